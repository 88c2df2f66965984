package frontier

import (
	"breakwater/store"
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// These tests cover a lease of a host that is in flight when the host is
// given up on: FailHost must fail the host's other queued URLs and leave the
// leased one to its own outcome, whichever way the lease ends and whether it
// ends before or after the FailHost commit lands.

const failN = 5 // URLs of a.test; the first is leased

var gaveUp = store.Result{ErrorClass: "gave-up", Error: "host given up"}

// failWithLeaseOut queues failN URLs of a.test, leases the first, calls
// FailHost and ends the lease with end: before the FailHost commit lands
// (the writer held by a gate meanwhile) or after it. It returns once every
// write has landed.
func failWithLeaseOut(t *testing.T, h *harness, beforeCommit bool, end func(*Lease)) *Lease {
	t.Helper()
	h.add(pages("a.test", failN)...)
	synctest.Wait()
	l := mustLease(t, h.f)
	if l.Item.URL != pageURL("a.test", 0) {
		t.Fatalf("leased %s, want %s", l.Item.URL, pageURL("a.test", 0))
	}
	var open func()
	if beforeCommit {
		open = gate(t, h.f)
	}
	if err := h.f.FailHost("a.test", gaveUp); err != nil {
		t.Fatalf("FailHost: %v", err)
	}
	synctest.Wait()
	if !beforeCommit {
		if q := h.queued("a.test"); !slices.Equal(q, []string{l.Item.URL}) {
			t.Fatalf("after FailHost landed, file queue of a.test = %q, want only the leased %s", q, l.Item.URL)
		}
		if c := h.counts(); c != (store.Counts{Seen: failN, Queued: 1, Failed: failN - 1}) {
			t.Fatalf("after FailHost landed, counts = %+v, want 1 queued (the lease), %d failed", c, failN-1)
		}
	}
	wantBlocked(t, h.f) // the lease is out, or FailHost is pending: never exhausted, nothing to offer
	end(l)
	if beforeCommit {
		synctest.Wait()
		wantBlocked(t, h.f) // FailHost is still pending
		open()
	}
	synctest.Wait()
	return l
}

// wantOthersFailed checks that every URL of a.test but the first got the
// template.
func wantOthersFailed(t *testing.T, h *harness) {
	t.Helper()
	results := h.results()
	for _, u := range pages("a.test", failN)[1:] {
		if r := results[u]; r == nil || r.ErrorClass != gaveUp.ErrorClass || r.Host != "a.test" || r.URL != u {
			t.Errorf("result of %s = %+v, want the gave-up template", u, r)
		}
	}
}

var landings = []struct {
	name         string
	beforeCommit bool
}{
	{"before FailHost lands", true},
	{"after FailHost lands", false},
}

func TestFailHostKeepsCompletedLease(t *testing.T) {
	for _, tt := range landings {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, Options{Buffer: 2}, func(t *testing.T, h *harness) {
				l := failWithLeaseOut(t, h, tt.beforeCommit, func(l *Lease) { complete(t, h.f, l) })
				wantExhausted(t, h.f)
				if r := h.results()[l.Item.URL]; r == nil || r.Status != 200 || r.Failed() {
					t.Errorf("result of the leased %s = %+v, want its own 200, not the template", l.Item.URL, r)
				}
				wantOthersFailed(t, h)
				if c := h.counts(); c != (store.Counts{Seen: failN, Fetched: 1, Failed: failN - 1}) {
					t.Fatalf("counts = %+v, want 1 fetched, %d failed, nothing queued", c, failN-1)
				}
			})
		})
	}
}

func TestFailHostKeepsReleasedLease(t *testing.T) {
	for _, tt := range landings {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, Options{Buffer: 2}, func(t *testing.T, h *harness) {
				l := failWithLeaseOut(t, h, tt.beforeCommit, h.f.Release)
				if q := h.queued("a.test"); !slices.Equal(q, []string{l.Item.URL}) {
					t.Fatalf("file queue of a.test = %q, want the released %s", q, l.Item.URL)
				}
				wantOthersFailed(t, h)
				if c := h.counts(); c != (store.Counts{Seen: failN, Queued: 1, Failed: failN - 1}) {
					t.Fatalf("counts = %+v, want the released URL queued, %d failed", c, failN-1)
				}
				again, err := poll(h.f)
				if err != nil {
					t.Fatalf("Next = %v, but %s is queued in the file", err, l.Item.URL)
				}
				if again.Item.URL != l.Item.URL || again.Item.Seq != l.Item.Seq {
					t.Fatalf("leased %s (seq %d), want the released %s (seq %d)",
						again.Item.URL, again.Item.Seq, l.Item.URL, l.Item.Seq)
				}
				complete(t, h.f, again)
				synctest.Wait()
				wantExhausted(t, h.f)
				if c := h.counts(); c != (store.Counts{Seen: failN, Fetched: 1, Failed: failN - 1}) {
					t.Fatalf("counts = %+v, want 1 fetched, %d failed", c, failN-1)
				}
			})
		})
	}
}

func TestFailHostKeepsDeferredLease(t *testing.T) {
	// Longer than the fake time the polls may spend while the gate holds
	// the writer (waitLoads gives up after a minute each): a shorter
	// deferral falls due meanwhile and is rightly promoted back to the queue.
	const wait = time.Hour
	for _, tt := range landings {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, Options{Buffer: 2}, func(t *testing.T, h *harness) {
				var due time.Time
				l := failWithLeaseOut(t, h, tt.beforeCommit, func(l *Lease) {
					it := l.Item
					it.Attempts++
					due = time.Now().Add(wait)
					if err := h.f.Defer(l, it, due); err != nil {
						t.Fatalf("Defer: %v", err)
					}
				})
				if q := h.queued("a.test"); len(q) != 0 {
					t.Fatalf("file queue of a.test = %q, want empty", q)
				}
				if r := h.results()[l.Item.URL]; r != nil {
					t.Fatalf("the deferred %s has result %+v, want none yet", l.Item.URL, r)
				}
				wantOthersFailed(t, h)
				if c := h.counts(); c != (store.Counts{Seen: failN, Deferred: 1, Failed: failN - 1}) {
					t.Fatalf("counts = %+v, want 1 deferred, %d failed", c, failN-1)
				}
				if next, ok, err := h.db.NextDue(); err != nil || !ok || next != due.UnixNano() {
					t.Fatalf("NextDue = %d, %v, %v; want %d (the deferred lease)", next, ok, err, due.UnixNano())
				}
				wantBlocked(t, h.f)
				r := <-asyncNext(t.Context(), h.f)
				if r.err != nil {
					t.Fatalf("Next after the due time: %v", r.err)
				}
				if r.lease.Item.URL != l.Item.URL || r.lease.Item.Attempts != 1 || !r.at.Equal(due) {
					t.Fatalf("Next = %s (attempts %d) at %v, want %s (attempts 1) at its due time %v",
						r.lease.Item.URL, r.lease.Item.Attempts, r.at, l.Item.URL, due)
				}
			})
		})
	}
}

// A host's URLs must not be leased while a FailHost of it is pending: the leases it
// spares are the ones out when it was called, so a lease handed out later
// would be failed under its worker, and its own outcome dropped (Complete of
// a URL no longer queued is ignored). Each case lines up, with MaxBatch 1
// and gates, a commit that makes a URL of a.test leasable after FailHost
// was called but before its commit lands.
func TestNothingLeasedWhileFailHostPending(t *testing.T) {
	tests := []struct {
		name string
		// leaseOK: the URL may be leased, as no FailHost is pending by then
		// (a FailHost called while another is pending is absorbed by it),
		// but its own outcome must be kept.
		leaseOK bool
		// setup calls FailHost and returns the gate behind which it waits,
		// once everything before it is lined up in the writer.
		setup func(t *testing.T, h *harness) (open func())
	}{
		{"host unknown when FailHost is called", false, func(t *testing.T, h *harness) func() {
			openA := gate(t, h.f)
			h.add(pageURL("a.test", 0)) // lands after FailHost is called, before its commit
			openC := gate(t, h.f)
			failHost(t, h)
			openA()
			return openC
		}},
		{"earlier FailHost lands first", true, func(t *testing.T, h *harness) func() {
			h.add(pageURL("a.test", 0))
			synctest.Wait()
			openA := gate(t, h.f)
			failHost(t, h)
			h.add(pageURL("a.test", 1)) // lands between the two FailHosts
			openC := gate(t, h.f)
			failHost(t, h)
			openA()
			return openC
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bubble(t, Options{MaxBatch: 1}, func(t *testing.T, h *harness) {
				openC := tt.setup(t, h)
				synctest.Wait()
				l, err := poll(h.f)
				openC()
				synctest.Wait()
				if l == nil {
					if !errors.Is(err, context.Canceled) {
						t.Fatalf("Next = %v while FailHost is pending, want it to wait", err)
					}
					if !tt.leaseOK {
						wantExhausted(t, h.f)
						return
					}
					// The URL outlived the FailHosts; its load waited behind the gate.
					l = mustLease(t, h.f)
				}
				if !tt.leaseOK {
					t.Errorf("leased %s while a FailHost of its host was pending", l.Item.URL)
				}
				complete(t, h.f, l)
				synctest.Wait()
				if r := h.results()[l.Item.URL]; r == nil || r.Status != 200 {
					t.Errorf("then its 200 was dropped: stored result %+v", r)
				}
			})
		})
	}
}

func failHost(t *testing.T, h *harness) {
	t.Helper()
	if err := h.f.FailHost("a.test", gaveUp); err != nil {
		t.Fatalf("FailHost: %v", err)
	}
}
