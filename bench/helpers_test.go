package bench

import (
	"context"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestMaxInWindow(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...float64) []time.Time {
		var out []time.Time
		for _, s := range secs {
			out = append(out, t0.Add(time.Duration(s*float64(time.Second))))
		}
		return out
	}
	tests := []struct {
		name   string
		times  []time.Time
		window time.Duration
		want   int
	}{
		{"none", nil, time.Minute, 0},
		{"one", at(0), time.Minute, 1},
		{"all within", at(0, 1, 2, 59), time.Minute, 4},
		{"window end is exclusive", at(0, 60), time.Minute, 1},
		{"densest later", at(0, 100, 101, 102, 200), 10 * time.Second, 3},
		{"two rests", at(0, 1, 2, 70, 71), time.Minute, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxInWindow(tt.times, tt.window); got != tt.want {
				t.Errorf("maxInWindow = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestInterleave(t *testing.T) {
	urls := []string{"a0", "a1", "a2", "b0", "b1", "b2"}
	got := interleave(urls, Size{Hosts: 2, Pages: 3})
	want := []string{"a0", "b0", "a1", "b1", "a2", "b2"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("interleave = %v, want %v", got, want)
	}
}

func TestParseSections(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", DefaultSections, false},
		{"soak", []string{"soak"}, false},
		{"crawl", []string{"crawl"}, false},
		{"recrawl", []string{"recrawl"}, false},
		{" dead , memory", []string{"dead", "memory"}, false},
		{"crawl,bogus", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseSections(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for _, s := range tt.want {
				if !got[s] {
					t.Errorf("%q not selected in %v", s, got)
				}
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{format(PagesPerSec, 0), "0 pages/s"},
		{format(PagesPerSec, 999.6), "1,000 pages/s"},
		{format(URLsPerSec, 1234567), "1,234,567 URLs/s"},
		{format(Bytes, 150_000_000), "150.0 MB"},
		{format(Share, 0.3), "30.0%"},
		{format(Change, -0.125), "-12.5%"},
		{format(Times, 2.5), "2.50x"},
		{format(Count, -1234), "-1,234"},
		{set("rest", 10*time.Minute).Value, "10m"},
		{set("ttl", 24*time.Hour).Value, "24h"},
		{string(lastLines([]byte("a\nb\nc\n"), 2)), "b\nc"},
		{string(lastLines([]byte("only"), 3)), "only"},
		{wrap("aa bb cc", 5, ""), "aa bb\n  cc\n"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if got := parseKB("   123456 kB\n"); got != 123456 {
		t.Errorf("parseKB = %d", got)
	}
}

func TestReadProcStatusSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	st, err := readProcStatus("self")
	if err != nil || st.rssKB <= 0 || st.hwmKB < st.rssKB {
		t.Fatalf("readProcStatus(self) = %+v, %v; want 0 < VmRSS <= VmHWM", st, err)
	}
}

func TestGrowthRatio(t *testing.T) {
	run := func(samples ...RSSSample) *MemoryResult { return &MemoryResult{Growth: &MemoryRun{Samples: samples}} }
	tests := []struct {
		name   string
		m      *MemoryResult
		want   float64
		wantOK bool
	}{
		{"flat", run(RSSSample{Percent: 25, RSSKB: 100}, RSSSample{Percent: 100, RSSKB: 100}), 0, true},
		{"grew", run(RSSSample{Percent: 25, RSSKB: 100}, RSSSample{Percent: 50, RSSKB: 110}, RSSSample{Percent: 100, RSSKB: 130}), 0.3, true},
		{"no 100", run(RSSSample{Percent: 25, RSSKB: 100}), 0, false},
		{"no run", &MemoryResult{}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := tt.m.GrowthRatio()
			if ok != tt.wantOK || (ok && (got < tt.want-1e-9 || got > tt.want+1e-9)) {
				t.Errorf("GrowthRatio = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// TestDeadRowsVerdicts checks that a capped breaker-off run turns its
// figures into lower bounds and cannot fail the worker-seconds target.
func TestDeadRowsVerdicts(t *testing.T) {
	d := &DeadResult{ConnLimit: 14,
		Baseline: &DeadRun{Wall: 10 * time.Second},
		On: &DeadRun{Breaker: true, Wall: 13 * time.Second, LiveDone: 11 * time.Second,
			DeadMaxPerRest: 8, DeadWorkerSeconds: 16},
		Off: &DeadRun{Wall: 100 * time.Second, Capped: true, DeadWorkerSeconds: 100}}
	figs := (&Report{Dead: d}).Figures()
	tests := []struct{ figure, value, verdict string }{
		{"breaker on: time ratio to no dead host", "1.30x", ""},
		{"breaker on: live pages all fetched at", "11.00 s", ""},
		{"breaker on: live pages' time ratio to no dead host", "1.10x", "met"},
		{"breaker on: most dead-host requests in one rest", "8", "met"},
		{"breaker off: time ratio to no dead host", ">= 10.00x", ""},
		{"breaker off: most dead-host requests in one rest", "0", ""},
		{"worker-seconds on dead host, off / on", ">= 6.25x", "unknown"},
	}
	for _, tt := range tests {
		f := find(t, figs, tt.figure)
		if f.value() != tt.value || f.Verdict != tt.verdict {
			t.Errorf("%s: value %q verdict %q; want %q %q", tt.figure, f.value(), f.Verdict, tt.value, tt.verdict)
		}
	}
}

// A quick run's sizes are a fraction of the full run's: its verdicts are
// bracketed so that none reads as the real one, and the header says why.
func TestQuickVerdictsOnlyHint(t *testing.T) {
	d := &DeadResult{ConnLimit: 14,
		Baseline: &DeadRun{Wall: 10 * time.Second},
		On: &DeadRun{Breaker: true, Wall: 20 * time.Second, LiveDone: 12 * time.Second,
			DeadMaxPerRest: 8, DeadWorkerSeconds: 16},
		Off: &DeadRun{Wall: 100 * time.Second, DeadWorkerSeconds: 1000}}
	rep := &Report{Quick: true, Dead: d}
	got := map[string]string{}
	for _, f := range rep.Figures() {
		got[f.Name] = f.Verdict
	}
	for fig, want := range map[string]string{
		"breaker on: time ratio to no dead host":             "",
		"breaker on: live pages' time ratio to no dead host": "(missed)",
		"worker-seconds on dead host, off / on":              "(met)",
		"breaker off: time ratio to no dead host":            "",
	} {
		if got[fig] != want {
			t.Errorf("quick %q: verdict %q, want %q", fig, got[fig], want)
		}
	}
	var out strings.Builder
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "verdict in brackets only hints") || strings.Contains(out.String(), "MISSED") {
		t.Errorf("quick table does not say its verdicts only hint, or prints MISSED:\n%s", out.String())
	}
}

// TestRunChildCap checks both ends of a child's time limit: an expected cap
// is a measurement, an unexpected one is reported as stuck with a dump file.
func TestRunChildCap(t *testing.T) {
	if _, err := exec.LookPath("sleep"); err != nil {
		t.Skip("no sleep binary")
	}
	dir := t.TempDir()
	cfg := &Config{TempDir: dir, ChildCap: 200 * time.Millisecond,
		Child: func(ctx context.Context, _ []string) *exec.Cmd { return exec.CommandContext(ctx, "sleep", "5") }}
	r := &runner{cfg: cfg, dir: dir, report: &Report{}}
	run, err := r.runChild(context.Background(), childRun{name: "capped", capped: true})
	if err != nil || run == nil || !run.Capped {
		t.Errorf("capped run = %+v, %v; want a capped run and no error", run, err)
	}
	_, err = r.runChild(context.Background(), childRun{name: "hang"})
	if err == nil || !strings.Contains(err.Error(), "stuck") || !strings.Contains(err.Error(), "breakwater-bench-stuck-hang-") {
		t.Errorf("hanging child: err = %v; want a stuck error naming the dump file", err)
	}
}

func TestProjectedOffSeconds(t *testing.T) {
	tests := []struct {
		name string
		off  *DeadRun
		want float64
	}{
		{"not capped", &DeadRun{DeadWorkerSeconds: 100, DeadResults: map[string]int64{"transient": 50}}, 0},
		{"nothing recorded", &DeadRun{Capped: true, DeadLeft: 10}, 0},
		{"half done", &DeadRun{Capped: true, DeadWorkerSeconds: 100, DeadLeft: 50, DeadResults: map[string]int64{"transient": 50}}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := (&DeadResult{Off: tt.off}).ProjectedOffSeconds(); got != tt.want {
				t.Errorf("ProjectedOffSeconds = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMedianRate(t *testing.T) {
	walls := []time.Duration{3 * time.Second, time.Second, 2 * time.Second}
	median, rate, lowest, highest := medianRate(walls, 6)
	if median != 2*time.Second || rate != 3 || lowest != 2 || highest != 6 {
		t.Errorf("medianRate(3s, 1s, 2s; 6) = %v, %v, %v, %v; want 2s, 3, 2, 6", median, rate, lowest, highest)
	}
	if walls[0] != 3*time.Second {
		t.Errorf("medianRate reordered its input: %v", walls)
	}
	median, rate, lowest, highest = medianRate([]time.Duration{4 * time.Second}, 8)
	if median != 4*time.Second || rate != 2 || lowest != 2 || highest != 2 {
		t.Errorf("medianRate(4s; 8) = %v, %v, %v, %v; want 4s, 2, 2, 2", median, rate, lowest, highest)
	}
	f := num("enqueue", URLsPerSec, 271800, "").over([]float64{195300, 271800, 290000})
	if got, want := f.value(), "271,800 URLs/s (median of 3: 195,300-290,000)"; got != want {
		t.Errorf("value over passes = %q, want %q", got, want)
	}
	if got := num("enqueue", URLsPerSec, 1, "").over([]float64{1}).value(); got != "1 URLs/s" {
		t.Errorf("value of one pass = %q, want no spread", got)
	}
}

// TestWARCRowsVerdicts checks the --warc rows' targets, and that an archive
// that is not clean is FAILED in every configuration, with a loud note.
func TestWARCRowsVerdicts(t *testing.T) {
	crawl := func(w *WARCRun) *Report {
		return &Report{Quick: true, Crawl: &CrawlResult{Site: Size{2, 1}, PagesPerSec: 1000, WARC: w}}
	}
	clean := &WARCRun{Fetched: 2, PagesPerSec: 790, RatioToCeiling: 0.31, RatioToCrawl: 0.79, BytesPerPage: 1900,
		Traffic: Traffic{PageRequests: 2, DistinctPages: 2}, CheckOK: true, PagesArchived: 2}
	broken := *clean
	broken.CheckOK, broken.NProblems, broken.Problems = false, 1, []string{"f.warc.gz@0: block digest mismatch"}
	for _, tc := range []struct {
		w    *WARCRun
		want map[string]string
	}{
		{clean, map[string]string{
			"with --warc: ratio to ceiling":                        "(met)",
			"with --warc: ratio to the crawl without --warc":       "(missed)",
			"with --warc: warc.Check problems":                     Met,
			"with --warc: pages in one response or revisit record": Met,
			"with --warc: pages archived more than once":           Met,
		}},
		{&broken, map[string]string{
			"with --warc: warc.Check problems": Failed,
		}},
	} {
		got := map[string]string{}
		for _, f := range crawl(tc.w).Figures() {
			got[f.Name] = f.Verdict
		}
		for fig, want := range tc.want {
			if got[fig] != want {
				t.Errorf("%q: verdict %q, want %q", fig, got[fig], want)
			}
		}
	}
	if f := find(t, crawl(&broken).Figures(), "with --warc: warc.Check problems"); !strings.Contains(f.value(), "block digest mismatch") {
		t.Errorf("a broken archive's figure does not name its problem: %q", f.value())
	}
	if f := find(t, crawl(clean).Figures(), "with --warc: warc.Check problems"); f.value() != "0" {
		t.Errorf("a clean archive's problems = %q, want 0", f.value())
	}
}

// find is the figure named name.
func find(t *testing.T, figs []Figure, name string) Figure {
	t.Helper()
	for _, f := range figs {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no figure %q in %+v", name, figs)
	return Figure{}
}

// TestVerdicts holds figures against each kind of target, exact and as
// lower bounds, checks and goals, full and quick.
func TestVerdicts(t *testing.T) {
	tests := []struct {
		name  string
		f     Figure
		quick bool
		want  string
	}{
		{"no target", num("x", Count, 1, ""), false, ""},
		{"at least, met", num("x", Share, 0.5, "").want(AtLeast, 0.5), false, Met},
		{"at least, missed", num("x", Share, 0.4, "").want(AtLeast, 0.5), false, Missed},
		{"at least, lower bound short", num("x", Times, 6, "").lower(true).want(AtLeast, 50), false, Unknown},
		{"at least, lower bound over", num("x", Times, 60, "").lower(true).want(AtLeast, 50), false, Met},
		{"at most, lower bound under", num("x", Bytes, 1, "").lower(true).want(AtMost, 2), false, Unknown},
		{"at most, lower bound over", num("x", Bytes, 3, "").lower(true).want(AtMost, 2), false, Missed},
		{"below", num("x", Bytes, 2, "").want(Below, 2), false, Missed},
		{"all", num("x", Count, 9, "").of(10).want(All, 0), false, Missed},
		{"within", num("x", Change, -0.19, "").want(Within, 0.2), false, Met},
		{"quick hint", num("x", Share, 0.4, "").want(AtLeast, 0.5), true, "(missed)"},
		{"check failed, quick", num("x", Count, 1, "").check(Equal, 0), true, Failed},
		{"check met, quick", num("x", Count, 0, "").check(Equal, 0), true, Met},
	}
	for _, tt := range tests {
		if got := tt.f.verdict(tt.quick); got != tt.want {
			t.Errorf("%s: verdict %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestNoWARC checks that Config.NoWARC skips the crawl section's second crawl.
func TestNoWARC(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Sections, cfg.NoWARC = map[string]bool{SectionCrawl: true}, true
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Crawl == nil || rep.Crawl.Fetched != 40 || rep.Crawl.WARC != nil {
		t.Fatalf("crawl = %+v; want 40 fetched and no --warc run", rep.Crawl)
	}
}
