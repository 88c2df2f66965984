package breaker

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Ticket identifies one admitted request. Pass it back to Report unchanged.
type Ticket struct {
	Host string
	// Generation is the breaker generation the request was admitted under;
	// zero when the host had no entry.
	Generation uint64
	// Probe is set on the single request a half-open circuit lets through.
	Probe bool
	// At is when the request was admitted.
	At time.Time
}

// Decision is Admit's answer.
type Decision struct {
	Allowed bool
	// Ticket is valid only when Allowed.
	Ticket Ticket
	// RetryAt is when asking again may succeed: the end of the rest, or the
	// deadline of the outstanding probe. Zero for a held host, which waits
	// for a person (and for an allowed request).
	RetryAt time.Time
	// State and Hold describe the circuit after the decision.
	State State
	Hold  Hold
	// DownSince is the breaker's DownSince for a refused, unheld host: with
	// it a caller knows when the host falls due to be given up on.
	DownSince time.Time
}

// GiveUpAt is when a refused host falls due to be given up on once it has
// been down for after (see Registry.GiveUp); false when the decision has no
// DownSince: an allowed request, or a held host.
func (d Decision) GiveUpAt(after time.Duration) (time.Time, bool) {
	if d.DownSince.IsZero() {
		return time.Time{}, false
	}
	return d.DownSince.Add(after), true
}

// Transition records one change of a host's State or Hold.
type Transition struct {
	At       time.Time
	Host     string
	From, To State
	// Hold is the hold after the transition.
	Hold Hold
	// Class and Detail describe the outcome that caused the transition
	// (status or error text); empty for time, pauses and releases.
	Class  Class
	Detail string
	// Reason is the pause reason (for a Pause), the case's detail (for a
	// refusal), or "unpaused" / "case resolved" (for a release).
	Reason string
	// Generation is the breaker's generation after the transition; the
	// callback receives one host's transitions in increasing Generation.
	Generation uint64
}

// entry is a host with trouble. Absent hosts are closed and clean.
type entry struct {
	b Breaker
	// probing is set while the probe admitted at probeAt is unreported and
	// its deadline has not passed. Transitions clear it.
	probing bool
	probeAt time.Time
}

// Registry holds the breakers of every troubled host of one process. It is
// safe for concurrent use; see the package doc for its rules.
type Registry struct {
	cfg Config
	on  func(Transition)

	mu    sync.Mutex
	hosts map[string]*entry
	// floor exceeds every generation an evicted entry reached; new entries
	// start there so that no old ticket can match their later generations.
	floor   uint64
	dirty   map[string]struct{}
	removed map[string]struct{}
	// pending holds committed transitions not yet handed to on, in commit
	// order; delivering is set while a goroutine is handing them over.
	pending    []Transition
	delivering bool
}

// NewRegistry returns an empty registry using cfg.WithDefaults().
// onTransition, if not nil, is called for every transition, in the order
// they were committed, never concurrently with itself and never under the
// registry's lock (see Concurrency in the package doc).
func NewRegistry(cfg Config, onTransition func(Transition)) *Registry {
	return &Registry{
		cfg:     cfg.WithDefaults(),
		on:      onTransition,
		hosts:   make(map[string]*entry),
		floor:   1,
		dirty:   make(map[string]struct{}),
		removed: make(map[string]struct{}),
	}
}

// Admit decides whether a request to host may start at now. An absent or
// open host costs one map lookup.
func (r *Registry) Admit(host string, now time.Time) Decision {
	r.mu.Lock()
	e := r.hosts[host]
	if e == nil {
		r.mu.Unlock()
		return Decision{Allowed: true, Ticket: Ticket{Host: host, At: now}}
	}
	d, tr, fire := r.admit(host, e, now)
	if fire {
		r.queue(tr)
	}
	r.unlock()
	return d
}

func (r *Registry) admit(host string, e *entry, now time.Time) (Decision, Transition, bool) {
	var tr Transition
	before := e.b
	fire := !r.cfg.Disabled && e.b.Advance(now)
	if fire {
		tr = r.commit(host, e, before, now, "", "", "")
	}
	d := Decision{State: e.b.State, Hold: e.b.Hold, Ticket: Ticket{Host: host}}
	switch {
	case e.b.Hold != NoHold:
	case e.b.State == Closed || r.cfg.Disabled:
		d.Allowed = true
		d.Ticket = Ticket{Host: host, Generation: e.b.Generation, At: now}
	case e.b.State == Open:
		d.RetryAt = e.b.ReadyAt()
	case e.b.State == HalfOpen:
		r.admitProbe(host, e, &d, now)
	}
	if !d.Allowed && e.b.Hold == NoHold {
		d.DownSince = e.b.DownSince
	}
	return d, tr, fire
}

// admitProbe is the single-flight gate: one probe at a time, and a probe
// that never reports stops blocking at its deadline so that no host can be
// stuck half-open.
func (r *Registry) admitProbe(host string, e *entry, d *Decision, now time.Time) {
	deadline := e.probeAt.Add(r.cfg.ProbeTimeout)
	if e.probing && now.Before(deadline) {
		d.RetryAt = deadline
		return
	}
	e.probing, e.probeAt = true, now
	d.Allowed = true
	d.Ticket = Ticket{Host: host, Generation: e.b.Generation, Probe: true, At: now}
}

// Report applies the outcome of a request admitted with t, unless t is
// stale (see "Stale tickets" in the package doc; Refused always counts),
// and frees the probe gate if t holds it. With Config.Disabled only Refused
// counts: it still opens a case.
func (r *Registry) Report(t Ticket, c Class, detail string, now time.Time) {
	if r.cfg.Disabled && c != Refused {
		return
	}
	r.mu.Lock()
	tr, fire := r.report(t, c, detail, now)
	if fire {
		r.queue(tr)
	}
	r.unlock()
}

// Cancel gives back a ticket whose request was never sent (the host was
// not ready after all, or the request was cut short before it reached the
// host): it frees the probe gate if t holds it, and changes nothing else.
// Reporting a neutral class instead would say the host answered.
// It reports whether t held the gate, so that the caller can wake the URLs
// waiting on it.
func (r *Registry) Cancel(t Ticket) (freedGate bool) {
	if !t.Probe {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.hosts[t.Host]
	if e == nil || !e.probing || t.Generation != e.b.Generation || !t.At.Equal(e.probeAt) {
		return false
	}
	e.probing = false
	r.evictIfClean(t.Host, e)
	return true
}

func (r *Registry) report(t Ticket, c Class, detail string, now time.Time) (Transition, bool) {
	e := r.hosts[t.Host]
	switch {
	case e == nil:
		// An absent host is closed and clean: only a non-probe failure or a
		// refusal changes it.
		if c != Refused && (c != Transient || t.Probe) {
			return Transition{}, false
		}
		e = r.newEntry(t.Host)
	case c != Refused && !e.accepts(t):
		return Transition{}, false
	}
	if t.Probe && e.probing && t.Generation == e.b.Generation && t.At.Equal(e.probeAt) {
		e.probing = false
	}
	before := e.b
	moved := e.b.Record(r.cfg, c, detail, now)
	tr := r.commit(t.Host, e, before, now, c, detail, "")
	return tr, moved
}

// accepts reports whether an outcome of t may change e (Refused aside).
// Half-open takes only probes of its own generation; closed takes every
// non-probe ticket, because each closed period began with the host absent
// (a close leaves it clean) and absence forgets generations; open takes
// nothing, as nothing was admitted under its generation.
func (e *entry) accepts(t Ticket) bool {
	switch e.b.State {
	case HalfOpen:
		return t.Probe && t.Generation == e.b.Generation
	case Closed:
		return !t.Probe
	}
	return false
}

// Pause force-opens host with an operator hold, creating its entry if
// needed. Time and successes never close it; only Unpause releases it. A
// host held by a case keeps its case and gains the pause (a transition);
// pausing a paused host only replaces the reason.
func (r *Registry) Pause(host, reason string, now time.Time) {
	r.mu.Lock()
	e := r.hosts[host]
	if e == nil {
		e = r.newEntry(host)
	}
	before := e.b
	moved := e.b.pause(r.cfg, reason, now)
	tr := r.commit(host, e, before, now, "", "", reason)
	if moved {
		r.queue(tr)
	}
	r.unlock()
}

// Unpause releases an operator pause, leaving any case: the host goes
// half-open only if no case holds it. For a host that is not paused it
// returns an error wrapping ErrCaseOpen if a case holds it, else
// ErrNotPaused.
func (r *Registry) Unpause(host string, now time.Time) error {
	return r.release(host, Paused, "unpaused", now)
}

// ResolveCase releases a case hold, leaving any pause: the host goes
// half-open only if it is not paused. For a host without a case it returns
// an error wrapping ErrNoCase.
func (r *Registry) ResolveCase(host string, now time.Time) error {
	return r.release(host, Case, "case resolved", now)
}

func (r *Registry) release(host string, want Hold, reason string, now time.Time) error {
	r.mu.Lock()
	e := r.hosts[host]
	if e == nil || !e.b.Hold.Has(want) {
		var have Hold
		if e != nil {
			have = e.b.Hold
		}
		r.mu.Unlock()
		return releaseError(host, want, have)
	}
	before := e.b
	e.b.unhold(want, now)
	r.queue(r.commit(host, e, before, now, "", "", reason))
	r.unlock()
	return nil
}

func releaseError(host string, want, have Hold) error {
	switch {
	case want == Case:
		return fmt.Errorf("resolve case for %s: %w", host, ErrNoCase)
	case have.Has(Case):
		return fmt.Errorf("unpause %s: %w", host, ErrCaseOpen)
	}
	return fmt.Errorf("unpause %s: %w", host, ErrNotPaused)
}

// GiveUp reports whether host has been down, unheld, for at least after:
// it is open or half-open without a hold and no probe streak has closed it
// since DownSince. It is always false with Config.Disabled: with the
// automatic breaker off no host is down by its account.
func (r *Registry) GiveUp(host string, after time.Duration, now time.Time) bool {
	if r.cfg.Disabled {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts[host].dueToGiveUp(after, now)
}

// DueToGiveUp returns the hosts GiveUp reports true for, in no order. It
// copies nothing else: a crawl of many failing hosts asks it often.
func (r *Registry) DueToGiveUp(after time.Duration, now time.Time) []string {
	if r.cfg.Disabled {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var due []string
	for host, e := range r.hosts {
		if e.dueToGiveUp(after, now) {
			due = append(due, host)
		}
	}
	return due
}

func (e *entry) dueToGiveUp(after time.Duration, now time.Time) bool {
	if e == nil || e.b.State == Closed || e.b.Hold != NoHold || e.b.DownSince.IsZero() {
		return false
	}
	return now.Sub(e.b.DownSince) >= after
}

// ReprieveReason is the Transition.Reason of a host sent to half-open by
// Reprieve.
const ReprieveReason = "local fault cleared"

// Reprieve ends an incident of our own making (the crawl's local-fault
// guard: our network, not the hosts, failed) that began at since, so that
// it counts against no host. Every unheld host whose circuit went down at
// or after since goes to half-open with the configured rest (a probe, not a
// full rest, decides it) and its down clock restarted at now; every other
// unheld host that is down has the incident's length, now - since, taken
// off its down time, as Resumed does for time the crawler did not run; a
// closed host's count of consecutive failures starts again, since the
// failures that ended it were ours. Held hosts wait for a person and are
// left alone. It returns the hosts sent to half-open, sorted by host.
func (r *Registry) Reprieve(since, now time.Time) []Reprieved {
	if r.cfg.Disabled || now.Before(since) {
		return nil
	}
	r.mu.Lock()
	var reprieved []Reprieved
	for host, e := range r.hosts {
		if e.b.Hold != NoHold {
			continue
		}
		before := e.b
		switch {
		case e.b.State == Closed:
			e.b.Failures = 0
		case e.b.DownSince.IsZero():
		case !e.b.DownSince.Before(since):
			if e.b.State == Open {
				reprieved = append(reprieved, Reprieved{Host: host, Opened: e.b.Generation})
				e.b.State, e.b.ProbeSuccesses = HalfOpen, 0
				e.b.Generation++
			}
			e.b.Rest, e.b.Level, e.b.DownSince = r.cfg.Rest, 0, now
		default:
			if e.b.DownSince = e.b.DownSince.Add(now.Sub(since)); e.b.DownSince.After(now) {
				e.b.DownSince = now
			}
		}
		if e.b == before {
			continue
		}
		tr := r.commit(host, e, before, now, "", "", ReprieveReason)
		if tr.From != tr.To {
			r.queue(tr)
		}
	}
	r.unlock()
	slices.SortFunc(reprieved, func(a, b Reprieved) int { return strings.Compare(a.Host, b.Host) })
	return reprieved
}

// Reprieved is a host Reprieve sent to half-open. Opened is the
// generation of the open circuit it ended: a copy of the breaker kept
// elsewhere (a fleet's shared one) is the same circuit only while it has
// that generation.
type Reprieved struct {
	Host   string
	Opened uint64
}

// Get returns host's breaker and whether it has an entry. A host without
// one is closed and clean (the zero Breaker).
func (r *Registry) Get(host string) (Breaker, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.hosts[host]
	if e == nil {
		return Breaker{}, false
	}
	return e.b, true
}

// Snapshot returns a copy of every entry.
func (r *Registry) Snapshot() map[string]Breaker {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]Breaker, len(r.hosts))
	for h, e := range r.hosts {
		out[h] = e.b
	}
	return out
}

// Load restores a persisted breaker for host without firing a transition or
// marking it dirty. It is meant for startup, before requests are admitted.
// A clean breaker removes the entry; a held breaker is forced Open; a
// missing rest takes the configured one; a pause stored before holds were
// independent (Hold Paused, its reason in HoldReason) has the reason moved
// to PauseReason. The probe gate starts free.
func (r *Registry) Load(host string, b Breaker) {
	if b.Hold != NoHold {
		b.State = Open
	}
	if b.Hold == Paused && b.PauseReason == "" && b.HoldReason != "" {
		b.PauseReason, b.HoldReason = b.HoldReason, ""
	}
	if b.State != Closed && b.Rest <= 0 {
		b.Rest = r.cfg.Rest
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old := r.hosts[host]; old != nil {
		r.floor = max(r.floor, old.b.Generation+1)
	}
	if b.Clean() {
		delete(r.hosts, host)
		delete(r.dirty, host)
		return
	}
	r.hosts[host] = &entry{b: b}
}

// TakeDirty returns the hosts whose breaker changed since the last call
// (with their current state) and the hosts whose entry was evicted (now
// closed and clean: delete them from the store), and clears both sets.
// Both results are nil when nothing changed; removed is sorted. Until it is
// called the sets hold at most one name per host that had trouble.
func (r *Registry) TakeDirty() (changed map[string]Breaker, removed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dirty) > 0 {
		changed = make(map[string]Breaker, len(r.dirty))
		for h := range r.dirty {
			changed[h] = r.hosts[h].b
		}
		clear(r.dirty)
	}
	return changed, r.takeRemovedLocked()
}

// TakeDirtyHosts is TakeDirty with the changed hosts' names alone, sorted:
// a caller that writes them later reads their state then (Visit), which
// is at least as new, instead of holding a copy of every changed breaker
// meanwhile.
func (r *Registry) TakeDirtyHosts() (changed, removed []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.dirty) > 0 {
		changed = make([]string, 0, len(r.dirty))
		for h := range r.dirty {
			changed = append(changed, h)
		}
		slices.Sort(changed)
		clear(r.dirty)
	}
	return changed, r.takeRemovedLocked()
}

// Visit calls fn with each of hosts, its breaker and whether it has an
// entry (see Get), under one hold of the registry's lock: fn must not call
// the registry.
func (r *Registry) Visit(hosts []string, fn func(host string, b Breaker, ok bool)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hosts {
		if e := r.hosts[h]; e != nil {
			fn(h, e.b, true)
		} else {
			fn(h, Breaker{}, false)
		}
	}
}

func (r *Registry) takeRemovedLocked() (removed []string) {
	if len(r.removed) > 0 {
		removed = make([]string, 0, len(r.removed))
		for h := range r.removed {
			removed = append(removed, h)
		}
		slices.Sort(removed)
		clear(r.removed)
	}
	return removed
}

func (r *Registry) newEntry(host string) *entry {
	e := &entry{b: Breaker{Generation: r.floor}}
	r.hosts[host] = e
	return e
}

// commit books a change of e.b from before: a new generation frees the
// probe gate, the host becomes dirty, and a clean entry is evicted. It
// returns the Transition describing it (meaningful only when State or
// Hold changed).
func (r *Registry) commit(host string, e *entry, before Breaker, now time.Time, c Class, detail, reason string) Transition {
	if e.b.Generation != before.Generation {
		e.probing = false
	}
	if e.b != before {
		r.dirty[host] = struct{}{}
		delete(r.removed, host)
	}
	r.evictIfClean(host, e)
	switch {
	case reason != "":
	case e.b.Hold.Has(Case):
		reason = e.b.HoldReason
	case e.b.Hold.Has(Paused):
		reason = e.b.PauseReason
	}
	return Transition{
		At: now, Host: host, From: before.State, To: e.b.State, Hold: e.b.Hold,
		Class: c, Detail: detail, Reason: reason, Generation: e.b.Generation,
	}
}

func (r *Registry) evictIfClean(host string, e *entry) {
	if !e.b.Clean() || e.probing {
		return
	}
	delete(r.hosts, host)
	r.floor = max(r.floor, e.b.Generation+1)
	r.removed[host] = struct{}{}
	delete(r.dirty, host)
}

// queue books a committed transition for delivery. r.mu must be held, and
// the caller must release it with unlock.
func (r *Registry) queue(tr Transition) {
	if r.on != nil {
		r.pending = append(r.pending, tr)
	}
}

// unlock releases r.mu, first handing every pending transition to the
// callback, one at a time and with r.mu released during each call, unless
// another goroutine is already doing so: that one delivers ours too, after
// those committed before it. So transitions reach the callback in commit
// order and one at a time, and a caller with no competition has its
// transition delivered before it returns. A callback that calls back into
// the registry finds a delivery under way and returns at once; its own
// transitions follow when the callback returns.
func (r *Registry) unlock() {
	if r.delivering || len(r.pending) == 0 {
		r.mu.Unlock()
		return
	}
	r.delivering = true
	locked := true
	defer func() { // also if the callback panics
		if !locked {
			r.mu.Lock()
		}
		r.delivering = false
		r.mu.Unlock()
	}()
	for len(r.pending) > 0 {
		tr := r.pending[0]
		r.pending[0] = Transition{}
		r.pending = r.pending[1:]
		r.mu.Unlock()
		locked = false
		r.on(tr)
		r.mu.Lock()
		locked = true
	}
	r.pending = nil
}
