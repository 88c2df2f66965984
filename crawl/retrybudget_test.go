package crawl

import (
	"math"
	"slices"
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
		ratio           float64
		firsts          int
		healthy, failed int
		pace            time.Duration
		want            int
	}{
		{0.2, 0, 0, 0, 0, 3},
		{0.2, 4, 0, 0, 0, 3},
		{0.2, 5, 0, 0, 0, 4},
		{0.2, 100, 0, 0, 0, 23}, // floor adds to the ratio share
		{0.29, 100, 0, 0, 0, 32},
		{0.1, 10, 0, 0, 0, 4},
		{0, 1000, 0, 0, 0, 3},
		{1, 7, 0, 0, 0, 10},
		{0.2, -5, 0, 0, 0, 3},
		{0.2, 0, 7, 3, 0, 21},                   // 3 + 3*7 - 3: a healthy-enough host earns retries
		{0.2, 0, 1, 3, 0, 3},                    // a quarter healthy earns nothing
		{0.2, 0, 2, 8, 0, 3},                    // nor does a fifth
		{0.2, 100, 10, 90, 0, 23},               // a struggling host keeps its old share
		{0.2, 100, 70, 30, 0, 203},              // 3 + 20 + 210 - 30
		{0.2, 0, 700, 300, time.Second, 60},     // its pace serves 60 a minute
		{0.2, 0, 700, 300, 10 * time.Second, 6}, // 6 a minute
		{0.2, 0, 700, 300, 5 * time.Minute, 3},  // the floor stands above a slow pace
		{0.2, 0, 0, 0, time.Millisecond, 3},     // a fast pace earns nothing by itself
		{0.2, 0, -4, -4, 0, 3},                  // negative counts are none
		{0.2, 0, 1 << 30, 0, 0, math.MaxInt32},  // never past the counters' range
	}
	for _, tt := range tests {
		b := NewRetryBudget(tt.ratio, time.Minute, 3)
		w := RetryWindow{FirstAttempts: tt.firsts, Healthy: tt.healthy, Failed: tt.failed}
		if got := b.Allowance(w, tt.pace); got != tt.want {
			t.Errorf("ratio %v: Allowance(%+v, %v) = %d, want %d", tt.ratio, w, tt.pace, got, tt.want)
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
			if got := b.Allowance(RetryWindow{FirstAttempts: 100}, 0); got != 23 {
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
	if ok || !at.Equal(bt(5*time.Second+100*time.Millisecond)) {
		t.Fatalf("TryRetry over budget with answers to come = %v, %v; want false, t0+5.1s", ok, at)
	}
	answers(b, "a", bt(2*time.Second), 0, 123)
	ok, at = b.TryRetry("a", bt(5*time.Second))
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
			// Every request failed: nothing is still to come, nothing earned.
			answers(b, "h", bt(tt.now), 0, b.Window("h", bt(tt.now)).pending())
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

// answers records healthy and failed answers to host at now.
func answers(b *RetryBudget, host string, now time.Time, healthy, failed int) {
	for range healthy {
		b.RecordAnswer(host, true, now)
	}
	for range failed {
		b.RecordAnswer(host, false, now)
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

// tailSim replays a host left with nothing but deferred retries: each URL
// is retried until it is answered healthy, no two requests closer than
// pace, answers latency after their request, the i-th answer failed when
// fails(i). It returns how long the tail took, the retries made, and the
// most retries granted in any span of fiveSixths of the window.
func tailSim(b *RetryBudget, urls int, pace, latency time.Duration, fails func(i int) bool) (took time.Duration, retries, busiest int) {
	type answer struct {
		at  time.Time
		url int
		ok  bool
	}
	due := make([]time.Time, urls) // zero: done
	for i := range due {
		due[i] = budgetT0
	}
	var inFlight []answer
	var grants []time.Time
	now, nextPace, left, n := budgetT0, budgetT0, urls, 0
	for left > 0 {
		// Deliver the answers due by now.
		keep := inFlight[:0]
		for _, a := range inFlight {
			if a.at.After(now) {
				keep = append(keep, a)
				continue
			}
			b.RecordAnswer("h", a.ok, a.at)
			if a.ok {
				due[a.url], left = time.Time{}, left-1
			} else {
				due[a.url] = a.at
			}
		}
		inFlight = keep
		if left == 0 {
			break
		}
		// Take the URL due first, if the pace allows.
		next, pick := time.Time{}, -1
		for i, d := range due {
			if !d.IsZero() && (pick < 0 || d.Before(next)) && !inFlightHas(inFlight, i, func(a answer) int { return a.url }) {
				next, pick = d, i
			}
		}
		if pick >= 0 && !next.After(now) && !nextPace.After(now) {
			if ok, at := b.TryRetryPaced("h", pace, now); ok {
				inFlight = append(inFlight, answer{at: now.Add(latency), url: pick, ok: !fails(n)})
				grants = append(grants, now)
				nextPace, n = now.Add(pace), n+1
				continue
			} else {
				due[pick] = at
			}
		}
		// Step to the next event.
		step := budgetT0.Add(100 * time.Hour)
		for _, a := range inFlight {
			step = minTime(step, a.at)
		}
		for i, d := range due {
			if !d.IsZero() && !inFlightHas(inFlight, i, func(a answer) int { return a.url }) {
				step = minTime(step, maxTime(d, nextPace))
			}
		}
		if !step.After(now) {
			step = now.Add(time.Millisecond)
		}
		now = step
	}
	span := b.width * (retryBuckets - 1)
	for i, g := range grants {
		k := 0
		for _, h := range grants[i:] {
			if h.Sub(g) < span {
				k++
			}
		}
		busiest = max(busiest, k)
	}
	return now.Sub(budgetT0), n, busiest
}

func inFlightHas[A any](list []A, url int, of func(A) int) bool {
	for _, a := range list {
		if of(a) == url {
			return true
		}
	}
	return false
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// spread fails the answers whose index mod 10 is in tenths: a fixed pattern
// rather than a random one, so the runs are the same every time.
func spread(tenths ...int) func(int) bool {
	return func(i int) bool { return slices.Contains(tenths, i%10) }
}

func TestRetryBudgetTailAtPace(t *testing.T) {
	const latency = 20 * time.Millisecond
	tests := []struct {
		name  string
		fails func(int) bool
		pace  time.Duration
		// The tail must take at most maxStretch times its retries at the
		// pace; a struggling host must see at most maxBusiest retries in
		// any five sixths of a minute.
		maxStretch float64
		maxBusiest int
	}{
		{"30% failing, 1 s pace: retries at the pace", spread(1, 4, 7), time.Second, 1.1, 50},
		{"30% failing, 200 ms pace", spread(1, 4, 7), 200 * time.Millisecond, 1.1, 250},
		{"30% failing, no pace: as fast as answers come", spread(1, 4, 7), 0, 1.1, 1 << 30},
		{"30% failing, the first three", spread(0, 1, 2), time.Second, 2.5, 50},
		{"50% failing: still at the pace", spread(1, 3, 5, 7, 9), time.Second, 1.2, 50},
		{"80% failing: a few a minute", spread(0, 1, 2, 3, 5, 6, 7, 8), time.Second, 0, 6},
		{"90% failing: about the floor", spread(0, 1, 2, 3, 4, 5, 6, 7, 8), time.Second, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewRetryBudget(0.2, time.Minute, 3)
			took, retries, busiest := tailSim(b, 41, tt.pace, latency, tt.fails)
			need := time.Duration(retries) * tt.pace
			if tt.pace == 0 {
				need = time.Duration(retries) * latency // one after another, each waiting for its answer
			}
			t.Logf("%d retries in %v (at the pace: %v), at most %d in 50 s", retries, took, need, busiest)
			if tt.maxStretch > 0 && float64(took) > tt.maxStretch*float64(need) {
				t.Errorf("the tail took %v, over %.1fx the %v its %d retries need at the pace", took, tt.maxStretch, need, retries)
			}
			if busiest > tt.maxBusiest {
				t.Errorf("%d retries in 50 s, want at most %d", busiest, tt.maxBusiest)
			}
		})
	}
}

// TestRetryBudgetProperties checks, for random traffic, the budget's
// invariants: a granted retry fits the allowance of the window it was
// granted in; no span of five sixths of the window (always inside one
// window) sees more retries than the pace could serve; a host that has
// never answered well gets no more than the floor plus its share of first
// attempts; and a refusal's retryAt is after now, within the window, and
// either the first moment with room or, while answers are still to come,
// one pace interval on.
func TestRetryBudgetProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ratio := rapid.Float64Range(0, 1).Draw(t, "ratio")
		floor := rapid.IntRange(1, 5).Draw(t, "floor")
		pace := time.Duration(rapid.SampledFrom([]int64{0, int64(100 * time.Millisecond), int64(time.Second), int64(10 * time.Second)}).Draw(t, "pace"))
		healthyShare := rapid.Float64Range(0, 1).Draw(t, "healthy share")
		b := NewRetryBudget(ratio, time.Minute, floor)
		window, span := b.width*retryBuckets, b.width*(retryBuckets-1)
		var grants, firstTimes []time.Time
		everHealthy := false
		now := budgetT0
		for range rapid.IntRange(1, 300).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(5*time.Second)).Draw(t, "dt")))
			switch rapid.IntRange(0, 2).Draw(t, "event") {
			case 0:
				b.RecordFirstAttempt("h", now)
				firstTimes = append(firstTimes, now)
				continue
			case 1:
				healthy := rapid.Float64Range(0, 1).Draw(t, "draw") < healthyShare
				everHealthy = everHealthy || healthy
				b.RecordAnswer("h", healthy, now)
				continue
			}
			before := b.Window("h", now)
			ok, at := b.TryRetryPaced("h", pace, now)
			if ok {
				if before.Retries >= b.Allowance(before, pace) {
					t.Fatalf("retry granted with %d retries in the window, allowance %d", before.Retries, b.Allowance(before, pace))
				}
				grants = append(grants, now)
				recent := countSince(grants, now.Add(-span))
				if pace > 0 && recent > max(int(window/pace), floor) {
					t.Fatalf("%d retries within %v at a pace of %v", recent, span, pace)
				}
				if !everHealthy {
					share := int(ratio*float64(countSince(firstTimes, now.Add(-window))) + 1e-9)
					if recent > floor+share {
						t.Fatalf("%d retries within %v by a host never healthy, want <= %d + %d", recent, span, floor, share)
					}
				}
				continue
			}
			if !at.After(now) || at.Sub(now) > window {
				t.Fatalf("retryAt %v not within (now, now+window] of %v", at, now)
			}
			hasRoom := func(when time.Time) bool {
				w := b.Window("h", when)
				return w.Retries < b.Allowance(w, pace)
			}
			if b.couldEarn(before, pace) {
				if at.Sub(now) > max(pace, b.width/retryRecheckBuckets) {
					t.Fatalf("answers to come, yet retryAt is %v on", at.Sub(now))
				}
			} else if hasRoom(at.Add(-time.Nanosecond)) || !hasRoom(at) {
				t.Fatalf("retryAt %v is not the first moment with room", at)
			}
		}
	})
}

// countSince counts the times at or after since.
func countSince(times []time.Time, since time.Time) int {
	n := 0
	for _, x := range times {
		if !x.Before(since) {
			n++
		}
	}
	return n
}

// TestRetryBudgetAllowanceMonotone checks that healthy answers and first
// attempts never lower the allowance, failures and a slower pace never
// raise it.
func TestRetryBudgetAllowanceMonotone(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := NewRetryBudget(rapid.Float64Range(0, 1).Draw(t, "ratio"), time.Minute, rapid.IntRange(1, 5).Draw(t, "floor"))
		count := rapid.IntRange(0, 10_000)
		w := RetryWindow{FirstAttempts: count.Draw(t, "firsts"), Healthy: count.Draw(t, "healthy"), Failed: count.Draw(t, "failed")}
		pace := time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(t, "pace"))
		base := b.Allowance(w, pace)
		more := func(f func(*RetryWindow)) int { v := w; f(&v); return b.Allowance(v, pace) }
		if got := more(func(v *RetryWindow) { v.Healthy++ }); got < base {
			t.Fatalf("a healthy answer lowered the allowance from %d to %d", base, got)
		}
		if got := more(func(v *RetryWindow) { v.FirstAttempts++ }); got < base {
			t.Fatalf("a first attempt lowered the allowance from %d to %d", base, got)
		}
		if got := more(func(v *RetryWindow) { v.Failed++ }); got > base {
			t.Fatalf("a failure raised the allowance from %d to %d", base, got)
		}
		if pace > 0 {
			if got := b.Allowance(w, pace+time.Second); got > base {
				t.Fatalf("a slower pace raised the allowance from %d to %d", base, got)
			}
		}
		if base < b.minPerWindow {
			t.Fatalf("allowance %d below the floor %d", base, b.minPerWindow)
		}
	})
}

func TestRetryBudgetRechecksOnlyWhenAnswersCouldEarn(t *testing.T) {
	tests := []struct {
		name            string
		healthy, failed int // answers to the 4 first attempts and 3 floor retries
		want            time.Duration
	}{
		{"answers to come could earn room: one pace on", 0, 0, 5*time.Second + time.Second},
		{"the last two could still earn: one pace on", 0, 5, 5*time.Second + time.Second},
		{"failures outweigh what the last could earn: the slide", 0, 6, time.Minute},
		{"every answer in: the slide", 0, 7, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewRetryBudget(0.2, time.Minute, 3)
			firsts(b, "h", bt(0), 4)
			retriesOKNoT(b, bt(0), 3)
			answers(b, "h", bt(time.Second), tt.healthy, tt.failed)
			if got := b.Allowance(b.Window("h", bt(5*time.Second)), time.Second); got != 3 {
				t.Fatalf("allowance %d, want the floor of 3 for the setup", got)
			}
			ok, at := b.TryRetryPaced("h", time.Second, bt(5*time.Second))
			if ok || !at.Equal(bt(tt.want)) {
				t.Fatalf("TryRetryPaced = %v, t0+%v; want false, t0+%v", ok, at.Sub(budgetT0), tt.want)
			}
		})
	}
}
