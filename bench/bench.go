package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

// Machine describes where the figures were taken.
type Machine struct {
	Date       time.Time `json:"date"`
	OS         string    `json:"os"`
	Arch       string    `json:"arch"`
	CPUs       int       `json:"cpus"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	GoVersion  string    `json:"go_version"`
	CPUModel   string    `json:"cpu_model,omitempty"`
}

// Report is everything one Run measured; a section that did not run is nil.
type Report struct {
	Machine Machine       `json:"machine"`
	Quick   bool          `json:"quick"`
	Took    time.Duration `json:"took_ns"`
	// Workers and HostConcurrency are the crawls' and the ceiling's,
	// every section but memory's large pages and hosts' failing crawl.
	Workers         int             `json:"workers"`
	HostConcurrency int             `json:"host_concurrency"`
	Ceiling         *CeilingResult  `json:"ceiling,omitempty"`
	Crawl           *CrawlResult    `json:"crawl,omitempty"`
	Recrawl         *RecrawlResult  `json:"recrawl,omitempty"`
	Tail            *TailResult     `json:"tail,omitempty"`
	Dead            *DeadResult     `json:"dead,omitempty"`
	Frontier        *FrontierResult `json:"frontier,omitempty"`
	Memory          *MemoryResult   `json:"memory,omitempty"`
	Hosts           *HostsResult    `json:"hosts,omitempty"`
	Fleet           *FleetResult    `json:"fleet,omitempty"`
	Soak            *SoakResult     `json:"soak,omitempty"`
	Peers           *PeersResult    `json:"peers,omitempty"`
	// Baseline, if set, is the figures against a previous BENCHMARKS.md.
	Baseline *BaselineComparison `json:"baseline,omitempty"`
}

// runner carries one Run's state: its config, its temporary directory and
// the report being filled in.
type runner struct {
	cfg    *Config
	dir    string
	report *Report
}

// Run measures the selected sections one after another and returns what
// it measured. Temporary files live in one directory removed at the end.
// On error the report holds the sections finished before it.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "breakwater-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	r := &runner{cfg: &cfg, dir: dir, report: &Report{Machine: machine(cfg.now()),
		Workers: cfg.Workers, HostConcurrency: cfg.HostConcurrency}}
	start := cfg.now()
	err = r.sections(ctx)
	r.report.Took = cfg.since(start)
	return r.report, err
}

func (r *runner) sections(ctx context.Context) error {
	cfg := r.cfg
	steps := []struct {
		run bool
		fn  func(context.Context) error
	}{
		{cfg.runs(SectionCeiling) || cfg.runs(SectionCrawl), r.ceilingAndCrawl},
		{cfg.runs(SectionPeers), r.peers},
		{cfg.runs(SectionRecrawl), r.recrawl},
		{cfg.runs(SectionTail), r.tail},
		{cfg.runs(SectionDead), r.dead},
		{cfg.runs(SectionFrontier), r.frontierSection},
		{cfg.runs(SectionMemory) && cfg.Child != nil, r.memory},
		{cfg.runs(SectionHosts) && cfg.Child != nil, r.hostsSection},
		{cfg.runs(SectionFleet), r.fleetSection},
		{cfg.runs(SectionSoak) && cfg.Child != nil, r.soak},
	}
	for _, s := range steps {
		if !s.run {
			continue
		}
		if err := s.fn(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	return nil
}

func (c *Config) validate() error {
	sizes := []Size{c.Site, c.DeadSite, c.QueuedSite, c.GrowthSite}
	for _, s := range sizes {
		if s.Hosts < 2 || s.Pages < 1 {
			return fmt.Errorf("bench: site %s too small (at least 2 hosts of 1 page)", s)
		}
	}
	switch {
	case c.Workers < 1 || c.HostConcurrency < 1:
		return errors.New("bench: workers and host concurrency must be at least 1")
	case c.DeadURLs < 1 || c.DeadLinksPerPage < 1 || c.DeadTimeout <= 0 || c.GiveUpAfter <= 0:
		return errors.New("bench: dead URLs, dead links per page, timeout and give-up must be positive")
	case c.FrontierURLs < 1 || c.FrontierHosts < 1 || c.FrontierPasses < 1 || c.QueuedPages < 1:
		return errors.New("bench: frontier URLs, hosts, passes and queued pages must be positive")
	}
	if c.runs(SectionFleet) && c.Store != "" {
		if len(c.FleetProcs) == 0 || c.FleetPasses < 1 || c.FleetCap <= 0 {
			return errors.New("bench: fleet processes, passes and cap must be given")
		}
		for _, n := range c.FleetProcs {
			if n < 1 {
				return fmt.Errorf("bench: a fleet of %d processes", n)
			}
		}
	}
	if c.runs(SectionSoak) {
		return c.Soak.validate()
	}
	return nil
}

func machine(now time.Time) Machine {
	return Machine{Date: now.UTC(), OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), CPUModel: cpuModel()}
}

// cpuModel is the first "model name" of /proc/cpuinfo, "" elsewhere.
func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
