package crawl

import (
	"context"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/robots"
)

// A host is forgotten only when nothing of it is in flight, and forgetting
// it releases its request context; aborting cancels the requests in flight
// and gives later requests a fresh context.
func TestHostTableRequests(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	table := newHostTable(0)
	hs := table.get("a.test", t0)
	ctx, done := hs.beginRequest(context.Background())

	table.prune(t0.Add(time.Hour), time.Minute)
	if table.lookup("a.test", t0.Add(time.Hour)) == nil {
		t.Fatal("a host with a request in flight was forgotten")
	}
	if ctx.Err() != nil {
		t.Fatal("prune cancelled a request in flight")
	}

	hs.abort()
	if ctx.Err() == nil {
		t.Fatal("abort left the request in flight running")
	}
	done()
	next, done2 := hs.beginRequest(context.Background())
	if next.Err() != nil {
		t.Fatal("a request begun after abort starts cancelled")
	}
	done2()

	table.prune(t0.Add(2*time.Hour), time.Minute)
	if table.lookup("a.test", t0.Add(2*time.Hour)) != nil {
		t.Fatal("an idle host with nothing in flight was kept")
	}
	if next.Err() == nil {
		t.Fatal("forgetting the host did not release its request context")
	}
}

// A host's request context lives only while requests are in flight: kept
// for the minute the table keeps an idle host, every host of a wide crawl
// would hold one. Aborting still reaches the requests in flight.
func TestHostRequestContextReleasedWhenIdle(t *testing.T) {
	h := newHostTable(0).get("a.test", time.Unix(100, 0))
	ctx1, done1 := h.beginRequest(context.Background())
	ctx2, done2 := h.beginRequest(context.Background())
	done1()
	if ctx1.Err() != nil {
		t.Fatal("context cancelled while a request is still in flight")
	}
	done2()
	if ctx2.Err() == nil || h.requests != nil {
		t.Fatal("host kept its request context with nothing in flight")
	}
	ctx3, done3 := h.beginRequest(context.Background())
	defer done3()
	if ctx3.Err() != nil {
		t.Fatal("a new request got the released context")
	}
	h.abort()
	if ctx3.Err() == nil {
		t.Fatal("abort did not reach the request in flight")
	}
}

// An idle host lets go of its parsed robots.txt rules after rulesIdle (they
// are read back from the file), long before the table forgets the host.
func TestIdleHostDropsItsRules(t *testing.T) {
	start := time.Unix(100, 0)
	table := newHostTable(0)
	h := table.get("a.test", start)
	rules, err := robots.FromResponse(404, nil, start)
	if err != nil {
		t.Fatal(err)
	}
	h.rules, h.robotsChecked = rules, true
	table.prune(start.Add(rulesIdle/2), time.Minute)
	if h.rules == nil {
		t.Fatal("rules dropped before rulesIdle")
	}
	table.prune(start.Add(rulesIdle+time.Second), time.Minute)
	if h.rules != nil || h.robotsChecked {
		t.Fatal("idle host kept its rules")
	}
	if len(table.signals()) != 1 {
		t.Fatal("host forgotten before the table's idle time")
	}
}

// A host idle for fadeIdle fades: the guard and the display read it as
// before, asking for it again brings back all a fresh state would lack,
// and it is forgotten at the table's idle time. A host still waiting does
// not fade.
func TestIdleHostFades(t *testing.T) {
	start := time.Unix(100, 0)
	table := newHostTable(2 * time.Second)
	h := table.get("a.test", start)
	h.signal.observe(Verdict{Class: breaker.OK, Status: 200}, "http://a.test/", start)
	h.throttles, h.robotsFailed = 2, true
	waiting := table.get("b.test", start)
	waiting.notBefore = start.Add(time.Hour)

	table.prune(start.Add(fadeIdle+time.Second), time.Minute)
	if len(table.m) != 1 || table.m["b.test"] == nil || len(table.faded) != 1 {
		t.Fatalf("after fadeIdle: %d whole, %d faded; want b.test whole, a.test faded", len(table.m), len(table.faded))
	}
	readings := table.signals()
	if len(readings) != 2 {
		t.Fatalf("guard reads %d hosts, want 2", len(readings))
	}
	for _, r := range readings {
		if r.host == "a.test" && (r.answeredURL != "http://a.test/" || !r.answeredAt.Equal(start)) {
			t.Errorf("faded reading %+v lost its answer", r)
		}
	}
	if p := table.snapshot(start.Add(fadeIdle + time.Second))["a.test"]; p.Interval != 2*time.Second || p.Throttles != 2 {
		t.Errorf("faded host shows %+v, want its 2s floor and 2 throttles", p)
	}

	back := table.lookup("a.test", start.Add(fadeIdle+2*time.Second))
	if back == nil || !sameSignal(back.signal, h.signal) || !back.lastUsed.Equal(start) || len(table.faded) != 0 ||
		back.throttles != 2 || !back.robotsFailed || back.floor != 2*time.Second {
		t.Fatalf("lookup of a faded host: %+v, want its reading, throttles, robots failure and last use back", back)
	}
	table.prune(start.Add(2*fadeIdle+3*time.Second), time.Minute)
	table.prune(start.Add(time.Minute+time.Second), time.Minute)
	if _, ok := table.faded["a.test"]; ok || table.m["a.test"] != nil {
		t.Fatal("faded host kept past the table's idle time")
	}
}

func sameSignal(a, b hostSignal) bool {
	return a.answeredAt.Equal(b.answeredAt) && a.answeredURL == b.answeredURL && a.failingSince.Equal(b.failingSince) &&
		a.failures == b.failures && a.failedAt.Equal(b.failedAt) && a.failKind == b.failKind
}

// A faded host's reading comes back as it was, zero times included.
func TestFadedSignalRoundTrips(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 123)
	for _, s := range []hostSignal{
		{},
		{answeredAt: t0, answeredURL: "http://a.test/x"},
		{answeredAt: t0, answeredURL: "http://a.test/x", failingSince: t0.Add(time.Second), failures: 3,
			failedAt: t0.Add(2 * time.Second), failKind: "dial"},
		{failingSince: t0, failures: 2, failedAt: t0, failKind: "circuit opened"},
	} {
		h := &hostState{signal: s, lastUsed: t0, floor: time.Second}
		f := fade(h)
		if got := f.signal(); !sameSignal(got, s) || !fromUnixNanos(f.lastUsed).Equal(t0) {
			t.Errorf("faded %+v came back as %+v", s, got)
		}
	}
}
