package frontier

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// activeHosts counts the hosts whose URLs the scheduler has loaded (and
// not drained yet), and the URLs it holds in memory.
func activeHosts(f *Frontier) (hosts, buffered int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hosts {
		if h.active && (len(h.buf) > 0 || h.loading) {
			hosts++
		}
		buffered += len(h.buf)
	}
	return hosts, buffered
}

// A queue of many hosts, crawled one URL at a time with no politeness wait,
// needs one host loaded at a time, and a second once the first has dwindled
// to less than half the next one's size (see wakeLongestLocked): what the
// scheduler holds must not grow with the hosts in the file. Reopening the file must not load
// them all either. Every URL is still leased, each exactly once.
func TestDormantHostsAreNotLoaded(t *testing.T) {
	const hosts, perHost = 50, 20
	bubble(t, Options{HostConcurrency: 2}, func(t *testing.T, h *harness) {
		var want []string
		for i := range hosts {
			urls := pages(fmt.Sprintf("h%02d.test", i), perHost)
			h.add(urls...)
			want = append(want, urls...)
		}
		synctest.Wait()
		h.reopen()
		synctest.Wait()
		if n, buffered := activeHosts(h.f); n != 0 || buffered != 0 {
			t.Fatalf("after Open: %d hosts loaded, %d URLs in memory; want none before a worker asks", n, buffered)
		}
		var got []string
		for range hosts * perHost {
			l := mustLease(t, h.f)
			got = append(got, l.Item.URL)
			complete(t, h.f, l)
			synctest.Wait()
			if n, buffered := activeHosts(h.f); n > 2 || buffered > 2*h.f.opts.Buffer {
				t.Fatalf("after %d leases: %d hosts loaded, %d URLs in memory; want at most 2 and %d",
					len(got), n, buffered, 2*h.f.opts.Buffer)
			}
		}
		wantExhausted(t, h.f)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("leased %d URLs, want each of the %d queued exactly once", len(got), len(want))
		}
	})
}

// A worker that finds every loaded host waiting out its politeness delay
// loads another host rather than wait.
func TestHostActivatedWhenNoneReady(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 3)...)
		synctest.Wait()
		h.add(pages("b.test", 3)...)
		synctest.Wait()
		l := mustLease(t, h.f)
		if l.Item.Host != "a.test" {
			t.Fatalf("first lease from %s, want a.test (queued first)", l.Item.Host)
		}
		h.f.Started(l, time.Now().Add(time.Hour))
		complete(t, h.f, l)
		synctest.Wait()
		if n, _ := activeHosts(h.f); n != 1 {
			t.Fatalf("%d hosts loaded, want only a.test", n)
		}
		l = mustLease(t, h.f)
		if l.Item.Host != "b.test" {
			t.Fatalf("lease from %s while a.test waits an hour, want b.test", l.Item.Host)
		}
	})
}

// A held host is not loaded however idle the workers are; once unheld it is.
func TestHeldHostStaysDormant(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 2)...)
		synctest.Wait()
		h.f.Hold("a.test")
		if l, err := poll(h.f); l != nil || !errors.Is(err, ErrExhausted) {
			t.Fatalf("Next = %v, %v with only a held host queued, want ErrExhausted", l, err)
		}
		if n, buffered := activeHosts(h.f); n != 0 || buffered != 0 {
			t.Fatalf("%d hosts loaded, %d URLs in memory; want the held host left in the file", n, buffered)
		}
		if got := h.f.HeldWork(); got != 1 {
			t.Fatalf("HeldWork = %d, want 1 (a.test, its 2 URLs in the file)", got)
		}
		h.f.Unhold("a.test")
		l := mustLease(t, h.f)
		if l.Item.URL != pageURL("a.test", 0) {
			t.Fatalf("leased %s after Unhold, want %s", l.Item.URL, pageURL("a.test", 0))
		}
	})
}

// Many workers waiting at once load a few hosts at a time, not every host
// in the file, and all of them end up with a lease.
func TestConcurrentWorkersActivateAFewHostsAtATime(t *testing.T) {
	const hosts, workers = 40, 8
	bubble(t, Options{HostConcurrency: 1}, func(t *testing.T, h *harness) {
		for i := range hosts {
			h.add(pages(fmt.Sprintf("h%02d.test", i), 5)...)
		}
		synctest.Wait()
		h.reopen()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var results []<-chan nextResult
		for range workers {
			results = append(results, asyncNext(ctx, h.f))
		}
		seen := map[string]bool{}
		for _, ch := range results {
			r := <-ch
			if r.err != nil {
				t.Fatalf("Next: %v", r.err)
			}
			if seen[r.lease.Item.Host] {
				t.Fatalf("two leases of %s with HostConcurrency 1", r.lease.Item.Host)
			}
			seen[r.lease.Item.Host] = true
		}
		if n, _ := activeHosts(h.f); n > workers+maxActivating {
			t.Fatalf("%d hosts loaded for %d workers, want at most %d", n, workers, workers+maxActivating)
		}
	})
}

// The dormant host with the most URLs queued is woken first, whatever the
// order the hosts were queued in; equal ones wake in that order.
func TestBiggestDormantHostWakesFirst(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pages("small.test", 2)...)
		h.add(pages("tie1.test", 5)...)
		h.add(pages("big.test", 9)...)
		h.add(pages("tie2.test", 5)...)
		synctest.Wait()
		h.reopen()
		var order []string
		for range 4 {
			l := mustLease(t, h.f)
			order = append(order, l.Item.Host)
			h.f.Started(l, time.Now().Add(time.Hour)) // keeps its host busy: the next lease wakes another
		}
		want := []string{"big.test", "tie1.test", "tie2.test", "small.test"}
		if !slices.Equal(order, want) {
			t.Fatalf("hosts woken in order %v, want %v", order, want)
		}
	})
}

// A dormant host with more than twice the URLs of every active host is woken
// while the workers still have ready hosts: it is the crawl's longest job.
// One that is not that much bigger waits until a worker finds nothing ready.
func TestMuchBiggerDormantHostWakesWhileOthersAreReady(t *testing.T) {
	bubble(t, Options{}, func(t *testing.T, h *harness) {
		h.add(pages("small.test", 6)...)
		synctest.Wait()
		complete(t, h.f, mustLease(t, h.f)) // small.test wakes: 5 left
		h.add(pages("twice.test", 12)...)   // not more than twice 5, by class
		synctest.Wait()
		wantLoaded := func(when string, want ...string) {
			t.Helper()
			synctest.Wait()
			if loaded := loadedHosts(h.f); !slices.Equal(loaded, want) {
				t.Fatalf("loaded %v %s, want %v", loaded, when, want)
			}
		}
		l := mustLease(t, h.f)
		if l.Item.Host != "small.test" {
			t.Fatalf("lease from %s, want small.test, ready and loaded", l.Item.Host)
		}
		complete(t, h.f, l)
		wantLoaded("after a lease with twice.test dormant", "small.test")
		h.add(pages("big.test", 40)...)
		synctest.Wait()
		wantLoaded("before the next lease", "small.test")
		complete(t, h.f, mustLease(t, h.f))
		wantLoaded("after a lease with big.test dormant", "big.test", "small.test")
	})
}

// loadedHosts lists the active hosts with URLs in memory, sorted.
func loadedHosts(f *Frontier) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for name, h := range f.hosts {
		if h.active && len(h.buf) > 0 {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
