package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"breakwater/demosite"
)

// MemoryRun is one child crawl of the memory section.
type MemoryRun struct {
	Name   string        `json:"name"`
	Capped bool          `json:"capped"` // stopped at its time cap: no child report, peak is a lower bound
	Child  ChildReport   `json:"child"`
	Wall   time.Duration `json:"wall_ns"`
	// CPU is the child's user and system time, from its rusage.
	CPU time.Duration `json:"cpu_ns"`
	// PeakKB is the larger of the VmHWM sampled from /proc and the one the
	// child reads of itself as it exits. (rusage maxrss is no use here: a
	// child started with vfork inherits its parent's high-water mark.)
	PeakKB int64 `json:"peak_kb"`
	// PeakAnonKB is the largest anonymous RSS sampled: the part of the peak
	// that is the process's own memory rather than mapped file pages.
	PeakAnonKB int64 `json:"peak_anon_kb"`
	// PeakFileKB is the largest RssFile sampled: file pages mapped in,
	// mostly the bbolt file's, which the kernel may drop under pressure.
	PeakFileKB int64       `json:"peak_file_kb"`
	Samples    []RSSSample `json:"samples,omitempty"`

	last  RSSSample // the latest sample, standing in for 100% if the child exits between samples
	start time.Time // when the child was started
}

// RSSSample is the child's VmRSS when the site had served Percent of the
// crawl's pages.
type RSSSample struct {
	Percent int   `json:"percent"`
	Pages   int   `json:"pages"`
	RSSKB   int64 `json:"rss_kb"`
	AnonKB  int64 `json:"anon_kb"`
	HWMKB   int64 `json:"hwm_kb"` // VmHWM: the peak so far
}

// MemoryResult is the memory section.
type MemoryResult struct {
	QueuedSite  Size          `json:"queued_site"`
	QueuedPages int           `json:"queued_pages"` // pages the million-URL crawl fetches before it stops
	SeedsCap    time.Duration `json:"seeds_cap_ns"`
	// Seeded is `crawl --seeds FILE` with every URL of QueuedSite: the
	// user's path to a million queued URLs. It stops QueuedPages pages after
	// the last seed is queued, or at SeedsCap.
	Seeded *MemoryRun `json:"seeded"`
	// Filled adds the same URLs through frontier.Add, a hundred a call, as
	// a crawl adds discovered links; Queued then crawls that file from the
	// site's roots with the million URLs queued.
	Filled     *MemoryRun `json:"filled"`
	Queued     *MemoryRun `json:"queued"`
	GrowthSite Size       `json:"growth_site"`
	Growth     *MemoryRun `json:"growth"` // a crawl of GrowthSite from its roots to the end
	// Large is a crawl of each of Config.LargePages.
	Large []LargePageRun `json:"large,omitempty"`
}

// Growth is RSS at 100% over RSS at 25% of the growth crawl, minus one;
// ok is false when either sample is missing.
func (m *MemoryResult) GrowthRatio() (ratio float64, ok bool) {
	if m.Growth == nil {
		return 0, false
	}
	var at25, at100 int64
	for _, s := range m.Growth.Samples {
		switch s.Percent {
		case 25:
			at25 = s.RSSKB
		case 100:
			at100 = s.RSSKB
		}
	}
	if at25 == 0 || at100 == 0 {
		return 0, false
	}
	return float64(at100)/float64(at25) - 1, true
}

// memory runs the child crawls. Sites are served by this process; only the
// crawler runs in the child, so only its memory is measured.
func (r *runner) memory(ctx context.Context) error {
	cfg := r.cfg
	res := &MemoryResult{QueuedSite: cfg.QueuedSite, QueuedPages: cfg.QueuedPages, SeedsCap: cfg.SeedsCap,
		GrowthSite: cfg.GrowthSite}
	r.report.Memory = res
	if err := r.queuedRuns(ctx, res); err != nil {
		return err
	}
	cfg.logf("memory: crawl of %s to the end, RSS at 25/50/100%%", cfg.GrowthSite)
	site, err := startSite(cfg.GrowthSite, 0, 0)
	if err != nil {
		return err
	}
	defer site.Close()
	seeds := filepath.Join(r.dir, "growth-seeds.txt")
	if err := writeLines(seeds, site.Roots()); err != nil {
		return err
	}
	args := []string{"--db", filepath.Join(r.dir, "growth.db"), "--seeds", seeds}
	res.Growth, err = r.runChild(ctx, childRun{name: "growth", args: args, sample: growthSampler(site, cfg.GrowthSite)})
	if err != nil {
		return err
	}
	if g := res.Growth; len(g.Samples) < 3 && g.last.RSSKB > 0 {
		g.Samples = append(g.Samples, g.last)
	}
	return r.largePageRuns(ctx, res)
}

// queuedRuns measures a crawl with a million URLs queued, reached two
// ways: `crawl --seeds FILE` (capped at SeedsCap), and frontier.Add followed
// by a crawl of the filled file from the site's roots.
func (r *runner) queuedRuns(ctx context.Context, res *MemoryResult) error {
	cfg := r.cfg
	site, err := startSite(cfg.QueuedSite, 0, 0)
	if err != nil {
		return err
	}
	defer site.Close()
	urls := filepath.Join(r.dir, "million-urls.txt")
	roots := filepath.Join(r.dir, "million-roots.txt")
	if err := errors.Join(writeLines(urls, site.URLs()), writeLines(roots, site.Roots())); err != nil {
		return err
	}
	crawlArgs := func(db, stop string) []string {
		return []string{"--db", filepath.Join(r.dir, db), "--workers", strconv.Itoa(cfg.Workers),
			"--host-concurrency", strconv.Itoa(cfg.HostConcurrency), stop, strconv.Itoa(cfg.QueuedPages)}
	}
	n := cfg.QueuedSite.URLs()
	cfg.logf("memory: crawl --seeds with %d URLs (%s), stop after %d pages once all are queued, or at %s", n, cfg.QueuedSite, cfg.QueuedPages, cfg.SeedsCap)
	seeded := childRun{name: "seeded", args: append(crawlArgs("seeded.db", "--pages-after-seeds"), "--seeds", urls),
		limit: cfg.SeedsCap, capped: true}
	if res.Seeded, err = r.runChild(ctx, seeded); err != nil {
		return err
	}
	cfg.logf("memory: frontier.Add of %d URLs", n)
	filled := childRun{name: "filled", args: []string{"--db", filepath.Join(r.dir, "filled.db"), "--fill", urls}}
	if res.Filled, err = r.runChild(ctx, filled); err != nil {
		return err
	}
	cfg.logf("memory: crawl of the filled file from its roots, stop after %d pages", cfg.QueuedPages)
	res.Queued, err = r.runChild(ctx, childRun{name: "queued", args: append(crawlArgs("filled.db", "--max-pages"), "--seeds", roots)})
	return err
}

// sampler is called with each /proc sample of the running child.
type sampler func(st procStatus, run *MemoryRun)

// growthSampler records VmRSS when the site has served 25, 50 and 100% of
// its pages (robots.txt requests, one a host, discounted).
func growthSampler(site *demosite.Site, size Size) sampler {
	return percentSampler(size.URLs(), func() int { return totalRequests(site) - size.Hosts })
}

// percentSampler records a sample when served() reaches 25, 50 and 100%
// of total.
func percentSampler(total int, served func() int) sampler {
	next := 0
	percents := []int{25, 50, 100}
	return func(st procStatus, run *MemoryRun) {
		pages := served()
		at := func(percent int) RSSSample {
			return RSSSample{Percent: percent, Pages: pages, RSSKB: st.rssKB, AnonKB: st.anonKB, HWMKB: st.hwmKB}
		}
		run.last = at(100)
		for next < len(percents) && pages >= total*percents[next]/100 {
			run.Samples = append(run.Samples, at(percents[next]))
			next++
		}
	}
}

// childRun is one child process of the memory section.
type childRun struct {
	name   string
	args   []string
	sample sampler       // nil: peak only
	limit  time.Duration // 0: Config.ChildCap
	capped bool          // reaching limit is part of the measurement, not a hang
}

// runChild runs Child in a new process, sampling its /proc/PID/status every
// few milliseconds until it exits. A child that overruns its limit when it
// should not is stuck: it gets SIGQUIT, so the Go runtime prints every
// goroutine, and the dump is kept in a file named in the error.
func (r *runner) runChild(ctx context.Context, c childRun) (*MemoryRun, error) {
	if c.limit <= 0 {
		c.limit = r.cfg.ChildCap
	}
	cctx, cancel := context.WithTimeout(ctx, c.limit)
	defer cancel()
	args := c.args
	if d := r.cfg.HeapProfileDir; d != "" {
		args = append(slices.Clip(args), "--heapprofile", filepath.Join(d, c.name+".heap"))
	}
	cmd := r.cfg.Child(cctx, args)
	if !c.capped {
		cmd.Cancel = func() error {
			if ctx.Err() != nil {
				return cmd.Process.Kill()
			}
			return cmd.Process.Signal(syscall.SIGQUIT)
		}
		cmd.WaitDelay = 10 * time.Second
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	run := &MemoryRun{Name: c.name}
	start := r.cfg.now()
	run.start = start
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("memory %s: start child: %w", c.name, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { watch(cmd.Process.Pid, stop, c.sample, run) })
	err := cmd.Wait()
	close(stop)
	wg.Wait()
	run.Wall = r.cfg.since(start)
	if ps := cmd.ProcessState; ps != nil {
		run.CPU = ps.UserTime() + ps.SystemTime()
	}
	if err != nil {
		return r.childFailed(ctx, cctx, c, run, err, stderr.Bytes())
	}
	if err := json.Unmarshal(bytes.TrimSpace(lastLines(stdout.Bytes(), 1)), &run.Child); err != nil {
		return nil, fmt.Errorf("memory %s: child report %q: %w", c.name, stdout.String(), err)
	}
	run.PeakKB = max(run.PeakKB, run.Child.VmHWMKB)
	run.PeakAnonKB = max(run.PeakAnonKB, run.Child.AnonKB)
	return run, nil
}

// childFailed tells apart why a child ended badly: the whole bench was
// stopped, an expected cap was reached, the child hung, or it failed.
func (r *runner) childFailed(ctx, cctx context.Context, c childRun, run *MemoryRun, err error, stderr []byte) (*MemoryRun, error) {
	switch {
	case ctx.Err() != nil:
		return nil, fmt.Errorf("memory %s: %w", c.name, ctx.Err())
	case cctx.Err() != nil && c.capped:
		run.Capped = true
		return run, nil
	case cctx.Err() != nil:
		return nil, fmt.Errorf("memory %s: child still running after %s (stuck?); its goroutines are in %s",
			c.name, c.limit, r.keep("stuck-"+c.name, stderr))
	}
	return nil, fmt.Errorf("memory %s: child: %w: %s", c.name, err, lastLines(stderr, 5))
}

// keep writes data to a file that outlives the run's temporary directory
// and returns its name.
func (r *runner) keep(name string, data []byte) string {
	f, err := os.CreateTemp(r.cfg.TempDir, "breakwater-bench-"+name+"-*.txt")
	if err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	_, werr := f.Write(data)
	if err := errors.Join(werr, f.Close()); err != nil {
		return "(not saved: " + err.Error() + ")"
	}
	return f.Name()
}

func watch(pid int, stop <-chan struct{}, sample sampler, run *MemoryRun) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	id := strconv.Itoa(pid)
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		st, err := readProcStatus(id)
		if err != nil {
			continue // not started yet or already gone
		}
		run.PeakKB = max(run.PeakKB, st.hwmKB)
		run.PeakAnonKB = max(run.PeakAnonKB, st.anonKB)
		run.PeakFileKB = max(run.PeakFileKB, st.fileKB)
		if sample != nil {
			sample(st, run)
		}
	}
}

func writeLines(path string, lines []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for _, l := range lines {
		w.WriteString(l)
		w.WriteByte('\n')
	}
	return errors.Join(w.Flush(), f.Close())
}

// lastLines returns the last n lines of b, for error messages.
func lastLines(b []byte, n int) []byte {
	b = bytes.TrimRight(b, "\n")
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == '\n' {
			if n--; n == 0 {
				return b[i+1:]
			}
		}
	}
	return b
}
