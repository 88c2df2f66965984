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
	"strconv"
	"sync"
	"time"

	"breakwater/demosite"
)

// MemoryRun is one child crawl of the memory section.
type MemoryRun struct {
	Name  string        `json:"name"`
	Child ChildReport   `json:"child"`
	Wall  time.Duration `json:"wall_ns"`
	// PeakKB is the larger of the VmHWM sampled from /proc and the one the
	// child reads of itself as it exits. (rusage maxrss is no use here: a
	// child started with vfork inherits its parent's high-water mark.)
	PeakKB  int64       `json:"peak_kb"`
	Samples []RSSSample `json:"samples,omitempty"`

	last RSSSample // the latest sample, standing in for 100% if the child exits between samples
}

// RSSSample is the child's VmRSS when the site had served Percent of the
// crawl's pages.
type RSSSample struct {
	Percent int   `json:"percent"`
	Pages   int   `json:"pages"`
	RSSKB   int64 `json:"rss_kb"`
}

// MemoryResult is the memory section.
type MemoryResult struct {
	QueuedSite  Size       `json:"queued_site"`
	QueuedPages int        `json:"queued_pages"` // pages each million-URL run fetches before it stops
	Seeded      *MemoryRun `json:"seeded"`       // crawl --seeds FILE with every URL of QueuedSite
	Resumed     *MemoryRun `json:"resumed"`      // the same file resumed with no seeds
	GrowthSite  Size       `json:"growth_site"`
	Growth      *MemoryRun `json:"growth"` // a crawl of GrowthSite from its roots to the end
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
	res := &MemoryResult{QueuedSite: cfg.QueuedSite, QueuedPages: cfg.QueuedPages, GrowthSite: cfg.GrowthSite}
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
	res.Growth, err = r.runChild(ctx, "growth", args, growthSampler(site, cfg.GrowthSite))
	if err != nil {
		return err
	}
	if g := res.Growth; len(g.Samples) < 3 && g.last.RSSKB > 0 {
		g.Samples = append(g.Samples, g.last)
	}
	return nil
}

// queuedRuns crawls with every URL of QueuedSite as a seed (the normal path
// of `crawl --seeds FILE`), stopping after QueuedPages pages, then resumes
// the same file with no seeds: the frontier still holds about a million URLs.
func (r *runner) queuedRuns(ctx context.Context, res *MemoryResult) error {
	cfg := r.cfg
	site, err := startSite(cfg.QueuedSite, 0, 0)
	if err != nil {
		return err
	}
	defer site.Close()
	seeds := filepath.Join(r.dir, "million-seeds.txt")
	if err := writeLines(seeds, site.URLs()); err != nil {
		return err
	}
	db := filepath.Join(r.dir, "million.db")
	common := []string{"--db", db, "--workers", strconv.Itoa(cfg.Workers),
		"--host-concurrency", strconv.Itoa(cfg.HostConcurrency), "--max-pages", strconv.Itoa(cfg.QueuedPages)}
	cfg.logf("memory: crawl --seeds with %d URLs (%s), stop after %d pages", cfg.QueuedSite.URLs(), cfg.QueuedSite, cfg.QueuedPages)
	if res.Seeded, err = r.runChild(ctx, "seeded", append(common, "--seeds", seeds), nil); err != nil {
		return err
	}
	if err := os.Remove(seeds); err != nil {
		return err
	}
	cfg.logf("memory: resume the same file, stop after %d more pages", cfg.QueuedPages)
	res.Resumed, err = r.runChild(ctx, "resumed", common, nil)
	return err
}

// sampler is called with each /proc sample of the running child.
type sampler func(st procStatus, run *MemoryRun)

// growthSampler records VmRSS when the site has served 25, 50 and 100% of
// its pages (robots.txt requests, one a host, discounted).
func growthSampler(site *demosite.Site, size Size) sampler {
	next := 0
	percents := []int{25, 50, 100}
	return func(st procStatus, run *MemoryRun) {
		pages := totalRequests(site) - size.Hosts
		run.last = RSSSample{Percent: 100, Pages: pages, RSSKB: st.rssKB}
		for next < len(percents) && pages >= size.URLs()*percents[next]/100 {
			run.Samples = append(run.Samples, RSSSample{Percent: percents[next], Pages: pages, RSSKB: st.rssKB})
			next++
		}
	}
}

// runChild runs Child in a new process with args, sampling its
// /proc/PID/status every few milliseconds until it exits.
func (r *runner) runChild(ctx context.Context, name string, args []string, sample sampler) (*MemoryRun, error) {
	cmd := r.cfg.Child(ctx, args)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	run := &MemoryRun{Name: name}
	start := r.cfg.now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("memory %s: start child: %w", name, err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { watch(cmd.Process.Pid, stop, sample, run) })
	err := cmd.Wait()
	close(stop)
	wg.Wait()
	run.Wall = r.cfg.since(start)
	if err != nil {
		return nil, fmt.Errorf("memory %s: child: %w: %s", name, err, lastLines(stderr.Bytes(), 5))
	}
	if err := json.Unmarshal(bytes.TrimSpace(lastLines(stdout.Bytes(), 1)), &run.Child); err != nil {
		return nil, fmt.Errorf("memory %s: child report %q: %w", name, stdout.String(), err)
	}
	run.PeakKB = max(run.PeakKB, run.Child.VmHWMKB)
	return run, nil
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
