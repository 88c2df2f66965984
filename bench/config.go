package bench

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"slices"
	"strings"
	"time"

	"breakwater/breaker"
)

// Section names, in the order Run runs them.
const (
	SectionCeiling  = "ceiling"
	SectionCrawl    = "crawl"
	SectionRecrawl  = "recrawl"
	SectionDead     = "dead"
	SectionFrontier = "frontier"
	SectionMemory   = "memory"
	SectionHosts    = "hosts"
	SectionFleet    = "fleet"
	SectionSoak     = "soak"
	SectionPeers    = "peers"
	SectionTail     = "tail"
)

// AllSections lists every section in run order.
var AllSections = []string{SectionCeiling, SectionCrawl, SectionPeers, SectionRecrawl, SectionTail, SectionDead, SectionFrontier, SectionMemory, SectionHosts, SectionFleet, SectionSoak}

// DefaultSections are the sections a run selects when none is named: all
// but the soak, which takes minutes on its own and must be asked for. The
// fleet section is among them but runs only when Config.Store names a
// Redis (or "auto"); without one the report says how to run it.
var DefaultSections = []string{SectionCeiling, SectionCrawl, SectionPeers, SectionRecrawl, SectionTail, SectionDead, SectionFrontier, SectionMemory, SectionHosts, SectionFleet}

// ParseSections turns "ceiling,crawl" into a set, rejecting unknown names.
// An empty string selects DefaultSections.
func ParseSections(list string) (map[string]bool, error) {
	set := make(map[string]bool)
	if strings.TrimSpace(list) == "" {
		for _, s := range DefaultSections {
			set[s] = true
		}
		return set, nil
	}
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if !isSection(name) {
			return nil, fmt.Errorf("unknown section %q (want %s)", name, strings.Join(AllSections, ","))
		}
		set[name] = true
	}
	return set, nil
}

func isSection(name string) bool {
	for _, s := range AllSections {
		if s == name {
			return true
		}
	}
	return false
}

// Size is a site shape: Hosts hosts of Pages pages each.
type Size struct {
	Hosts int `json:"hosts"`
	Pages int `json:"pages"`
}

// URLs is the number of pages of the site.
func (s Size) URLs() int { return s.Hosts * s.Pages }

// String reads "200 hosts x 60 pages".
func (s Size) String() string { return fmt.Sprintf("%d hosts x %d pages", s.Hosts, s.Pages) }

// Config is one benchmark configuration. DefaultConfig is the full run the
// bench runs by default; QuickConfig a smoke test well under a minute.
type Config struct {
	Sections map[string]bool // which sections run; nil means DefaultSections

	// Ceiling, crawl and recrawl.
	Site            Size // 200 x 60
	Workers         int  // crawl workers and ceiling goroutines: 64
	HostConcurrency int  // crawl --host-concurrency and the ceiling's MaxConnsPerHost: 4
	NoWARC          bool // skip the crawl section's second crawl, with --warc

	// Dead host.
	DeadSite         Size          // 800 x 60
	DeadURLs         int           // distinct URLs of the dead host: 500
	DeadLinksPerPage int           // dead-host links on each live page: 1
	DeadTimeout      time.Duration // request timeout of the dead-host runs: 2s
	DeadRetries      int           // --retries of every dead-host run: 0
	Breaker          breaker.Config
	GiveUpAfter      time.Duration // 5s: the crawl cannot end before the dead host is given up
	BreakerOffCap    time.Duration // --max-duration of the breaker-off run; 0: none

	// Frontier.
	FrontierURLs   int // 1,000,000
	FrontierHosts  int // 1000
	FrontierPasses int // 3: the median pass is the figure

	// Memory.
	QueuedSite  Size // its URL set seeds the frontier: 1000 x 1000
	QueuedPages int  // pages the million-URL crawl fetches before it stops: 20,000
	// SeedsCap stops the `crawl --seeds` run of the million URLs: 2m.
	SeedsCap   time.Duration
	GrowthSite Size // crawled to the end with RSS samples at 25/50/100%: 1000 x 100
	// LargePages are sites of large pages, crawled at the default body cap:
	// memory must not grow with page size.
	LargePages []PageSize
	// ChildCap is how long a child may run before it is taken for stuck and
	// made to dump its goroutines: 5m.
	ChildCap time.Duration
	// Hosts, in child processes like the memory section.
	ManyHosts     Size          // virtual hosts, every URL a seed: 100,000 x 2 with HostsFull, else 10,000 x 2
	FailingHosts  Size          // hosts refusing connections x URLs each: 50,000 x 3 with HostsFull, else 5,000 x 3
	RefusingHosts Size          // refusing hosts x 1 URL, crawled as the failing ones: 40,000 x 1 with HostsFull, else 4,000 x 1
	FailingGiveUp time.Duration // --give-up-after of the failing crawl: 2m with HostsFull, else 30s
	HostsCap      time.Duration // how long one of its children may run: 20m
	// FailingThreshold, if positive, is the failing crawl's
	// --breaker-threshold instead of the default (8). A refused host's
	// retries are held to a few a minute by the retry budget, so with 3
	// URLs a host its circuit takes a minute or two to open.
	FailingThreshold int

	// HeapProfileDir, if set, is where each child writes a heap profile
	// taken near its peak, as NAME.heap.
	HeapProfileDir string

	// Child returns the command that runs Child in a new process with args.
	// Nil skips the memory section.
	Child func(ctx context.Context, args []string) *exec.Cmd

	// Fleet: real `breakwater crawl` processes over Site with Workers and
	// HostConcurrency, one on a bbolt file, then each of FleetProcs on the
	// Redis of Store ("" skips the section; StoreAuto starts a
	// redis-server of its own; else a redis:// URL of a database that is
	// empty or holds only a Breakwater crawl, which is flushed before each
	// run). Crawler returns the command `breakwater crawl ARGS`; nil skips
	// the section.
	Store       string
	Crawler     func(ctx context.Context, args []string) *exec.Cmd
	FleetProcs  []int         // 1, 2, 4
	FleetPasses int           // rounds of every run, the median shown: 3
	FleetCap    time.Duration // how long one run may take before its processes are stopped: 5m

	// Soak (opt-in): one child crawl of SoakSite's healthy hosts plus a
	// dead, a flaky, a throttling, a recovering and a refusing host, with
	// --warc, Workers and HostConcurrency as above.
	Soak SoakConfig
	// Tail is the tail section: a flaky host's last retries.
	Tail TailConfig

	TempDir string                           // parent of the run's temporary directory; "" means os.TempDir
	Logger  *slog.Logger                     // the crawls' logger; nil discards
	Now     func() time.Time                 // nil means time.Now
	Log     func(format string, args ...any) // progress lines; nil discards
}

// DefaultConfig is the full benchmark (about seven minutes on 2 cores).
func DefaultConfig() Config {
	return Config{
		Site: Size{200, 60}, Workers: 64, HostConcurrency: 4,
		DeadSite: Size{800, 60}, DeadURLs: 500, DeadLinksPerPage: 1,
		DeadTimeout: 2 * time.Second, DeadRetries: 0,
		// A sweep's settings: open after 8 timeouts, rest longer than the
		// crawl so no probe is spent, give up after 5s so the crawl can end.
		Breaker:     breaker.Config{Threshold: 8, Rest: 10 * time.Minute, Probes: 2},
		GiveUpAfter: 5 * time.Second,
		// Without a breaker the dead host costs a 2s timeout per URL, one
		// at a time (each waits for the robots.txt attempt before it): about
		// 17 minutes, measured to the end. The cap only guards a hang.
		BreakerOffCap: 40 * time.Minute,
		FrontierURLs:  1_000_000, FrontierHosts: 1000, FrontierPasses: 3,
		QueuedSite: Size{1000, 1000}, QueuedPages: 20_000, SeedsCap: 2 * time.Minute,
		GrowthSite: Size{1000, 100}, ChildCap: 5 * time.Minute,
		// Two sizes: 32 workers on one host of 64 linked 8 MiB pages
		// (2,657 MB before bodies streamed), and one 64 MiB page (185 MB).
		LargePages: []PageSize{{Pages: 64, Bytes: 8 << 20, Workers: 32, HostConcurrency: 32},
			{Pages: 1, Bytes: 64 << 20, Workers: 32, HostConcurrency: 1}},
		ManyHosts: Size{10_000, 2}, FailingHosts: Size{5_000, 3}, RefusingHosts: Size{4_000, 1}, FailingGiveUp: 30 * time.Second,
		HostsCap:   20 * time.Minute,
		FleetProcs: []int{1, 2, 4}, FleetPasses: 3, FleetCap: 5 * time.Minute,
		Soak: DefaultSoakConfig(),
		Tail: DefaultTailConfig(),
	}
}

// HostsFull sets the hosts section to the sizes its targets are set
// at. They take several minutes, too long for every full run.
func (c *Config) HostsFull() {
	c.ManyHosts, c.FailingHosts, c.RefusingHosts, c.FailingGiveUp = Size{100_000, 2}, Size{50_000, 3}, Size{40_000, 1}, 2*time.Minute
}

// QuickConfig is a small configuration for smoke tests: the same sections
// at a fraction of the size, well under a minute.
func QuickConfig() Config {
	c := DefaultConfig()
	c.Site = Size{40, 30}
	c.DeadSite = Size{80, 30}
	c.DeadURLs = 40
	c.DeadTimeout = 500 * time.Millisecond
	c.Breaker.Threshold = 4
	c.GiveUpAfter = time.Second
	c.BreakerOffCap = 10 * time.Second
	c.FrontierURLs, c.FrontierHosts = 50_000, 100
	c.QueuedSite, c.QueuedPages, c.SeedsCap = Size{100, 500}, 2000, 20*time.Second
	c.GrowthSite, c.ChildCap = Size{100, 50}, time.Minute
	c.LargePages = []PageSize{{Pages: 4, Bytes: 1 << 20, Workers: 4, HostConcurrency: 4}}
	c.ManyHosts, c.FailingHosts, c.RefusingHosts, c.FailingGiveUp = Size{500, 2}, Size{300, 3}, Size{200, 1}, 5*time.Second
	c.FailingThreshold = 2
	c.FleetPasses, c.FleetCap = 1, time.Minute
	c.Soak = QuickSoakConfig()
	c.Tail = QuickTailConfig()
	return c
}

func (c *Config) runs(section string) bool {
	if c.Sections == nil {
		return slices.Contains(DefaultSections, section)
	}
	return c.Sections[section]
}

func (c *Config) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log(format, args...)
	}
}

func (c *Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

// since is the wall time from start to now on the config's clock.
func (c *Config) since(start time.Time) time.Duration { return c.now().Sub(start) }
