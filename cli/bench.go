package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"breakwater/bench"
)

// benchChildCommand is the hidden command the memory and soak sections
// re-execute this binary with, so that only the crawler's memory is measured.
const benchChildCommand = "internal-bench-child"

// benchFlags binds the bench command's flags.
type benchFlags struct {
	quick      bool
	only       string
	cpuProfile string
	tmpDir     string
	asJSON     bool
	offCap     time.Duration
	noWARC     bool
	hostsFull  bool
	heapDir    string
	soak       bool
	store      string
	passes     int
	baseline   string
	log        logFlags
}

func (b *benchFlags) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&b.quick, "quick", false, "small configuration for smoke tests (well under a minute)")
	fs.StringVar(&b.only, "only", "", "comma-separated sections to run: "+strings.Join(bench.AllSections, ",")+" (default all but soak)")
	fs.BoolVar(&b.soak, "soak", false, "also run the soak section, left out of the default run for its length (6-13 minutes on 2 cores, "+
		"most of it the crawl of the healthy hosts and the dead host's give-up): "+
		"100,000 pages on 1,000 hosts plus a dead, a flaky, a throttling, a recovering and a refusing host, with --warc, "+
		"in a child process; peak RSS along it, goroutines and descriptors left, the dead host's requests (--only soak runs it alone; "+
		"--quick --soak a small one in under a minute)")
	fs.StringVar(&b.store, "store", "", "run the fleet section on this Redis: redis://HOST:PORT/DB (an empty database, or one holding only "+
		"a Breakwater crawl, which is flushed before each run; anything else is refused), or auto to start a redis-server of its own "+
		"(temporary, on a free loopback port) and stop it after; without it the fleet section is skipped, unless --only names fleet, "+
		"which implies auto")
	fs.IntVar(&b.passes, "fleet-passes", 0, "times each fleet run is done, interleaved, the median shown (default 3; --quick 1)")
	fs.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile of this process (every section but memory and soak) to this file")
	fs.DurationVar(&b.offCap, "breaker-off-cap", 0, "stop the breaker-off dead-host run after this long (default 40m, which runs it to the end in about 17m; --quick 10s)")
	fs.BoolVar(&b.noWARC, "no-warc", false, "skip the crawl section's second crawl, with --warc")
	fs.BoolVar(&b.hostsFull, "hosts-full", false, "run the hosts section at its full sizes (100,000 hosts with queued URLs, 50,000 failing hosts: several minutes)")
	fs.StringVar(&b.heapDir, "child-heapprofiles", "", "directory where each memory or hosts child writes a heap profile taken near its peak (NAME.heap)")
	fs.StringVar(&b.tmpDir, "tmpdir", "", "directory for the run's temporary databases (default: the system's)")
	fs.StringVar(&b.baseline, "baseline", "", "compare every figure with this previous BENCHMARKS.md and name each one more than 10% worse "+
		"(default BENCHMARKS.md when it is in the working directory and the run is not --quick; '' for none)")
	fs.BoolVar(&b.asJSON, "json", false, "print the report as JSON instead of a table: the measurements and every section's figures")
	b.log.addFlags(fs)
	// The crawls' own logs would drown the table: warnings only, unless asked.
	b.log.level = "warn"
	fs.Lookup("log-level").DefValue = "warn"
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	b := &benchFlags{}
	fs := newFlagSet("bench", "bench [flags]", stdout)
	b.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("bench takes no arguments, got %q", fs.Args())
	}
	cfg, err := b.config(stderr)
	if err != nil {
		return err
	}
	stopProfile, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return err
	}
	baseline, rows, err := b.readBaseline(fs.Changed("baseline"))
	if err != nil {
		return err
	}
	report, err := bench.Run(ctx, cfg)
	err = errors.Join(err, stopProfile())
	if report != nil {
		report.Quick = b.quick
		if rows != nil {
			report.Baseline = bench.Compare(baseline, report.Figures(), rows)
		}
		if b.asJSON {
			err = errors.Join(err, report.WriteJSON(stdout))
		} else {
			err = errors.Join(err, report.WriteTable(stdout))
		}
	}
	return err
}

// config builds the bench configuration the flags ask for.
func (b *benchFlags) config(stderr io.Writer) (bench.Config, error) {
	cfg := bench.DefaultConfig()
	if b.quick {
		cfg = bench.QuickConfig()
	}
	sections, err := bench.ParseSections(b.only)
	if err != nil {
		return cfg, usagef("--only: %v", err)
	}
	if b.soak {
		sections[bench.SectionSoak] = true
	}
	cfg.Sections = sections
	cfg.Store = b.store
	if b.passes > 0 {
		cfg.FleetPasses = b.passes
	}
	if cfg.Store == "" && b.only != "" && sections[bench.SectionFleet] {
		cfg.Store = bench.StoreAuto
	}
	if b.offCap > 0 {
		cfg.BreakerOffCap = b.offCap
	}
	if cfg.Logger, err = b.log.logger(stderr); err != nil {
		return cfg, err
	}
	cfg.TempDir = b.tmpDir
	cfg.NoWARC = b.noWARC
	cfg.HeapProfileDir = b.heapDir
	if b.hostsFull {
		cfg.HostsFull()
	}
	cfg.Log = func(format string, args ...any) { fmt.Fprintf(stderr, "bench: "+format+"\n", args...) }
	exe, err := os.Executable()
	if err != nil {
		return cfg, fmt.Errorf("find this binary for the memory and soak sections: %w", err)
	}
	cfg.Child = func(ctx context.Context, args []string) *exec.Cmd {
		return exec.CommandContext(ctx, exe, append([]string{benchChildCommand}, args...)...)
	}
	cfg.Crawler = func(ctx context.Context, args []string) *exec.Cmd {
		return exec.CommandContext(ctx, exe, append([]string{"crawl"}, args...)...)
	}
	return cfg, nil
}

// startCPUProfile starts profiling into path ("" does nothing) and returns
// the function that stops it and closes the file.
func startCPUProfile(path string) (func() error, error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, usagef("CPU profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("start CPU profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// runBenchChild is the hidden entry point of the memory and soak sections' child.
func runBenchChild(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return bench.Child(ctx, args, stdout)
}

// defaultBaseline is the baseline a full run compares with when it is in
// the working directory.
const defaultBaseline = "BENCHMARKS.md"

// readBaseline reads the file --baseline names, before the run so that a
// bad file fails fast. Unset, it is defaultBaseline when present and the
// run is not quick (a quick run's figures are a fraction of the full
// run's); set to "", none.
func (b *benchFlags) readBaseline(set bool) (string, []bench.BaselineRow, error) {
	path := b.baseline
	if !set {
		if _, err := os.Stat(defaultBaseline); err != nil || b.quick {
			return "", nil, nil
		}
		path = defaultBaseline
	}
	if path == "" {
		return "", nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return "", nil, fmt.Errorf("--baseline: %w", err)
	}
	defer f.Close()
	rows, err := bench.ParseBaseline(f)
	if err != nil {
		return "", nil, fmt.Errorf("--baseline %s: %w", path, err)
	}
	return path, rows, nil
}
