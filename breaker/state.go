package breaker

import (
	"strconv"
	"time"
)

// State is where a host's circuit stands. The zero value is Closed, so a
// host the registry has never seen reads as healthy.
type State uint8

// The three circuit states.
const (
	// Closed admits every request and counts consecutive transient failures.
	Closed State = iota
	// Open admits nothing until its rest has passed (or, when held, until released).
	Open
	// HalfOpen admits one probe at a time; enough probe successes close it.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// Hold says why an open circuit must not close on its own. It is a set of
// independent flags: a host may be paused by an operator and held by a
// case at once (Paused|Case), and releasing one leaves the other.
type Hold uint8

// The holds. A held breaker is always Open, never probed and never moved to
// half-open by time; only Registry.Unpause (for Paused) and
// Registry.ResolveCase (for Case) release them, and the circuit goes
// half-open when the last is released. The values are those stored before
// holds became flags, so stored breakers read the same.
const (
	// NoHold is an ordinary breaker.
	NoHold Hold = 0
	// Paused is an operator's force-open.
	Paused Hold = 1
	// Case is a refusal that named the crawler: a human must resolve it.
	Case Hold = 2
)

// Has reports whether h includes every hold in x.
func (h Hold) Has(x Hold) bool { return h&x == x }

// String returns "", "paused", "case" or, for both, "case+paused".
func (h Hold) String() string {
	switch h {
	case NoHold:
		return ""
	case Paused:
		return "paused"
	case Case:
		return "case"
	case Case | Paused:
		return "case+paused"
	}
	return "Hold(" + strconv.Itoa(int(h)) + ")"
}

// Defaults used by Config.WithDefaults. Eight failures and five minutes of
// rest are the reference's starting point for general crawling.
const (
	DefaultThreshold    = 8
	DefaultRest         = 5 * time.Minute
	DefaultProbes       = 2
	DefaultProbeTimeout = 45 * time.Second
)

// Config tunes every breaker of a registry. A zero or negative field means
// its default (see WithDefaults).
type Config struct {
	// Threshold is the number of consecutive transient failures that opens
	// a closed circuit. Default 8.
	Threshold int
	// Rest is how long an open circuit stays shut before a probe. Default 5m.
	Rest time.Duration
	// RestMax caps the rest when failed probes double it. Default Rest,
	// which turns escalation off; a value below Rest is raised to Rest.
	RestMax time.Duration
	// Probes is the number of consecutive probe successes that closes a
	// half-open circuit. Default 2: one success proves little.
	Probes int
	// ProbeTimeout is how long a probe may stay unreported before the gate
	// lets another probe through. It should be the request timeout plus
	// slack. Default 45s.
	ProbeTimeout time.Duration
	// Disabled turns the automatic breaker off, for comparison runs: Admit
	// allows every host that is not held, Report ignores every class but
	// Refused and GiveUp is always false. Holds still apply: a Refused
	// report still opens a case, and pauses and cases are released as
	// when enabled.
	Disabled bool
}

// WithDefaults returns c with every zero or negative field set to its default.
func (c Config) WithDefaults() Config {
	if c.Threshold <= 0 {
		c.Threshold = DefaultThreshold
	}
	if c.Rest <= 0 {
		c.Rest = DefaultRest
	}
	if c.RestMax < c.Rest {
		c.RestMax = c.Rest
	}
	if c.Probes <= 0 {
		c.Probes = DefaultProbes
	}
	if c.ProbeTimeout <= 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	return c
}

// Breaker is the circuit of one host. It is a plain value with exported
// fields so that another package can persist and restore it; its methods
// are pure functions of (breaker, outcome, now). Which outcomes reach it is
// the Registry's business (generations, probe gate).
type Breaker struct {
	State State
	// Failures counts consecutive transient failures while closed.
	Failures int
	// ProbeSuccesses counts consecutive probe successes while half-open.
	ProbeSuccesses int
	// OpenedAt is the start of the current rest.
	OpenedAt time.Time
	// Rest is the length of the current rest; failed probes may double it.
	Rest time.Duration
	// Level is the number of doublings applied to Rest since the last close.
	Level int
	// DownSince is, while the circuit is not closed, when the host was last
	// known to answer: set when a closed circuit opens, restarted when a
	// hold is released and when a probe is answered with Throttled or
	// Permanent; zero while closed. GiveUp reads it.
	DownSince time.Time
	// Generation increases by one on every transition (a change of State
	// or Hold); outcomes of requests admitted under another generation are
	// stale.
	Generation uint64
	// Hold is the set of holds keeping the circuit open; see Hold.
	Hold Hold
	// HoldReason is the case's refusal detail while Hold has Case, else
	// empty. (Breakers stored before holds were independent kept a pause's
	// reason here; Registry.Load moves it to PauseReason.)
	HoldReason string
	// PauseReason is the operator's reason while Hold has Paused, else empty.
	PauseReason string
}

// Clean reports whether b is indistinguishable from a host never seen:
// closed, no failures counted, no hold. The registry keeps no entry for it.
func (b Breaker) Clean() bool {
	return b.State == Closed && b.Failures == 0 && b.Hold == NoHold
}

// ReadyAt returns when a resting breaker may move to half-open. It is zero
// unless b is Open and unheld: held breakers wait for a person, not a time.
func (b Breaker) ReadyAt() time.Time {
	if b.State != Open || b.Hold != NoHold {
		return time.Time{}
	}
	return b.OpenedAt.Add(b.Rest)
}

// Resumed returns b as restored at now by a run that follows one last known
// to be running at lastRunning (zero if unknown), so that the time the
// crawler was not running does not count as the host's downtime. For an
// unheld Open or HalfOpen breaker with a DownSince, the down time already
// spent while running, lastRunning - DownSince (none if lastRunning is zero
// or not after DownSince; lastRunning after now counts as now), is kept:
// DownSince becomes now - spent. OpenedAt and Rest are left alone: a rest
// passes in wall time, so a host that rested while the crawler was stopped
// may be probed at once. Closed and held breakers are returned unchanged.
// Resumed is not a transition: Generation is unchanged.
func (b Breaker) Resumed(lastRunning, now time.Time) Breaker {
	if (b.State != Open && b.State != HalfOpen) || b.Hold != NoHold || b.DownSince.IsZero() {
		return b
	}
	var spent time.Duration
	if !lastRunning.IsZero() {
		if lastRunning.After(now) {
			lastRunning = now
		}
		spent = max(lastRunning.Sub(b.DownSince), 0)
	}
	b.DownSince = now.Add(-spent)
	return b
}

// Advance moves an unheld Open breaker whose rest has ended (now >=
// OpenedAt+Rest) to HalfOpen and reports whether it did.
func (b *Breaker) Advance(now time.Time) bool {
	if b.State != Open || b.Hold != NoHold || now.Before(b.ReadyAt()) {
		return false
	}
	b.State = HalfOpen
	b.ProbeSuccesses = 0
	b.Generation++
	return true
}

// Record applies one classified outcome and reports whether it caused a
// transition. While half-open the outcome is taken as a probe's. Neutral
// classes (and unknown ones) change no counter or state, but a half-open
// probe answered with Throttled or Permanent restarts DownSince; Refused
// opens and holds the circuit in any state; an Open breaker ignores
// everything else.
func (b *Breaker) Record(cfg Config, c Class, detail string, now time.Time) bool {
	cfg = cfg.WithDefaults()
	switch {
	case c == Refused:
		return b.refuse(cfg, detail, now)
	case b.State == Closed:
		return b.recordClosed(cfg, c, now)
	case b.State == HalfOpen:
		return b.recordProbe(cfg, c, now)
	}
	return false
}

func (b *Breaker) recordClosed(cfg Config, c Class, now time.Time) bool {
	switch c {
	case OK:
		b.Failures = 0
	case Transient:
		b.Failures++
		if b.Failures >= cfg.Threshold {
			b.open(cfg, now)
			return true
		}
	}
	return false
}

func (b *Breaker) recordProbe(cfg Config, c Class, now time.Time) bool {
	switch c {
	case OK:
		b.ProbeSuccesses++
		if b.ProbeSuccesses >= cfg.Probes {
			b.close(cfg)
			return true
		}
	case Transient:
		b.escalate(cfg)
		b.open(cfg, now)
		return true
	case Throttled, Permanent:
		// The host answered (a 429, a 404): it is alive, so the down
		// clock restarts. Nothing else changes.
		b.DownSince = now
	}
	return false
}

// refuse adds a case hold, keeping any pause. A case already open keeps
// its first detail: the person resolving it needs the original message.
func (b *Breaker) refuse(cfg Config, detail string, now time.Time) bool {
	if b.Hold.Has(Case) {
		return false
	}
	b.addHold(cfg, Case, now)
	b.HoldReason = detail
	return true
}

// pause adds an operator's hold, keeping any case. Pausing a paused host
// only replaces the reason, which is no transition.
func (b *Breaker) pause(cfg Config, reason string, now time.Time) bool {
	moved := !b.Hold.Has(Paused)
	if moved {
		b.addHold(cfg, Paused, now)
	}
	b.PauseReason = reason
	return moved
}

// addHold adds h to the holds. An unheld circuit opens; a held one is Open
// already and only gains the hold, a transition all the same.
func (b *Breaker) addHold(cfg Config, h Hold, now time.Time) {
	if b.Hold == NoHold {
		b.open(cfg, now)
	} else {
		b.Generation++
	}
	b.Hold |= h
}

// unhold releases the single hold h (Paused or Case) and its reason, and
// reports whether b had it. The circuit stays Open while another hold
// remains; releasing the last goes straight to half-open and restarts the
// down clock: time spent held says nothing about the host's health and may
// exceed any give-up window.
func (b *Breaker) unhold(h Hold, now time.Time) bool {
	if h == NoHold || !b.Hold.Has(h) {
		return false
	}
	b.Hold &^= h
	if h.Has(Case) {
		b.HoldReason = ""
	}
	if h.Has(Paused) {
		b.PauseReason = ""
	}
	if b.Hold == NoHold {
		b.State = HalfOpen
		b.ProbeSuccesses = 0
		b.DownSince = now
	}
	b.Generation++
	return true
}

// open starts a rest. Opening from closed starts the down clock and the
// rest ladder afresh; reopening from half-open keeps the escalated rest.
func (b *Breaker) open(cfg Config, now time.Time) {
	if b.State == Closed {
		b.DownSince = now
		b.Rest, b.Level = cfg.Rest, 0
	}
	if b.Rest <= 0 {
		b.Rest = cfg.Rest
	}
	b.State, b.OpenedAt = Open, now
	b.Failures, b.ProbeSuccesses = 0, 0
	b.Generation++
}

func (b *Breaker) close(cfg Config) {
	b.State = Closed
	b.Failures, b.ProbeSuccesses = 0, 0
	b.OpenedAt, b.DownSince = time.Time{}, time.Time{}
	b.Rest, b.Level = cfg.Rest, 0
	b.Generation++
}

// escalate doubles the rest up to cfg.RestMax; Level counts the doublings
// that actually lengthened it.
func (b *Breaker) escalate(cfg Config) {
	if b.Rest <= 0 {
		b.Rest = cfg.Rest
	}
	next := cfg.RestMax
	if b.Rest <= cfg.RestMax/2 {
		next = 2 * b.Rest
	}
	if next > b.Rest {
		b.Rest = next
		b.Level++
	}
}
