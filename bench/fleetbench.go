package bench

import (
	"fmt"
	"time"
)

// The fleet section crawls the crawl section's site
// with real `breakwater crawl` processes: one on a bbolt file (--db), then
// 1, 2 and 4 on one Redis store (--store, distinct --fleet-id), all of a
// run started together. Each run starts from an empty store or a new file.

// StoreAuto as Config.Store makes the fleet section start a redis-server
// of its own (a temporary directory, a free loopback port, no persistence)
// and stop it after.
const StoreAuto = "auto"

// FleetProc is one `breakwater crawl` process of a fleet run.
type FleetProc struct {
	ID   string `json:"id"`   // its --fleet-id ("" on bbolt)
	Exit int    `json:"exit"` // its exit code; -1: killed (the run's cap) or no code
	// Fetched and Failed are its "this run N fetched, M failed" line on
	// stdout; -1 when the line is missing.
	Fetched int64 `json:"fetched"`
	Failed  int64 `json:"failed"`
	// Commands is its "fleet store commands" log line: the Redis commands
	// it sent (each pipelined command counted, a script call 1); -1 when
	// missing (always on bbolt).
	Commands int64         `json:"commands"`
	Wall     time.Duration `json:"wall_ns"` // its own start to its exit
	// CPU is its user + system CPU time (rusage), start-up included.
	CPU      time.Duration `json:"cpu_ns"`
	Warnings int           `json:"warnings"`
	Errors   int           `json:"errors"`
	// Problems are its first few warning and error log lines, as
	// "LEVEL msg: err".
	Problems []string `json:"problems,omitempty"`
	// Dump names the file that keeps its stderr when it did not exit 0.
	Dump string `json:"dump,omitempty"`
}

// FleetPass is one run of a fleet configuration.
type FleetPass struct {
	Wall        time.Duration `json:"wall_ns"` // the first process's start to the last one's exit
	Traffic     Traffic       `json:"traffic"` // what the site saw during the run
	PagesPerSec float64       `json:"pages_per_sec"`
	// LogCommands sums the processes' "fleet store commands" lines: the
	// commands they sent, a script call 1. ServerCommands is the server's
	// INFO stats total_commands_processed over the run, less the bench's
	// own INFO: it counts every command a script runs as well as the
	// script call, each connection's handshake and script loads, and any
	// other client's commands.
	LogCommands    int64 `json:"log_commands"`
	ServerCommands int64 `json:"server_commands"`
	// ServerCPU is the server's CPU time over the run (INFO cpu
	// used_cpu_user + used_cpu_sys): what the run cost Redis.
	ServerCPU time.Duration `json:"server_cpu_ns"`
	// CrawlCPU sums the processes' CPU time: with ServerCPU, what the
	// crawl cost the machine, whatever else ran on it (the site's serving,
	// in the bench's process, not counted).
	CrawlCPU time.Duration `json:"crawl_cpu_ns"`
	Procs    []FleetProc   `json:"procs"`
	Capped   bool          `json:"capped"` // stopped at Config.FleetCap
}

// FleetRun is one configuration: Procs processes on Store, FleetPasses times.
type FleetRun struct {
	Store  string      `json:"store"` // "bbolt" or "redis"
	Procs  int         `json:"procs"`
	Passes []FleetPass `json:"passes"`
	// Median is the index in Passes of the pass of median wall time, the
	// one whose figures the table shows.
	Median    int     `json:"median"`
	MinPerSec float64 `json:"min_pages_per_sec"`
	MaxPerSec float64 `json:"max_pages_per_sec"`
}

// Pass is the run's median pass.
func (fr *FleetRun) Pass() *FleetPass { return &fr.Passes[fr.Median] }

// Name reads "4 processes on Redis".
func (fr *FleetRun) Name() string {
	s := "es"
	if fr.Procs == 1 {
		s = ""
	}
	store := "Redis"
	if fr.Store == "bbolt" {
		store = "bbolt"
	}
	return fmt.Sprintf("%d process%s on %s", fr.Procs, s, store)
}

// FleetResult is the fleet section.
type FleetResult struct {
	// Skipped says why the section did not run; the other fields are then
	// empty.
	Skipped         string      `json:"skipped,omitempty"`
	Site            Size        `json:"site"`
	Workers         int         `json:"workers"`
	HostConcurrency int         `json:"host_concurrency"`
	Store           string      `json:"store,omitempty"` // the store's URL without its password
	Auto            bool        `json:"auto,omitempty"`  // a redis-server the bench started
	RedisVersion    string      `json:"redis_version,omitempty"`
	Passes          int         `json:"passes"`
	Runs            []*FleetRun `json:"runs,omitempty"` // bbolt first, then Redis by processes
	// FleetToBolt is the pages/s of the most processes on Redis over one
	// process on bbolt (the target); RedisToBolt one process on Redis over
	// one on bbolt: what the store costs.
	FleetToBolt float64 `json:"fleet_to_bolt"`
	RedisToBolt float64 `json:"redis_to_bolt"`
	// Idle is what one idle process costs Redis.
	Idle *FleetIdle `json:"idle,omitempty"`
}

// Bolt is the bbolt run; Redis the run of n processes on Redis.
func (f *FleetResult) Bolt() *FleetRun { return f.find("bbolt", 1) }

func (f *FleetResult) Redis(n int) *FleetRun { return f.find("redis", n) }

func (f *FleetResult) find(store string, n int) *FleetRun {
	for _, r := range f.Runs {
		if r.Store == store && r.Procs == n {
			return r
		}
	}
	return nil
}

// Biggest is the run of the most processes on Redis.
func (f *FleetResult) Biggest() *FleetRun {
	var best *FleetRun
	for _, r := range f.Runs {
		if r.Store == "redis" && (best == nil || r.Procs > best.Procs) {
			best = r
		}
	}
	return best
}

// Clean reports whether every pass of every run fetched each of the site's
// pages exactly once, every process exited 0, and no run hit its cap; why
// names the first thing wrong. A process that fetched nothing is not
// wrong (a process holds a bounded number of hosts, and a small site's
// hosts may all be held by the others): Balanced says whether that
// happened.
func (f *FleetResult) Clean() (ok bool, why string) {
	for _, run := range f.Runs {
		for i, p := range run.Passes {
			if why := p.problem(f.Site.URLs()); why != "" {
				return false, fmt.Sprintf("%s, pass %d: %s", run.Name(), i+1, why)
			}
		}
	}
	return true, ""
}

// problem names what is wrong with a pass over a site of urls pages, or "".
func (p *FleetPass) problem(urls int) string {
	if p.Capped {
		return "stopped at its time cap"
	}
	for _, pr := range p.Procs {
		if pr.Exit != 0 {
			return fmt.Sprintf("process %s exited %d", pr.label(), pr.Exit)
		}
	}
	if d := p.Traffic.Duplicates(); d != 0 {
		return fmt.Sprintf("%d pages fetched more than once", d)
	}
	if p.Traffic.DistinctPages != urls {
		return fmt.Sprintf("%d of the site's %d pages fetched", p.Traffic.DistinctPages, urls)
	}
	return ""
}

// Fewest is the fewest pages one process of the run fetched in any pass
// (-1 when a process printed no count).
func (fr *FleetRun) Fewest() int64 {
	fewest := int64(-1)
	for i, q := range fr.Passes {
		for j, pr := range q.Procs {
			if (i == 0 && j == 0) || pr.Fetched < fewest {
				fewest = pr.Fetched
			}
		}
	}
	return fewest
}

func (pr *FleetProc) label() string {
	if pr.ID == "" {
		return "(bbolt)"
	}
	return pr.ID
}

// CommandsPerPage divides the pass's commands (from the processes' logs,
// or the server's count) by the distinct pages served; 0 without pages.
func (p *FleetPass) CommandsPerPage(server bool) float64 {
	n := p.LogCommands
	if server {
		n = p.ServerCommands
	}
	if p.Traffic.DistinctPages == 0 {
		return 0
	}
	return float64(n) / float64(p.Traffic.DistinctPages)
}

// PagesPerCPUSec is the pages per second of CPU time the processes and
// the server spent together; 0 without a measure.
func (p *FleetPass) PagesPerCPUSec() float64 {
	cpu := p.CrawlCPU + p.ServerCPU
	if cpu <= 0 {
		return 0
	}
	return float64(p.Traffic.DistinctPages) / cpu.Seconds()
}

// PagesPerServerSec is the pages per second of Redis CPU the pass cost:
// what one Redis core could carry at this cost per page; 0 without a
// measure.
func (p *FleetPass) PagesPerServerSec() float64 {
	if p.ServerCPU <= 0 {
		return 0
	}
	return float64(p.Traffic.DistinctPages) / p.ServerCPU.Seconds()
}
