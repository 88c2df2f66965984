package crawl

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/breaker"
	"breakwater/control"
	"breakwater/frontier"
	"breakwater/metrics"
	"breakwater/notify"
	"breakwater/store"
)

var guardT0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

func guardAt(d time.Duration) time.Time { return guardT0.Add(d) }

// reading builds a host's reading: answered at answered (zero: never),
// then failures transient failures from failingSince, one a second.
func reading(host string, answered time.Time, failures int, failingSince time.Time) hostReading {
	r := hostReading{host: host}
	if !answered.IsZero() {
		r.answeredAt, r.answeredURL = answered, "http://"+host+"/"
	}
	if failures > 0 {
		r.failingSince, r.failures, r.failKind = failingSince, failures, "timeout"
		r.failedAt = failingSince.Add(time.Duration(failures-1) * time.Second)
	}
	return r
}

func TestAssessLocalFault(t *testing.T) {
	cfg := LocalFaultOptions{Hosts: 5, Share: 0.5, Window: time.Minute}
	now := guardAt(10 * time.Minute)
	answered := now.Add(-20 * time.Second)
	failing := func(n int, first string) []hostReading {
		var rs []hostReading
		for i := range n {
			rs = append(rs, reading(fmt.Sprintf("%s%d.test", first, i), answered, 2, now.Add(-10*time.Second)))
		}
		return rs
	}
	healthy := func(n int) []hostReading {
		var rs []hostReading
		for i := range n {
			rs = append(rs, reading(fmt.Sprintf("ok%d.test", i), now.Add(-time.Second), 0, time.Time{}))
		}
		return rs
	}
	cases := []struct {
		name     string
		readings []hostReading
		ended    time.Time
		trips    bool
	}{
		{"five of eight fail", append(failing(5, "f"), healthy(3)...), time.Time{}, true},
		{"four fail", append(failing(4, "f"), healthy(1)...), time.Time{}, false},
		{"five of twelve fail: less than half", append(failing(5, "f"), healthy(7)...), time.Time{}, false},
		{"five of ten fail: half", append(failing(5, "f"), healthy(5)...), time.Time{}, true},
		{"never answered: dead from the start, not our fault", func() []hostReading {
			var rs []hostReading
			for i := range 6 {
				rs = append(rs, reading(fmt.Sprintf("d%d.test", i), time.Time{}, 5, now.Add(-30*time.Second)))
			}
			return rs
		}(), time.Time{}, false},
		{"one failure each is noise", func() []hostReading {
			var rs []hostReading
			for i := range 6 {
				rs = append(rs, reading(fmt.Sprintf("n%d.test", i), answered, 1, now.Add(-time.Second)))
			}
			return rs
		}(), time.Time{}, false},
		{"failing since before the last incident ended", failing(6, "f"), now.Add(-5 * time.Second), false},
		{"failing for longer than the window: not at once", func() []hostReading {
			var rs []hostReading
			for i := range 6 {
				rs = append(rs, reading(fmt.Sprintf("s%d.test", i), now.Add(-3*time.Minute), 40, now.Add(-100*time.Second)))
			}
			return rs
		}(), time.Time{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inc, trips := assess(cfg, c.readings, c.ended, now)
			if trips != c.trips {
				t.Fatalf("trips = %v, want %v (incident %+v)", trips, c.trips, inc)
			}
		})
	}

	t.Run("evidence and probes", func(t *testing.T) {
		rs := append(failing(6, "f"), healthy(4)...)
		rs[0].failingSince = now.Add(-40 * time.Second)
		rs[1].answeredAt = now.Add(-2 * time.Second) // answered last: probed first
		// Idle for longer than the window: not active, so not in the share.
		rs = append(rs, reading("idle.test", now.Add(-5*time.Minute), 0, time.Time{}))
		inc, ok := assess(cfg, rs, time.Time{}, now)
		if !ok {
			t.Fatal("did not trip")
		}
		if inc.failing != 6 || inc.active != 10 || inc.kinds["timeout"] != 6 {
			t.Errorf("evidence %d failing of %d active, kinds %v; want 6 of 10, timeout 6", inc.failing, inc.active, inc.kinds)
		}
		if !inc.since.Equal(rs[0].failingSince) {
			t.Errorf("since %v, want the first failure %v", inc.since, rs[0].failingSince)
		}
		var hosts []string
		for _, p := range inc.targets {
			hosts = append(hosts, p.host)
		}
		want := []string{"f1.test", "f0.test", "f2.test", "ok0.test", "ok1.test"}
		if !slices.Equal(hosts, want) {
			t.Errorf("probe targets %v, want %v", hosts, want)
		}
	})
}

// The signal a host gives the guard: an answer of any status resets it; a
// host becomes a suspect once, at its second failure in a row after an
// answer.
func TestHostSignal(t *testing.T) {
	var s hostSignal
	timeoutV := Verdict{Class: breaker.Transient, Detail: "timeout: context deadline exceeded"}
	if s.observe(timeoutV, "u", guardAt(0)) || s.observe(timeoutV, "u", guardAt(1)) {
		t.Error("a host that never answered became a suspect")
	}
	s.observe(Verdict{Class: breaker.Permanent, Status: 404}, "http://a.test/x", guardAt(2))
	if s.failures != 0 || s.answeredURL != "http://a.test/x" {
		t.Fatalf("after a 404: %+v, want an answer recorded", s)
	}
	if s.observe(timeoutV, "u", guardAt(3)) {
		t.Error("suspect after one failure")
	}
	if !s.observe(Verdict{Class: breaker.Transient, Status: 503, Detail: "status 503"}, "u", guardAt(4)) {
		t.Error("not a suspect after two failures in a row")
	}
	if s.observe(timeoutV, "u", guardAt(5)) {
		t.Error("suspect again at the third failure: once is enough")
	}
	if !s.failingSince.Equal(guardAt(3)) || s.failKind != "timeout" {
		t.Errorf("failing since %v kind %q, want +3s timeout", s.failingSince.Sub(guardT0), s.failKind)
	}

	// A circuit opening at the first failure (threshold 1) makes a suspect
	// of a host that answered, once.
	var o hostSignal
	o.observe(Verdict{Class: breaker.OK, Status: 200}, "http://b.test/", guardAt(0))
	o.observe(timeoutV, "u", guardAt(1))
	if !o.opened(guardAt(1)) || o.opened(guardAt(2)) {
		t.Error("an opened circuit made no suspect, or made one twice")
	}
	var never hostSignal
	if never.opened(guardAt(1)) {
		t.Error("a host that never answered became a suspect when its circuit opened")
	}
}

// outageSite is n hosts of pages chained pages each, served by a fake that
// hangs every request (until the client's timeout) from from to to, as the
// crawler sees its own network die.
func outageSite(n, pages int, from, to time.Time, timeout time.Duration) *fakeFetcher {
	s := site{}
	for i := range n {
		s.chain(fmt.Sprintf("h%d.test", i), pages)
	}
	f := siteFetcher(s)
	serve := f.serve
	f.serve = func(ctx context.Context, n int, url string) page {
		if now := time.Now(); !now.Before(from) && now.Before(to) {
			return page{err: errTimeout, latency: timeout}
		}
		return serve(ctx, n, url)
	}
	return f
}

// guardRun is what one crawl through an outage showed.
type guardRun struct {
	sum          Summary
	duringOutage int           // requests started during the outage
	backAfter    time.Duration // from the outage's end to the first page fetched after it
	results      map[string]store.Result
	opens        int // transitions to open
	reprieves    int // transitions with breaker.ReprieveReason
	// seen is what the crawl showed 30s into the outage: its progress, its
	// status and its metrics; metricsAfter the metrics after the run.
	progress     Progress
	status       *control.Status
	metrics      string
	metricsAfter string
	events       []notify.Event // notifications sent
	// withoutSecrets counts the requests that left the user's credentials
	// out: the probes, since every host is a seed's.
	withoutSecrets int
}

// eventTap is a webhook in memory: it keeps every event POSTed to it.
type eventTap struct {
	mu     sync.Mutex
	events []notify.Event
}

func (tap *eventTap) RoundTrip(req *http.Request) (*http.Response, error) {
	var ev notify.Event
	if err := json.NewDecoder(req.Body).Decode(&ev); err != nil {
		return nil, err
	}
	tap.mu.Lock()
	tap.events = append(tap.events, ev)
	tap.mu.Unlock()
	return &http.Response{StatusCode: 204, Body: http.NoBody, Request: req}, nil
}

func scrape(t *testing.T, m *metrics.Crawl) string {
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// crawlThroughOutage crawls 8 hosts of 40 pages while every host hangs from
// +20s to +80s, with the guard on (hosts 5) or off (0), and circuits that
// open after threshold failures.
func crawlThroughOutage(t *testing.T, guardHosts, threshold int) guardRun {
	const hosts, pages = 8, 40
	var run guardRun
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions()
		opts.Delay = time.Second
		opts.HostConcurrency = 2
		opts.Timeout = 5 * time.Second
		opts.Breaker = breaker.Config{Threshold: threshold, Rest: 5 * time.Minute, Probes: 1}
		opts.GiveUpAfter = 3 * time.Minute
		opts.Retries = 5
		opts.RetryBase = time.Second
		opts.RetryMax = 10 * time.Second
		opts.RetryBudget = 1
		opts.Workers = 16
		opts.LocalFault.Hosts = guardHosts
		t0 := time.Now()
		from, to := t0.Add(20*time.Second), t0.Add(80*time.Second)
		for i := range hosts {
			opts.Seeds = append(opts.Seeds, chainURL(fmt.Sprintf("h%d.test", i), 0))
		}
		tap := &eventTap{}
		opts.Notify = notify.New("http://hook.test/", "crawl.db", notify.Options{Client: &http.Client{Transport: tap}})
		var e *Engine
		opts.Metrics = metrics.New(func() (metrics.Snapshot, error) { return e.MetricsSnapshot() })
		r := newRig(t, opts, outageSite(hosts, pages, from, to, opts.Timeout))
		e = r.e
		go func() {
			time.Sleep(from.Add(30 * time.Second).Sub(time.Now()))
			run.progress = e.Progress()
			run.status, _ = e.Control().Status()
			run.metrics = scrape(t, opts.Metrics)
		}()
		run.sum = r.run()
		reqs := r.f.requests("")
		run.duringOutage = len(startedIn(reqs, from, to))
		for _, q := range reqs {
			if q.WithoutSecrets {
				run.withoutSecrets++
			}
		}
		run.backAfter = -1
		for _, q := range reqs {
			if !q.Start.Before(to) && q.Status == 200 {
				run.backAfter = q.Start.Sub(to)
				break
			}
		}
		run.metricsAfter = scrape(t, opts.Metrics)
		opts.Notify.Close(context.Background())
		run.events = tap.events
		run.results = r.results()
		for i := range hosts {
			for _, tr := range r.transitions(fmt.Sprintf("h%d.test", i)) {
				if tr.To == "open" {
					run.opens++
				}
				if tr.Reason == breaker.ReprieveReason {
					run.reprieves++
				}
			}
		}
	})
	t.Logf("guard hosts %d, threshold %d: %d requests during the 60s outage, first page %v after it, %d opens, %d reprieves, crawl %v",
		guardHosts, threshold, run.duringOutage, run.backAfter, run.opens, run.reprieves, run.sum.Duration)
	return run
}

// A 60s outage of our own network in the middle of a crawl: with the
// guard, fetching pauses within seconds, a few probes are sent, and the
// crawl is back as soon as a probe is answered, with every page fetched and
// no host given up on. Without it, every host opens, rests out its full
// rest after the network is back, and is given up on.
func TestLocalFaultGuardThroughOutage(t *testing.T) {
	on := crawlThroughOutage(t, 5, 3)
	off := crawlThroughOutage(t, 0, 3)
	// With a threshold of 1 every circuit opens before the guard trips.
	opened := crawlThroughOutage(t, 5, 1)

	for u, res := range on.results {
		if res.Status != 200 {
			t.Errorf("with the guard: %s ended %d %q %q, want fetched", u, res.Status, res.ErrorClass, res.Error)
		}
	}
	if want := 8 * 40; len(on.results) != want {
		t.Errorf("with the guard: %d results, want %d", len(on.results), want)
	}
	if !on.sum.Exhausted {
		t.Errorf("with the guard: summary %+v, want exhausted", on.sum)
	}
	// Every host is a seed's: only the probes, which any answer will do
	// for, leave the user's credentials out.
	if on.withoutSecrets == 0 || off.withoutSecrets != 0 {
		t.Errorf("requests without the user's credentials: %d with the guard (its probes), %d without; want some, none",
			on.withoutSecrets, off.withoutSecrets)
	}
	// Before it tripped: the hosts' requests in flight and their retries,
	// a host's concurrency a time. Then two probes a round, the rounds a
	// quarter of the incident's age apart: 17 of them in 60s.
	if most := 8*2*3 + probeEach*17; on.duringOutage > most {
		t.Errorf("with the guard: %d requests during the outage, want at most %d", on.duringOutage, most)
	}
	// A probe round a quarter of the outage after it ends, at most, and a
	// probe's timeout.
	// The incident shows while it lasts, and is counted.
	if lf := on.progress.LocalFault; lf == nil || lf.FailingHosts < 5 || lf.ErrorKinds["timeout"] == 0 {
		t.Errorf("progress 30s into the outage: local fault %+v, want one with 5+ hosts failing by timeout", lf)
	}
	if on.status == nil || on.status.LocalFault == nil {
		t.Errorf("status 30s into the outage: %+v, want its local fault", on.status)
	}
	if !strings.Contains(on.metrics, "breakwater_local_fault 1\n") ||
		!strings.Contains(on.metricsAfter, "breakwater_local_fault 0\n") ||
		!strings.Contains(on.metricsAfter, "breakwater_local_fault_incidents_total 1\n") {
		t.Errorf("metrics: during the outage\n%s\nafter the run\n%s\nwant the gauge 1 then 0 and one incident",
			grepLines(on.metrics, "local_fault"), grepLines(on.metricsAfter, "local_fault"))
	}
	var kinds []string
	for _, ev := range on.events {
		kinds = append(kinds, ev.Kind)
	}
	if !slices.Equal(kinds, []string{"local-fault", "local-fault-cleared"}) {
		t.Errorf("notifications %v, want local-fault then local-fault-cleared", kinds)
	} else if on.events[0].Fields["failing_hosts"].(float64) < 5 {
		t.Errorf("local-fault event %+v, want its evidence", on.events[0])
	}
	if off.progress.LocalFault != nil || !strings.Contains(off.metricsAfter, "breakwater_local_fault_incidents_total 0\n") {
		t.Errorf("with the guard off: progress %+v, metrics %s: want no incident", off.progress.LocalFault,
			grepLines(off.metricsAfter, "local_fault"))
	}
	if on.backAfter < 0 || on.backAfter > 15*time.Second+5*time.Second {
		t.Errorf("with the guard: first page %v after the outage, want within 20s", on.backAfter)
	}
	// Every circuit opened during the outage is sent to half-open when it
	// ends, so none rests a full rest.
	for _, run := range []guardRun{on, opened} {
		if run.reprieves != run.opens {
			t.Errorf("with the guard: %d circuits opened, %d sent back to half-open", run.opens, run.reprieves)
		}
	}
	if opened.opens < 5 {
		t.Errorf("threshold 1: %d circuits opened in the outage, want most of the 8", opened.opens)
	}
	if !opened.sum.Exhausted || opened.backAfter < 0 || opened.backAfter > 20*time.Second {
		t.Errorf("threshold 1: summary %+v, first page %v after the outage: want done, back within 20s, not after a 5m rest",
			opened.sum, opened.backAfter)
	}
	for u, res := range opened.results {
		if res.Status != 200 {
			t.Errorf("threshold 1: %s ended %d %q, want fetched", u, res.Status, res.ErrorClass)
		}
	}

	// The contrast: the scenario does open circuits and cost a full rest.
	if off.opens == 0 {
		t.Fatal("without the guard no circuit opened: the outage tests nothing")
	}
	if off.backAfter >= 0 && off.backAfter < time.Minute {
		t.Errorf("without the guard the first page came %v after the outage: want a rest's wait", off.backAfter)
	}
	downs := 0
	for _, res := range off.results {
		if res.ErrorClass == "host-down" {
			downs++
		}
	}
	if downs == 0 {
		t.Error("without the guard no URL was given up on: the outage outlasting --give-up-after tests nothing")
	}
}

func grepLines(text, sub string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The guard's cost on the request path: one outcome fed to a host's signal
// under its lock, what every answered request pays.
func BenchmarkObserveFault(b *testing.B) {
	e := &Engine{guard: newFaultGuard(DefaultOptions().LocalFault), hosts: newHostTable(0)}
	x := &exchange{host: e.hosts.get("a.test", guardT0)}
	x.lease = &frontier.Lease{Item: store.Item{URL: "http://a.test/p/1", Host: "a.test"}}
	ok := Verdict{Class: breaker.OK, Status: 200}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		e.observeFault(x, ok, guardT0.Add(time.Duration(i)))
	}
}
