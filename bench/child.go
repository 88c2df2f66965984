package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"breakwater/crawl"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
)

// ChildReport is what the child process prints, as one JSON line, when its
// crawl ends.
type ChildReport struct {
	Fetched   int64 `json:"fetched"`
	Failed    int64 `json:"failed"`
	Queued    int64 `json:"queued"`
	Exhausted bool  `json:"exhausted"`
	SeedsNS   int64 `json:"seeds_ns"` // checking the seeds file
	// AllSeededNS is when every seed was queued (--pages-after-seeds only).
	AllSeededNS int64 `json:"all_seeded_ns,omitempty"`
	WallNS      int64 `json:"wall_ns"`  // the whole crawl, seeds included
	VmHWMKB     int64 `json:"vmhwm_kb"` // the child's own peak RSS at the end
	AnonKB      int64 `json:"anon_kb"`  // its anonymous RSS at the end
	RSSKB       int64 `json:"rss_kb"`   // its VmRSS at the end
	// CrawlNS is crawl.New to Run's return: the crawl alone, without
	// checking the seeds or the leak check's wait after it.
	CrawlNS  int64  `json:"crawl_ns,omitempty"`
	Why      string `json:"why,omitempty"`       // crawl.Summary.Why
	HeldWork int    `json:"held_work,omitempty"` // hosts held by a case or a pause, with URLs left
	// Leaks is the goroutine and descriptor check (--settle only).
	Leaks *LeakCheck `json:"leaks,omitempty"`
	// Heap is what held the heap at its peak (--heapparts only).
	Heap *HeapParts `json:"heap,omitempty"`
	// DB is the database file's mapping as the crawl ends.
	DB *Mapping `json:"db,omitempty"`
}

// Child is the entry point of the memory section's child process: a crawl
// set up the way `breakwater crawl --seeds FILE` sets one up (the file
// checked with crawl.ForEachSeed and streamed through Options.SeedsFile, the
// database opened with storage.Open, crawl.New and Run), with the bench's
// settings; or, with --fill, frontier.Add of a file's URLs. It prints a
// ChildReport on stdout.
func Child(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("internal-bench-child", pflag.ContinueOnError)
	o := crawl.DefaultOptions()
	seeds := fs.String("seeds", "", "file of seed URLs")
	fill := fs.String("fill", "", "file of URLs to add through frontier.Add, instead of crawling")
	dbPath := fs.String("db", "", "database file")
	fs.IntVar(&o.Workers, "workers", 64, "workers")
	fs.IntVar(&o.HostConcurrency, "host-concurrency", 4, "in-flight requests per host")
	fs.IntVar(&o.MaxPages, "max-pages", 0, "stop after this many pages")
	pagesAfterSeeds := fs.Int("pages-after-seeds", 0, "stop after this many pages fetched once every seed is queued (instead of --max-pages)")
	fs.DurationVar(&o.Delay, "delay", 0, "politeness gap per host")
	fs.StringVar(&o.Proxy, "proxy", "", "send requests through this proxy (the many-hosts site's SOCKS5 front)")
	heapProfile := fs.String("heapprofile", "", "write a heap profile here each time the heap in use reaches a new high")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole child here")
	heapParts := fs.Bool("heapparts", false, "report what held the heap at its peak, by part (ChildReport.Heap)")
	// The soak's settings; their defaults are the crawl's.
	fs.StringVar(&o.WARC.Dir, "warc", "", "write WARC files into this directory")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "request timeout (the connect timeout is at most this)")
	fs.IntVar(&o.Breaker.Threshold, "breaker-threshold", o.Breaker.Threshold, "consecutive failures that open a host's circuit")
	fs.DurationVar(&o.Breaker.Rest, "breaker-rest", o.Breaker.Rest, "rest of an open circuit")
	fs.IntVar(&o.Breaker.Probes, "breaker-probes", o.Breaker.Probes, "probe successes that close a circuit")
	fs.DurationVar(&o.GiveUpAfter, "give-up-after", o.GiveUpAfter, "give a host up once its circuit was open this long")
	fs.DurationVar(&o.RetryBase, "retry-base", o.RetryBase, "first retry backoff")
	fs.DurationVar(&o.RetryMax, "retry-max", o.RetryMax, "longest retry backoff and Retry-After")
	fs.Float64Var(&o.RetryBudget, "retry-budget", o.RetryBudget, "retries a host may make per first attempt in a minute")
	settle := fs.Duration("settle", 0, "after the crawl, wait up to this long for goroutines and open descriptors to fall back to their counts before it, and report them (0: no check)")
	nofile := fs.Uint64("nofile", 0, "raise RLIMIT_NOFILE to at least this many descriptors")
	logPath := fs.String("log", "", "write the crawl's warnings and errors to this file, as JSON lines")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("bench child: %w", err)
	}
	o.AllowPrivate, o.Logger = true, slog.New(slog.DiscardHandler)
	takeParts := func() *HeapParts { return nil }
	if *heapProfile != "" || *heapParts {
		stop := profileHeapPeaks(*heapProfile)
		defer stop()
		if *heapParts {
			takeParts = stop
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("bench child: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("bench child: start CPU profile: %w", err)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if *logPath != "" {
		f, err := os.Create(*logPath)
		if err != nil {
			return fmt.Errorf("bench child: %w", err)
		}
		defer f.Close()
		o.Logger = slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	o.Sitemaps = false // the bench site has none: their 404s are not pages
	o.ConnectTimeout = min(o.ConnectTimeout, o.Timeout)
	var noFileLimit uint64
	if *nofile > 0 {
		var err error
		if noFileLimit, err = raiseNoFile(*nofile); err != nil {
			return fmt.Errorf("bench child: %w", err)
		}
	}
	start := time.Now()
	if *fill != "" {
		return fillFrontier(o, *dbPath, *fill, start, stdout)
	}
	nSeeds := 0
	if *seeds != "" {
		var err error
		if nSeeds, err = checkSeedsFile(*seeds); err != nil {
			return err
		}
		o.SeedsFile = *seeds
	}
	rep := ChildReport{SeedsNS: int64(time.Since(start))}
	db, err := storage.Open(*dbPath, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	// The baseline is taken with the database open, as it still is when
	// Run returns: what is left above it is the crawl's.
	var leaks *leakBaseline
	if *settle > 0 {
		leaks = takeLeakBaseline()
	}
	endWatch := func() {}
	if *pagesAfterSeeds > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithCancel(ctx)
		defer stop()
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			stopAfterSeeds(ctx, stop, db, nSeeds, *pagesAfterSeeds, start, &rep)
		}()
		endWatch = func() { stop(); <-watched }
	}
	crawlStart := time.Now()
	sum, err := crawlDB(ctx, o, db)
	rep.CrawlNS = int64(time.Since(crawlStart))
	endWatch() // before rep is read
	if err != nil {
		return err
	}
	if leaks != nil {
		rep.Leaks = leaks.check(*settle)
		rep.Leaks.NoFile = noFileLimit
	}
	rep.Exhausted, rep.Why, rep.HeldWork = sum.Exhausted, sum.Why, sum.HeldWork
	rep.Heap = takeParts()
	rep.DB = readMapping("self", *dbPath)
	return rep.finish(stdout, start, sum.Counts)
}

func (rep *ChildReport) finish(stdout io.Writer, start time.Time, c store.Counts) error {
	rep.WallNS = int64(time.Since(start))
	rep.Fetched, rep.Failed, rep.Queued = c.Fetched, c.Failed, c.Queued
	if st, err := readProcStatus("self"); err == nil {
		rep.VmHWMKB, rep.AnonKB, rep.RSSKB = st.hwmKB, st.anonKB, st.rssKB
	}
	return json.NewEncoder(stdout).Encode(rep)
}

// fillFrontier adds every URL of path to the file's frontier the way a
// crawl adds discovered links: frontier.NewItem, then Add a hundred at a
// time, then Close, which commits them all.
func fillFrontier(o crawl.Options, dbPath, path string, start time.Time, stdout io.Writer) error {
	db, err := storage.Open(dbPath, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	f, err := frontier.Open(db, frontier.Options{HostConcurrency: o.HostConcurrency, Logger: o.Logger})
	if err != nil {
		return err
	}
	err = errors.Join(addLines(f, path), f.Close())
	if err != nil {
		return fmt.Errorf("bench child: fill: %w", err)
	}
	c, err := db.Counts()
	if err != nil {
		return err
	}
	var rep ChildReport
	return rep.finish(stdout, start, c)
}

func addLines(f *frontier.Frontier, path string) error {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	sc := bufio.NewScanner(in)
	batch := make([]store.Item, 0, frontierAddBatch)
	for sc.Scan() {
		it, err := frontier.NewItem(sc.Text(), 0, 0)
		if err != nil {
			return err
		}
		if batch = append(batch, it); len(batch) == frontierAddBatch {
			if err := f.Add(batch...); err != nil {
				return err
			}
			// Add hands the slice to the writer: the next batch needs its own.
			batch = make([]store.Item, 0, frontierAddBatch)
		}
	}
	if err := f.Add(batch...); err != nil {
		return err
	}
	return sc.Err()
}

// checkSeedsFile reads the seeds file once before the crawl, as `crawl
// --seeds` does; the engine then streams it from Options.SeedsFile. It
// returns the number of seeds.
func checkSeedsFile(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("bench child: %w", err)
	}
	defer f.Close()
	n := 0
	err = crawl.ForEachSeed(bufio.NewReader(f), path, nil, func(string) error { n++; return nil })
	return n, err
}

// stopAfterSeeds stops the crawl once it has fetched pages more pages after
// every seed was queued, so that the frontier holds them all for a while.
// The seeds are the site's URLs, so all of them are seen once nSeeds are.
// It records in rep when that happened.
func stopAfterSeeds(ctx context.Context, stop context.CancelFunc, db *storage.DB, nSeeds, pages int, start time.Time, rep *ChildReport) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	base := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		c, err := db.Counts()
		if err != nil {
			continue
		}
		done := c.Fetched + c.Failed
		if base < 0 && c.Seen >= int64(nSeeds) {
			base = done
			rep.AllSeededNS = int64(time.Since(start))
		}
		if base >= 0 && done >= base+int64(pages) {
			stop()
			return
		}
	}
}

// procStatus holds the memory lines of /proc/PID/status, in KiB. RSS is
// anonymous memory (the heap, stacks) plus file pages mapped in, which for
// Breakwater is mostly the bbolt file's mmap: the kernel can drop those.
type procStatus struct{ rssKB, hwmKB, anonKB, fileKB int64 }

// readProcStatus reads VmRSS and VmHWM of pid ("self" for this process).
func readProcStatus(pid string) (procStatus, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	for line := range bytes.Lines(data) {
		key, val, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		switch key {
		case "VmRSS":
			st.rssKB = parseKB(val)
		case "VmHWM":
			st.hwmKB = parseKB(val)
		case "RssAnon":
			st.anonKB = parseKB(val)
		case "RssFile":
			st.fileKB = parseKB(val)
		}
	}
	if st.rssKB == 0 {
		return st, fmt.Errorf("/proc/%s/status: no VmRSS", pid)
	}
	return st, nil
}

// Mapping is what one file's mapping holds in memory, from
// /proc/PID/smaps: resident pages, those of them dirty (the only ones the
// kernel must write back before it can drop them), and the file's size.
type Mapping struct {
	RSSKB   int64 `json:"rss_kb"`
	DirtyKB int64 `json:"dirty_kb"`
	SizeKB  int64 `json:"size_kb"` // the mapping's length: bbolt maps ahead of the file
	FileKB  int64 `json:"file_kb"` // the file's size on disk
}

// readMapping sums the mappings of path in pid's smaps; nil if it cannot
// be read or path is not mapped.
func readMapping(pid, path string) *Mapping {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil
	}
	data, err := os.ReadFile("/proc/" + pid + "/smaps")
	if err != nil {
		return nil
	}
	var m Mapping
	found, in := false, false
	for line := range bytes.Lines(data) {
		fields := strings.Fields(string(line))
		if len(fields) == 0 {
			continue
		}
		if !strings.HasSuffix(fields[0], ":") { // a mapping's header: range, perms, offset, dev, inode, path
			in = len(fields) >= 6 && fields[len(fields)-1] == abs
			if in {
				found = true
				if lo, hi, ok := strings.Cut(fields[0], "-"); ok {
					a, _ := strconv.ParseUint(lo, 16, 64)
					b, _ := strconv.ParseUint(hi, 16, 64)
					m.SizeKB += int64(b-a) / 1024
				}
			}
			continue
		}
		if !in || len(fields) < 2 {
			continue
		}
		n, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "Rss:":
			m.RSSKB += n
		case "Shared_Dirty:", "Private_Dirty:":
			m.DirtyKB += n
		}
	}
	if !found {
		return nil
	}
	if fi, err := os.Stat(abs); err == nil {
		m.FileKB = fi.Size() / 1024
	}
	return &m
}

// parseKB parses a /proc value such as "   123456 kB".
func parseKB(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	return n
}
