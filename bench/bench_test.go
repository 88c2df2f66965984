package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// childEnv makes the test binary act as the memory section's child process.
const childEnv = "BREAKWATER_BENCH_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		err := Child(ctx, os.Args[1:], os.Stdout)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// testChild re-executes the test binary as Child.
func testChild(ctx context.Context, args []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	// A race-enabled binary otherwise sleeps a second as it exits.
	cmd.Env = append(os.Environ(), childEnv+"=1", "GORACE=atexit_sleep_ms=0")
	return cmd
}

// tinyConfig is every section at a size that runs in a few seconds under -race.
func tinyConfig(t *testing.T) Config {
	t.Helper()
	c := QuickConfig()
	c.Site, c.Workers, c.HostConcurrency = Size{4, 10}, 8, 2
	c.DeadSite, c.DeadURLs, c.DeadLinksPerPage = Size{4, 10}, 6, 1
	c.DeadTimeout, c.GiveUpAfter, c.BreakerOffCap = 150*time.Millisecond, 200*time.Millisecond, 20*time.Second
	c.Breaker.Threshold, c.Breaker.Probes, c.Breaker.Rest = 2, 1, time.Minute
	c.FrontierURLs, c.FrontierHosts = 2000, 20
	c.QueuedSite, c.QueuedPages, c.SeedsCap = Size{4, 100}, 50, 30*time.Second
	c.GrowthSite, c.ChildCap = Size{4, 50}, 30*time.Second
	c.LargePages = []PageSize{{Pages: 3, Bytes: 256 << 10, Workers: 2, HostConcurrency: 2}}
	c.ManyHosts, c.FailingHosts, c.RefusingHosts, c.FailingGiveUp, c.HostsCap = Size{50, 2}, Size{10, 3}, Size{10, 1}, time.Second, time.Minute
	c.FailingThreshold = 2
	c.Child = testChild
	start := time.Now()
	c.Log = func(format string, args ...any) {
		t.Logf("%5.2fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	c.TempDir = t.TempDir()
	return c
}

func TestRunTinyEndToEnd(t *testing.T) {
	rep, err := Run(context.Background(), tinyConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Run("ceiling", func(t *testing.T) { checkCeiling(t, rep.Ceiling) })
	t.Run("crawl", func(t *testing.T) { checkCrawl(t, rep.Crawl) })
	t.Run("recrawl", func(t *testing.T) { checkRecrawl(t, rep.Recrawl) })
	t.Run("dead", func(t *testing.T) { checkDead(t, rep.Dead) })
	t.Run("frontier", func(t *testing.T) { checkFrontier(t, rep.Frontier) })
	t.Run("memory", func(t *testing.T) { checkMemory(t, rep.Memory) })
	t.Run("hosts", func(t *testing.T) { checkHosts(t, rep.Hosts) })
	t.Run("table", func(t *testing.T) {
		var out bytes.Buffer
		if err := rep.WriteTable(&out); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"CPUs, GOMAXPROCS", "SECTION", "ratio to ceiling", "nothing changed: time, first crawl / this",
			"changed pages fetched again", "\nrecrawl: the crawl section's site", "breaker on: time ratio",
			"lease+complete", "RSS growth from 25% to 100%", "worker-seconds on dead host: every attempt",
			"with --warc: ratio to the crawl without --warc", "with --warc: WARC bytes per page", "with --warc: index.cdxj lines", "GNU wget 1.21",
			"many hosts: peak RSS", "many hosts: peak anonymous RSS", "failing hosts: peak file-backed RSS",
			"failing hosts: URLs failed", "refusing hosts: live heap per host", "many hosts: per host: ", "settings: many hosts 50 hosts x 2 pages"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, out.String())
			}
		}
	})
}

func checkCeiling(t *testing.T, c *CeilingResult) {
	t.Helper()
	if c == nil || c.Pages != 40 || c.Errors != 0 || c.Passes != ceilingPasses || c.PagesPerSec <= 0 ||
		c.MinPerSec > c.PagesPerSec || c.PagesPerSec > c.MaxPerSec {
		t.Fatalf("ceiling = %+v; want 40 pages, no errors, min <= median <= max", c)
	}
}

func checkCrawl(t *testing.T, c *CrawlResult) {
	t.Helper()
	if c == nil {
		t.Fatal("no crawl result")
	}
	want := Traffic{PageRequests: 40, DistinctPages: 40, RobotsRequests: 4}
	if c.Fetched != 40 || c.Failed != 0 || !c.Exhausted || c.Traffic != want {
		t.Errorf("crawl = %+v; want 40 fetched once each, 4 robots.txt, exhausted", c)
	}
	if c.PagesPerSec <= 0 || c.RatioToCeiling <= 0 || c.DBBytes <= 0 {
		t.Errorf("crawl rates = %+v; want positive rate, ratio and file size", c)
	}
	checkWARC(t, c.WARC, want)
	if l := c.Listen; l == nil || l.Fetched != c.Fetched || l.PagesPerSec <= 0 || l.RatioToCrawl <= 0 {
		t.Errorf("the crawl with --listen: %+v, want the same pages and its rates", l)
	}
}

// checkWARC checks the crawl section's second crawl, with --warc, of the
// tiny site: every page fetched once and archived once, the archive clean.
func checkWARC(t *testing.T, w *WARCRun, want Traffic) {
	t.Helper()
	if w == nil {
		t.Fatal("no --warc crawl in the crawl section")
	}
	if w.Fetched != 40 || w.Failed != 0 || !w.Exhausted || w.Traffic != want {
		t.Errorf("--warc crawl = %+v; want 40 fetched once each, 4 robots.txt, exhausted", w)
	}
	if w.PagesPerSec <= 0 || w.RatioToCeiling <= 0 || w.RatioToCrawl <= 0 || w.DBBytes <= 0 {
		t.Errorf("--warc rates = %+v; want positive rate, ratios and file size", w)
	}
	if w.Files < 1 || w.Bytes <= 0 || w.BytesPerPage != float64(w.Bytes)/40 {
		t.Errorf("--warc files = %d, %d bytes, %.0f a page; want at least one file and bytes/40 a page", w.Files, w.Bytes, w.BytesPerPage)
	}
	if !w.CheckOK || w.NProblems != 0 || len(w.Unfinished) != 0 || !w.Clean() {
		t.Errorf("--warc archive not clean: %+v", w)
	}
	if w.PagesArchived != 40 || w.PagesArchivedTwice != 0 {
		t.Errorf("--warc archive holds %d pages once and %d more than once; want 40 and 0", w.PagesArchived, w.PagesArchivedTwice)
	}
	// 40 pages and 4 robots.txt, each a request and a response or revisit.
	rec := w.Records
	if rec["warcinfo"] < 1 || rec["request"] != 44 || rec["response"]+rec["revisit"] != 44 {
		t.Errorf("--warc records = %v; want a warcinfo, 44 requests, 44 responses and revisits", rec)
	}
	if w.IndexRecords != 44 || w.IndexWall <= 0 || w.IndexReadWall <= 0 {
		t.Errorf("--warc index: %d lines, written again in %s, from the files in %s; want 44 lines and both timed",
			w.IndexRecords, w.IndexWall, w.IndexReadWall)
	}
}

func checkRecrawl(t *testing.T, c *RecrawlResult) {
	t.Helper()
	if c == nil {
		t.Fatal("no recrawl result")
	}
	f, u, ch := c.First, c.Unchanged, c.Changed
	if f.Fetched != 40 || f.PageRequests != 40 || f.NotModified != 0 || f.BodyBytes <= 0 || !f.Exhausted {
		t.Errorf("first crawl = %+v; want 40 pages fetched once, with bodies", f)
	}
	if u.Fetched != 40 || u.Failed != 0 || u.PageRequests != 40 || u.NotModified != 40 || u.BodyBytes != 0 || !u.Exhausted {
		t.Errorf("unchanged recrawl = %+v; want every page asked once, answered 304, no body", u)
	}
	// Every tenth page of each of the 4 hosts: page 0.
	if c.ChangedPages != 4 || c.ChangedRefetched != 4 || ch.PageRequests != 40 || ch.NotModified != 36 || !ch.Exhausted {
		t.Errorf("changed recrawl = %+v, %d of %d changed pages fetched; want the 4 changed pages fetched, 36 answered 304",
			ch, c.ChangedRefetched, c.ChangedPages)
	}
	if ch.BodyBytes <= 0 || ch.BodyBytes >= f.BodyBytes {
		t.Errorf("changed recrawl received %d body bytes, the first crawl %d; want some, fewer", ch.BodyBytes, f.BodyBytes)
	}
	if c.TimeRatio(u) <= 0 || c.RawOK <= 0 || c.RawNotModified <= 0 {
		t.Errorf("ratios: time %.2f, raw %.0f / %.0f; want positive", c.TimeRatio(u), c.RawOK, c.RawNotModified)
	}
}

func checkDead(t *testing.T, d *DeadResult) {
	t.Helper()
	if d == nil || d.Baseline == nil || d.On == nil || d.Off == nil {
		t.Fatalf("dead = %+v; want three runs", d)
	}
	for _, run := range []*DeadRun{d.Baseline, d.On, d.Off} {
		if run.Fetched != 40 || run.Traffic.Duplicates() != 0 {
			t.Errorf("%s: %d fetched, %d refetched; want 40 live pages once", run.Name, run.Fetched, run.Traffic.Duplicates())
		}
	}
	if d.Baseline.Traffic.DeadConnections != 0 || d.Baseline.DeadWorkerSeconds != 0 {
		t.Errorf("baseline touched a dead host: %+v", d.Baseline)
	}
	on := d.On
	if !on.Exhausted || on.DeadLeft != 0 || on.DeadMaxPerRest < d.Threshold || on.DeadMaxPerRest > d.ConnLimit {
		t.Errorf("breaker on = %+v; want exhausted, nothing left, %d..%d dead requests", on, d.Threshold, d.ConnLimit)
	}
	if on.LiveDone <= 0 || on.LiveDone > on.Wall {
		t.Errorf("breaker on: live pages done at %s of a %s crawl; want within it", on.LiveDone, on.Wall)
	}
	if !(0 < on.DeadFirstTried && on.DeadFirstTried < on.DeadOpened && on.DeadOpened < on.DeadGivenUp && on.DeadGivenUp <= on.Wall) ||
		on.DeadGivenUp-on.DeadOpened < d.GiveUpAfter {
		t.Errorf("breaker on: dead host first tried %s, opened %s, given up %s of a %s crawl; want in that order, given up %s after opening",
			on.DeadFirstTried, on.DeadOpened, on.DeadGivenUp, on.Wall, d.GiveUpAfter)
	}
	if on.DeadResults["host-down"] == 0 || on.DeadWorkerSeconds <= 0 {
		t.Errorf("breaker on dead results = %v, %.2fs; want host-down URLs and some worker time", on.DeadResults, on.DeadWorkerSeconds)
	}
	off := d.Off
	if off.Capped || off.DeadResults["transient"] != int64(d.DeadURLs) || off.Traffic.DeadConnections != d.DeadURLs {
		t.Errorf("breaker off = %+v; want every dead URL attempted once and recorded transient", off)
	}
	if d.WorkerSecondsRatio() <= 1 || d.TimeRatio(on) <= 0 {
		t.Errorf("ratios: worker-seconds %.2f, time %.2f; want the breaker to save worker time", d.WorkerSecondsRatio(), d.TimeRatio(on))
	}
}

func checkFrontier(t *testing.T, f *FrontierResult) {
	t.Helper()
	if f == nil || f.URLs != 2000 || f.EnqueuePerSec <= 0 || f.LeasePerSec <= 0 || f.QueuedBytes <= 0 || f.FileBytes <= 0 {
		t.Fatalf("frontier = %+v; want positive rates and sizes for 2000 URLs", f)
	}
	if f.Passes != 3 {
		t.Errorf("frontier: %d passes, want 3", f.Passes)
	}
	for _, r := range [][3]float64{{f.EnqueueMinPerSec, f.EnqueuePerSec, f.EnqueueMaxPerSec}, {f.LeaseMinPerSec, f.LeasePerSec, f.LeaseMaxPerSec}} {
		if !(r[0] <= r[1] && r[1] <= r[2]) {
			t.Errorf("frontier: min, median, max rates %v are out of order", r)
		}
	}
	if want := float64(f.URLs) / f.EnqueueWall.Seconds(); f.EnqueuePerSec != want {
		t.Errorf("frontier: enqueue rate %.0f, want %.0f from the median wall %v", f.EnqueuePerSec, want, f.EnqueueWall)
	}
}

func checkHosts(t *testing.T, h *HostsResult) {
	t.Helper()
	if h == nil || h.Many == nil || h.Failing == nil || h.Refusing == nil {
		t.Fatalf("hosts = %+v; want three runs", h)
	}
	for _, run := range []*MemoryRun{h.Many, h.Failing, h.Refusing} {
		if run.PeakKB < 1000 || run.Capped || !run.Child.Exhausted {
			t.Errorf("%s: peak %d kB, capped %v, exhausted %v; want a real peak of a crawl to the end",
				run.Name, run.PeakKB, run.Capped, run.Child.Exhausted)
		}
		if run.PeakAnonKB <= 0 || run.PeakFileKB <= 0 || run.PeakAnonKB+run.PeakFileKB < run.PeakKB/2 {
			t.Errorf("%s: peak %d kB, anonymous %d kB, file-backed %d kB; want both parts measured",
				run.Name, run.PeakKB, run.PeakAnonKB, run.PeakFileKB)
		}
		hp := run.Child.Heap
		if hp == nil || hp.HeapInuseKB <= 0 || len(hp.Parts) == 0 {
			t.Errorf("%s: heap at its peak %+v; want its parts", run.Name, hp)
			continue
		}
		var sum int64
		for _, p := range hp.Parts {
			sum += p.Bytes
		}
		if sum/1024 != hp.ProfiledKB {
			t.Errorf("%s: parts sum to %d bytes, profiled %d kB", run.Name, sum, hp.ProfiledKB)
		}
	}
	if c := h.Refusing.Child; c.Failed != 10 || c.Fetched != 0 {
		t.Errorf("refusing hosts: %+v; want all 10 URLs failed", c)
	}
	// Through the SOCKS5 front, every page of every virtual host, and one
	// robots.txt a host.
	if c := h.Many.Child; c.Fetched != 100 || c.Failed != 0 || h.ManyServed != 150 {
		t.Errorf("many hosts: %+v, %d requests served; want 100 fetched, none failed, 150 served", c, h.ManyServed)
	}
	if c := h.Failing.Child; c.Failed != 30 || c.Fetched != 0 {
		t.Errorf("failing hosts: %+v; want all 30 URLs failed", c)
	}
}

func checkMemory(t *testing.T, m *MemoryResult) {
	t.Helper()
	if m == nil || m.Seeded == nil || m.Filled == nil || m.Queued == nil || m.Growth == nil {
		t.Fatalf("memory = %+v; want four runs", m)
	}
	for _, run := range []*MemoryRun{m.Seeded, m.Filled, m.Queued, m.Growth} {
		if run.PeakKB < 1000 || run.Capped {
			t.Errorf("%s: peak %d kB, capped %v; want a real peak", run.Name, run.PeakKB, run.Capped)
		}
	}
	if got := m.Filled.Child.Queued; got != 400 {
		t.Errorf("filled: %d queued, want 400", got)
	}
	if q := m.Queued.Child; q.Fetched != 50 || q.Queued != 350 {
		t.Errorf("queued crawl: %+v; want 50 fetched and 350 left", q)
	}
	if g := m.Growth.Child; g.Fetched != 200 || !g.Exhausted {
		t.Errorf("growth crawl: %+v; want all 200 pages", g)
	}
	if len(m.Growth.Samples) != 3 || m.Growth.Samples[2].Percent != 100 {
		t.Errorf("growth samples = %+v; want 25, 50, 100%%", m.Growth.Samples)
	}
	if _, ok := m.GrowthRatio(); !ok {
		t.Error("no growth ratio")
	}
	if len(m.Large) != 1 || m.Large[0].Run.Child.Fetched != 3 || !m.Large[0].Run.Child.Exhausted {
		t.Errorf("large pages = %+v; want one crawl of all 3 pages", m.Large)
	}
}

func TestHeapPartOfInnermostRule(t *testing.T) {
	for _, tc := range []struct {
		funcs []string
		want  string
	}{
		{[]string{"golang.org/x/time/rate.NewLimiter", "breakwater/crawl.NewPace", "breakwater/crawl.(*hostTable).get"}, partPace},
		{[]string{"breakwater/crawl.(*hostTable).get", "breakwater/crawl.(*Engine).handle"}, partHostState},
		{[]string{"context.WithCancel", "breakwater/crawl.(*hostState).beginRequest"}, partHostState},
		{[]string{"runtime.malg", "runtime.newproc1"}, partOther},
		{[]string{"net/http.(*wantConnQueue).pushBack", "net/http.(*Transport).queueForIdleConn"}, partHTTPWait},
		{[]string{"bufio.NewReaderSize", "net/http.(*Transport).dialConn"}, partHTTPConns},
		{[]string{"fmt.Errorf", "breakwater/fetch.(*guardedDialer).DialContext"}, partErrors},
	} {
		if got := partOf(tc.funcs); got != tc.want {
			t.Errorf("partOf(%q) = %q, want %q", tc.funcs, got, tc.want)
		}
	}
}

func TestScaledLiveBytesUndoesSampling(t *testing.T) {
	// One 64-byte object sampled at 512 KiB stands for about 8,192 of them.
	r := runtime.MemProfileRecord{AllocBytes: 64, AllocObjects: 1}
	if got := scaledLiveBytes(&r, 512<<10); got < 512<<10 || got > 513<<10 {
		t.Errorf("scaled = %d, want about 512 KiB", got)
	}
	if got := scaledLiveBytes(&r, 1); got != 64 {
		t.Errorf("unsampled = %d, want 64", got)
	}
	freed := runtime.MemProfileRecord{AllocBytes: 64, AllocObjects: 1, FreeBytes: 64, FreeObjects: 1}
	if got := scaledLiveBytes(&freed, 512<<10); got != 0 {
		t.Errorf("freed = %d, want 0", got)
	}
}

// The child finds the database file's mapping in its own smaps.
func TestReadMappingFindsAMappedFile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	m := readMapping("self", exe) // the test binary is mapped, read-only
	if m == nil || m.RSSKB <= 0 || m.SizeKB < m.RSSKB || m.FileKB <= 0 || m.DirtyKB > m.RSSKB {
		t.Fatalf("mapping of %s: %+v; want resident pages within the mapping's size", exe, m)
	}
	if readMapping("self", exe+".absent") != nil {
		t.Error("a file not mapped has a mapping")
	}
}
