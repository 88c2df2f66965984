package crawl

// Whole crawls (Engine.Run) inside a synctest bubble, over a fake fetcher
// serving a small site: politeness, the breaker and retries, judged by the
// fake times at which the fetcher saw each request start and end. Fake time
// makes the gaps exact, so the assertions have no tolerance.

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/store"
)

// slow sets every page's latency.
func (s site) slow(d time.Duration) site {
	for u, p := range s {
		p.latency = d
		s[u] = p
	}
	return s
}

// deadHost serves s, except that every URL of host hangs until the
// client's timeout.
func deadHost(s site, host string, after time.Duration) *fakeFetcher {
	f := siteFetcher(s)
	serve := f.serve
	f.serve = func(ctx context.Context, n int, url string) page {
		if h, _ := frontier.HostKey(url); h == host {
			return timeout(after)
		}
		return serve(ctx, n, url)
	}
	return f
}

// linkedToDead is a.test's chain of n pages, page i also linking to
// dead.test's page i, so the dead host's URLs keep being found.
func linkedToDead(n int) site {
	s := site{}.chain("a.test", n)
	for i := range n {
		u := chainURL("a.test", i)
		s[u] = htmlPage(u, chainURL("a.test", (i+1)%n), chainURL("a.test", (i+2)%n),
			chainURL("dead.test", i))
	}
	return s
}

// checkEachPageOnce fails unless host got robots.txt once and each of its
// chain's n pages once, and nothing else.
func checkEachPageOnce(t *testing.T, reqs []fetched, host string, n int) {
	t.Helper()
	want := []string{"http://" + host + "/robots.txt"}
	for i := range n {
		want = append(want, chainURL(host, i))
	}
	wantURLs(t, reqs, want...)
}

// inFlightMost is the most requests in flight at once.
func inFlightMost(reqs []fetched) int {
	most := 0
	for _, r := range reqs {
		n := 0
		for _, o := range reqs {
			if !o.Start.After(r.Start) && o.End.After(r.Start) {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

func TestCrawlPoliteness(t *testing.T) {
	const delay = time.Second
	tests := []struct {
		name    string
		hosts   []string
		pages   int
		latency time.Duration
		robots  string // for every host
		opts    func(o *Options)
		// gap is the least gap between request starts to one host.
		gap time.Duration
		// longest bounds the crawl's duration: hosts are crawled in
		// parallel, and no worker sleeps on a host that must wait.
		longest time.Duration
		// overlap: the most requests in flight to one host at once.
		overlap int
		// seedAll queues every page at the start, not only the roots.
		seedAll bool
	}{
		{
			name:  "--delay per host, hosts in parallel",
			hosts: []string{"a.test", "b.test", "c.test"}, pages: 8, latency: 300 * time.Millisecond,
			// 9 requests a host, 8 gaps: 27 one after the other would take 26s.
			gap: delay, longest: 8*delay + time.Second, overlap: 1,
		},
		{
			name:  "one worker does not wait on a busy host",
			hosts: []string{"a.test", "b.test"}, pages: 6, latency: 100 * time.Millisecond,
			opts: func(o *Options) { o.Workers = 1 },
			// One host alone takes 6 gaps; one after the other, 12.
			gap: delay, longest: 6*delay + time.Second, overlap: 1,
		},
		{
			// robots.txt takes longer than --delay to answer: a pace that
			// switched to the Crawl-delay keeping the tokens earned meanwhile
			// would let the first page follow at once.
			name:  "Crawl-delay wins when larger than --delay",
			hosts: []string{"a.test"}, pages: 4, latency: 2 * delay,
			robots: "User-agent: *\nCrawl-delay: 5\n",
			gap:    5 * time.Second, longest: 4*5*time.Second + 2*delay + time.Second, overlap: 1,
		},
		{
			name:  "--delay wins when larger than Crawl-delay",
			hosts: []string{"a.test"}, pages: 4, latency: 100 * time.Millisecond,
			robots: "User-agent: *\nCrawl-delay: 0.5\n",
			gap:    delay, longest: 4*delay + time.Second, overlap: 1,
		},
		{
			name:  "--host-concurrency overlaps requests, starts still --delay apart",
			hosts: []string{"a.test"}, pages: 8, latency: 5 * delay,
			opts: func(o *Options) { o.HostConcurrency = 3 }, seedAll: true,
			// robots.txt alone until 5s, then three at a time, 1s apart:
			// 5, 6, 7; 10, 11, 12; 15, 16, the last ending at 21s (50ms
			// later when a lease met the robots.txt fetch and was parked).
			// One at a time would take 45s.
			gap: delay, longest: 22 * time.Second, overlap: 3,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := site{}
				var seeds []string
				for _, h := range tt.hosts {
					s.chain(h, tt.pages)
					if tt.robots != "" {
						s["http://"+h+"/robots.txt"] = page{status: 200, body: tt.robots}
					}
					seeds = append(seeds, chainURL(h, 0))
				}
				opts := rigOptions(seeds...)
				opts.Delay = delay
				if tt.opts != nil {
					tt.opts(&opts)
				}
				f := siteFetcher(s.slow(tt.latency))
				serve := f.serve
				f.serve = func(ctx context.Context, n int, url string) page {
					p := serve(ctx, n, url)
					p.latency = tt.latency // 404s for robots.txt too
					return p
				}
				r := newRig(t, opts, f)
				if tt.seedAll {
					seeds = sortedKeys(s)
					seeds = slices.DeleteFunc(seeds, func(u string) bool { return strings.HasSuffix(u, "/robots.txt") })
				}
				r.add(0, seeds...)

				sum := r.run()

				if !sum.Exhausted {
					t.Errorf("summary %+v, want exhausted", sum)
				}
				for _, h := range tt.hosts {
					reqs := r.f.requests(h)
					checkEachPageOnce(t, reqs, h, tt.pages)
					checkGaps(t, reqs, tt.gap)
					if n := inFlightMost(reqs); n != tt.overlap {
						t.Errorf("%s: at most %d requests in flight at once, want %d", h, n, tt.overlap)
					}
				}
				if sum.Duration > tt.longest {
					t.Errorf("crawl took %v, want at most %v", sum.Duration, tt.longest)
				}
			})
		})
	}
}

// deadHostOptions: a breaker that opens after 3 failures and rests a
// minute, URLs that never run out of retries before the host is given up
// on, two requests at a time.
func deadHostOptions() Options {
	o := rigOptions()
	o.Scope = ScopeAny
	o.Delay = time.Second
	o.HostConcurrency = 2
	o.Breaker = breaker.Config{Threshold: 3, Rest: time.Minute, Probes: 1}
	o.GiveUpAfter = 5 * time.Minute
	o.Retries = 10
	o.RetryBase = time.Second
	o.RetryMax = 10 * time.Second
	o.RetryBudget = 1
	return o
}

// transitionTimes returns when host's breaker moved to state to.
func transitionTimes(trs []store.Transition, to string) []time.Time {
	var out []time.Time
	for _, tr := range trs {
		if tr.To == to {
			out = append(out, tr.At)
		}
	}
	return out
}

func startedIn(reqs []fetched, from, to time.Time) []fetched {
	var out []fetched
	for _, r := range reqs {
		if !r.Start.Before(from) && r.Start.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

func TestCrawlDeadHostBreaker(t *testing.T) {
	const pages = 10
	const window = 5 * time.Minute
	var withBreaker, without int
	t.Run("breaker enabled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := deadHostOptions()
			r := newRig(t, opts, deadHost(linkedToDead(pages), "dead.test", opts.Timeout))
			r.add(0, aRoot)
			t0 := time.Now()

			sum := r.run()

			if !sum.Exhausted {
				t.Fatalf("summary %+v: a dead host must not keep the crawl alive", sum)
			}
			checkEachPageOnce(t, r.f.requests("a.test"), "a.test", pages)
			dead := r.f.requests("dead.test")
			withBreaker = len(startedIn(dead, t0, t0.Add(window)))
			trs := r.transitions("dead.test")
			opens, probes := transitionTimes(trs, "open"), transitionTimes(trs, "half-open")
			if len(opens) == 0 {
				t.Fatalf("dead host's breaker never opened: transitions %+v", trs)
			}
			first := opens[0]
			// Threshold failures open it, with what was in flight then.
			before := startedIn(dead, t0, first)
			if most := opts.Breaker.Threshold + opts.HostConcurrency - 1; len(before) > most {
				t.Errorf("%d requests before the circuit opened, want at most %d", len(before), most)
			}
			for _, req := range dead {
				if req.Start.Before(first) && req.End.After(first) {
					t.Errorf("%s in flight when the circuit opened ended at +%v, want cut short at +%v",
						req.URL, req.End.Sub(t0), first.Sub(t0))
				}
			}
			// Nothing during a rest; then one probe, which fails and
			// reopens the circuit.
			for _, at := range opens {
				if during := startedIn(dead, at, at.Add(opts.Breaker.Rest)); len(during) != 0 {
					t.Errorf("requests %v during the rest from +%v", urlsOf(during), at.Sub(t0))
				}
			}
			after := startedIn(dead, first, first.Add(time.Hour))
			if len(after) != len(probes) {
				t.Errorf("%d requests after the circuit opened, %d half-open periods: want one probe each",
					len(after), len(probes))
			}
			t.Logf("dead host: %d requests before it opened at +%v, %d probes; crawl took %v",
				len(before), first.Sub(t0), len(after), sum.Duration)
			// Its URLs were parked, not failed, until it was given up on,
			// once down for --give-up-after.
			giveUp := first.Add(opts.GiveUpAfter)
			res := r.results()
			for i := range pages {
				u := chainURL("dead.test", i)
				if got := res[u]; got.ErrorClass != "host-down" || got.FetchedAt.Before(giveUp) {
					t.Errorf("%s: class %q at +%v, want host-down from +%v", u, got.ErrorClass,
						got.FetchedAt.Sub(t0), giveUp.Sub(t0))
				}
			}
			if end := t0.Add(sum.Duration); end.After(giveUp.Add(opts.Breaker.Rest)) {
				t.Errorf("crawl ended at +%v, want soon after the give-up at +%v", sum.Duration, giveUp.Sub(t0))
			}
		})
	})
	t.Run("breaker disabled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := deadHostOptions()
			opts.BreakerEnabled = false
			opts.MaxDuration = window
			r := newRig(t, opts, deadHost(linkedToDead(pages), "dead.test", opts.Timeout))
			r.add(0, aRoot)
			r.run()
			without = len(r.f.requests("dead.test"))
		})
	})
	t.Logf("dead host's requests in the first %v: %d with the breaker, %d without", window, withBreaker, without)
	if without < 2*withBreaker {
		t.Errorf("in the first %v the dead host got %d requests with the breaker and %d without: the breaker saved little",
			window, withBreaker, without)
	}
}

// Opening a host's circuit cuts its requests in flight short: they are not
// attempts (their URLs stay queued, here to be given up on), so exactly
// threshold attempts end as failures.
func TestCrawlOpeningCircuitAbortsRequestsInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := deadHostOptions()
		opts.HostConcurrency = 3
		opts.Delay = 3 * time.Second // staggers the attempts: some are in flight when it opens
		opts.Retries = 0
		opts.Breaker.Rest = time.Hour
		opts.GiveUpAfter = time.Minute
		r := newRig(t, opts, deadHost(linkedToDead(10), "dead.test", opts.Timeout))
		r.add(0, aRoot)

		sum := r.run()

		if !sum.Exhausted {
			t.Fatalf("summary %+v, want exhausted", sum)
		}
		classes := map[string]int{}
		for u, res := range r.results() {
			if strings.HasPrefix(u, "http://dead.test/") {
				classes[res.ErrorClass]++
			}
		}
		if classes["transient"] != opts.Breaker.Threshold {
			t.Errorf("dead host's results %v: want exactly the threshold %d failed; those in flight when it opened are cut short",
				classes, opts.Breaker.Threshold)
		}
		opened := transitionTimes(r.transitions("dead.test"), "open")
		if len(opened) != 1 {
			t.Fatalf("opened at %v, want once", opened)
		}
		cut := 0
		for _, req := range r.f.requests("dead.test") {
			switch {
			case req.CutShort && !req.End.Equal(opened[0]):
				t.Errorf("%s cut short at %v, want at the opening %v", req.URL, req.End, opened[0])
			case req.CutShort:
				cut++
			case req.End.After(opened[0]):
				t.Errorf("%s ran on after the circuit opened", req.URL)
			}
		}
		if cut == 0 {
			t.Errorf("no request was in flight when the circuit opened: the test proves nothing")
		}
	})
}

// A host is given up on when it falls due, by the request path itself: its
// URLs wake at the give-up time, not at the end of a rest that may be far
// longer. Here the rest is an hour and the sweep never runs.
func TestCrawlDeadHostGivenUpWhenDueWithoutSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := deadHostOptions()
		opts.Breaker.Rest = time.Hour
		opts.GiveUpAfter = time.Minute
		opts.housekeepEvery = 2 * time.Hour
		r := newRig(t, opts, deadHost(linkedToDead(10), "dead.test", opts.Timeout))
		r.add(0, aRoot)
		t0 := time.Now()

		sum := r.run()

		if !sum.Exhausted {
			t.Fatalf("summary %+v: the dead host was not given up on without the sweep", sum)
		}
		opened := transitionTimes(r.transitions("dead.test"), "open")
		if len(opened) != 1 {
			t.Fatalf("opened at %v, want once", opened)
		}
		due := opened[0].Add(opts.GiveUpAfter)
		for u, res := range r.results() {
			// Due, not at the sweep two hours on: at the latest once the
			// request a worker had in flight at the moment times out.
			late := res.FetchedAt.Sub(due)
			if strings.HasPrefix(u, "http://dead.test/") && (late < 0 || late > opts.Timeout) {
				t.Errorf("%s: %q at +%v, want host-down at +%v, when due (within a request timeout)", u, res.ErrorClass,
					res.FetchedAt.Sub(t0), due.Sub(t0))
			}
		}
	})
}

// A host's first robots.txt attempt is made alone (its other URLs wait for
// the rules), but once it has failed each URL makes its own attempt, up to
// --host-concurrency at once: a dead host's URLs must not fail one timeout
// at a time, which would also keep its breaker from opening for
// threshold x timeout.
func TestCrawlDeadHostRobotsAttemptsRunInParallelAfterAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := deadHostOptions()
		opts.BreakerEnabled = false
		opts.HostConcurrency = 3
		opts.Delay = 0
		opts.Retries = 0
		opts.MaxDuration = 35 * time.Second
		s := site{}
		var seeds []string
		for i := range 10 {
			seeds = append(seeds, chainURL("dead.test", i))
		}
		r := newRig(t, opts, deadHost(s, "dead.test", opts.Timeout))
		r.add(0, seeds...)

		r.run()

		reqs := r.f.requests("dead.test")
		if len(reqs) < 4 {
			t.Fatalf("dead host got %d requests, want several", len(reqs))
		}
		if reqs[1].Start.Before(reqs[0].End) {
			t.Errorf("second attempt at %v, first ended at %v: the first robots.txt attempt must be made alone",
				reqs[1].Start, reqs[0].End)
		}
		if n := inFlightMost(reqs); n != opts.HostConcurrency {
			t.Errorf("at most %d attempts in flight, want --host-concurrency %d", n, opts.HostConcurrency)
		}
	})
}

func TestCrawlRecoveringHostIsProbedBackToClosed(t *testing.T) {
	const recoverAt = 2 * time.Minute
	tests := []struct {
		name            string
		hostConcurrency int
		delay           time.Duration
	}{
		{name: "one request at a time", hostConcurrency: 1, delay: time.Second},
		// Requests overlap: a lease that meets the outstanding probe must
		// not park the host until the probe's deadline (Timeout + 15 s).
		{name: "concurrent requests", hostConcurrency: 3, delay: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := rigOptions(aRoot)
				opts.HostConcurrency = tt.hostConcurrency
				opts.Delay = tt.delay
				opts.Breaker = breaker.Config{Threshold: 2, Rest: 30 * time.Second, Probes: 2}
				opts.GiveUpAfter = time.Hour
				opts.Retries = 10
				opts.RetryBase = time.Second
				opts.RetryMax = 5 * time.Second
				opts.RetryBudget = 1
				t0 := time.Now()
				s := site{}.chain("a.test", 10)
				s["http://a.test/robots.txt"] = page{status: 200, body: "User-agent: *\nAllow: /\n"}
				f := siteFetcher(s.slow(100 * time.Millisecond))
				serve := f.serve
				f.serve = func(ctx context.Context, n int, url string) page {
					if time.Since(t0) < recoverAt {
						return page{status: 503, latency: 100 * time.Millisecond}
					}
					return serve(ctx, n, url)
				}
				r := newRig(t, opts, f)
				// Every page queued: leases meet the probe gate while a
				// probe is out.
				for i := range 10 {
					r.add(0, chainURL("a.test", i))
				}

				sum := r.run()

				if !sum.Exhausted {
					t.Errorf("summary %+v, want exhausted", sum)
				}
				res := r.results()
				for i := range 10 {
					if got := res[chainURL("a.test", i)]; got.Status != 200 || got.ErrorClass != "" {
						t.Errorf("page %d: status %d class %q, want fetched", i, got.Status, got.ErrorClass)
					}
				}
				var path []string
				for _, tr := range r.transitions("a.test") {
					path = append(path, tr.From+"->"+tr.To)
				}
				if !inOrder(path, "closed->open", "open->half-open", "half-open->closed") {
					t.Errorf("transitions %v, want closed->open, then open->half-open, then half-open->closed", path)
				}
				// A recovered host is found within a rest, and its probes
				// follow each other at once: the second does not wait for the
				// first's probe gate deadline.
				trs := r.transitions("a.test")
				closed := transitionTimes(trs, "closed")
				halfOpen := transitionTimes(trs, "half-open")
				if len(closed) != 1 || len(halfOpen) == 0 {
					t.Fatalf("transitions %v, want one close", path)
				}
				if took := closed[0].Sub(halfOpen[len(halfOpen)-1]); took > 2*(tt.delay+time.Second) {
					t.Errorf("%d probes took %v from half-open to closed, want them one after the other",
						opts.Breaker.Probes, took)
				}
				if most := recoverAt + opts.Breaker.Rest + 20*time.Second; sum.Duration >= most {
					t.Errorf("crawl took %v, want under %v: recovery found late", sum.Duration, most)
				}
				t.Logf("transitions %v; crawl took %v", path, sum.Duration)
			})
		})
	}
}

// inOrder reports whether want occurs in got as a subsequence.
func inOrder(got []string, want ...string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

func TestCrawlRetries(t *testing.T) {
	t.Run("transient failures do not block the worker", func(t *testing.T) {
		for _, failing := range []string{"http://f.test/", "http://f.test/robots.txt"} {
			t.Run(failing+" answers 500", func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					testRetriesDoNotBlockTheWorker(t, failing)
				})
			})
		}
	})
	t.Run("Retry-After on 429 holds the whole host", func(t *testing.T) {
		synctest.Test(t, testRetryAfterHoldsTheHost)
	})
	t.Run("a 30%-flaky host is finished without opening its breaker", func(t *testing.T) {
		synctest.Test(t, testFlakyHostFinished)
	})
}

// With one worker, a host whose URL keeps failing must not hold the worker
// through its backoff: the healthy host is crawled meanwhile, and the
// failing URL ends failed after exactly Retries+1 attempts, each after its
// backoff.
func testRetriesDoNotBlockTheWorker(t *testing.T, failing string) {
	const retries = 3
	s := site{}.chain("a.test", 10)
	s["http://f.test/"] = htmlPage("f")
	s[failing] = page{status: 500}
	opts := rigOptions(aRoot, "http://f.test/")
	opts.Workers = 1
	opts.Delay = time.Second
	opts.Retries = retries
	opts.RetryBase = 10 * time.Second
	opts.Rand = func() float64 { return 0.99 } // backoffs 9.9, 19.8, 39.6 s
	opts.Breaker.Threshold = 100               // retries, not the breaker
	r := newRig(t, opts, siteFetcher(s))
	r.add(0, aRoot, "http://f.test/")

	sum := r.run()

	if !sum.Exhausted {
		t.Errorf("summary %+v, want exhausted", sum)
	}
	healthy := r.f.requests("a.test")
	checkEachPageOnce(t, healthy, "a.test", 10)
	var attempts []fetched
	for _, req := range r.f.requests("f.test") {
		if req.Status == 500 {
			attempts = append(attempts, req)
		}
	}
	if len(attempts) != retries+1 {
		t.Fatalf("failing URL got %d attempts %v, want Retries+1 = %d", len(attempts), urlsOf(attempts), retries+1)
	}
	for k := 1; k <= retries; k++ {
		backoff := Backoff(k, opts.RetryBase, opts.RetryMax, opts.Rand)
		if gap := attempts[k].Start.Sub(attempts[k-1].End); gap < backoff {
			t.Errorf("retry %d came %v after attempt %d, want its backoff %v", k, gap, k-1, backoff)
		}
	}
	if last := attempts[retries].Start; !healthy[len(healthy)-1].Start.Before(last) {
		t.Errorf("healthy host finished at %v, after the last retry at %v: the worker waited out backoffs",
			healthy[len(healthy)-1].Start, last)
	}
	got := r.results()["http://f.test/"]
	if got.ErrorClass != "transient" || got.Attempts != retries+1 {
		t.Errorf("failing URL recorded as class %q after %d attempts, want transient after %d",
			got.ErrorClass, got.Attempts, retries+1)
	}
}

// counted serves s, but answers the nth request to host (from 0) with
// instead when fail(n) says so.
func counted(s site, host string, fail func(n int) bool, instead page) *fakeFetcher {
	f := siteFetcher(s)
	serve := f.serve
	var mu sync.Mutex
	n := 0
	f.serve = func(ctx context.Context, seen int, url string) page {
		if h, _ := frontier.HostKey(url); h == host {
			mu.Lock()
			i := n
			n++
			mu.Unlock()
			if fail(i) {
				return instead
			}
		}
		return serve(ctx, seen, url)
	}
	return f
}

func testRetryAfterHoldsTheHost(t *testing.T) {
	const retryAfter = 30 * time.Second
	s := site{}.chain("a.test", 8).slow(500 * time.Millisecond)
	throttled := page{status: 429, header: http.Header{"Retry-After": {"30"}}, latency: 500 * time.Millisecond}
	opts := rigOptions(aRoot)
	opts.HostConcurrency = 2
	r := newRig(t, opts, counted(s, "a.test", func(n int) bool { return n%3 == 2 }, throttled))
	r.add(0, aRoot)

	sum := r.run()

	if !sum.Exhausted {
		t.Errorf("summary %+v, want exhausted", sum)
	}
	reqs := r.f.requests("a.test")
	n429 := 0
	for _, q := range reqs {
		if q.Status != 429 {
			continue
		}
		n429++
		// From the moment the 429 arrived, the whole host waits.
		if during := startedIn(reqs, q.End, q.End.Add(retryAfter)); len(during) != 0 {
			t.Errorf("%v started within %v of a 429 at %v", urlsOf(during), retryAfter, q.End)
		}
	}
	if n429 == 0 {
		t.Fatalf("no 429: the test did not exercise Retry-After")
	}
	res := r.results()
	for i := range 8 {
		// A 429 is not an attempt.
		if got := res[chainURL("a.test", i)]; got.Status != 200 || got.Attempts != 1 {
			t.Errorf("page %d: status %d after %d attempts, want fetched at its first", i, got.Status, got.Attempts)
		}
	}
	t.Logf("%d requests, %d answered 429, crawl took %v", len(reqs), n429, sum.Duration)
}

func testFlakyHostFinished(t *testing.T) {
	const pages = 20
	s := site{}.chain("a.test", pages).slow(100 * time.Millisecond)
	opts := rigOptions(aRoot)
	opts.Retries = 5
	opts.RetryBase = time.Second
	opts.RetryMax = 10 * time.Second
	opts.RetryBudget = 1 // the budget has its own tests
	opts.Breaker.Threshold = 8
	// Three requests in ten fail, in bursts of three.
	r := newRig(t, opts, counted(s, "a.test", func(n int) bool { return n%10 < 3 }, page{status: 500}))
	r.add(0, aRoot)

	sum := r.run()

	if !sum.Exhausted {
		t.Errorf("summary %+v, want exhausted", sum)
	}
	fails := 0
	for _, q := range r.f.requests("a.test") {
		if q.Status == 500 {
			fails++
		}
	}
	if fails == 0 {
		t.Fatalf("no failure: the test did not exercise retries")
	}
	res := r.results()
	for i := range pages {
		if got := res[chainURL("a.test", i)]; got.Status != 200 || got.ErrorClass != "" {
			t.Errorf("page %d: status %d class %q after %d attempts, want fetched", i, got.Status, got.ErrorClass, got.Attempts)
		}
	}
	for _, tr := range r.transitions("a.test") {
		if tr.To == "open" {
			t.Errorf("breaker opened on a 30%%-flaky host: %+v", tr)
		}
	}
	t.Logf("%d requests, %d answered 500", len(r.f.requests("a.test")), fails)
}
