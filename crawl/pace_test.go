package crawl

import (
	"testing"
	"time"

	"golang.org/x/time/rate"
	"pgregory.net/rapid"
)

// paceT0 is the origin of the pace tests' time ladder.
var paceT0 = time.Date(2025, time.March, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return paceT0.Add(d) }

// gapOf is the gap between starts at perSecond requests per second.
func gapOf(perSecond float64) time.Duration {
	return time.Duration(float64(time.Second) / perSecond)
}

// takeAll steps the clock from paceT0 to paceT0+span in steps of step and
// returns the offsets at which Take succeeded.
func takeAll(t *testing.T, p *Pace, span, step time.Duration) []time.Duration {
	t.Helper()
	var took []time.Duration
	for d := time.Duration(0); d <= span; d += step {
		if p.Take(at(d)) {
			took = append(took, d)
		}
	}
	return took
}

// wantInterval fails the test unless p's gap is want, within rounding.
func wantInterval(t *testing.T, p *Pace, want time.Duration) {
	t.Helper()
	if got := p.Interval(); got < want-time.Microsecond || got > want+time.Microsecond {
		t.Fatalf("Interval() = %v, want %v", got, want)
	}
}

func TestPaceFloorRespected(t *testing.T) {
	tests := []struct {
		gap, step, span time.Duration
	}{
		{time.Second, time.Millisecond, 10 * time.Second},
		{300 * time.Millisecond, time.Millisecond, 5 * time.Second},
		{1500 * time.Millisecond, 7 * time.Millisecond, 20 * time.Second},
		{7 * time.Millisecond, 100 * time.Microsecond, time.Second},
		{time.Second / 3, 31*time.Microsecond + 1, 2 * time.Second}, // odd step across a fractional gap
	}
	for _, tt := range tests {
		t.Run(tt.gap.String(), func(t *testing.T) {
			p := NewPace(tt.gap, paceT0)
			took := takeAll(t, p, tt.span, tt.step)
			if len(took) == 0 || took[0] != 0 {
				t.Fatalf("first Take not at t0: %v", took)
			}
			for i := 1; i < len(took); i++ {
				if gap := took[i] - took[i-1]; gap < tt.gap || gap >= tt.gap+tt.step+time.Microsecond {
					t.Fatalf("Takes at %v and %v are %v apart, want [%v, %v)", took[i-1], took[i], gap, tt.gap, tt.gap+tt.step)
				}
			}
			if want := int(tt.span/tt.gap) + 1; len(took) < want-1 || len(took) > want {
				t.Errorf("%d Takes in %v, want about %d", len(took), tt.span, want)
			}
		})
	}
}

func TestPaceWaitDoesNotConsume(t *testing.T) {
	p := NewPace(2*time.Second, paceT0)
	steps := []struct {
		at       time.Duration
		wantWait time.Duration
		take     bool
		wantTake bool
	}{
		{0, 0, false, false},
		{0, 0, true, true},
		{0, 2 * time.Second, false, false},
		{500 * time.Millisecond, 1500 * time.Millisecond, true, false},
		{1999 * time.Millisecond, time.Millisecond, false, false},
		{2 * time.Second, 0, false, false},
		{2 * time.Second, 0, true, true},
		{10 * time.Second, 0, true, true}, // idle time does not bank a burst
		{10 * time.Second, 2 * time.Second, true, false},
	}
	for i, s := range steps {
		if got := p.Wait(at(s.at)); got < s.wantWait || got > s.wantWait+time.Microsecond {
			t.Fatalf("step %d: Wait(t0+%v) = %v, want %v", i, s.at, got, s.wantWait)
		}
		if s.take {
			if got := p.Take(at(s.at)); got != s.wantTake {
				t.Fatalf("step %d: Take(t0+%v) = %v, want %v", i, s.at, got, s.wantTake)
			}
		}
	}
}

func TestPaceThrottleHalvesRate(t *testing.T) {
	p := NewPace(time.Second, paceT0)
	steps := []struct {
		at          time.Duration
		wantChanged bool
		wantGap     time.Duration
	}{
		{0, true, 2 * time.Second},
		{500 * time.Millisecond, false, 2 * time.Second}, // in-flight echo absorbed
		{1999 * time.Millisecond, false, 2 * time.Second},
		{2 * time.Second, true, 4 * time.Second},
		{6 * time.Second, true, 8 * time.Second},
		{14 * time.Second, true, 16 * time.Second},
		{30 * time.Second, true, 32 * time.Second},
		{62 * time.Second, true, time.Minute}, // 64 s capped at PaceMaxInterval
		{200 * time.Second, false, time.Minute},
	}
	for i, s := range steps {
		from := p.Interval()
		ch := p.Throttled(at(s.at))
		if ch.Changed != s.wantChanged || ch.From != from {
			t.Fatalf("step %d: Throttled = %+v, want Changed=%v From=%v", i, ch, s.wantChanged, from)
		}
		wantInterval(t, p, s.wantGap)
		if ch.Interval != p.Interval() {
			t.Fatalf("step %d: change reports %v, Interval() is %v", i, ch.Interval, p.Interval())
		}
	}
}

func TestPaceThrottleSlowsTakes(t *testing.T) {
	p := NewPace(time.Second, paceT0)
	if !p.Take(at(0)) {
		t.Fatal("first Take refused")
	}
	p.Throttled(at(100 * time.Millisecond))
	// The token that was half refilled at 1 req/s now refills at 0.5 req/s.
	if p.Take(at(time.Second)) {
		t.Fatal("Take one floor gap later allowed after a throttle")
	}
	if w := p.Wait(at(100 * time.Millisecond)); w < 1800*time.Millisecond || w > 1800*time.Millisecond+time.Microsecond {
		t.Fatalf("Wait after throttle = %v, want 1.8s", w)
	}
	if !p.Take(at(1900 * time.Millisecond)) {
		t.Fatal("Take refused once the slower gap passed")
	}
}

func TestPaceSlowestRespectsSlowFloor(t *testing.T) {
	tests := []struct {
		name    string
		floor   time.Duration
		changed bool
		gap     time.Duration
	}{
		{"floor below cap halves to cap", 40 * time.Second, true, time.Minute},
		{"floor at cap stays", time.Minute, false, time.Minute},
		{"floor above cap stays", 90 * time.Second, false, 90 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPace(tt.floor, paceT0)
			if ch := p.Throttled(paceT0); ch.Changed != tt.changed {
				t.Fatalf("Throttled changed = %v, want %v", ch.Changed, tt.changed)
			}
			wantInterval(t, p, tt.gap)
		})
	}
}

// succeedN reports n successes one second apart from start and returns the
// number of them that changed the pace.
func succeedN(t *testing.T, p *Pace, start time.Duration, n int) int {
	t.Helper()
	changes := 0
	for i := range n {
		if p.Succeeded(at(start + time.Duration(i)*time.Second)).Changed {
			changes++
		}
	}
	return changes
}

func TestPaceAdditiveRecoveryStopsAtFloor(t *testing.T) {
	p := NewPace(time.Second, paceT0)
	p.Throttled(at(0))
	p.Throttled(at(10 * time.Second))
	wantInterval(t, p, 4*time.Second) // 0.25 req/s
	if n := succeedN(t, p, 20*time.Second, PaceRecoveryRun-1); n != 0 {
		t.Fatalf("pace changed %d times before a full run", n)
	}
	if !p.Succeeded(at(30 * time.Second)).Changed {
		t.Fatal("a full run of successes did not raise the rate")
	}
	wantInterval(t, p, gapOf(0.35)) // +0.1 req/s
	// 0.35 -> 0.45 ... 0.95 -> 1.0 (capped): 7 more runs.
	if n := succeedN(t, p, time.Minute, 7*PaceRecoveryRun); n != 7 {
		t.Fatalf("%d increases, want 7", n)
	}
	if got := p.Interval(); got != time.Second {
		t.Fatalf("Interval() after recovery = %v, want exactly the floor 1s", got)
	}
	if n := succeedN(t, p, 5*time.Minute, 5*PaceRecoveryRun); n != 0 {
		t.Fatalf("pace rose %d times past its floor", n)
	}
	wantInterval(t, p, time.Second)
}

func TestPaceThrottleResetsRun(t *testing.T) {
	p := NewPace(time.Second, paceT0)
	p.Throttled(at(0))
	succeedN(t, p, 10*time.Second, PaceRecoveryRun-1)
	p.Throttled(at(100 * time.Second))
	wantInterval(t, p, 4*time.Second)
	if n := succeedN(t, p, 200*time.Second, PaceRecoveryRun-1); n != 0 {
		t.Fatal("successes before the throttle counted towards the run")
	}
}

func TestPaceUnlimited(t *testing.T) {
	p := NewPace(0, paceT0)
	if got := takeAll(t, p, time.Millisecond, time.Microsecond); len(got) != 1001 {
		t.Fatalf("unlimited pace allowed %d of 1001 Takes", len(got))
	}
	if p.Interval() != 0 || p.Wait(at(time.Millisecond)) != 0 {
		t.Fatalf("unlimited pace: Interval %v, Wait %v, want 0, 0", p.Interval(), p.Wait(at(time.Millisecond)))
	}
	ch := p.Throttled(at(2 * time.Millisecond))
	if want := (PaceChange{Changed: true, From: 0, Interval: time.Second}); ch != want {
		t.Fatalf("Throttled from unlimited = %+v, want %+v", ch, want)
	}
	// The last Take was at t0+1ms; the new 1 s gap counts from it.
	if w := p.Wait(at(2 * time.Millisecond)); w < 999*time.Millisecond || w > 999*time.Millisecond+time.Microsecond {
		t.Fatalf("Wait after throttle = %v, want 999ms", w)
	}
	// 1 -> 1.5 -> ... -> 9.5 req/s takes 17 runs; the 18th reaches 10 and
	// lifts the limit entirely.
	if n := succeedN(t, p, time.Minute, 17*PaceRecoveryRun); n != 17 {
		t.Fatalf("%d increases, want 17", n)
	}
	wantInterval(t, p, gapOf(9.5))
	if n := succeedN(t, p, time.Hour, PaceRecoveryRun); n != 1 || p.Interval() != 0 {
		t.Fatalf("after full recovery: %d changes, Interval %v; want 1, unlimited", n, p.Interval())
	}
	for i := range 2 {
		if !p.Take(at(time.Hour)) {
			t.Fatalf("recovered unlimited pace refused back-to-back Take %d", i+1)
		}
	}
}

func TestPaceSetFloor(t *testing.T) {
	tests := []struct {
		name     string
		start    time.Duration
		throttle int
		floor    time.Duration
		wantGap  time.Duration
		changed  bool
	}{
		{"unlimited gains a floor", 0, 0, 2 * time.Second, 2 * time.Second, true},
		{"raise floor", time.Second, 0, 3 * time.Second, 3 * time.Second, true},
		{"lower floor", 2 * time.Second, 0, time.Second, time.Second, true},
		{"same floor", time.Second, 0, time.Second, time.Second, false},
		{"floor removed", time.Second, 0, 0, 0, true},
		{"throttled keeps slower rate", time.Second, 2, 3 * time.Second, 4 * time.Second, false},
		{"throttled capped by slower floor", time.Second, 1, 10 * time.Second, 10 * time.Second, true},
		{"throttled unlimited keeps rate", 0, 1, 500 * time.Millisecond, time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewPace(tt.start, paceT0)
			for i := range tt.throttle {
				p.Throttled(at(time.Duration(i) * time.Hour))
			}
			if ch := p.SetFloor(tt.floor, at(10*time.Hour)); ch.Changed != tt.changed {
				t.Fatalf("SetFloor changed = %v, want %v (%+v)", ch.Changed, tt.changed, ch)
			}
			wantInterval(t, p, tt.wantGap)
		})
	}
}

func TestPaceSetFloorKeepsLastStart(t *testing.T) {
	p := NewPace(0, paceT0)
	p.Take(at(0))
	p.SetFloor(2*time.Second, at(500*time.Millisecond))
	if w := p.Wait(at(500 * time.Millisecond)); w < 1500*time.Millisecond || w > 1500*time.Millisecond+time.Microsecond {
		t.Fatalf("Wait after SetFloor = %v, want 1.5s from the last start", w)
	}
	if p.Take(at(1999 * time.Millisecond)) {
		t.Fatal("Take allowed before the new floor gap passed")
	}
	if !p.Take(at(2 * time.Second)) {
		t.Fatal("Take refused once the new floor gap passed")
	}
}

// TestPaceProperty drives a pace with random feedback and checks that Wait
// and Take agree and that no two starts are closer than the fastest gap the
// pace held between them.
func TestPaceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		floors := rapid.SampledFrom([]time.Duration{0, 10 * time.Millisecond, 300 * time.Millisecond, time.Second, 7 * time.Second})
		p := NewPace(floors.Draw(t, "floor"), paceT0)
		now := paceT0
		var last time.Time
		minGap := time.Duration(-1) // fastest gap since last start; 0 = unlimited
		note := func() {
			if g := p.Interval(); minGap < 0 || g < minGap {
				minGap = g
			}
		}
		note()
		for i := range rapid.IntRange(1, 300).Draw(t, "steps") {
			switch rapid.IntRange(0, 9).Draw(t, "op") {
			case 0:
				p.Throttled(now)
			case 1, 2, 3:
				p.Succeeded(now)
			case 4:
				p.SetFloor(floors.Draw(t, "floor"), now)
			case 5, 6:
				now = now.Add(p.Wait(now)) // sleep exactly as told
			default:
				now = now.Add(time.Duration(rapid.Int64Range(0, int64(2*time.Second)).Draw(t, "dt")))
			}
			note()
			wait := p.Wait(now)
			took := p.Take(now)
			if took != (wait == 0) {
				t.Fatalf("step %d: Wait = %v but Take = %v", i, wait, took)
			}
			if !took {
				continue
			}
			if !last.IsZero() && now.Sub(last) < minGap-time.Microsecond {
				t.Fatalf("step %d: starts %v apart, fastest gap held was %v", i, now.Sub(last), minGap)
			}
			last, minGap = now, -1
			note()
		}
	})
}

func TestPaceLimitAlwaysWithinBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := NewPace(time.Duration(rapid.Int64Range(0, int64(2*time.Minute)).Draw(t, "floor")), paceT0)
		now := paceT0
		for range rapid.IntRange(1, 200).Draw(t, "steps") {
			now = now.Add(time.Duration(rapid.Int64Range(0, int64(3*time.Second)).Draw(t, "dt")))
			if rapid.Bool().Draw(t, "throttle") {
				p.Throttled(now)
			} else {
				p.Succeeded(now)
			}
			if p.limit > p.floor || p.limit < min(rate.Every(PaceMaxInterval), p.floor) {
				t.Fatalf("limit %v outside [%v, %v]", p.limit, min(rate.Every(PaceMaxInterval), p.floor), p.floor)
			}
		}
	})
}
