package crawl

import (
	"sync"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// budgetT0 starts the retry budget tests' time ladder on a bucket boundary.
var budgetT0 = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

func bt(d time.Duration) time.Time { return budgetT0.Add(d) }

// firsts records n first attempts to host at now.
func firsts(b *RetryBudget, host string, now time.Time, n int) {
	for range n {
		b.RecordFirstAttempt(host, now)
	}
}

// retriesOK returns how many of n retries to host at now were allowed.
func retriesOK(t *testing.T, b *RetryBudget, host string, now time.Time, n int) int {
	t.Helper()
	ok := 0
	for range n {
		if allowed, at := b.TryRetry(host, now); allowed {
			if !at.Equal(now) {
				t.Fatalf("allowed retry got retryAt %v, want now %v", at, now)
			}
			ok++
		}
	}
	return ok
}

func TestRetryBudgetAllowance(t *testing.T) {
	tests := []struct {
		ratio  float64
		firsts int
		want   int
	}{
		{0.2, 0, 3},
		{0.2, 4, 3},
		{0.2, 5, 4},
		{0.2, 100, 23}, // floor adds to the ratio share
		{0.29, 100, 32},
		{0.1, 10, 4},
		{0, 1000, 3},
		{1, 7, 10},
		{0.2, -5, 3},
	}
	for _, tt := range tests {
		b := NewRetryBudget(tt.ratio, time.Minute, 3)
		if got := b.Allowance(tt.firsts); got != tt.want {
			t.Errorf("ratio %v: Allowance(%d) = %d, want %d", tt.ratio, tt.firsts, got, tt.want)
		}
	}
}

func TestRetryBudgetDefaults(t *testing.T) {
	tests := []struct {
		name   string
		ratio  float64
		window time.Duration
		floor  int
	}{
		{"all out of range", -1, 0, 0},
		{"negative window and floor", -0.5, -time.Second, -2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewRetryBudget(tt.ratio, tt.window, tt.floor)
			if got := b.Allowance(100); got != 23 {
				t.Errorf("Allowance(100) = %d, want 23 from defaults", got)
			}
			if b.width*retryBuckets != DefaultRetryWindow {
				t.Errorf("window = %v, want %v", b.width*retryBuckets, DefaultRetryWindow)
			}
		})
	}
}

func TestRetryBudgetExhaustsAtAllowance(t *testing.T) {
	b := NewRetryBudget(0.2, time.Minute, 3)
	firsts(b, "a", bt(0), 100)
	if got := retriesOK(t, b, "a", bt(time.Second), 30); got != 23 {
		t.Fatalf("%d retries allowed after 100 first attempts, want 23", got)
	}
	ok, at := b.TryRetry("a", bt(5*time.Second))
	if ok || !at.Equal(bt(time.Minute)) {
		t.Fatalf("TryRetry over budget = %v, %v; want false, t0+60s", ok, at)
	}
	if r, f := b.Usage("a", bt(5*time.Second)); r != 23 || f != 100 {
		t.Fatalf("Usage = %d retries, %d firsts; want 23, 100", r, f)
	}
	if got := retriesOK(t, b, "other", bt(5*time.Second), 10); got != 3 {
		t.Fatalf("another host got %d retries, want its own floor of 3", got)
	}
}

func TestRetryBudgetRefillsAsWindowSlides(t *testing.T) {
	b := NewRetryBudget(0.2, time.Minute, 3)
	steps := []struct {
		at        time.Duration
		firsts    int
		tries     int
		wantOK    int
		wantUsage [2]int // retries, firsts after the step
	}{
		{0, 50, 20, 13, [2]int{13, 50}},                                // 3 + 10
		{10 * time.Second, 50, 20, 10, [2]int{23, 100}},                // 3 + 20, 13 used
		{59 * time.Second, 0, 5, 0, [2]int{23, 100}},                   // still full
		{60 * time.Second, 0, 5, 3, [2]int{13, 50}},                    // t0 bucket gone: 3 + 10 allowed, 10 used
		{60 * time.Second, 10, 5, 2, [2]int{15, 60}},                   // fresh firsts add 2 more
		{70 * time.Second, 0, 20, 0, [2]int{5, 10}},                    // allowance 5, 5 used
		{120 * time.Second, 0, 20, 3, [2]int{3, 0}},                    // only the floor is left
		{time.Hour, 0, 0, 0, [2]int{0, 0}},                             // all forgotten
		{time.Hour + 5*time.Second, 1000, 300, 203, [2]int{203, 1000}}, // scales with traffic
	}
	for i, s := range steps {
		now := bt(s.at)
		firsts(b, "h", now, s.firsts)
		if got := retriesOK(t, b, "h", now, s.tries); got != s.wantOK {
			t.Fatalf("step %d (t0+%v): %d retries allowed, want %d", i, s.at, got, s.wantOK)
		}
		if r, f := b.Usage("h", now); [2]int{r, f} != s.wantUsage {
			t.Fatalf("step %d (t0+%v): Usage = %d, %d; want %v", i, s.at, r, f, s.wantUsage)
		}
	}
}

func TestRetryBudgetRetryAt(t *testing.T) {
	tests := []struct {
		name  string
		setup func(b *RetryBudget)
		now   time.Duration
		want  time.Duration
	}{
		{
			name:  "floor retries expire with their bucket",
			setup: func(b *RetryBudget) { retriesOKNoT(b, bt(0), 3) },
			now:   25 * time.Second,
			want:  time.Minute,
		},
		{
			name: "retries spread out free up with the oldest bucket",
			setup: func(b *RetryBudget) {
				retriesOKNoT(b, bt(5*time.Second), 1)
				retriesOKNoT(b, bt(15*time.Second), 1)
				retriesOKNoT(b, bt(25*time.Second), 1)
			},
			now:  30 * time.Second,
			want: time.Minute,
		},
		{
			name: "first attempts leaving the window shrink the allowance",
			setup: func(b *RetryBudget) {
				firsts(b, "h", bt(0), 10)
				retriesOKNoT(b, bt(20*time.Second), 5)
			},
			now:  30 * time.Second,
			want: 80 * time.Second, // at t0+60s 5 retries > floor 3; they go at t0+80s
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewRetryBudget(0.2, time.Minute, 3)
			tt.setup(b)
			ok, at := b.TryRetry("h", bt(tt.now))
			if ok || !at.Equal(bt(tt.want)) {
				t.Fatalf("TryRetry = %v, %v; want false, t0+%v", ok, at.Sub(budgetT0), tt.want)
			}
			if ok, _ := b.TryRetry("h", at.Add(-time.Nanosecond)); ok {
				t.Fatal("retry allowed just before retryAt")
			}
			if ok, _ := b.TryRetry("h", at); !ok {
				t.Fatal("retry refused at retryAt")
			}
		})
	}
}

// retriesOKNoT spends n retries on host "h" at now, for table setups.
func retriesOKNoT(b *RetryBudget, now time.Time, n int) {
	for range n {
		b.TryRetry("h", now)
	}
}

func TestRetryBudgetFloorWithoutFirstAttempts(t *testing.T) {
	b := NewRetryBudget(0.2, time.Minute, 3)
	for minute := range 5 {
		start := bt(time.Duration(minute) * time.Minute)
		if got := retriesOK(t, b, "idle", start, 10); got != 3 {
			t.Fatalf("minute %d: %d retries allowed, want the floor of 3", minute, got)
		}
	}
}

func TestRetryBudgetPrune(t *testing.T) {
	b := NewRetryBudget(0.2, time.Minute, 3)
	firsts(b, "old", bt(0), 5)
	firsts(b, "new", bt(50*time.Second), 5)
	b.Prune(bt(70 * time.Second))
	if _, ok := b.hosts["old"]; ok {
		t.Error("Prune kept a host with an empty window")
	}
	if _, ok := b.hosts["new"]; !ok {
		t.Error("Prune dropped a host with first attempts in the window")
	}
	if len(b.hosts) != 1 {
		t.Errorf("%d hosts tracked after Prune, want 1", len(b.hosts))
	}
}

func TestRetryBudgetOutOfOrderTimes(t *testing.T) {
	b := NewRetryBudget(0.2, time.Minute, 3)
	firsts(b, "h", bt(2*time.Minute), 10)
	// A time so late it shares a slot with a newer slice must not wipe it.
	firsts(b, "h", bt(time.Minute), 5)
	if _, f := b.Usage("h", bt(2*time.Minute)); f != 15 {
		t.Fatalf("first attempts = %d, want 15", f)
	}
}

func TestRetryBudgetConcurrent(t *testing.T) {
	b := NewRetryBudget(0.2, time.Minute, 3)
	firsts(b, "h", bt(0), 100)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Go(func() {
			n := 0
			for range 20 {
				b.RecordFirstAttempt("x", bt(time.Second))
				if ok, _ := b.TryRetry("h", bt(time.Second)); ok {
					n++
				}
				b.Usage("h", bt(time.Second))
			}
			mu.Lock()
			allowed += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if allowed != 23 {
		t.Fatalf("%d retries allowed concurrently, want exactly 23", allowed)
	}
}

// TestRetryBudgetProperty checks, for random traffic, that an allowed retry
// fits the allowance and that retryAt is the first moment a retry would be
// allowed.
func TestRetryBudgetProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := NewRetryBudget(rapid.Float64Range(0, 1).Draw(t, "ratio"), time.Minute, rapid.IntRange(1, 5).Draw(t, "floor"))
		now := budgetT0
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(15*time.Second)).Draw(t, "dt")))
			if rapid.Bool().Draw(t, "first") {
				b.RecordFirstAttempt("h", now)
				continue
			}
			ok, at := b.TryRetry("h", now)
			if ok {
				// First attempts may later leave the window before the
				// retries they paid for; at the moment of spending, though,
				// the retry must fit.
				if r, f := b.Usage("h", now); r > b.Allowance(f) {
					t.Fatalf("retry allowed: %d retries in window, allowance %d", r, b.Allowance(f))
				}
				continue
			}
			if !at.After(now) || at.Sub(now) > time.Minute {
				t.Fatalf("retryAt %v not within (now, now+window] of %v", at, now)
			}
			probe := func(when time.Time) bool {
				r, f := b.Usage("h", when)
				return r < b.Allowance(f)
			}
			if probe(at.Add(-time.Nanosecond)) || !probe(at) {
				t.Fatalf("retryAt %v is not the first moment with room", at)
			}
		}
	})
}
