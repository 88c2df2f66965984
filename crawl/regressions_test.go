package crawl

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/backend"
	"breakwater/breaker"
	"breakwater/storage"
	"breakwater/store"
)

// With --breaker=false, a circuit an earlier run left open admits every
// request, and the fetcher must not refuse its connections: before, each
// request was refused, given back and offered again, for ever.
func TestBreakerOffIgnoresACircuitLeftOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions(aRoot)
		opts.BreakerEnabled = false
		opts.MaxDuration = time.Hour
		r := newRig(t, opts, siteFetcher(site{}.chain("a.test", 3)))
		now := time.Now()
		r.e.breakers.Load("a.test", breaker.Breaker{State: breaker.Open, OpenedAt: now, DownSince: now,
			Rest: time.Hour, Generation: 3})
		r.add(0, aRoot)

		sum := r.run()

		if !sum.Exhausted || sum.Counts.Fetched != 3 {
			t.Errorf("summary %+v: want the 3 pages fetched and the crawl exhausted", sum)
		}
		if n := len(r.f.requests("a.test")); n > 4 {
			t.Errorf("%d requests to a.test for robots.txt and 3 pages", n)
		}
	})
}

// A probe whose request is never sent (politeness parked it) gives its
// ticket back without telling the breaker the host answered: the down
// clock stays where it was, and the gate is free again.
func TestUnsentProbeKeepsTheDownClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigOptions(aRoot), siteFetcher(site{}.chain("a.test", 2)))
		r.knowRobots("a.test", "")
		r.add(0, aRoot)
		r.openBreaker("a.test")
		before, _ := r.e.breakers.Get("a.test")
		time.Sleep(2 * time.Minute) // past the rest: the next request is a probe
		hs := r.e.hosts.get("a.test", time.Now())
		hs.mu.Lock()
		hs.notBefore = time.Now().Add(5 * time.Second)
		hs.mu.Unlock()

		x, d := r.process(r.lease())
		wantEnding(t, d, parkHost)
		if !x.ticket.Probe {
			t.Fatalf("ticket %+v is not a probe", x.ticket)
		}
		r.e.settle(x, d)

		after, _ := r.e.breakers.Get("a.test")
		if !after.DownSince.Equal(before.DownSince) {
			t.Errorf("DownSince moved %v -> %v with no request sent", before.DownSince, after.DownSince)
		}
		if d := r.e.breakers.Admit("a.test", time.Now()); !d.Allowed || !d.Ticket.Probe {
			t.Errorf("after the unsent probe: %+v, want the gate free for a probe", d)
		}
	})
}

// --max-pages counts pages requested, each once: a robots.txt failure
// before the page, or a 429 answer, neither lets the run go over the limit
// nor counts a page twice.
func TestMaxPagesCountsEachPageOnce(t *testing.T) {
	t.Run("robots.txt failed first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			opts.MaxPages = 1
			s := site{}.chain("a.test", 4)
			f := siteFetcher(s)
			serve := f.serve
			f.serve = func(ctx context.Context, n int, url string) page {
				if url == aRobots && n == 0 {
					return page{err: syscall.ECONNRESET}
				}
				return serve(ctx, n, url)
			}
			r := newRig(t, opts, f)
			r.add(0, aRoot)
			r.run()
			pages := 0
			for _, req := range r.f.requests("a.test") {
				if req.URL != aRobots {
					pages++
				}
			}
			if pages != 1 {
				t.Errorf("%d pages requested with --max-pages 1: %v", pages, urlsOf(r.f.requests("a.test")))
			}
		})
	})
	t.Run("a 429 first", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := rigOptions(aRoot)
			opts.MaxPages = 2
			s := site{}.chain("a.test", 4)
			f := siteFetcher(s)
			serve := f.serve
			f.serve = func(ctx context.Context, n int, url string) page {
				if url == aRoot && n == 0 {
					return page{status: 429, header: http.Header{"Retry-After": {"1"}}}
				}
				return serve(ctx, n, url)
			}
			r := newRig(t, opts, f)
			r.knowRobots("a.test", "")
			r.add(0, aRoot)
			sum := r.run()
			if sum.Counts.Fetched != 2 {
				t.Errorf("%d pages fetched with --max-pages 2 after a 429 (requests %v), want 2",
					sum.Counts.Fetched, urlsOf(r.f.requests("a.test")))
			}
		})
	})
}

// An unpause that lands while a lease of the host is on its way to a hold
// is not undone by that lease's ending.
func TestUnpauseDuringALeaseIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigOptions(aRoot), siteFetcher(site{}.chain("a.test", 2)))
		r.add(0, aRoot)
		l := r.lease()
		r.e.breakers.Pause("a.test", "test", time.Now())
		x, d := r.process(l)
		wantEnding(t, d, holdHost)
		if err := r.e.breakers.Unpause("a.test", time.Now()); err != nil {
			t.Fatal(err)
		}
		r.e.syncHold("a.test")
		r.e.settle(x, d)
		if n := r.e.front.HeldWork(); n != 0 {
			t.Errorf("breaker released, yet the frontier holds %d URL(s) of a.test", n)
		}
	})
}

// The crawler's downtime is taken off an open host's down time once: a
// run that loads the breakers and stops before its first heartbeat does
// not make the next run take the same stopped hour off again.
func TestResumedDownTimeIsTakenOffOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "crawl.db")
		db, err := storage.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		t0 := time.Now()
		var b store.Batch
		b.PutBreaker("a.test", breaker.Breaker{State: breaker.Open, OpenedAt: t0.Add(-25 * time.Minute),
			DownSince: t0.Add(-25 * time.Minute), Rest: time.Minute, Generation: 4})
		b.PutRunningAt(t0)
		if _, err := db.Commit(&b); err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			time.Sleep(time.Hour) // the crawler is stopped
			opts := DefaultOptions()
			opts.Fetcher, opts.Logger = siteFetcher(site{}), rigLogger(t)
			e, err := New(opts, backend.File(db))
			if err != nil {
				t.Fatal(err)
			}
			got, _ := e.breakers.Get("a.test")
			if down := time.Since(got.DownSince); down != 25*time.Minute {
				t.Errorf("resume %d: down for %v, want still 25m (no running time passed)", i+1, down)
			}
			if err := e.front.Close(); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
		}
	})
}
