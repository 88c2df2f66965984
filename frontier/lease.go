package frontier

import (
	"breakwater/store"
	"slices"
	"time"
)

// Release ends a lease without an attempt: the URL goes back to the front of
// its host's queue and nothing is written.
func (f *Frontier) Release(l *Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.endLocked(l) {
		return
	}
	h := l.host
	h.buf = append([]store.Item{l.Item}, h.buf...)
	f.updateLocked(h)
	f.broadcastLocked()
}

// Started records that the lease's request is starting: its host may start
// another no earlier than next. It ends the host's reservation.
func (f *Frontier) Started(l *Lease, next time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := l.host
	h.reserved = false
	if next.After(h.readyAt) {
		h.readyAt = next
	}
	f.updateLocked(h)
	f.broadcastLocked() // a waiting Next may now take the host or must re-time its wait
}

// Complete ends a lease with its result and the URLs it discovered; the
// queue entry is deleted in the same commit that stores the result.
func (f *Frontier) Complete(l *Lease, r *store.Result, discovered []store.Item) error {
	return f.CompleteWith(l, r, discovered, nil)
}

// CompleteWith is Complete with attach, if not nil, carried by the commit
// that stores the result (see store.Batch.Attach and Options.Archive), and
// the operations also adds (the page's links) in that commit's batch.
func (f *Frontier) CompleteWith(l *Lease, r *store.Result, discovered []store.Item, attach any, also ...func(*store.Batch)) error {
	it := l.Item
	rec := store.EncodeResult(it, r)
	entries := encodeQueued(discovered)
	h := l.host
	h.writes.Add(1)
	err := f.writer.submit(1+len(discovered), func(b *store.Batch) {
		h.writes.Add(-1)
		if attach != nil {
			b.Attach(attach)
		}
		b.CompleteRecord(it, rec)
		for i, d := range discovered {
			b.AddEncoded(d, entries[i])
		}
		for _, add := range also {
			add(b)
		}
	})
	if err != nil {
		h.writes.Add(-1) // never queued
	}
	f.endAfterWrite(l)
	return err
}

// Defer ends a lease by parking its URL until due, with the item as given
// (the caller updates Attempts when the URL was attempted).
func (f *Frontier) Defer(l *Lease, it store.Item, due time.Time) error {
	h := l.host
	h.writes.Add(1)
	err := f.writer.submit(1, func(b *store.Batch) {
		h.writes.Add(-1)
		b.Defer(it, due)
	})
	if err != nil {
		h.writes.Add(-1) // never queued
	}
	f.endAfterWrite(l)
	return err
}

// endAfterWrite ends a lease after its write was submitted: ending it first would
// let a concurrent Next see nothing leased and nothing pending, and report
// ErrExhausted while the lease's discovered URLs are on their way.
func (f *Frontier) endAfterWrite(l *Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.endLocked(l) {
		f.updateLocked(l.host)
		f.broadcastLocked() // the write may have committed already
		if f.leased == 0 && f.starved() {
			f.writer.hurry() // a lingering batch now holds all there is to wait for
		}
	}
}

func (f *Frontier) endLocked(l *Lease) bool {
	if l.done {
		return false
	}
	l.done = true
	l.host.inflight--
	if i := slices.Index(l.host.leased, l.Item.Seq); i >= 0 {
		l.host.leased = slices.Delete(l.host.leased, i, i+1)
	}
	l.host.reserved = false
	f.leased--
	return true
}

// Park keeps host from being offered before until (a breaker rest, a
// Retry-After, a robots.txt retry).
func (f *Frontier) Park(host string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil && until.After(h.readyAt) {
		h.readyAt = until
		f.updateLocked(h)
		f.broadcastLocked()
	}
}

// Unpark makes a parked host eligible from now on: the reason it waited for
// is gone (a probe reported). Politeness is not affected: the caller's
// rate check still applies.
func (f *Frontier) Unpark(host string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil && h.readyAt.After(now) {
		h.readyAt = now
		f.updateLocked(h)
		f.broadcastLocked()
	}
}

// Hold keeps host from being offered until Unhold (a paused host, an open
// case). Its URLs stay queued; it counts in HeldWork.
func (f *Frontier) Hold(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.host(host)
	h.held = true
	f.updateLocked(h)
	f.broadcastLocked()
}

// Unhold makes a held host eligible again, from now.
func (f *Frontier) Unhold(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil && h.held {
		h.held = false
		h.readyAt = f.opts.Now()
		f.dormantLocked(h)
		f.updateLocked(h)
		f.broadcastLocked()
	}
}

// FailHost records every queued URL of host as failed with the template
// (for a host given up on) and drops them from memory. Leases in flight for
// the host are not affected: their own outcome is recorded when they end.
func (f *Frontier) FailHost(host string, template store.Result) error {
	f.mu.Lock()
	h := f.host(host) // kept until the commit lands, so URLs added meanwhile wait too
	if h.failing {    // the pending one fails whatever is queued when it lands
		f.mu.Unlock()
		return nil
	}
	h.failing = true
	inFlight := slices.Clone(h.leased)
	f.updateLocked(h)
	f.mu.Unlock()
	return f.writer.submit(1, func(b *store.Batch) { b.FailHost(host, template, inFlight) })
}
