package crawl

// Direct tests of the request path: one lease at a time through process,
// then settle, inside a synctest bubble. Each test checks the disposition
// process returned and what settle made of it: what the frontier offers
// next and when, what the file holds, and the host's breaker and pace.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/store"
)

const (
	aRoot = "http://a.test/"
	aP1   = "http://a.test/p/1"
)

// wantNextLease fails unless the frontier's next lease is url with attempts,
// offered at exactly at.
func wantNextLease(t *testing.T, r *rig, url string, attempts int, at time.Time) *frontier.Lease {
	t.Helper()
	l := r.lease()
	if l.Item.URL != url || l.Item.Attempts != attempts {
		t.Errorf("next lease %s with %d attempts, want %s with %d", l.Item.URL, l.Item.Attempts, url, attempts)
	}
	if now := time.Now(); !now.Equal(at) {
		t.Errorf("next lease offered at +%v, want +%v", now.Sub(epoch), at.Sub(epoch))
	}
	return l
}

// epoch is the bubble's starting time, for readable messages.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func wantCounts(t *testing.T, r *rig, want store.Counts) {
	t.Helper()
	if got := r.counts(); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
}

func wantNoBreaker(t *testing.T, r *rig, host string) {
	t.Helper()
	if b, ok := r.e.breakers.Get(host); ok {
		t.Errorf("%s has a breaker entry %+v, want none (a neutral outcome)", host, b)
	}
}

func TestProcessGivesBack(t *testing.T) {
	// hang is a page that answers only after an hour: something else must
	// end its request.
	hang := page{status: 200, latency: time.Hour}
	refusedAtDial := page{err: fmt.Errorf("get %s: dial tcp: %w", aRoot, fetch.ErrHostRefused)}
	tests := []struct {
		name string
		page page // the answer to aRoot
		// stopAfter, if set, stops the crawl that long into the request.
		stopAfter time.Duration
		// probe makes the lease the probe of a half-open circuit.
		probe bool
	}{
		{name: "request cut short by our stop", page: hang, stopAfter: time.Second},
		{name: "request refused at dial: the circuit opened meanwhile", page: refusedAtDial},
		{name: "probe cut short by our stop frees the probe gate", page: hang, stopAfter: time.Second, probe: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := rigOptions(aRoot)
				opts.MaxPages = 5
				r := newRig(t, opts, siteFetcher(site{aRoot: tt.page}))
				r.knowRobots("a.test", "")
				r.add(0, aRoot)
				if tt.probe {
					r.openBreaker("a.test")
					time.Sleep(opts.Breaker.Rest + opts.Breaker.Rest/10)
				}
				if tt.stopAfter > 0 {
					ctx, stop := context.WithCancel(context.Background())
					r.e.fetchCtx = ctx
					time.AfterFunc(tt.stopAfter, stop)
				}

				x, d := r.process(r.lease())

				wantEnding(t, d, giveBack)
				if tt.probe {
					if !x.ticket.Probe {
						t.Fatalf("ticket %+v, want the half-open circuit's probe", x.ticket)
					}
					if dec := r.e.breakers.Admit("a.test", time.Now()); dec.Allowed {
						t.Fatalf("a second probe admitted while the first is outstanding")
					}
				}
				r.e.settle(x, d)
				now := time.Now()
				reqs := r.f.requests("")
				if len(reqs) != 1 || reqs[0].CutShort != (tt.stopAfter > 0) {
					t.Errorf("requests %+v, want one, cut short: %v", reqs, tt.stopAfter > 0)
				}
				if n := r.e.pageCap.started.Load(); n != 0 {
					t.Errorf("%d of --max-pages held after the give-back, want the reservation returned", n)
				}
				if tt.probe {
					if dec := r.e.breakers.Admit("a.test", now); !dec.Allowed || !dec.Ticket.Probe {
						t.Errorf("Admit after settle = %+v, want the probe gate free again", dec)
					}
				} else {
					wantNoBreaker(t, r, "a.test")
				}
				wantCounts(t, r, store.Counts{Seen: 1, Queued: 1})
				wantNextLease(t, r, aRoot, 0, time.Now())
			})
		})
	}

	t.Run("--max-pages reached", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			opts.MaxPages = 1
			r := newRig(t, opts, siteFetcher(site{}.chain("a.test", 3)))
			r.knowRobots("a.test", "")
			r.add(0, aRoot, aP1)
			if d := r.step(); d.ending != complete {
				t.Fatalf("first page: %v, want complete", d)
			}

			x, d := r.process(r.lease())

			wantEnding(t, d, giveBack)
			r.e.settle(x, d)
			if reqs := r.f.requests(""); len(reqs) != 1 {
				t.Errorf("requests %v, want only the first page", urlsOf(reqs))
			}
			if n := r.e.pageCap.started.Load(); n != 1 {
				t.Errorf("started = %d, want 1", n)
			}
			// /p/2 was found on the first page.
			wantCounts(t, r, store.Counts{Seen: 3, Fetched: 1, Queued: 2})
			wantNextLease(t, r, aP1, 0, time.Now())
		})
	})
}

func TestProcessParksHost(t *testing.T) {
	t.Run("politeness: a Crawl-delay learnt from robots.txt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			opts.Delay = time.Second
			s := site{}.chain("a.test", 2)
			s["http://a.test/robots.txt"] = page{status: 200, body: "User-agent: *\nCrawl-delay: 5\n"}
			r := newRig(t, opts, siteFetcher(s))
			r.add(0, aRoot)
			t0 := time.Now()
			// The first lease fetches robots.txt, under --delay, and gives
			// the URL back.
			if d := r.step(); d.ending != giveBack {
				t.Fatalf("robots.txt lease: %v, want give back", d)
			}

			l := wantNextLease(t, r, aRoot, 0, t0.Add(opts.Delay))
			x, d := r.process(l)

			wantEnding(t, d, parkHost)
			if want := t0.Add(5 * time.Second); !d.until.Equal(want) {
				t.Errorf("parked until +%v, want +%v: Crawl-delay counts from robots.txt's start", d.until.Sub(t0), want.Sub(t0))
			}
			r.e.settle(x, d)
			x, d = r.process(wantNextLease(t, r, aRoot, 0, d.until))
			wantEnding(t, d, complete)
			r.e.settle(x, d)
			reqs := r.f.requests("a.test")
			if len(reqs) != 2 || reqs[1].Start.Sub(reqs[0].Start) != 5*time.Second {
				t.Errorf("requests %v at %v, want robots.txt then / 5s later", urlsOf(reqs), gaps(reqs))
			}
		})
	})

	t.Run("breaker open: until its rest ends, with jitter", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			r := newRig(t, opts, siteFetcher(site{aRoot: htmlPage("home")}))
			r.knowRobots("a.test", "")
			r.add(0, aRoot)
			t0 := time.Now()
			r.openBreaker("a.test")

			x, d := r.process(r.lease())

			wantEnding(t, d, parkHost)
			// Rand is 0.5: half of min(rest/10, 5s).
			want := t0.Add(opts.Breaker.Rest + 2500*time.Millisecond)
			if !d.until.Equal(want) {
				t.Errorf("parked until +%v, want +%v", d.until.Sub(t0), want.Sub(t0))
			}
			r.e.settle(x, d)
			if reqs := r.f.requests(""); len(reqs) != 0 {
				t.Errorf("an open host got requests %v", urlsOf(reqs))
			}
			x, d = r.process(wantNextLease(t, r, aRoot, 0, want))
			if !x.ticket.Probe || d.ending != complete {
				t.Errorf("after the rest: ticket %+v, %v; want a probe, complete", x.ticket, d)
			}
			r.e.settle(x, d)
		})
	})

	t.Run("429: the whole host waits out Retry-After", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			s := site{}.chain("a.test", 2)
			s[aRoot] = page{status: 429, header: http.Header{"Retry-After": {"120"}}}
			r := newRig(t, opts, siteFetcher(s))
			r.knowRobots("a.test", "")
			r.add(0, aRoot, aP1)
			t0 := time.Now()

			x, d := r.process(r.lease())

			wantEnding(t, d, parkHost)
			want := t0.Add(120 * time.Second)
			if !d.until.Equal(want) {
				t.Errorf("parked until +%v, want +120s", d.until.Sub(t0))
			}
			r.e.settle(x, d)
			hs := r.e.hosts.get("a.test", time.Now())
			hs.mu.Lock()
			interval, throttles, notBefore := hs.pace.Interval(), hs.throttles, hs.notBefore
			hs.mu.Unlock()
			if interval != time.Second || throttles != 1 || !notBefore.Equal(want) {
				t.Errorf("pace %v, %d throttles, not before +%v; want 1s (PaceThrottleStart), 1, +120s",
					interval, throttles, notBefore.Sub(t0))
			}
			wantNoBreaker(t, r, "a.test")
			// Not an attempt: the URL is offered again first, as it was.
			wantNextLease(t, r, aRoot, 0, want)
		})
	})

	t.Run("another worker is fetching robots.txt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			opts.HostConcurrency = 2
			answer := make(chan struct{})
			f := &fakeFetcher{serve: func(_ context.Context, _ int, url string) page {
				if strings.HasSuffix(url, "/robots.txt") {
					<-answer
					return page{status: 404}
				}
				return htmlPage("page")
			}}
			r := newRig(t, opts, f)
			r.add(0, aRoot, aP1)
			first := r.lease()
			done := make(chan disposition)
			go func() {
				x, d := r.process(first)
				r.e.settle(x, d)
				done <- d
			}()
			synctest.Wait() // the first lease waits for robots.txt's answer
			t0 := time.Now()

			x, d := r.process(r.lease())

			wantEnding(t, d, parkHost)
			if want := t0.Add(50 * time.Millisecond); !d.until.Equal(want) {
				t.Errorf("parked until +%v, want +50ms", d.until.Sub(t0))
			}
			r.e.settle(x, d)
			close(answer)
			if d := <-done; d.ending != giveBack {
				t.Errorf("robots.txt lease: %v, want give back", d)
			}
			if reqs := r.f.requests(""); len(reqs) != 1 {
				t.Errorf("requests %v, want robots.txt alone", urlsOf(reqs))
			}
		})
	})
}

func TestProcessHoldsHost(t *testing.T) {
	t.Run("paused host", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, rigOptions(aRoot), siteFetcher(site{aRoot: htmlPage("home")}))
			r.knowRobots("a.test", "")
			r.add(0, aRoot)
			r.e.breakers.Pause("a.test", "complaint", time.Now())

			x, d := r.process(r.lease())

			wantEnding(t, d, holdHost)
			r.e.settle(x, d)
			wantHeld(t, r)
			if reqs := r.f.requests(""); len(reqs) != 0 {
				t.Errorf("a paused host got requests %v", urlsOf(reqs))
			}
		})
	})

	t.Run("403 naming the product token raises a case", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := site{aRoot: {status: 403, body: "Forbidden. Breakwater is not welcome here."}}
			r := newRig(t, rigOptions(aRoot), siteFetcher(s))
			r.knowRobots("a.test", "")
			r.add(0, aRoot)

			x, d := r.process(r.lease())

			wantEnding(t, d, holdHost)
			r.e.settle(x, d)
			wantHeld(t, r)
			if b, _ := r.e.breakers.Get("a.test"); b.State != breaker.Open || b.Hold != breaker.Case {
				t.Errorf("breaker %v hold %q, want open with a case", b.State, b.Hold)
			}
			var cases []store.Case
			err := r.db.ForEachCase(func(c store.Case) error {
				cases = append(cases, c)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(cases) != 1 || cases[0].Status != 403 ||
				!strings.Contains(cases[0].Excerpt, "Breakwater is not welcome") {
				t.Errorf("cases %+v, want one for the 403 with its excerpt", cases)
			}
		})
	})
}

// wantHeld checks that the one queued URL waits behind its host's hold:
// nothing is offered, and a crawl would end with it as held work.
func wantHeld(t *testing.T, r *rig) {
	t.Helper()
	wantCounts(t, r, store.Counts{Seen: 1, Queued: 1})
	if n := r.e.front.HeldWork(); n != 1 {
		t.Errorf("held work %d, want 1", n)
	}
	if l, err := r.e.front.Next(t.Context()); !errors.Is(err, frontier.ErrExhausted) {
		t.Errorf("Next = %v, %v; want ErrExhausted (only held work left)", l, err)
	}
}

func TestProcessDefersURL(t *testing.T) {
	t.Run("transient failure counts an attempt, with backoff", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			r := newRig(t, opts, siteFetcher(site{aRoot: {status: 500}}))
			r.knowRobots("a.test", "")
			r.add(0, aRoot)
			t0 := time.Now()

			x, d := r.process(r.lease())

			wantEnding(t, d, deferURL)
			// Rand is 0.5: half of the first ceiling, RetryBase.
			due := t0.Add(opts.RetryBase / 2)
			if d.item.Attempts != 1 || !d.until.Equal(due) {
				t.Errorf("deferred with %d attempts until +%v, want 1 until +%v", d.item.Attempts, d.until.Sub(t0), due.Sub(t0))
			}
			r.e.settle(x, d)
			if b, _ := r.e.breakers.Get("a.test"); b.Failures != 1 {
				t.Errorf("breaker failures %d, want 1", b.Failures)
			}
			wantCounts(t, r, store.Counts{Seen: 1, Deferred: 1})
			wantNextLease(t, r, aRoot, 1, due)
		})
	})

	t.Run("retry budget exhausted does not count one", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRig(t, rigOptions(aRoot), siteFetcher(site{aRoot: htmlPage("home")}))
			r.knowRobots("a.test", "")
			r.add(1, aRoot)
			now := time.Now()
			for ok := true; ok; ok, _ = r.e.budget.TryRetry("a.test", now) {
				// Each retry failed: none is still to come, none earned more.
				r.e.budget.RecordAnswer("a.test", false, now)
			}
			_, retryAt := r.e.budget.TryRetry("a.test", now)

			x, d := r.process(r.lease())

			wantEnding(t, d, deferURL)
			if d.item.Attempts != 1 || !d.until.Equal(retryAt) {
				t.Errorf("deferred with %d attempts until %v, want 1 (unchanged) until the budget's %v",
					d.item.Attempts, d.until, retryAt)
			}
			r.e.settle(x, d)
			if reqs := r.f.requests(""); len(reqs) != 0 {
				t.Errorf("requests %v, want none", urlsOf(reqs))
			}
			wantCounts(t, r, store.Counts{Seen: 1, Deferred: 1})
			x, d = r.process(wantNextLease(t, r, aRoot, 1, retryAt))
			wantEnding(t, d, complete)
			r.e.settle(x, d)
		})
	})

	t.Run("503 with Retry-After also parks the host", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			s := site{}.chain("a.test", 2)
			s[aRoot] = page{status: 503, header: http.Header{"Retry-After": {"60"}}}
			r := newRig(t, opts, siteFetcher(s))
			r.knowRobots("a.test", "")
			r.add(0, aRoot, aP1)
			t0 := time.Now()

			x, d := r.process(r.lease())

			wantEnding(t, d, deferURL)
			if want := t0.Add(time.Minute); !d.hostWait.Equal(want) || !d.until.Equal(t0.Add(opts.RetryBase/2)) {
				t.Errorf("%v, host waits until +%v; want the URL deferred by its backoff and the host until +60s",
					d, d.hostWait.Sub(t0))
			}
			r.e.settle(x, d)
			// The URL's retry falls due first, but the host waits for both.
			l := r.lease()
			if now := time.Now(); !now.Equal(t0.Add(time.Minute)) {
				t.Errorf("host offered again at +%v (%s), want +60s", now.Sub(t0), l.Item.URL)
			}
		})
	})
}

func TestProcessCompletes(t *testing.T) {
	blocked := fmt.Errorf("get %s: dial tcp 10.0.0.1:80: %w", aRoot,
		&fetch.BlockedAddressError{Addr: netip.MustParseAddr("10.0.0.1"), Reason: "private"})
	tests := []struct {
		name     string
		page     page
		robots   string
		attempts int // of the URL before this lease
		want     store.Result
		found    []string
		counts   store.Counts
		requests int
	}{
		{
			name: "200 HTML: its links in scope are queued",
			page: htmlPage("home", "/a", "/b", "/a#again", "http://other.test/"),
			want: store.Result{Status: 200, Title: "home", Outlinks: 3, Attempts: 1},
			// other.test is out of the seeds' scope.
			found:    []string{"http://a.test/a", "http://a.test/b"},
			counts:   store.Counts{Seen: 3, Fetched: 1, Queued: 2},
			requests: 1,
		},
		{
			name: "200 HTML: its links are queued as pages, then its requisites and frames as requisites",
			page: page{status: 200, header: http.Header{"Content-Type": {"text/html"}}, body: `<title>home</title>
				<link rel=stylesheet href=/s.css><img src=/i.png srcset="/i2.png 2x"><script src=/s.js></script>
				<div style="background:url(/bg.png)"><a href="/a">a</a><iframe src="/f"></iframe></div>`},
			want: store.Result{Status: 200, Title: "home", Outlinks: 7, Attempts: 1},
			found: []string{"http://a.test/a", "http://a.test/s.css", "http://a.test/i.png", "http://a.test/i2.png",
				"http://a.test/s.js", "http://a.test/bg.png", "http://a.test/f"},
			counts:   store.Counts{Seen: 8, Fetched: 1, Queued: 7},
			requests: 1,
		},
		{
			name:     "404: failed, permanent",
			page:     page{status: 404},
			want:     store.Result{Status: 404, ErrorClass: "permanent", Attempts: 1},
			counts:   store.Counts{Seen: 1, Failed: 1},
			requests: 1,
		},
		{
			name:   "robots.txt disallows: class robots, not requested",
			page:   htmlPage("home"),
			robots: "User-agent: *\nDisallow: /\n",
			want:   store.Result{ErrorClass: "robots"},
			counts: store.Counts{Seen: 1, Failed: 1},
		},
		{
			name:     "blocked address: class blocked",
			page:     page{err: blocked},
			want:     store.Result{ErrorClass: "blocked", Attempts: 1},
			counts:   store.Counts{Seen: 1, Failed: 1},
			requests: 1,
		},
		{
			name:     "retries exhausted: failed, transient",
			page:     page{status: 500},
			attempts: 2, // rigOptions' Retries
			want:     store.Result{Status: 500, ErrorClass: "transient", Attempts: 3},
			counts:   store.Counts{Seen: 1, Failed: 1},
			requests: 1,
		},
		{
			name:     "redirect: its target is queued at the same depth",
			page:     redirectPage(301, "/moved"),
			want:     store.Result{Status: 301, Attempts: 1},
			found:    []string{"http://a.test/moved"},
			counts:   store.Counts{Seen: 2, Fetched: 1, Queued: 1},
			requests: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, rigOptions(aRoot), siteFetcher(site{aRoot: tt.page}))
				r.knowRobots("a.test", tt.robots)
				r.add(tt.attempts, aRoot)

				x, d := r.process(r.lease())

				wantEnding(t, d, complete)
				// A link is one hop deeper; a redirect's target is the same
				// page, one redirect further.
				depth, redirects := 1, 0
				if tt.page.status/100 == 3 {
					depth, redirects = 0, 1
				}
				var found []string
				for _, it := range d.found {
					found = append(found, it.URL)
					if it.Depth != depth || it.Redirects != redirects {
						t.Errorf("found %s at depth %d after %d redirects, want %d and %d",
							it.URL, it.Depth, it.Redirects, depth, redirects)
					}
				}
				if fmt.Sprint(found) != fmt.Sprint(tt.found) {
					t.Errorf("found %v, want %v", found, tt.found)
				}
				r.e.settle(x, d)
				got, ok := r.results()[aRoot]
				if !ok {
					t.Fatalf("no result for %s", aRoot)
				}
				if got.Status != tt.want.Status || got.ErrorClass != tt.want.ErrorClass || got.Title != tt.want.Title ||
					got.Outlinks != tt.want.Outlinks || got.Attempts != tt.want.Attempts || got.Host != "a.test" {
					t.Errorf("result %+v, want %+v", got, tt.want)
				}
				wantCounts(t, r, tt.counts)
				if reqs := r.f.requests(""); len(reqs) != tt.requests {
					t.Errorf("requests %v, want %d", urlsOf(reqs), tt.requests)
				}
				if tt.want.ErrorClass != "transient" {
					wantNoBreaker(t, r, "a.test")
				}
			})
		})
	}
}

func TestProcessGivesUpHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions(aRoot, "http://b.test/")
		opts.Breaker.Rest = time.Hour
		opts.GiveUpAfter = 10 * time.Minute
		s := site{}.chain("a.test", 3).chain("b.test", 1)
		r := newRig(t, opts, siteFetcher(s))
		r.knowRobots("a.test", "")
		r.add(0, aRoot, aP1, "http://a.test/p/2")
		t0 := time.Now()
		r.openBreaker("a.test")

		// Offered before its rest ends, the host waits until it falls due
		// to be given up on: sooner than the end of its rest.
		x, d := r.process(r.lease())
		wantEnding(t, d, parkHost)
		if due := t0.Add(opts.GiveUpAfter); !d.until.Equal(due) {
			t.Errorf("parked until +%v, want +%v (--give-up-after)", d.until.Sub(t0), opts.GiveUpAfter)
		}
		r.e.settle(x, d)
		r.knowRobots("b.test", "")
		r.add(0, "http://b.test/")
		if d := r.step(); d.ending != complete {
			t.Fatalf("b.test: %v, want complete", d)
		}

		x, d = r.process(wantNextLease(t, r, aRoot, 0, t0.Add(opts.GiveUpAfter)))

		wantEnding(t, d, giveUpHost)
		r.e.settle(x, d)
		res := r.results()
		for _, u := range []string{aRoot, aP1, "http://a.test/p/2"} {
			got := res[u]
			if got.ErrorClass != "host-down" || !got.FetchedAt.Equal(t0.Add(opts.GiveUpAfter)) {
				t.Errorf("%s: class %q at +%v, want host-down at +%v", u, got.ErrorClass,
					got.FetchedAt.Sub(t0), opts.GiveUpAfter)
			}
		}
		if got := res["http://b.test/"]; got.Status != 200 {
			t.Errorf("b.test: %+v, want fetched", got)
		}
		wantCounts(t, r, store.Counts{Seen: 4, Fetched: 1, Failed: 3})
		if reqs := r.f.requests("a.test"); len(reqs) != 0 {
			t.Errorf("a.test got %v, want nothing", urlsOf(reqs))
		}
	})
}
