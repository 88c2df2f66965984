package crawl

import (
	"math"
	"math/big"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fixedRand returns a random source that always yields r.
func fixedRand(r float64) func() float64 { return func() float64 { return r } }

// almostOne is the largest float64 below 1, the top of rnd's range.
var almostOne = math.Nextafter(1, 0)

func TestBackoffCeilingGrowsAndCaps(t *testing.T) {
	// With rnd at the top of its range the delay is the ceiling itself
	// (less float rounding), so this table traces the ceiling per attempt.
	const base, maxDelay = 100 * time.Millisecond, 2 * time.Second
	tests := []struct {
		attempt int
		want    time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{3, 400 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, 1600 * time.Millisecond},
		{6, 2 * time.Second}, // 3.2 s capped
		{7, 2 * time.Second},
		{64, 2 * time.Second},
		{1000, 2 * time.Second},
		{math.MaxInt, 2 * time.Second},
	}
	for _, tt := range tests {
		got := Backoff(tt.attempt, base, maxDelay, fixedRand(almostOne))
		if got > tt.want || tt.want-got > time.Microsecond {
			t.Errorf("Backoff(%d) = %v, want just under %v", tt.attempt, got, tt.want)
		}
	}
}

func TestBackoffJitterScalesCeiling(t *testing.T) {
	tests := []struct {
		name string
		r    float64
		want time.Duration
	}{
		{"zero", 0, 0},
		{"half", 0.5, 400 * time.Millisecond},
		{"quarter", 0.25, 200 * time.Millisecond},
		{"negative clamps to 0", -3, 0},
		{"NaN clamps to 0", math.NaN(), 0},
		{"one clamps below ceiling", 1, 800*time.Millisecond - 1},
		{"above one clamps below ceiling", 7, 800*time.Millisecond - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Backoff(4, 100*time.Millisecond, time.Hour, fixedRand(tt.r))
			if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Errorf("Backoff(4, r=%v) = %v, want %v", tt.r, got, tt.want)
			}
			if got < 0 || got > 800*time.Millisecond {
				t.Errorf("Backoff(4, r=%v) = %v, outside [0, 800ms]", tt.r, got)
			}
		})
	}
}

func TestBackoffDegenerateInputs(t *testing.T) {
	tests := []struct {
		name     string
		attempt  int
		base     time.Duration
		maxDelay time.Duration
		want     time.Duration
	}{
		{"attempt zero is not a retry", 0, time.Second, time.Minute, 0},
		{"negative attempt", -5, time.Second, time.Minute, 0},
		{"min int attempt", math.MinInt, time.Second, time.Minute, 0},
		{"zero base", 3, 0, time.Minute, 0},
		{"negative base", 3, -time.Second, time.Minute, 0},
		{"base above max is capped", 1, time.Hour, time.Minute, time.Minute / 2},
		{"zero max means uncapped", 11, time.Second, 0, 512 * time.Second},
		{"uncapped huge attempt saturates", 500, time.Second, 0, time.Duration(math.MaxInt64 / 2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Backoff(tt.attempt, tt.base, tt.maxDelay, fixedRand(0.5))
			if diff := got - tt.want; diff < -time.Microsecond || diff > time.Microsecond {
				t.Errorf("Backoff(%d, %v, %v) = %v, want %v", tt.attempt, tt.base, tt.maxDelay, got, tt.want)
			}
		})
	}
}

func TestBackoffNilRandStaysInBounds(t *testing.T) {
	for range 1000 {
		if d := Backoff(3, time.Second, time.Minute, nil); d < 0 || d > 4*time.Second {
			t.Fatalf("Backoff with nil rnd = %v, want within [0, 4s]", d)
		}
	}
}

// bigCeiling is an independent oracle for min(maxDelay, base*2^(attempt-1)).
func bigCeiling(attempt int, base, maxDelay time.Duration) time.Duration {
	c := new(big.Int).Lsh(big.NewInt(int64(base)), uint(attempt-1))
	if c.Cmp(big.NewInt(int64(maxDelay))) > 0 {
		return maxDelay
	}
	return time.Duration(c.Int64())
}

func TestBackoffPropertyWithinCeiling(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		attempt := rapid.IntRange(1, 200).Draw(t, "attempt")
		base := time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(t, "base"))
		maxDelay := time.Duration(rapid.Int64Range(1, math.MaxInt64).Draw(t, "max"))
		r := rapid.Float64Range(0, 1).Draw(t, "r")
		if r == 1 {
			r = almostOne
		}
		ceiling := bigCeiling(attempt, base, maxDelay)
		d := Backoff(attempt, base, maxDelay, fixedRand(r))
		if d < 0 || d > ceiling {
			t.Fatalf("Backoff(%d, %v, %v, r=%v) = %v, want within [0, %v]", attempt, base, maxDelay, r, d, ceiling)
		}
		// Full jitter: the delay is r of the ceiling, not r of something smaller.
		if want := r * float64(ceiling); math.Abs(float64(d)-want) > 1+want*1e-12 {
			t.Fatalf("Backoff(%d, %v, %v, r=%v) = %v, want about %v", attempt, base, maxDelay, r, d, time.Duration(want))
		}
	})
}
