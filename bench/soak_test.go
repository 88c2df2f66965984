package bench

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"breakwater/breaker"
)

// tinySoak is the soak at 20 hosts x 20 pages, with times short enough
// for a few seconds under -race: the dead host opens after 3 timeouts of
// 1s and is given up 600ms later, the recovering host answers after
// 300ms, retries wait at most 100ms and the budget never defers them.
func tinySoak() SoakConfig {
	return SoakConfig{Site: Size{20, 20}, UnhealthyPages: 4, DeadURLs: 10,
		Timeout: time.Second, Breaker: breaker.Config{Threshold: 3, Rest: 200 * time.Millisecond, Probes: 1},
		GiveUpAfter: 600 * time.Millisecond, RecoverAfter: 300 * time.Millisecond, ThrottleRPS: 200,
		RetryBase: 20 * time.Millisecond, RetryMax: 100 * time.Millisecond, RetryBudget: 1,
		Cap: 30 * time.Second, Settle: 5 * time.Second}
}

func TestSoakTiny(t *testing.T) {
	cfg := tinyConfig(t)
	cfg.Sections = map[string]bool{SectionSoak: true}
	cfg.Soak = tinySoak()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Soak == nil || rep.Soak.Run == nil || rep.Crawl != nil || rep.Memory != nil {
		t.Fatalf("report = %+v; want the soak alone", rep)
	}
	s := rep.Soak
	c := s.Run.Child
	if c.Fetched < 400 || c.CrawlNS <= 0 || s.PagesPerSec() <= 0 || s.HealthyPerSec() <= 0 {
		t.Errorf("child = %+v, %.0f pages/s, %.0f healthy pages/s; want the 400 healthy pages and more, positive rates",
			c, s.PagesPerSec(), s.HealthyPerSec())
	}
	// The healthy pages are not all asked exactly once on a loaded machine:
	// with a timeout this short a slow answer is asked again, and a
	// healthy host whose circuit opens is given up on within a second.
	// The full run's verdict row says which happened; here it must agree.
	if h := s.Healthy; h.DistinctPages == 0 || h.PageRequests < h.DistinctPages || h.RobotsRequests < 20 {
		t.Errorf("healthy traffic = %+v; want pages and 20 robots.txt", h)
	}
	// The refusing host holds its URLs for a person: the crawl ends with them left.
	if c.Exhausted || c.HeldWork == 0 || !strings.Contains(c.Why, "held") {
		t.Errorf("child ended exhausted %v, %d held, %q; want it to end with the refusing host's URLs held", c.Exhausted, c.HeldWork, c.Why)
	}
	checkSoakSamples(t, s.Run)
	checkSoakLeaks(t, c.Leaks)
	checkSoakHosts(t, s)
	if w := s.WARC; !w.CheckOK || w.Files < 1 || w.HealthyOnce == 0 || w.HealthyOnce+w.HealthyTwice+w.HealthyMissing != 400 {
		t.Errorf("archive = %+v; want it to read back clean, each of the 400 healthy pages counted once", w)
	}
	if !s.Verify.OK || s.Verify.Seen == 0 {
		t.Errorf("verify = %+v; want the file and archive clean", s.Verify)
	}
	if s.DBBytes <= 0 {
		t.Error("no database file size")
	}
	if s.NoFile == 0 || c.Leaks == nil || c.Leaks.NoFile == 0 {
		t.Errorf("RLIMIT_NOFILE: %d here, child %+v; want both read", s.NoFile, c.Leaks)
	}
	checkSoakTable(t, rep)
	if testing.Verbose() {
		var out bytes.Buffer
		_ = rep.WriteTable(&out)
		t.Log("\n" + out.String())
	}
}

func checkSoakSamples(t *testing.T, run *MemoryRun) {
	t.Helper()
	var percents []int
	for _, smp := range run.Samples {
		percents = append(percents, smp.Percent)
		if smp.HWMKB < smp.RSSKB || smp.RSSKB <= 0 {
			t.Errorf("sample %+v: want 0 < RSS <= peak", smp)
		}
	}
	if !reflect.DeepEqual(percents, []int{25, 50, 100}) {
		t.Errorf("samples at %v%%, want 25, 50, 100", percents)
	}
	if run.PeakKB < 1000 || run.Capped {
		t.Errorf("peak %d kB, capped %v; want a real peak", run.PeakKB, run.Capped)
	}
}

// checkSoakLeaks asks that nothing the crawl started outlives Run: an
// outcome, not a time, with several seconds to settle.
func checkSoakLeaks(t *testing.T, l *LeakCheck) {
	t.Helper()
	if l == nil {
		t.Fatal("no leak check in the child's report")
	}
	if l.GoroutinesBefore <= 0 || l.FDsBefore <= 0 || !l.Back() {
		t.Errorf("leak check = %+v; want goroutines and descriptors back to their baselines", l)
	}
}

func checkSoakHosts(t *testing.T, s *SoakResult) {
	t.Helper()
	got := map[string]SoakHost{}
	for _, h := range s.Unhealthy {
		got[h.Behavior] = h
	}
	for _, b := range []string{"dead", "flaky", "throttling", "recovering", "refusing"} {
		if _, ok := got[b]; !ok {
			t.Errorf("no %s host in %+v", b, s.Unhealthy)
		}
	}
	if ref := got["refusing"]; ref.Transitions["open"] != 1 || ref.Stored.Queued == 0 || ref.Stored.Fetched != 0 {
		t.Errorf("refusing host = %+v; want its circuit opened once and its URLs left queued", ref)
	}
	d := s.Dead
	if d.Connections < s.Config.Breaker.Threshold || d.Connections > d.Bound || d.Left != 0 || d.Results["host-down"] == 0 {
		t.Errorf("dead host = %+v; want %d..bound connections, host-down results, nothing left", d, s.Config.Breaker.Threshold)
	}
	if !(0 < d.FirstTried && d.FirstTried < d.Opened && d.Opened < d.GivenUp && d.FirstTried <= d.LastTried) ||
		d.OpenSpan != max(d.GivenUp, d.LastTried)-d.Opened {
		t.Errorf("dead host timeline = %+v; want first tried, opened, given up in that order, open until the later of give-up and last try", d)
	}
}

func checkSoakTable(t *testing.T, rep *Report) {
	t.Helper()
	s := rep.Soak
	metIf := func(ok bool) string {
		if ok {
			return Met
		}
		return Missed
	}
	checkIf := func(ok bool) string {
		if ok {
			return Met
		}
		return Failed
	}
	want := map[string]string{
		"healthy pages served":                            metIf(s.Healthy.DistinctPages == 400),
		"healthy pages fetched twice":                     metIf(s.Healthy.Duplicates() == 0),
		"goroutines settled":                              metIf(s.Run.Child.Leaks.GoroutinesBack()),
		"descriptors settled":                             metIf(s.Run.Child.Leaks.FDsBack()),
		"dead host: connections":                          metIf(s.Dead.Connections <= s.Dead.Bound),
		"warc.Check problems":                             checkIf(s.WARC.NProblems == 0),
		"healthy pages in one response or revisit record": checkIf(s.WARC.HealthyOnce == 400),
		"verify problems":                                 checkIf(s.Verify.OK),
	}
	figs := rep.Figures()
	for name, v := range want {
		if f := find(t, figs, name); f.Verdict != v {
			t.Errorf("%q: verdict %q, want %q", name, f.Verdict, v)
		}
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"pages/s over the whole crawl", "healthy pages served", "peak RSS at 25%",
		"RSS growth from 25% to 100%", "goroutines settled", "descriptors settled", "dead host: connections",
		"flaky host: requests", "throttling host:", "recovering host:", "refusing host: URLs left", "warc.Check problems",
		"verify problems", "RLIMIT_NOFILE", "settings: healthy site 20 hosts x 20 pages"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestSoakRowsVerdicts checks each soak verdict both ways on made-up figures.
func TestSoakRowsVerdicts(t *testing.T) {
	base := func() *SoakResult {
		return &SoakResult{Config: SoakConfig{Site: Size{2, 2}, Breaker: breaker.Config{Threshold: 8, Rest: 5 * time.Second}},
			HostConcurrency: 4,
			Run: &MemoryRun{Samples: []RSSSample{{Percent: 25, HWMKB: 100_000, RSSKB: 90_000, AnonKB: 50_000},
				{Percent: 50, HWMKB: 105_000, RSSKB: 95_000, AnonKB: 51_000}, {Percent: 100, HWMKB: 110_000, RSSKB: 99_000, AnonKB: 52_000}},
				Child: ChildReport{Fetched: 4, CrawlNS: int64(time.Second),
					Leaks: &LeakCheck{GoroutinesBefore: 5, GoroutinesAtEnd: 9, GoroutinesSettled: 5, FDsBefore: 10, FDsAtEnd: 12, FDsSettled: 10}}},
			Healthy: Traffic{PageRequests: 4, DistinctPages: 4},
			Dead:    SoakDead{Connections: 15, Bound: 15, Probes: 3},
			WARC:    SoakWARC{CheckOK: true, HealthyOnce: 4},
			Verify:  SoakVerify{OK: true, Seen: 9}}
	}
	verdicts := func(s *SoakResult) map[string]string {
		got := map[string]string{}
		for _, f := range (&Report{Soak: s}).Figures() {
			got[f.Name] = f.Verdict
		}
		return got
	}
	const (
		growth     = "RSS growth from 25% to 100%"
		goroutines = "goroutines settled"
		fds        = "descriptors settled"
		served     = "healthy pages served"
		twice      = "healthy pages fetched twice"
		dead       = "dead host: connections"
		archive    = "warc.Check problems"
		archived2  = "healthy pages archived more than once"
		verified   = "verify problems"
	)
	ok := verdicts(base())
	for _, k := range []string{growth, goroutines, fds, served, twice, dead, archive, archived2, verified} {
		if ok[k] != Met {
			t.Errorf("%q: verdict %q on good figures, want met (%v)", k, ok[k], ok)
		}
	}
	tests := []struct {
		name, row, want string
		spoil           func(*SoakResult)
	}{
		{"RSS grew 25%", growth, Missed, func(s *SoakResult) { s.Run.Samples[2].RSSKB = 112_500 }},
		{"RSS fell 25%", growth, Missed, func(s *SoakResult) { s.Run.Samples[2].RSSKB = 67_500 }},
		// A passing spike raises the peak for good; the RSS it left is what counts.
		{"only the peak grew", growth, Met, func(s *SoakResult) { s.Run.Samples[2].HWMKB = 150_000 }},
		{"a goroutine left", goroutines, Missed, func(s *SoakResult) { s.Run.Child.Leaks.GoroutinesSettled = 6 }},
		{"a descriptor left", fds, Missed, func(s *SoakResult) { s.Run.Child.Leaks.FDsSettled = 11 }},
		{"a page fetched twice", twice, Missed, func(s *SoakResult) { s.Healthy.PageRequests = 5 }},
		{"a page not fetched", served, Missed, func(s *SoakResult) { s.Healthy.DistinctPages = 3 }},
		{"dead host over its bound", dead, Missed, func(s *SoakResult) { s.Dead.Connections = 16 }},
		{"archive not clean", archive, Failed, func(s *SoakResult) { s.WARC.NProblems = 1 }},
		{"a page archived twice", archived2, Failed, func(s *SoakResult) { s.WARC.HealthyTwice = 1 }},
		{"verify found a problem", verified, Failed, func(s *SoakResult) {
			s.Verify = SoakVerify{Problems: []string{"seen 9 != fetched 4 + failed 0 + queued 4"}}
		}},
		{"verify not OK without a problem named", verified, Failed, func(s *SoakResult) { s.Verify.OK = false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := base()
			tt.spoil(s)
			if got := verdicts(s)[tt.row]; got != tt.want {
				t.Errorf("%q: verdict %q, want %q", tt.row, got, tt.want)
			}
		})
	}
	s := base()
	s.Run.Samples = s.Run.Samples[:1]
	if got, present := verdicts(s)[growth]; present {
		t.Errorf("growth verdict %q without a 100%% sample; want no row", got)
	}
}

func TestDeadBound(t *testing.T) {
	b := breaker.Config{Threshold: 8, Rest: 5 * time.Second}
	tests := []struct {
		name                  string
		opened, until         time.Duration
		wantSpan              time.Duration
		wantProbes, wantConns int
	}{
		{"never opened", 0, 30 * time.Second, 0, 0, 12},
		{"three rests", 6 * time.Second, 21 * time.Second, 15 * time.Second, 3, 15},
		{"a part rest counts", 6 * time.Second, 21500 * time.Millisecond, 15500 * time.Millisecond, 4, 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			span, probes, bound := deadBound(b, 4, tt.opened, tt.until)
			if span != tt.wantSpan || probes != tt.wantProbes || bound != tt.wantConns {
				t.Errorf("deadBound = %v, %d, %d; want %v, %d, %d", span, probes, bound, tt.wantSpan, tt.wantProbes, tt.wantConns)
			}
		})
	}
}

func TestMultisetMinus(t *testing.T) {
	got := multisetMinus([]string{"a", "a", "b", "socket:[1]", "socket:[2]"}, []string{"a", "b", "c"})
	if want := []string{"a", "socket:[1]", "socket:[2]"}; !reflect.DeepEqual(got, want) {
		t.Errorf("multisetMinus = %v, want %v", got, want)
	}
}

// The soak is opt-in: neither a nil section set nor an empty --only runs it.
func TestSoakOptIn(t *testing.T) {
	if (&Config{}).runs(SectionSoak) {
		t.Error("a config with no sections named runs the soak")
	}
	set, err := ParseSections("")
	if err != nil || set[SectionSoak] {
		t.Errorf("ParseSections(\"\") = %v, %v; want every section but the soak", set, err)
	}
	if set, err := ParseSections("soak"); err != nil || !set[SectionSoak] || len(set) != 1 {
		t.Errorf("ParseSections(soak) = %v, %v; want the soak alone", set, err)
	}
}
