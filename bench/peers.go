package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"breakwater/demosite"
)

// Peer tools of the peers section.
const (
	ToolWget2      = "wget2"
	ToolBreakwater = "breakwater"
)

// PeersResult is the peers section: Debian's wget2 and `breakwater crawl`
// over one site at equal concurrency, run one after the other in rounds,
// with a pass of the raw fetch loop in each round.
type PeersResult struct {
	Site    Size   `json:"site"`
	Skipped string `json:"skipped,omitempty"` // why the section did not run
	// Installed is set when the bench installed wget2 itself.
	Installed    bool   `json:"installed,omitempty"`
	Wget2Version string `json:"wget2_version,omitempty"`
	Workers      int    `json:"workers"` // wget2's --max-threads and breakwater's --workers
	// HostConcurrency is breakwater's --host-concurrency and the ceiling's
	// connections per host.
	HostConcurrency int       `json:"host_concurrency"`
	Runs            []PeerRun `json:"runs"` // in run order
	// CeilingRates are the raw fetch loop's pages/s, one pass a round, at
	// the same concurrency.
	CeilingRates []float64 `json:"ceiling_rates"`
}

// PeerRun is one run of one tool over the whole site.
type PeerRun struct {
	Tool        string        `json:"tool"`
	Wall        time.Duration `json:"wall_ns"` // process start to exit
	Traffic     Traffic       `json:"traffic"`
	PagesPerSec float64       `json:"pages_per_sec"` // distinct pages served over Wall
	CPU         time.Duration `json:"cpu_ns"`        // user + system of the process (rusage)
	// CPUPerPage is CPU in microseconds over the distinct pages.
	CPUPerPage float64 `json:"cpu_us_per_page"`
	MaxRSSKB   int64   `json:"max_rss_kb"` // the process's peak RSS (rusage)
	// LeadIn is from the process's start to the site's first request,
	// Tail from its last request to the process's exit: start-up and
	// shutdown, in Wall.
	LeadIn time.Duration `json:"lead_in_ns"`
	Tail   time.Duration `json:"tail_ns"`
	Exit   int           `json:"exit"`
	Dump   string        `json:"dump,omitempty"` // where its output was kept, when it failed
}

// peersRuns is how many runs each tool gets; the median is the figure.
const peersRuns = 3

// peersWorkers is the concurrency both tools run at.
const peersWorkers = 32

// peersCap is how long one run may take before it is stopped.
const peersCap = 5 * time.Minute

// Tool returns the runs of tool, in run order.
func (p *PeersResult) Tool(tool string) []PeerRun {
	var out []PeerRun
	for _, r := range p.Runs {
		if r.Tool == tool {
			out = append(out, r)
		}
	}
	return out
}

// median is the middle value of the runs' f (the lower middle of an even
// count, so that a figure is one a run measured).
func medianOf(runs []PeerRun, f func(PeerRun) float64) float64 {
	if len(runs) == 0 {
		return 0
	}
	vals := make([]float64, len(runs))
	for i, r := range runs {
		vals[i] = f(r)
	}
	slices.Sort(vals)
	return vals[(len(vals)-1)/2]
}

func medianFloat(vals []float64) float64 {
	if len(vals) == 0 {
		return 0
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	return s[(len(s)-1)/2]
}

// peers runs the peers section.
func (r *runner) peers(ctx context.Context) error {
	cfg := r.cfg
	res := &PeersResult{Site: cfg.Site, Workers: peersWorkers, HostConcurrency: cfg.HostConcurrency}
	r.report.Peers = res
	if cfg.Crawler == nil {
		res.Skipped = "no breakwater binary to run (Config.Crawler)"
		return nil
	}
	wget2, installed, why := findWget2(ctx, cfg)
	if wget2 == "" {
		res.Skipped = why
		cfg.logf("peers: skipped: %s", why)
		return nil
	}
	res.Installed = installed
	if out, err := exec.CommandContext(ctx, wget2, "--version").Output(); err == nil {
		line, _, _ := strings.Cut(string(out), "\n")
		line, _, _ = strings.Cut(line, " - ")
		res.Wget2Version = strings.TrimSpace(line)
	}
	site, err := startSite(cfg.Site, 0, 0)
	if err != nil {
		return err
	}
	defer site.Close()
	dir := filepath.Join(r.dir, "peers")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	seeds := filepath.Join(dir, "seeds.txt")
	if err := writeLines(seeds, site.Roots()); err != nil {
		return fmt.Errorf("peers: %w", err)
	}
	ceilCfg := *cfg
	ceilCfg.Workers = peersWorkers
	urls := interleave(site.URLs(), cfg.Site)
	for round := range peersRuns {
		// Alternate which tool goes first, so neither always runs on a
		// site and a machine warmed by the other.
		tools := []string{ToolWget2, ToolBreakwater}
		if round%2 == 1 {
			slices.Reverse(tools)
		}
		for _, tool := range tools {
			cfg.logf("peers: round %d of %d: %s over %s", round+1, peersRuns, tool, cfg.Site)
			run, err := r.peerRun(ctx, site, tool, wget2, seeds, filepath.Join(dir, fmt.Sprintf("%s-%d", tool, round+1)))
			if err != nil {
				return err
			}
			res.Runs = append(res.Runs, run)
		}
		pass, err := fetchAll(ctx, &ceilCfg, urls)
		if err != nil {
			return err
		}
		res.CeilingRates = append(res.CeilingRates, pass.PagesPerSec)
	}
	return nil
}

// findWget2 returns wget2's path, installing Debian's package first when
// it is missing and this process may (root, apt-get on the PATH). Without
// it, it returns "" and why.
func findWget2(ctx context.Context, cfg *Config) (path string, installed bool, why string) {
	if p, err := exec.LookPath("wget2"); err == nil {
		return p, false, ""
	}
	apt, err := exec.LookPath("apt-get")
	switch {
	case err != nil:
		return "", false, "wget2 is not installed and there is no apt-get to install it: install GNU wget2 to run this section"
	case os.Geteuid() != 0:
		return "", false, "wget2 is not installed and the bench is not root to install it: run `apt-get install wget2` to run this section"
	}
	cfg.logf("peers: installing wget2 (apt-get update, apt-get install -y wget2)")
	for _, args := range [][]string{{"update"}, {"install", "-y", "wget2"}} {
		cmd := exec.CommandContext(ctx, apt, args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", false, fmt.Sprintf("apt-get %s failed (%v): %s", strings.Join(args, " "), err,
				bytes.TrimSpace(lastLines(out, 3)))
		}
	}
	p, err := exec.LookPath("wget2")
	if err != nil {
		return "", false, "apt-get installed wget2 but it is not on the PATH"
	}
	return p, true, ""
}

// wget2Args are wget2's flags for a recursive crawl of the site's hosts
// equal to breakwater's: every root from the seeds file, no depth limit,
// robots.txt obeyed, no wait between requests, one try, bodies not kept.
// Without --span-hosts wget2 follows links only to the seeds' hosts.
func wget2Args(seeds, dir string) []string {
	return []string{"--recursive", "--level", "inf", "--max-threads", strconv.Itoa(peersWorkers),
		"--robots=on", "--wait", "0", "--tries", "1", "--delete-after", "--quiet",
		"--no-host-directories", "--directory-prefix", dir, "--input-file", seeds}
}

// breakwaterArgs are `breakwater crawl`'s flags for the same crawl.
func breakwaterArgs(seeds, dir string, hostConcurrency int) []string {
	return []string{"--seeds", seeds, "--db", filepath.Join(dir, "crawl.db"),
		"--workers", strconv.Itoa(peersWorkers), "--host-concurrency", strconv.Itoa(hostConcurrency),
		"--delay", "0", "--sitemaps=false", "--allow-private", "--progress", "never"}
}

// peerRun runs tool once over site from a fresh directory and measures it
// from the site's logs and the process's rusage.
func (r *runner) peerRun(ctx context.Context, site *demosite.Site, tool, wget2, seeds, dir string) (PeerRun, error) {
	run := PeerRun{Tool: tool}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return run, fmt.Errorf("peers: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, peersCap)
	defer cancel()
	var cmd *exec.Cmd
	if tool == ToolWget2 {
		cmd = exec.CommandContext(cctx, wget2, wget2Args(seeds, dir)...)
		cmd.Dir = dir
	} else {
		cmd = r.cfg.Crawler(cctx, breakwaterArgs(seeds, dir, r.cfg.HostConcurrency))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 10 * time.Second
	mark := markLogs(site)
	start := r.cfg.now()
	err := cmd.Start()
	var hwm int64
	if err == nil {
		stop := watchHWM(cmd.Process.Pid, &hwm)
		err = cmd.Wait()
		stop()
	}
	run.Wall = r.cfg.since(start)
	if ctx.Err() != nil {
		return run, fmt.Errorf("peers %s: %w", tool, ctx.Err())
	}
	run.Exit = exitCode(err)
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return run, fmt.Errorf("peers: run %s: %w", tool, err)
	}
	end := r.cfg.now()
	run.Traffic = trafficSince(site, mark)
	if first, last, ok := requestSpan(site, mark); ok {
		run.LeadIn, run.Tail = first.Sub(start), end.Sub(last)
	}
	if ps := cmd.ProcessState; ps != nil {
		run.CPU = ps.UserTime() + ps.SystemTime()
		// ru_maxrss counts the memory of the bench itself, which the child
		// was forked from before it ran the tool: the tool's own high-water
		// mark (VmHWM, read while it ran) where there is one.
		run.MaxRSSKB = maxRSSKB(ps)
		if hwm > 0 {
			run.MaxRSSKB = hwm
		}
	}
	if n := run.Traffic.DistinctPages; n > 0 {
		run.PagesPerSec = float64(n) / run.Wall.Seconds()
		run.CPUPerPage = float64(run.CPU.Microseconds()) / float64(n)
	}
	// wget2 exits 8 when a server answered an error (the site's few 404
	// links); only a crawl that missed pages is kept for a look.
	if run.Traffic.DistinctPages < len(site.URLs()) || cctx.Err() != nil {
		run.Dump = r.keep("peers-"+tool, out.Bytes())
		r.cfg.logf("peers: %s served %d of %d pages (exit %d); its output: %s",
			tool, run.Traffic.DistinctPages, len(site.URLs()), run.Exit, run.Dump)
	}
	return run, nil
}

// peerSummary is one tool's medians over its runs.
type peerSummary struct {
	rate, cpuPerPage float64
	leadIn, tail     time.Duration
	maxRSSKB         int64
	rates, cpus      []float64
	served           int // fewest distinct pages of a run
	duplicates       int // most pages fetched twice in a run
}

func summarize(runs []PeerRun) peerSummary {
	s := peerSummary{rate: medianOf(runs, func(r PeerRun) float64 { return r.PagesPerSec }),
		cpuPerPage: medianOf(runs, func(r PeerRun) float64 { return r.CPUPerPage }),
		leadIn:     time.Duration(medianOf(runs, func(r PeerRun) float64 { return float64(r.LeadIn) })),
		tail:       time.Duration(medianOf(runs, func(r PeerRun) float64 { return float64(r.Tail) }))}
	for i, r := range runs {
		s.rates = append(s.rates, r.PagesPerSec)
		s.cpus = append(s.cpus, r.CPUPerPage)
		s.maxRSSKB = max(s.maxRSSKB, r.MaxRSSKB)
		s.duplicates = max(s.duplicates, r.Traffic.Duplicates())
		if i == 0 || r.Traffic.DistinctPages < s.served {
			s.served = r.Traffic.DistinctPages
		}
	}
	return s
}

// requestSpan is the time of the first and the last request the site
// logged after mark.
func requestSpan(site *demosite.Site, mark logMark) (first, last time.Time, ok bool) {
	for i, h := range site.Hosts() {
		for _, req := range h.Requests()[mark[i]:] {
			if !ok || req.Time.Before(first) {
				first = req.Time
			}
			if !ok || req.Time.After(last) {
				last = req.Time
			}
			ok = true
		}
	}
	return first, last, ok
}

// watchHWM reads the process's VmHWM (its peak resident set since it ran
// the tool, in KiB) every 20 ms into *kb until stop is called; on systems
// without /proc, *kb stays 0.
func watchHWM(pid int, kb *int64) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			if v, ok := readStatusKB(pid, "VmHWM:"); ok && v > *kb {
				*kb = v
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

// readStatusKB reads one "Name:  N kB" line of /proc/PID/status.
func readStatusKB(pid int, field string) (int64, bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
