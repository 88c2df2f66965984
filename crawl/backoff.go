package crawl

// Retry delays. Backoff is a pure function of its inputs: the caller owns the
// random source, so tests can pin jitter and production can share one.

import (
	"math"
	"math/rand/v2"
	"time"
)

// Backoff returns how long to wait before retry number attempt (1 is the
// first retry) using exponential backoff with full jitter:
//
//	d = rnd() * min(maxDelay, base * 2^(attempt-1))
//
// Full jitter spreads retries from many workers across the whole interval,
// so a host that failed for everyone at once is not hit again in lockstep.
//
// An attempt of zero or less is not a retry and gets 0. A base of zero or
// less gives 0. A maxDelay of zero or less means no cap other than the largest
// time.Duration. The doubling saturates instead of overflowing, so huge
// attempts simply get the cap. rnd should return values in [0, 1); values
// outside are clamped, and a nil rnd uses math/rand/v2.
func Backoff(attempt int, base, maxDelay time.Duration, rnd func() float64) time.Duration {
	if attempt < 1 || base <= 0 {
		return 0
	}
	if maxDelay <= 0 {
		maxDelay = math.MaxInt64
	}
	ceiling := backoffCeiling(attempt, base, maxDelay)
	if rnd == nil {
		rnd = rand.Float64
	}
	d := time.Duration(clampUnit(rnd()) * float64(ceiling))
	// float64(ceiling) may round up; never hand back more than the ceiling.
	return min(max(d, 0), ceiling)
}

// backoffCeiling returns min(maxDelay, base*2^(attempt-1)) without
// overflowing: the doubling is compared against maxDelay before it happens.
func backoffCeiling(attempt int, base, maxDelay time.Duration) time.Duration {
	shift := attempt - 1
	if shift >= 63 || base > maxDelay>>shift {
		return maxDelay
	}
	return base << shift
}

// clampUnit maps r into [0, 1), treating NaN as 0.
func clampUnit(r float64) float64 {
	switch {
	case !(r > 0): // also catches NaN
		return 0
	case r >= 1:
		return math.Nextafter(1, 0)
	}
	return r
}
