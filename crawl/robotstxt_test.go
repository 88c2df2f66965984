package crawl

// robots.txt redirects to another host (RFC 9309 §2.3.1.2): each hop is a
// request to its target, admitted by the target's breaker and paced by its
// politeness. A target that may not be asked now parks the lease's host
// until it may, without being touched.

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
)

const (
	aRobots = "http://a.test/robots.txt"
	bRobots = "http://b.test/robots.txt"
	bRoot   = "http://b.test/"
)

// A robots.txt redirect to a host whose circuit is open parks the lease's
// host until the target's rest ends, without a request to the target (a
// paused target: TestRobotsRedirectToPausedHostLetsTheCrawlEnd).
func TestRobotsRedirectToHostThatMayNotBeAsked(t *testing.T) {
	tests := []struct {
		name string
		rest time.Duration
		shut func(r *rig)
		// mostRobots bounds the requests for a.test's robots.txt in the
		// crawl's hour: one per rest, not one per --delay.
		mostRobots int
	}{
		{
			name:       "target open: ask again when its rest ends",
			rest:       2 * time.Hour,
			shut:       func(r *rig) { r.openBreaker("b.test") },
			mostRobots: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := rigOptions(aRoot)
				opts.Delay = time.Second
				opts.MaxDuration = time.Hour
				opts.Breaker.Rest = tt.rest
				opts.GiveUpAfter = 3 * time.Hour
				s := site{}.chain("a.test", 3)
				s[aRobots] = redirectPage(301, bRobots)
				s[bRobots] = page{status: 200, body: "User-agent: *\nAllow: /\n"}
				r := newRig(t, opts, siteFetcher(s))
				tt.shut(r)
				r.add(0, aRoot)

				sum := r.run()

				if reqs := r.f.requests("b.test"); len(reqs) != 0 {
					t.Errorf("b.test got %d requests (%v), want none while it may not be asked",
						len(reqs), urlsOf(reqs[:min(len(reqs), 3)]))
				}
				robots := r.f.requests("a.test")
				if len(robots) == 0 || len(robots) > tt.mostRobots {
					t.Errorf("a.test got %d requests for robots.txt in %v, want 1 to %d: its host is parked, not spinning",
						len(robots), opts.MaxDuration, tt.mostRobots)
				}
				for _, req := range robots {
					if req.URL != aRobots {
						t.Errorf("a.test got %s before its robots.txt rules", req.URL)
					}
				}
				if sum.Exhausted || sum.Counts.Queued != 1 || sum.Counts.Fetched+sum.Counts.Failed != 0 {
					t.Errorf("summary %+v: want stopped by --max-duration with a.test's seed still queued", sum)
				}
				if d := sum.Duration; d < opts.MaxDuration || d > opts.MaxDuration+opts.StopGrace {
					t.Errorf("crawl ran %v, want it stopped at --max-duration %v", d, opts.MaxDuration)
				}
			})
		})
	}
}

// A host whose robots.txt redirects to a host held for a person (paused,
// or with a case) may wait for good, so its URLs fail as when robots.txt is
// unreachable, after their retries, naming the held host: the crawl ends by
// itself. Before, the lease's host was parked a rest at a time and the
// crawl asked for its robots.txt every --breaker-rest for as long as it ran.
func TestRobotsRedirectToPausedHostLetsTheCrawlEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions(aRoot)
		opts.Delay = time.Second
		opts.Breaker.Rest = 5 * time.Minute
		s := site{}.chain("a.test", 3)
		s[aRobots] = redirectPage(301, bRobots)
		r := newRig(t, opts, siteFetcher(s))
		r.e.breakers.Pause("b.test", "test", time.Now())
		r.add(0, aRoot)
		ctx, cancel := context.WithTimeout(t.Context(), 48*time.Hour)
		defer cancel()

		sum, err := r.e.Run(ctx)

		if err != nil {
			t.Fatal(err)
		}
		if !sum.Exhausted || sum.Duration >= 48*time.Hour {
			t.Errorf("crawl ran %v (%d requests for a.test's robots.txt), exhausted %v: want it to end by itself",
				sum.Duration, len(r.f.requests("a.test")), sum.Exhausted)
		}
		if n := len(r.f.requests("b.test")); n != 0 {
			t.Errorf("b.test got %d requests, want none while it is paused", n)
		}
		if got, want := len(r.f.requests("a.test")), opts.Retries+1; got != want {
			t.Errorf("a.test got %d requests for robots.txt, want one an attempt (%d)", got, want)
		}
		res := r.results()
		if got := res[aRoot]; got.ErrorClass != "transient" || !strings.Contains(got.Error, "b.test, which is held (paused)") {
			t.Errorf("seed recorded %q %q, want a transient failure naming b.test's pause", got.ErrorClass, got.Error)
		}
	})
}

func TestRobotsRedirectFollowedWithTargetsPoliteness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions(aRoot, bRoot)
		opts.Delay = 10 * time.Second
		s := site{}.chain("a.test", 4).chain("b.test", 3)
		s[aRobots] = redirectPage(301, bRobots)
		s[bRobots] = page{status: 200, body: "User-agent: *\nDisallow: /p/2\n"}
		r := newRig(t, opts, siteFetcher(s))
		r.add(0, aRoot, bRoot)

		sum := r.run()

		if !sum.Exhausted {
			t.Errorf("summary %+v, want the crawl exhausted", sum)
		}
		// a.test's rules are b.test's robots.txt: /p/2 is disallowed on both.
		res := r.results()
		for _, u := range []string{"http://a.test/p/2", "http://b.test/p/2"} {
			if got := res[u]; got.ErrorClass != "robots" {
				t.Errorf("%s: class %q, want robots", u, got.ErrorClass)
			}
		}
		for _, u := range []string{aRoot, aP1, "http://a.test/p/3", bRoot, "http://b.test/p/1"} {
			if got := res[u]; got.Status != 200 || got.ErrorClass != "" {
				t.Errorf("%s: status %d class %q, want fetched", u, got.Status, got.ErrorClass)
			}
		}
		a, b := r.f.requests("a.test"), r.f.requests("b.test")
		// A hop that meets b.test's politeness wait parks a.test, whose
		// robots.txt is asked again when it wakes; b.test's own URLs wake
		// at the same instant and may win b's token, each at most once.
		aPages, aRobotsN := splitRobots(a)
		if most := len(b); aRobotsN < 1 || aRobotsN > most { // 1 + b's own requests
			t.Errorf("a.test's robots.txt requested %d times, want 1 to %d", aRobotsN, most)
		}
		wantURLs(t, aPages, aRoot, aP1, "http://a.test/p/3")
		// b.test's robots.txt twice: the hop for a.test and its own.
		wantURLs(t, b, bRobots, bRobots, bRoot, "http://b.test/p/1")
		// The hop is a request to b.test like any other: spaced by b's delay.
		checkGaps(t, a, opts.Delay)
		checkGaps(t, b, opts.Delay)
		if br, ok := r.e.breakers.Get("b.test"); ok && br.State != breaker.Closed {
			t.Errorf("b.test breaker %v, want closed", br.State)
		}
	})
}

// splitRobots returns the requests that are not for robots.txt, and how
// many were.
func splitRobots(reqs []fetched) (pages []fetched, robotsTxt int) {
	for _, r := range reqs {
		if strings.HasSuffix(r.URL, "/robots.txt") {
			robotsTxt++
		} else {
			pages = append(pages, r)
		}
	}
	return pages, robotsTxt
}

// wantURLs fails unless reqs asked for exactly urls, in any order.
func wantURLs(t *testing.T, reqs []fetched, urls ...string) {
	t.Helper()
	want := map[string]int{}
	for _, u := range urls {
		want[u]++
	}
	got := map[string]int{}
	for _, r := range reqs {
		got[r.URL]++
	}
	if len(got) != len(want) {
		t.Errorf("requests %v, want %v", urlsOf(reqs), urls)
		return
	}
	for u, n := range want {
		if got[u] != n {
			t.Errorf("requests %v, want %v", urlsOf(reqs), urls)
			return
		}
	}
}

// fleetView is a frontier whose store shares the breakers of hosts this
// process does not hold (foreign), and whose probe gate another process
// may hold (gateTaken): what a fleet's frontier says of a robots.txt
// redirect's target another process crawls.
type fleetView struct {
	frontier.Queue
	foreign   map[string]breaker.Breaker
	gateTaken bool
	gates     []uint64 // the generations the probe gate was asked for
}

func (q *fleetView) ForeignBreaker(host string) (breaker.Breaker, bool, error) {
	b, ok := q.foreign[host]
	return b, ok, nil
}

func (q *fleetView) TryProbe(host string, generation uint64) (bool, error) {
	q.gates = append(q.gates, generation)
	return !q.gateTaken, nil
}

// On a fleet, a robots.txt hop to a host another process crawls follows
// the fleet's breaker of that host, not this process's empty copy: open,
// the host is not asked; half-open, the hop is its probe and must win the
// fleet's probe gate first.
func TestRobotsRedirectOnAFleetFollowsTheSharedBreaker(t *testing.T) {
	for _, tc := range []struct {
		name      string
		shared    breaker.Breaker
		gateTaken bool
		wantB     int // requests to b.test
		wantGate  bool
	}{
		{name: "open for the fleet", shared: breaker.Breaker{State: breaker.Open, OpenedAt: time.Now(), Rest: time.Hour, DownSince: time.Now(), Generation: 4}},
		{name: "half-open, another process probes", shared: breaker.Breaker{State: breaker.HalfOpen, Rest: time.Hour, DownSince: time.Now(), Generation: 5},
			gateTaken: true, wantGate: true},
		{name: "half-open, the hop is the probe", shared: breaker.Breaker{State: breaker.HalfOpen, Rest: time.Hour, DownSince: time.Now(), Generation: 5},
			wantB: 1, wantGate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := rigOptions(aRoot)
				opts.MaxDuration = 10 * time.Second
				s := site{}.chain("a.test", 2)
				s[aRobots] = redirectPage(301, bRobots)
				s[bRobots] = page{status: 200, body: "User-agent: *\nAllow: /\n"}
				r := newRig(t, opts, siteFetcher(s))
				shared := tc.shared
				shared.OpenedAt, shared.DownSince = time.Now(), time.Now()
				view := &fleetView{Queue: r.e.front, foreign: map[string]breaker.Breaker{"b.test": shared}, gateTaken: tc.gateTaken}
				r.e.front = view
				r.add(0, aRoot)

				r.run()

				if got := len(r.f.requests("b.test")); got != tc.wantB {
					t.Errorf("b.test got %d requests, want %d", got, tc.wantB)
				}
				if tc.wantGate && (len(view.gates) == 0 || view.gates[0] != shared.Generation) {
					t.Errorf("probe gate asked for generations %v, want %d", view.gates, shared.Generation)
				}
				if !tc.wantGate && len(view.gates) != 0 {
					t.Errorf("probe gate asked for %v of an open circuit", view.gates)
				}
			})
		})
	}
}
