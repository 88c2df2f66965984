package crawl

// Per-host pace: a politeness floor plus AIMD (additive increase,
// multiplicative decrease) on top of a golang.org/x/time/rate limiter with
// burst 1. Pace is a plain value guarded by its caller: the engine holds the
// host's lock around every call, so Pace has no mutex of its own.

import (
	"math"
	"time"

	"golang.org/x/time/rate"
)

// AIMD tuning. These are deliberately conservative: a 429 is the host
// telling us it is overloaded, so slowing down is quick and speeding up
// is slow.
const (
	// PaceRecoveryRun is how many consecutive successes earn one additive
	// increase. Any throttle restarts the count.
	PaceRecoveryRun = 10
	// PaceThrottleStart is the rate a host with no floor (unlimited) drops to
	// on its first 429: 1 request per second. Halving "infinity" is
	// meaningless, and the observed rate under concurrency is too noisy to
	// halve, so a fixed polite rate is used.
	PaceThrottleStart rate.Limit = 1
	// PaceUnlimitedStep is the additive increase, in requests per second,
	// for a host with no floor. A host with a floor steps by a tenth of the
	// floor rate instead, so it recovers from one halving in 5 runs.
	PaceUnlimitedStep rate.Limit = 0.5
	// PaceUnlimitedAt is the rate at which a host with no floor counts as
	// fully recovered and goes back to unlimited.
	PaceUnlimitedAt rate.Limit = 10
	// PaceMaxInterval is the slowest pace AIMD will impose (unless the floor
	// itself is slower): repeated 429s stop halving at one request a minute.
	// Longer waits are the job of Retry-After and the circuit breaker.
	PaceMaxInterval = time.Minute
)

// Pace decides when the next request to one host may start. The floor is
// the politeness limit (the larger of --delay and robots Crawl-delay); 429s
// halve the rate below it and runs of successes climb back to it, never
// past it. Requests start at least Interval apart (burst 1).
//
// The zero Pace is not usable; use NewPace. A Pace is not safe for
// concurrent use.
type Pace struct {
	floorGap    time.Duration // politeness floor as a gap; 0 means unlimited
	floor       rate.Limit    // fastest allowed rate: Every(floorGap)
	limit       rate.Limit    // current rate, never above floor
	lim         *rate.Limiter // nil while limit is rate.Inf
	lastTake    time.Time     // start of the latest request, zero if none
	run         int           // consecutive successes since the last change
	absorbUntil time.Time     // throttles before this are absorbed
}

// PaceChange reports what a feedback call did to the pace, so the caller can
// log transitions and stay quiet otherwise.
type PaceChange struct {
	Changed  bool
	From     time.Duration // gap before the call; 0 means unlimited
	Interval time.Duration // gap after the call; 0 means unlimited
}

// NewPace returns a pace at its floor of one request per minInterval; a
// minInterval of zero or less means unlimited. The first request may start
// at once; now is accepted for symmetry with the other methods.
func NewPace(minInterval time.Duration, now time.Time) *Pace {
	p := &Pace{}
	p.setFloorFields(minInterval)
	p.limit = p.floor
	if p.limit != rate.Inf {
		p.lim = rate.NewLimiter(p.limit, 1) // full: ready at once
	}
	return p
}

// Wait returns how long until a request may start: 0 when one may start
// at now. It consumes nothing.
func (p *Pace) Wait(now time.Time) time.Duration {
	if p.lim == nil {
		return 0
	}
	tokens := p.lim.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	d := time.Duration(math.Ceil((1 - tokens) / float64(p.limit) * float64(time.Second)))
	// Float rounding can leave the token a hair short at now+d; step past it
	// so that Take(now+Wait(now)) always succeeds.
	for i := 0; i < 8 && p.lim.TokensAt(now.Add(d)) < 1; i++ {
		d += time.Microsecond
	}
	return d
}

// Take starts a request at now if the pace allows it, and reports whether it
// did.
func (p *Pace) Take(now time.Time) bool {
	if p.lim != nil && !p.lim.AllowN(now, 1) {
		return false
	}
	p.lastTake = now
	return true
}

// Throttled records a 429 at now and halves the rate (multiplicative
// decrease), down to at most one request per PaceMaxInterval. An unlimited
// pace drops to PaceThrottleStart. Requests already in flight when the rate
// dropped answer with their own 429s, so further throttles within one new
// interval (at least a second) are absorbed rather than halving again.
func (p *Pace) Throttled(now time.Time) PaceChange {
	p.run = 0
	from := p.Interval()
	if now.Before(p.absorbUntil) {
		return PaceChange{From: from, Interval: from}
	}
	next := p.limit / 2
	if p.limit == rate.Inf {
		next = min(PaceThrottleStart, p.floor)
	}
	p.setLimit(max(next, p.slowest()), now)
	p.absorbUntil = now.Add(max(time.Second, p.Interval()))
	return p.change(from)
}

// Succeeded records a successful request at now. Every PaceRecoveryRun
// consecutive successes raise the rate by one step (additive increase) until
// it is back at the floor. With no floor, the step is PaceUnlimitedStep and
// reaching PaceUnlimitedAt restores unlimited.
func (p *Pace) Succeeded(now time.Time) PaceChange {
	from := p.Interval()
	if p.limit >= p.floor {
		p.run = 0
		return PaceChange{From: from, Interval: from}
	}
	p.run++
	if p.run < PaceRecoveryRun {
		return PaceChange{From: from, Interval: from}
	}
	p.run = 0
	p.setLimit(p.recovered(), now)
	return p.change(from)
}

// recovered is the rate one additive step above the current one, capped at
// the floor.
func (p *Pace) recovered() rate.Limit {
	if p.floor == rate.Inf {
		if next := p.limit + PaceUnlimitedStep; next < PaceUnlimitedAt {
			return next
		}
		return rate.Inf
	}
	return min(p.limit+p.floor/10, p.floor)
}

// SetFloor changes the politeness floor, typically when robots.txt
// Crawl-delay becomes known. A pace at its old floor moves to the new one; a
// throttled pace keeps its slower rate unless the new floor is slower still.
func (p *Pace) SetFloor(minInterval time.Duration, now time.Time) PaceChange {
	from := p.Interval()
	throttled := p.limit < p.floor
	p.setFloorFields(minInterval)
	next := p.limit
	if !throttled || next > p.floor {
		next = p.floor
	}
	p.setLimit(next, now)
	if p.lim != nil && !p.lastTake.IsZero() {
		// A new floor (robots.txt Crawl-delay) counts from the last request
		// start: tokens earned at the old, faster rate must not let the next
		// request in early.
		p.lim = rate.NewLimiter(p.limit, 1)
		p.lim.AllowN(p.lastTake, 1)
	}
	return p.change(from)
}

// Interval returns the current minimum gap between request starts; 0 means
// unlimited.
func (p *Pace) Interval() time.Duration {
	switch p.limit {
	case rate.Inf:
		return 0
	case p.floor:
		return p.floorGap
	}
	return time.Duration(math.Round(float64(time.Second) / float64(p.limit)))
}

func (p *Pace) setFloorFields(minInterval time.Duration) {
	p.floorGap = max(minInterval, 0)
	p.floor = rate.Inf
	if p.floorGap > 0 {
		p.floor = rate.Every(p.floorGap)
	}
}

// slowest is the lowest rate AIMD may set: one request per PaceMaxInterval,
// or the floor if that is slower.
func (p *Pace) slowest() rate.Limit {
	return min(rate.Every(PaceMaxInterval), p.floor)
}

// setLimit moves the limiter to rate next at now, keeping the spacing from
// the last request start across the switch.
func (p *Pace) setLimit(next rate.Limit, now time.Time) {
	switch {
	case next == p.limit:
		return
	case next == rate.Inf:
		p.lim = nil
	case p.lim == nil:
		// An unlimited limiter keeps no history (and advancing it by zero
		// time yields NaN tokens), so build a fresh one and replay the last
		// start into it.
		p.lim = rate.NewLimiter(next, 1)
		if !p.lastTake.IsZero() {
			p.lim.AllowN(p.lastTake, 1)
		}
	default:
		p.lim.SetLimitAt(now, next)
	}
	p.limit = next
}

func (p *Pace) change(from time.Duration) PaceChange {
	to := p.Interval()
	return PaceChange{Changed: to != from, From: from, Interval: to}
}
