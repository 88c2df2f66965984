package frontier

import (
	"breakwater/store"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

// bubble runs fn in a synctest bubble with a fresh frontier whose clock is
// the bubble's fake time: time.Sleep advances it, synctest.Wait settles every
// pending commit and refill.
func bubble(t *testing.T, opts Options, fn func(t *testing.T, h *harness)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		opts.Now = time.Now
		fn(t, newHarness(t, t.TempDir(), opts))
	})
}

func TestAddDedupesAndLeasesAfterCommit(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		open := gate(t, h.f)
		h.add("http://Example.COM/a#top", "http://example.com/b")
		h.add("http://example.com/a", "HTTP://EXAMPLE.com:80/a#other")
		synctest.Wait()
		// Handed to the writer but not committed: wait, never exhausted.
		wantBlocked(t, h.f)
		open()
		synctest.Wait()

		var got []string
		for {
			l, err := poll(h.f)
			if errors.Is(err, ErrExhausted) {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			got = append(got, l.Item.URL)
			complete(t, h.f, l)
			synctest.Wait()
		}
		want := []string{"http://Example.COM/a#top", "http://example.com/b"}
		if !slices.Equal(got, want) {
			t.Fatalf("leased %q, want %q (first form kept, duplicates dropped)", got, want)
		}
		if c := h.counts(); c.Seen != 2 || c.Fetched != 2 || c.Queued != 0 {
			t.Fatalf("counts = %+v, want 2 seen, 2 fetched, 0 queued", c)
		}
	})
}

func TestFIFOPerHost(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		for i := range 10 {
			h.add(pageURL("a.test", i), pageURL("b.test", i))
		}
		synctest.Wait()
		got := map[string][]string{}
		for range 20 {
			l := mustLease(t, h.f)
			got[l.Item.Host] = append(got[l.Item.Host], l.Item.URL)
			complete(t, h.f, l)
			synctest.Wait()
		}
		wantExhausted(t, h.f)
		for _, host := range []string{"a.test", "b.test"} {
			if want := pages(host, 10); !slices.Equal(got[host], want) {
				t.Errorf("%s leased %q, want FIFO %q", host, got[host], want)
			}
		}
	})
}

func TestNextExhaustedBlockedCanceled(t *testing.T) {
	t.Run("empty frontier is exhausted", func(t *testing.T) {
		bubble(t, Options{}, func(t *testing.T, h *harness) {
			wantExhausted(t, h.f)
			if _, err := h.f.Next(t.Context()); !errors.Is(err, ErrExhausted) {
				t.Fatalf("blocking Next = %v, want ErrExhausted", err)
			}
		})
	})
	t.Run("waits while a lease is out, exhausted after it ends", func(t *testing.T) {
		bubble(t, Options{}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			l := mustLease(t, h.f)
			waiter := asyncNext(t.Context(), h.f)
			time.Sleep(time.Hour)
			select {
			case r := <-waiter:
				t.Fatalf("Next returned (%v, %v) while a lease was out", r.lease, r.err)
			default:
			}
			complete(t, h.f, l)
			if r := <-waiter; !errors.Is(r.err, ErrExhausted) {
				t.Fatalf("Next after the last Complete = %v, want ErrExhausted", r.err)
			}
		})
	})
	t.Run("returns the context's error", func(t *testing.T) {
		bubble(t, Options{}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			l := mustLease(t, h.f)
			ctx, cancel := context.WithCancel(t.Context())
			waiter := asyncNext(ctx, h.f)
			synctest.Wait()
			cancel()
			if r := <-waiter; !errors.Is(r.err, context.Canceled) || r.lease != nil {
				t.Fatalf("Next after cancel = (%v, %v), want context.Canceled", r.lease, r.err)
			}
			ctx, cancel = context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if _, err := h.f.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Next with a deadline = %v, want DeadlineExceeded", err)
			}
			h.f.Release(l)
		})
	})
	t.Run("closed frontier", func(t *testing.T) {
		bubble(t, Options{}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			if err := h.f.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := poll(h.f); !errors.Is(err, ErrClosed) {
				t.Fatalf("Next after Close = %v, want ErrClosed", err)
			}
			if err := h.f.Add(item(t, pageURL("a.test", 1))); !errors.Is(err, ErrClosed) {
				t.Fatalf("Add after Close = %v, want ErrClosed", err)
			}
		})
	})
}

func TestHostConcurrency(t *testing.T) {
	tests := []struct {
		concurrency int
		wantA       int // leases of a.test out at once
	}{
		{1, 1},
		{3, 3},
		{10, 5}, // a.test has only 5 URLs
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.concurrency), func(t *testing.T) {
			bubble(t, Options{HostConcurrency: tt.concurrency}, func(t *testing.T, h *harness) {
				h.add(pages("a.test", 5)...)
				h.add(pageURL("b.test", 0))
				synctest.Wait()
				perHost := map[string]int{}
				for range tt.wantA + 1 {
					l := mustLease(t, h.f)
					perHost[l.Item.Host]++
					h.f.Started(l, time.Now()) // ends the reservation, no pacing
				}
				wantBlocked(t, h.f)
				if perHost["a.test"] != tt.wantA || perHost["b.test"] != 1 {
					t.Fatalf("leases per host = %v, want a.test:%d b.test:1", perHost, tt.wantA)
				}
				if got := h.f.InFlight(); got != tt.wantA+1 {
					t.Fatalf("InFlight = %d, want %d", got, tt.wantA+1)
				}
			})
		})
	}
}

func TestReservationUntilStartedOrRelease(t *testing.T) {
	bubble(t, Options{HostConcurrency: 3}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 3)...)
		synctest.Wait()
		l := mustLease(t, h.f)
		wantBlocked(t, h.f) // reserved, though the cap allows more
		h.f.Release(l)
		again := mustLease(t, h.f)
		if again.Item.URL != l.Item.URL {
			t.Fatalf("after Release leased %s, want the released %s back first", again.Item.URL, l.Item.URL)
		}
		wantBlocked(t, h.f)
		h.f.Started(again, time.Now())
		if next := mustLease(t, h.f); next.Item.URL != pageURL("a.test", 1) {
			t.Fatalf("after Started leased %s, want %s", next.Item.URL, pageURL("a.test", 1))
		}
	})
}

func TestStartedKeepsHostUntilNext(t *testing.T) {
	bubble(t, Options{HostConcurrency: 2}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 3)...)
		synctest.Wait()
		start := time.Now()
		l := mustLease(t, h.f)
		h.f.Started(l, start.Add(10*time.Second))
		wantBlocked(t, h.f)
		time.Sleep(9 * time.Second)
		wantBlocked(t, h.f)
		waiter := asyncNext(t.Context(), h.f)
		r := <-waiter
		if r.err != nil || r.lease.Item.URL != pageURL("a.test", 1) {
			t.Fatalf("Next = (%v, %v), want %s", r.lease, r.err, pageURL("a.test", 1))
		}
		if got := r.at.Sub(start); got != 10*time.Second {
			t.Fatalf("host offered again after %v, want exactly 10s", got)
		}
	})
}

// A worker waiting in Next must be woken when Started ends the reservation
// of the only host with work, not a minute later.
func TestStartedWakesWaitingNext(t *testing.T) {
	bubble(t, Options{HostConcurrency: 2}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 2)...)
		synctest.Wait()
		l := mustLease(t, h.f)
		waiter := asyncNext(t.Context(), h.f)
		synctest.Wait()
		start := time.Now()
		h.f.Started(l, start)
		r := <-waiter
		if r.err != nil {
			t.Fatal(r.err)
		}
		if waited := r.at.Sub(start); waited != 0 {
			t.Fatalf("waiting Next got %s %v after Started, want at once", r.lease.Item.URL, waited)
		}
	})
}

// Started's "not before" must hold even when the host's queue ran empty in
// between and its next URL arrives from a discovered link.
func TestStartedPaceSurvivesEmptyQueue(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pageURL("a.test", 0))
		synctest.Wait()
		start := time.Now()
		l := mustLease(t, h.f)
		h.f.Started(l, start.Add(10*time.Second))
		complete(t, h.f, l, item(t, pageURL("a.test", 1)))
		synctest.Wait()
		if l, err := poll(h.f); err == nil {
			t.Fatalf("leased %s at +0s, but Started said not before +10s", l.Item.URL)
		}
		time.Sleep(10 * time.Second)
		mustLease(t, h.f)
	})
}

func TestPark(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pageURL("a.test", 0), pageURL("b.test", 0))
		synctest.Wait()
		start := time.Now()
		h.f.Park("a.test", start.Add(time.Hour))
		h.f.Park("a.test", start.Add(time.Minute)) // an earlier Park does not shorten it
		// A worker never waits for a parked host while another is ready.
		r := <-asyncNext(t.Context(), h.f)
		if r.err != nil || r.lease.Item.Host != "b.test" || r.at != start {
			t.Fatalf("Next = (%v, %v) at +%v, want b.test at once", r.lease, r.err, r.at.Sub(start))
		}
		complete(t, h.f, r.lease)
		r = <-asyncNext(t.Context(), h.f)
		if r.err != nil || r.lease.Item.Host != "a.test" {
			t.Fatalf("Next = (%v, %v), want a.test once its park ends", r.lease, r.err)
		}
		if waited := r.at.Sub(start); waited != time.Hour {
			t.Fatalf("parked host offered after %v, want 1h", waited)
		}
	})
}

// The frontier decides readiness by Options.Now, not by the wall clock.
func TestParkUsesInjectedClock(t *testing.T) {
	clock := &fakeClock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	h := newHarness(t, t.TempDir(), Options{Now: clock.Now})
	h.add(pageURL("a.test", 0))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := h.f.Next(ctx) // waits for the commit
	if err != nil {
		t.Fatal(err)
	}
	h.f.Park("a.test", clock.Now().Add(time.Hour))
	h.f.Release(l)
	wantBlocked(t, h.f)
	clock.Advance(time.Hour - time.Nanosecond)
	wantBlocked(t, h.f)
	clock.Advance(time.Nanosecond)
	if l := mustLease(t, h.f); l.Item.URL != pageURL("a.test", 0) {
		t.Fatalf("leased %s, want %s", l.Item.URL, pageURL("a.test", 0))
	}
}

func TestHold(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.f.Hold("c.test") // held before it has any work
		if got := h.f.HeldWork(); got != 0 {
			t.Fatalf("HeldWork = %d with only a host without URLs held, want 0", got)
		}
		h.add(pages("a.test", 3)...)
		h.add(pageURL("b.test", 0), pageURL("c.test", 0))
		synctest.Wait()
		h.f.Hold("a.test")
		if got := h.f.HeldWork(); got != 2 {
			t.Fatalf("HeldWork = %d, want 2 (a.test with 3 URLs, c.test with 1)", got)
		}
		l := mustLease(t, h.f)
		if l.Item.Host != "b.test" {
			t.Fatalf("leased %s, want only b.test's URL while a and c are held", l.Item.URL)
		}
		complete(t, h.f, l)
		synctest.Wait()
		wantExhausted(t, h.f) // only held work is left

		h.f.Unhold("a.test")
		if l := mustLease(t, h.f); l.Item.URL != pageURL("a.test", 0) {
			t.Fatalf("after Unhold leased %s, want %s", l.Item.URL, pageURL("a.test", 0))
		}
		if got := h.f.HeldWork(); got != 1 {
			t.Fatalf("HeldWork after Unhold(a) = %d, want 1 (c.test)", got)
		}
	})
}

func TestCompleteStoresResultAndLinks(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pageURL("a.test", 0))
		synctest.Wait()
		l := mustLease(t, h.f)
		found := []store.Item{
			item(t, pageURL("a.test", 1)),
			item(t, pageURL("b.test", 0)),
			item(t, pageURL("A.TEST", 0)+"#dup"), // already seen
		}
		r := okResult(l.Item)
		r.Title, r.Outlinks = "home", len(found)
		if err := h.f.Complete(l, r, found); err != nil {
			t.Fatal(err)
		}
		h.reopen()
		if c := h.counts(); c != (store.Counts{Seen: 3, Queued: 2, Fetched: 1}) {
			t.Fatalf("counts after reopen = %+v, want seen 3, queued 2, fetched 1", c)
		}
		if got := h.results()[pageURL("a.test", 0)]; got == nil || got.Title != "home" || got.Status != 200 {
			t.Fatalf("stored result = %+v, want a.test/p0 with title home", got)
		}
		if q := h.queued("a.test"); !slices.Equal(q, []string{pageURL("a.test", 1)}) {
			t.Fatalf("a.test queue = %q, want only p1", q)
		}
		if q := h.queued("b.test"); !slices.Equal(q, []string{pageURL("b.test", 0)}) {
			t.Fatalf("b.test queue = %q, want p0", q)
		}
	})
}

func TestDeferComesBackWhenDue(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pageURL("a.test", 0))
		synctest.Wait()
		start := time.Now()
		l := mustLease(t, h.f)
		h.f.Started(l, start)
		it := l.Item
		it.Attempts++
		if err := h.f.Defer(l, it, start.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if c := h.counts(); c.Deferred != 1 || c.Queued != 0 {
			t.Fatalf("counts after Defer = %+v, want 1 deferred, 0 queued", c)
		}
		r := <-asyncNext(t.Context(), h.f) // never exhausted while something is deferred
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.at.Sub(start) != time.Hour || r.lease.Item.URL != it.URL || r.lease.Item.Attempts != 1 {
			t.Fatalf("got %+v after %v, want %s with 1 attempt after 1h", r.lease.Item, r.at.Sub(start), it.URL)
		}
		complete(t, h.f, r.lease)
		synctest.Wait()
		wantExhausted(t, h.f)
		if c := h.counts(); c != (store.Counts{Seen: 1, Fetched: 1}) {
			t.Fatalf("final counts = %+v", c)
		}
	})
}

// With a manual clock the writer's due timer runs in real time; any commit
// after the clock passes the due time promotes the URL.
func TestDeferWithInjectedClock(t *testing.T) {
	clock := &fakeClock{now: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)}
	h := newHarness(t, t.TempDir(), Options{Now: clock.Now})
	h.add(pageURL("a.test", 0))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := h.f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	it := l.Item
	it.Attempts = 2
	if err := h.f.Defer(l, it, clock.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	wantBlocked(t, h.f)
	clock.Advance(time.Minute)
	if err := h.f.Submit(func(*store.Batch) {}); err != nil {
		t.Fatal(err)
	}
	l, err = h.f.Next(ctx)
	if err != nil || l.Item.Attempts != 2 {
		t.Fatalf("Next = (%+v, %v), want the deferred URL with 2 attempts", l, err)
	}
}

func TestLeasesSurviveCrashAndClose(t *testing.T) {
	for _, stop := range []string{"crash", "close"} {
		t.Run(stop, func(t *testing.T) {
			bubble(t, Options{HostConcurrency: 2}, func(t *testing.T, h *harness) {
				h.add(pages("a.test", 3)...)
				h.add(pages("b.test", 2)...)
				synctest.Wait()
				var leased []*Lease
				for range 4 {
					l := mustLease(t, h.f)
					h.f.Started(l, time.Now())
					leased = append(leased, l)
				}
				done := leased[0].Item.URL
				complete(t, h.f, leased[0])
				synctest.Wait()
				if stop == "crash" {
					// This Complete reaches the writer but never the file.
					open := gate(t, h.f)
					complete(t, h.f, leased[1])
					h.crash(open)
				} else {
					h.close()
				}
				h.open()
				again := drain(t, h, 0)
				if slices.Contains(again, done) || len(again) != 4 {
					t.Fatalf("after reopen leased %q: want the 4 URLs not completed, never %s", again, done)
				}
				for _, l := range leased[1:] {
					if !slices.Contains(again, l.Item.URL) {
						t.Errorf("in-flight %s lost by the %s", l.Item.URL, stop)
					}
				}
			})
		})
	}
}

func TestBufferRefill(t *testing.T) {
	tests := []struct {
		name   string
		adds   int // Add calls the 100 URLs are split into
		reopen int // reopen after this many leases; 0 for never, -1 before the first
	}{
		{"one add", 1, 0},
		{"many adds", 25, 0},
		{"reopen midway", 1, 37},
		{"reopen before leasing", 4, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, Options{Buffer: 4}, func(t *testing.T, h *harness) {
				all := pages("a.test", 100)
				per := len(all) / tt.adds
				for i := 0; i < len(all); i += per {
					h.add(all[i:min(i+per, len(all))]...)
				}
				if tt.reopen < 0 {
					h.reopen()
				}
				got := drain(t, h, tt.reopen)
				if !slices.Equal(got, all) {
					t.Fatalf("leased %d URLs %q, want all 100 in FIFO order", len(got), got)
				}
			})
		})
	}
}

// drain leases and completes until exhausted, reopening after reopenAt leases.
func drain(t *testing.T, h *harness, reopenAt int) []string {
	t.Helper()
	var got []string
	for {
		synctest.Wait()
		l, err := poll(h.f)
		switch {
		case errors.Is(err, ErrExhausted):
			return got
		case err != nil:
			t.Fatalf("Next after %d leases: %v", len(got), err)
		}
		got = append(got, l.Item.URL)
		complete(t, h.f, l)
		if len(got) == reopenAt {
			h.reopen()
		}
	}
}

func TestReopenManyHosts(t *testing.T) {
	bubble(t, Options{Buffer: 2}, func(t *testing.T, h *harness) {
		var all []string
		for i := range 40 {
			all = append(all, pages(fmt.Sprintf("h%02d.test", i), 5)...)
		}
		h.add(all...)
		h.reopen()
		got := drain(t, h, 0)
		slices.Sort(got)
		slices.Sort(all)
		if !slices.Equal(got, all) {
			t.Fatalf("leased %d URLs after reopen, want %d, each once", len(got), len(all))
		}
	})
}

func TestFailHost(t *testing.T) {
	bubble(t, Options{Buffer: 2}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 5)...)
		h.add(pageURL("b.test", 0))
		synctest.Wait()
		tmpl := store.Result{ErrorClass: "gave-up", Error: "host given up"}
		if err := h.f.FailHost("a.test", tmpl); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		l := mustLease(t, h.f)
		if l.Item.Host != "b.test" {
			t.Fatalf("leased %s of a failed host", l.Item.URL)
		}
		complete(t, h.f, l)
		synctest.Wait()
		wantExhausted(t, h.f)
		if c := h.counts(); c != (store.Counts{Seen: 6, Failed: 5, Fetched: 1}) {
			t.Fatalf("counts = %+v, want 5 failed, 1 fetched", c)
		}
		results := h.results()
		for _, u := range pages("a.test", 5) {
			if r := results[u]; r == nil || r.ErrorClass != "gave-up" || r.Host != "a.test" {
				t.Errorf("result of %s = %+v, want the gave-up template", u, r)
			}
		}
	})
}

// A URL added in the same group commit as, but after, its host's FailHost is
// queued in the file and must still be offered.
func TestAddAfterFailHostInOneCommit(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 2)...)
		synctest.Wait()
		open := gate(t, h.f)
		if err := h.f.FailHost("a.test", store.Result{ErrorClass: "gave-up"}); err != nil {
			t.Fatal(err)
		}
		h.add(pageURL("a.test", 9))
		open()
		synctest.Wait()
		if q := h.queued("a.test"); !slices.Equal(q, []string{pageURL("a.test", 9)}) {
			t.Fatalf("file queue of a.test = %q, want p9", q)
		}
		l, err := poll(h.f)
		if err != nil {
			t.Fatalf("Next = %v, but %s is queued in the file", err, pageURL("a.test", 9))
		}
		if l.Item.URL != pageURL("a.test", 9) {
			t.Fatalf("leased %s, want p9", l.Item.URL)
		}
	})
}

// While Complete is handing a lease's discovered links to the writer, a
// Next must not report exhaustion: the crawl is not over.
func TestNotExhaustedDuringComplete(t *testing.T) {
	h := newHarness(t, t.TempDir(), Options{})
	h.add(pageURL("a.test", 0))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	const rounds = 200
	for i := range rounds {
		l, err := h.f.Next(ctx)
		if err != nil {
			t.Fatalf("round %d: Next = %v", i, err)
		}
		stop, probed := make(chan struct{}), make(chan int)
		go func() {
			exhausted := 0
			for {
				select {
				case <-stop:
					probed <- exhausted
					return
				default:
				}
				switch l, err := poll(h.f); {
				case errors.Is(err, ErrExhausted):
					exhausted++
				case l != nil:
					h.f.Release(l)
				}
			}
		}()
		var found []store.Item
		if i+1 < rounds {
			found = append(found, item(t, pageURL("a.test", i+1)))
		}
		complete(t, h.f, l, found...)
		close(stop)
		if n := <-probed; n > 0 && i+1 < rounds {
			t.Fatalf("round %d: Next reported ErrExhausted %d times while Complete was adding a link", i, n)
		}
	}
}

// TestNothingLost runs random sequences of frontier operations, restarts and
// crashes against a model: every distinct URL added is, at every settled
// moment, exactly once queued, deferred or resulted; no URL is leased twice
// at once; Next waits only when nothing may be offered and reports
// exhaustion only when nothing is left; and draining the frontier at the end
// fetches everything.
func TestNothingLost(t *testing.T) { nothingLost(t, Options{Buffer: 2}) }

// TestNothingLostSpilled is TestNothingLost with room for one dormant host
// in memory: the others wait in the file, brought back by scans.
func TestNothingLostSpilled(t *testing.T) { nothingLost(t, Options{Buffer: 2, MaxDormant: 1}) }

func nothingLost(t *testing.T, opts Options) {
	base := t.TempDir()
	hosts := []string{"a.test", "b.test", "c.test"}
	rapid.Check(t, func(rt *rapid.T) {
		dir, err := os.MkdirTemp(base, "case")
		if err != nil {
			rt.Fatal(err)
		}
		rapid.SyncTest(rt, func(rt *rapid.T) {
			pool := urlPool(rt, hosts, 4)
			opts.Now = time.Now
			p := &property{h: newHarness(rt, dir, opts), m: newCrawlModel(pool), pool: pool, hosts: hosts}
			p.run(rt, rapid.IntRange(1, 25).Draw(rt, "steps"))
			p.drain(rt)
		})
	})
}

// TestConcurrentWorkers crawls 50 hosts x 40 pages with 16 workers, each
// page linking to the next, to a page further on and to the next host's page
// of the same number. Run it with -race.
func TestConcurrentWorkers(t *testing.T) {
	const hosts, perHost, workers = 50, 40, 16
	h := newHarness(t, t.TempDir(), Options{HostConcurrency: 2, Buffer: 4})
	for i := range hosts {
		h.add(pageURL(webHost(i), 0))
	}
	log := newLeaseLog()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() { log.fail(crawlWorker(ctx, h.f, log, hosts, perHost)) })
	}
	wg.Wait()
	if err := errors.Join(log.errs...); err != nil {
		t.Fatal(err)
	}
	for u, n := range log.count {
		if n != 1 {
			t.Errorf("%s leased %d times", u, n)
		}
	}
	if len(log.count) != hosts*perHost {
		t.Errorf("leased %d distinct URLs, want %d", len(log.count), hosts*perHost)
	}
	h.reopen()
	if c := h.counts(); c != (store.Counts{Seen: hosts * perHost, Fetched: hosts * perHost}) {
		t.Fatalf("counts = %+v, want all %d fetched, none queued", c, hosts*perHost)
	}
}

func webHost(i int) string { return fmt.Sprintf("h%02d.test", i) }

// crawlWorker takes leases until exhausted, completing each page with its links.
func crawlWorker(ctx context.Context, f *Frontier, log *leaseLog, hosts, perHost int) error {
	for {
		l, err := f.Next(ctx)
		if errors.Is(err, ErrExhausted) {
			log.sawExhausted()
			return nil
		}
		if err != nil {
			return fmt.Errorf("Next: %w", err)
		}
		log.leased(l.Item.URL)
		f.Started(l, time.Now())
		var host, n int
		if _, err := fmt.Sscanf(l.Item.URL, "http://h%d.test/p%d", &host, &n); err != nil {
			return fmt.Errorf("leased %s: %w", l.Item.URL, err)
		}
		var found []store.Item
		for _, link := range []string{pageURL(webHost(host), n+1), pageURL(webHost(host), (n*7+3)%perHost), pageURL(webHost((host+1)%hosts), n)} {
			if it, err := NewItem(link, 1, 0); err == nil && !strings.HasSuffix(link, fmt.Sprintf("/p%d", perHost)) {
				found = append(found, it)
			}
		}
		log.ended(l.Item.URL)
		if err := f.Complete(l, okResult(l.Item), found); err != nil {
			return fmt.Errorf("Complete: %w", err)
		}
	}
}

// Under a steady stream of operations the writer commits at most every
// CommitEvery; an idle writer, a full batch and Close commit at once.
func TestCommitsLinger(t *testing.T) {
	const every = 100 * time.Millisecond
	t.Run("idle writer commits at once, then lingers", func(t *testing.T) {
		bubble(t, Options{CommitEvery: every}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			if c := h.counts(); c.Queued != 1 {
				t.Fatalf("first add: %d queued, want 1 committed at once", c.Queued)
			}
			h.add(pageURL("a.test", 1))
			synctest.Wait()
			if c := h.counts(); c.Queued != 1 {
				t.Fatalf("second add right after a commit: %d queued, want it to wait", c.Queued)
			}
			time.Sleep(every - time.Millisecond)
			synctest.Wait()
			if c := h.counts(); c.Queued != 1 {
				t.Fatalf("%v after the commit: %d queued, want still 1", every-time.Millisecond, c.Queued)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if c := h.counts(); c.Queued != 2 {
				t.Fatalf("%v after the commit: %d queued, want 2", every, c.Queued)
			}
		})
	})
	t.Run("a starving worker cuts the linger to a tenth", func(t *testing.T) {
		bubble(t, Options{CommitEvery: every, HostConcurrency: 2}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			h.f.Started(mustLease(t, h.f), time.Now()) // nothing else is queued: the next Next starves
			next := asyncNext(t.Context(), h.f)
			h.add(pageURL("a.test", 1))
			synctest.Wait()
			if c := h.counts(); c.Queued != 1 {
				t.Fatalf("add right after a commit: %d queued, want it to wait", c.Queued)
			}
			time.Sleep(every/starvedLinger - time.Millisecond)
			synctest.Wait()
			if c := h.counts(); c.Queued != 1 {
				t.Fatalf("%v after the commit: %d queued, want still 1", every/starvedLinger-time.Millisecond, c.Queued)
			}
			time.Sleep(time.Millisecond)
			synctest.Wait()
			if c := h.counts(); c.Queued != 2 {
				t.Fatalf("%v after the commit, a worker starving: %d queued, want 2", every/starvedLinger, c.Queued)
			}
			select {
			case r := <-next:
				if r.err != nil || r.lease.Item.URL != pageURL("a.test", 1) {
					t.Fatalf("the starving Next got %v, %v; want the new URL", r.lease, r.err)
				}
			default:
				t.Fatal("the starving Next still waits after the commit")
			}
		})
	})
	t.Run("a starving worker and no lease in flight: the batch commits at once", func(t *testing.T) {
		bubble(t, Options{CommitEvery: every}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			l := mustLease(t, h.f)
			h.f.Started(l, time.Now())
			next := asyncNext(t.Context(), h.f) // nothing else is queued: it starves
			synctest.Wait()
			found, err := NewItem(pageURL("a.test", 1), 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			// The last lease ends with the page's links: no worker has
			// anything else on its way to the batch.
			if err := h.f.Complete(l, okResult(l.Item), []store.Item{found}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			select {
			case r := <-next:
				if r.err != nil || r.lease.Item.URL != found.URL {
					t.Fatalf("the starving Next got %v, %v; want the page's link", r.lease, r.err)
				}
			default:
				t.Fatalf("the starving Next still waits with nothing in flight (linger %v)", every/starvedLinger)
			}
		})
	})
	t.Run("a full batch commits at once", func(t *testing.T) {
		bubble(t, Options{CommitEvery: every, MaxBatch: 3}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			h.add(pageURL("a.test", 1), pageURL("a.test", 2), pageURL("a.test", 3))
			synctest.Wait()
			if c := h.counts(); c.Queued != 4 {
				t.Fatalf("%d queued, want 4: a batch of MaxBatch must not wait", c.Queued)
			}
		})
	})
	t.Run("close commits what lingers", func(t *testing.T) {
		bubble(t, Options{CommitEvery: every}, func(t *testing.T, h *harness) {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			h.add(pageURL("a.test", 1))
			synctest.Wait()
			h.reopen()
			if c := h.counts(); c.Queued != 2 {
				t.Fatalf("after close: %d queued, want 2", c.Queued)
			}
		})
	})
}

// A host whose last lease ended must not be forgotten while the lease's
// completion waits for the writer: created again when a new URL of it
// lands, or brought back by a scan of the file's counts, it would load
// that entry, still queued in the file, and fetch it twice. The gates line
// up: commit the new URL and lease it, and only then commit the completion.
func TestRecreatedHostSkipsEntriesOfFormerLeases(t *testing.T) {
	bubble(t, Options{MaxBatch: 1}, func(t *testing.T, h *harness) {
		h.add(pageURL("a.test", 0))
		synctest.Wait()
		first := mustLease(t, h.f)
		openA := gate(t, h.f)
		h.add(pageURL("a.test", 1))
		openB := make(chan struct{})
		err := h.f.Submit(func(b *store.Batch) {
			<-openB
			b.DeleteBreaker("other.test") // fills the one-op batch
		})
		if err != nil {
			t.Fatal(err)
		}
		complete(t, h.f, first) // a.test has nothing left
		// The writer's periodic prune, as it may run between any two
		// commits: here, before p1's.
		h.f.mu.Lock()
		h.f.pruneLocked(time.Now())
		_, kept := h.f.hosts["a.test"]
		h.f.mu.Unlock()
		if !kept {
			t.Fatal("prune forgot a.test while the completion of its lease waits for the writer")
		}
		openA()
		synctest.Wait() // p1 committed, into the kept host's buffer; the writer waits at B
		second := mustLease(t, h.f)
		close(openB)
		synctest.Wait()
		if second.Item.URL != pageURL("a.test", 1) {
			t.Fatalf("leased %s, want %s: %s was leased already", second.Item.URL, pageURL("a.test", 1), first.Item.URL)
		}
		complete(t, h.f, second)
		synctest.Wait()
		wantExhausted(t, h.f)
	})
}
