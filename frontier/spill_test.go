package frontier

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// residentHosts counts the hosts the scheduler holds in memory, and the
// dormant ones among them.
func residentHosts(f *Frontier) (hosts, dormant int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.hosts), f.dormant.Len()
}

// A queue of many hosts holds at most MaxDormant dormant hosts in memory,
// whether the URLs arrive through Add or are found in the file on Open,
// and still hands out every URL exactly once.
func TestDormantHostsInMemoryAreCapped(t *testing.T) {
	const hosts, perHost, maxDormant = 600, 2, 32
	bubble(t, Options{MaxDormant: maxDormant, HostConcurrency: 1}, func(t *testing.T, h *harness) {
		var want []string
		var batch []string
		for i := range hosts {
			batch = append(batch, pages(fmt.Sprintf("h%04d.test", i), perHost)...)
			if len(batch) >= 200 {
				h.add(batch...)
				batch = nil
			}
		}
		h.add(batch...)
		for i := range hosts {
			want = append(want, pages(fmt.Sprintf("h%04d.test", i), perHost)...)
		}
		synctest.Wait()
		if n, d := residentHosts(h.f); d > maxDormant || n > maxDormant {
			t.Fatalf("after Add: %d hosts in memory, %d dormant; want at most %d", n, d, maxDormant)
		}
		var got []string
		peak := 0
		for len(got) < hosts*perHost {
			if len(got) == hosts*perHost/2 {
				h.reopen()
				synctest.Wait()
				if n, d := residentHosts(h.f); d > maxDormant || n > maxDormant {
					t.Fatalf("after Open: %d hosts in memory, %d dormant; want at most %d", n, d, maxDormant)
				}
			}
			l := mustLease(t, h.f)
			got = append(got, l.Item.URL)
			h.f.Started(l, time.Now())
			complete(t, h.f, l)
			synctest.Wait()
			n, d := residentHosts(h.f)
			if d > maxDormant {
				t.Fatalf("after %d leases: %d dormant hosts in memory, want at most %d", len(got), d, maxDormant)
			}
			peak = max(peak, n)
			if len(got)%100 == 0 {
				time.Sleep(6 * time.Second) // the writer's prune forgets drained hosts
				synctest.Wait()
			}
		}
		// Drained hosts wait for the prune, every 5 s: a few hundred leases'
		// worth of them at most on top of the dormant ones.
		if limit := maxDormant + 2*100/perHost + 8; peak > limit {
			t.Errorf("%d hosts in memory at the peak, want at most %d", peak, limit)
		}
		wantExhausted(t, h.f)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("leased %d URLs, want each of the %d queued exactly once", len(got), len(want))
		}
	})
}

// The hosts left in the file are brought in largest first.
func TestSpilledHostsComeBackLargestFirst(t *testing.T) {
	bubble(t, Options{MaxDormant: 1}, func(t *testing.T, h *harness) {
		h.add(pages("first.test", 1)...)
		synctest.Wait()
		h.add(append(append(pages("small.test", 2), pages("big.test", 6)...), pages("mid.test", 4)...)...)
		synctest.Wait()
		if n, _ := residentHosts(h.f); n != 1 {
			t.Fatalf("%d hosts in memory, want 1 (MaxDormant)", n)
		}
		var order []string
		for range 4 {
			l := mustLease(t, h.f)
			order = append(order, l.Item.Host)
			h.f.Started(l, time.Now().Add(time.Hour)) // keeps its host busy: the next lease wakes another
		}
		want := []string{"first.test", "big.test", "mid.test", "small.test"}
		if !slices.Equal(order, want) {
			t.Fatalf("hosts woken in order %v, want %v", order, want)
		}
	})
}

// A held host that was left in the file still counts as held work, its
// URLs in the file, and releases them all when unheld.
func TestHoldOfSpilledHostCountsItsURLs(t *testing.T) {
	bubble(t, Options{MaxDormant: 1}, func(t *testing.T, h *harness) {
		h.add(pages("a.test", 1)...)
		synctest.Wait()
		h.add(pages("b.test", 3)...)
		synctest.Wait()
		h.f.Hold("b.test")
		first := mustLease(t, h.f) // a.test; wakes the scan that counts b.test
		complete(t, h.f, first)
		synctest.Wait()
		wantExhausted(t, h.f)
		if n := h.f.HeldWork(); n != 1 {
			t.Fatalf("HeldWork = %d, want 1 (b.test, its 3 URLs in the file)", n)
		}
		h.f.Unhold("b.test")
		for range 3 {
			l := mustLease(t, h.f)
			if l.Item.Host != "b.test" {
				t.Fatalf("leased %s, want b.test's URLs", l.Item.URL)
			}
			complete(t, h.f, l)
			synctest.Wait()
		}
		wantExhausted(t, h.f)
	})
}
