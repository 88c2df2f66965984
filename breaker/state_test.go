package breaker

import (
	"testing"
	"time"
)

// t0 is the first rung of the time ladder every test climbs.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// allow is the reference's Breaker.allow: advance if rested, then admit
// unless still open.
func allow(b *Breaker, now time.Time) bool {
	b.Advance(now)
	return b.State != Open
}

// The reference's four tests, ported to the pure Breaker.
func TestReferenceOpensAfterThresholdConsecutiveFailures(t *testing.T) {
	cfg := Config{Threshold: 3}
	var b Breaker
	for i := range 3 {
		if !allow(&b, t0) {
			t.Fatalf("failure %d: not allowed before the threshold", i)
		}
		b.Record(cfg, Transient, "503", t0)
	}
	if allow(&b, t0) {
		t.Fatalf("allowed after %d consecutive failures; state %v", cfg.Threshold, b.State)
	}
}

func TestReferenceIntermittentFailuresDoNotOpen(t *testing.T) {
	cfg := Config{Threshold: 3}
	var b Breaker
	for _, c := range []Class{Transient, Transient, OK, Transient, Transient, OK} {
		allow(&b, t0)
		b.Record(cfg, c, "", t0)
	}
	if b.State != Closed {
		t.Fatalf("state = %v, want closed", b.State)
	}
}

func TestReferenceHalfOpenNeedsTwoSuccesses(t *testing.T) {
	cfg := Config{Threshold: 1, Rest: 10 * time.Second, Probes: 2}
	var b Breaker
	b.Record(cfg, Transient, "timeout", t0)
	if allow(&b, at(5*time.Second)) {
		t.Fatal("allowed during the rest")
	}
	if !allow(&b, at(11*time.Second)) || b.State != HalfOpen {
		t.Fatalf("after the rest: state %v, want half-open and allowed", b.State)
	}
	b.Record(cfg, OK, "200", at(11*time.Second))
	if b.State != HalfOpen {
		t.Fatalf("one probe success: state %v, want half-open", b.State)
	}
	b.Record(cfg, OK, "200", at(12*time.Second))
	if b.State != Closed {
		t.Fatalf("two probe successes: state %v, want closed", b.State)
	}
}

func TestReferenceNamedRefusalOpensImmediately(t *testing.T) {
	cfg := Config{Threshold: 99}
	var b Breaker
	b.Record(cfg, Refused, "403 names breakwater", t0)
	if allow(&b, t0) {
		t.Fatal("allowed after a named refusal")
	}
}

func TestBreakerRestBoundary(t *testing.T) {
	cfg := Config{Threshold: 1, Rest: time.Minute}
	tests := []struct {
		name string
		at   time.Time
		want State
	}{
		{"rest minus 1ns", at(time.Minute - time.Nanosecond), Open},
		{"exactly rest", at(time.Minute), HalfOpen},
		{"after rest", at(time.Hour), HalfOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Breaker
			b.Record(cfg, Transient, "", t0)
			b.Advance(tt.at)
			if b.State != tt.want {
				t.Fatalf("state = %v, want %v", b.State, tt.want)
			}
		})
	}
}

// none marks an expected time field as zero in the script below.
const none = time.Duration(-1)

// TestBreakerScript drives one breaker through a scripted sequence of
// outcomes and clock readings, checking state and counters after each row.
func TestBreakerScript(t *testing.T) {
	cfg := Config{Threshold: 3, Rest: 10 * time.Second, RestMax: 40 * time.Second, Probes: 2}
	s := time.Second
	type want struct {
		state       State
		fail, probe int
		rest        time.Duration
		level       int
		hold        Hold
		gen         uint64
		opened      time.Duration
		down        time.Duration
	}
	steps := []struct {
		at   time.Duration
		do   Class // "" advances the clock only
		want want
	}{
		{0, Transient, want{Closed, 1, 0, 0, 0, NoHold, 0, none, none}},
		{1 * s, Permanent, want{Closed, 1, 0, 0, 0, NoHold, 0, none, none}},
		{2 * s, Throttled, want{Closed, 1, 0, 0, 0, NoHold, 0, none, none}},
		{3 * s, Transient, want{Closed, 2, 0, 0, 0, NoHold, 0, none, none}},
		{4 * s, OK, want{Closed, 0, 0, 0, 0, NoHold, 0, none, none}},
		{5 * s, Transient, want{Closed, 1, 0, 0, 0, NoHold, 0, none, none}},
		{6 * s, Transient, want{Closed, 2, 0, 0, 0, NoHold, 0, none, none}},
		{7 * s, Transient, want{Open, 0, 0, 10 * s, 0, NoHold, 1, 7 * s, 7 * s}},
		{8 * s, OK, want{Open, 0, 0, 10 * s, 0, NoHold, 1, 7 * s, 7 * s}},
		{9 * s, Throttled, want{Open, 0, 0, 10 * s, 0, NoHold, 1, 7 * s, 7 * s}},
		{17*s - 1, "", want{Open, 0, 0, 10 * s, 0, NoHold, 1, 7 * s, 7 * s}},
		{17 * s, "", want{HalfOpen, 0, 0, 10 * s, 0, NoHold, 2, 7 * s, 7 * s}},
		{17 * s, Transient, want{Open, 0, 0, 20 * s, 1, NoHold, 3, 17 * s, 7 * s}},
		{37*s - 1, "", want{Open, 0, 0, 20 * s, 1, NoHold, 3, 17 * s, 7 * s}},
		{37 * s, "", want{HalfOpen, 0, 0, 20 * s, 1, NoHold, 4, 17 * s, 7 * s}},
		{37 * s, OK, want{HalfOpen, 0, 1, 20 * s, 1, NoHold, 4, 17 * s, 7 * s}},
		// A probe the host answered (404, 429) restarts the down clock.
		{38 * s, Permanent, want{HalfOpen, 0, 1, 20 * s, 1, NoHold, 4, 17 * s, 38 * s}},
		{38 * s, Transient, want{Open, 0, 0, 40 * s, 2, NoHold, 5, 38 * s, 38 * s}},
		{78 * s, "", want{HalfOpen, 0, 0, 40 * s, 2, NoHold, 6, 38 * s, 38 * s}},
		{78 * s, Transient, want{Open, 0, 0, 40 * s, 2, NoHold, 7, 78 * s, 38 * s}},
		{118 * s, "", want{HalfOpen, 0, 0, 40 * s, 2, NoHold, 8, 78 * s, 38 * s}},
		{118 * s, Throttled, want{HalfOpen, 0, 0, 40 * s, 2, NoHold, 8, 78 * s, 118 * s}},
		{118 * s, OK, want{HalfOpen, 0, 1, 40 * s, 2, NoHold, 8, 78 * s, 118 * s}},
		{119 * s, OK, want{Closed, 0, 0, 10 * s, 0, NoHold, 9, none, none}},
		{120 * s, Transient, want{Closed, 1, 0, 10 * s, 0, NoHold, 9, none, none}},
		{121 * s, Refused, want{Open, 0, 0, 10 * s, 0, Case, 10, 121 * s, 121 * s}},
		{122 * s, OK, want{Open, 0, 0, 10 * s, 0, Case, 10, 121 * s, 121 * s}},
		{1000 * time.Hour, "", want{Open, 0, 0, 10 * s, 0, Case, 10, 121 * s, 121 * s}},
		{1000 * time.Hour, Refused, want{Open, 0, 0, 10 * s, 0, Case, 10, 121 * s, 121 * s}},
	}
	var b Breaker
	for i, st := range steps {
		now := at(st.at)
		if st.do == "" {
			b.Advance(now)
		} else {
			b.Record(cfg, st.do, string(st.do), now)
		}
		got := want{b.State, b.Failures, b.ProbeSuccesses, b.Rest, b.Level, b.Hold, b.Generation,
			offset(b.OpenedAt), offset(b.DownSince)}
		if got != st.want {
			t.Fatalf("row %d (%v at %v):\n got %+v\nwant %+v", i, st.do, st.at, got, st.want)
		}
	}
}

// TestBreakerHolds climbs a ladder of pauses, refusals and releases: the
// two holds are independent, and the circuit goes half-open only when the
// last one is released.
func TestBreakerHolds(t *testing.T) {
	cfg := Config{Threshold: 3, Rest: 10 * time.Second}
	s, long := time.Second, 1000*time.Hour
	type want struct {
		moved        bool
		state        State
		hold         Hold
		detail, why  string // HoldReason (the case's), PauseReason
		gen          uint64
		down, opened time.Duration
	}
	type step struct {
		at   time.Duration
		do   string // pause, refuse, unpause, resolve, advance, or a Class to record
		arg  string
		want want
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"pause, refuse, resolve: still paused", []step{
			{0, "pause", "complaint", want{true, Open, Paused, "", "complaint", 1, 0, 0}},
			{1 * s, "refuse", "403 names us", want{true, Open, Paused | Case, "403 names us", "complaint", 2, 0, 0}},
			{2 * s, "refuse", "again", want{false, Open, Paused | Case, "403 names us", "complaint", 2, 0, 0}},
			{3 * s, "ok", "", want{false, Open, Paused | Case, "403 names us", "complaint", 2, 0, 0}},
			{4 * s, "resolve", "", want{true, Open, Paused, "", "complaint", 3, 0, 0}},
			{5 * s, "resolve", "", want{false, Open, Paused, "", "complaint", 3, 0, 0}},
			{long, "advance", "", want{false, Open, Paused, "", "complaint", 3, 0, 0}},
			{long, "unpause", "", want{true, HalfOpen, NoHold, "", "", 4, long, 0}},
		}},
		{"refuse, pause, unpause: still a case; resolve: half-open", []step{
			{0, "refuse", "403 names us", want{true, Open, Case, "403 names us", "", 1, 0, 0}},
			{1 * s, "pause", "notice", want{true, Open, Case | Paused, "403 names us", "notice", 2, 0, 0}},
			{2 * s, "pause", "notice 2", want{false, Open, Case | Paused, "403 names us", "notice 2", 2, 0, 0}},
			{3 * s, "unpause", "", want{true, Open, Case, "403 names us", "", 3, 0, 0}},
			{4 * s, "unpause", "", want{false, Open, Case, "403 names us", "", 3, 0, 0}},
			{long, "advance", "", want{false, Open, Case, "403 names us", "", 3, 0, 0}},
			{long, "resolve", "", want{true, HalfOpen, NoHold, "", "", 4, long, 0}},
		}},
		{"a hold on a resting circuit keeps its down clock", []step{
			{0, "transient", "", want{false, Closed, NoHold, "", "", 0, none, none}},
			{1 * s, "transient", "", want{false, Closed, NoHold, "", "", 0, none, none}},
			{2 * s, "transient", "", want{true, Open, NoHold, "", "", 1, 2 * s, 2 * s}},
			{3 * s, "pause", "ops", want{true, Open, Paused, "", "ops", 2, 2 * s, 3 * s}},
			{4 * s, "refuse", "403", want{true, Open, Paused | Case, "403", "ops", 3, 2 * s, 3 * s}},
			{5 * s, "unpause", "", want{true, Open, Case, "403", "", 4, 2 * s, 3 * s}},
			{6 * s, "resolve", "", want{true, HalfOpen, NoHold, "", "", 5, 6 * s, 3 * s}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Breaker
			for i, st := range tt.steps {
				now := at(st.at)
				var moved bool
				switch st.do {
				case "pause":
					moved = b.pause(cfg, st.arg, now)
				case "refuse":
					moved = b.Record(cfg, Refused, st.arg, now)
				case "unpause":
					moved = b.unhold(Paused, now)
				case "resolve":
					moved = b.unhold(Case, now)
				case "advance":
					moved = b.Advance(now)
				default:
					moved = b.Record(cfg, Class(st.do), st.arg, now)
				}
				got := want{moved, b.State, b.Hold, b.HoldReason, b.PauseReason, b.Generation,
					offset(b.DownSince), offset(b.OpenedAt)}
				if got != st.want {
					t.Fatalf("row %d (%s %q at %v):\n got %+v\nwant %+v", i, st.do, st.arg, st.at, got, st.want)
				}
			}
		})
	}
}

// TestBreakerResumed climbs a ladder across a crawler restart: the host
// went down at 0, the previous run was last known running at lastRunning,
// the new run starts at now. Only the down time spent while running counts.
func TestBreakerResumed(t *testing.T) {
	h := time.Hour
	opened, rest := 30*time.Minute, 10*time.Minute
	tests := []struct {
		name        string
		state       State
		hold        Hold
		down        time.Duration // none: zero DownSince
		lastRunning time.Duration // none: unknown
		now         time.Duration
		want        time.Duration // DownSince after
	}{
		{"open: running time kept, stopped time dropped", Open, NoHold, 0, 2 * h, 10 * h, 8 * h},
		{"half-open: the same", HalfOpen, NoHold, 0, 2 * h, 10 * h, 8 * h},
		{"restart at once: nothing dropped", Open, NoHold, 0, 2 * h, 2 * h, 0},
		{"unknown last running: none spent", Open, NoHold, 0, none, 10 * h, 10 * h},
		{"last running before DownSince: none spent", Open, NoHold, 3 * h, 2 * h, 10 * h, 10 * h},
		{"last running at DownSince: none spent", HalfOpen, NoHold, 2 * h, 2 * h, 10 * h, 10 * h},
		{"last running after now: never further back", Open, NoHold, 0, 11 * h, 10 * h, 0},
		{"paused: unchanged", Open, Paused, 0, 2 * h, 10 * h, 0},
		{"case: unchanged", Open, Case, 0, 2 * h, 10 * h, 0},
		{"case and paused: unchanged", Open, Case | Paused, 0, 2 * h, 10 * h, 0},
		{"closed: unchanged", Closed, NoHold, none, 2 * h, 10 * h, none},
		{"open without DownSince: unchanged", Open, NoHold, none, 2 * h, 10 * h, none},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := Breaker{State: tt.state, Hold: tt.hold, Failures: 2, OpenedAt: at(opened), Rest: rest, Level: 1, Generation: 7}
			var last time.Time
			if tt.down != none {
				b.DownSince = at(tt.down)
			}
			if tt.lastRunning != none {
				last = at(tt.lastRunning)
			}
			got := b.Resumed(last, at(tt.now))
			want := b
			if tt.want != none {
				want.DownSince = at(tt.want)
			}
			if got != want {
				t.Fatalf("Resumed(%v, %v):\n got %+v\nwant %+v", tt.lastRunning, tt.now, got, want)
			}
		})
	}
}

func TestHoldHas(t *testing.T) {
	tests := []struct {
		h, x Hold
		want bool
	}{
		{NoHold, Paused, false},
		{NoHold, Case, false},
		{Paused, Paused, true},
		{Paused, Case, false},
		{Case, Case, true},
		{Case, Paused, false},
		{Paused | Case, Paused, true},
		{Paused | Case, Case, true},
		{Paused | Case, Paused | Case, true},
		{Case, Paused | Case, false},
	}
	for _, tt := range tests {
		if got := tt.h.Has(tt.x); got != tt.want {
			t.Errorf("%v.Has(%v) = %v, want %v", tt.h, tt.x, got, tt.want)
		}
	}
	if Paused != 1 || Case != 2 {
		t.Fatalf("Paused = %d, Case = %d: stored breakers read them as 1 and 2", Paused, Case)
	}
}

func offset(tm time.Time) time.Duration {
	if tm.IsZero() {
		return none
	}
	return tm.Sub(t0)
}

func TestBreakerEscalation(t *testing.T) {
	rest := 10 * time.Second
	tests := []struct {
		name   string
		max    time.Duration
		rests  []time.Duration // rest after each failed probe
		levels []int
	}{
		{"off by default", 0, []time.Duration{rest, rest, rest}, []int{0, 0, 0}},
		{"doubles to the cap", 4 * rest, []time.Duration{2 * rest, 4 * rest, 4 * rest}, []int{1, 2, 2}},
		{"partial last step", 25 * time.Second, []time.Duration{2 * rest, 25 * time.Second, 25 * time.Second}, []int{1, 2, 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{Threshold: 1, Rest: rest, RestMax: tt.max, Probes: 1}
			var b Breaker
			b.Record(cfg, Transient, "", t0)
			for i := range tt.rests {
				now := b.ReadyAt()
				if !b.Advance(now) {
					t.Fatalf("probe %d: no half-open at ReadyAt", i)
				}
				b.Record(cfg, Transient, "", now)
				if b.Rest != tt.rests[i] || b.Level != tt.levels[i] {
					t.Fatalf("failed probe %d: rest %v level %d, want %v level %d", i, b.Rest, b.Level, tt.rests[i], tt.levels[i])
				}
			}
			now := b.ReadyAt()
			b.Advance(now)
			b.Record(cfg, OK, "", now)
			if b.State != Closed || b.Rest != rest || b.Level != 0 {
				t.Fatalf("after close: %v rest %v level %d, want closed, %v, 0", b.State, b.Rest, b.Level, rest)
			}
		})
	}
}

func TestConfigWithDefaults(t *testing.T) {
	tests := []struct {
		name string
		in   Config
		want Config
	}{
		{"zero", Config{}, Config{Threshold: 8, Rest: 5 * time.Minute, RestMax: 5 * time.Minute, Probes: 2, ProbeTimeout: 45 * time.Second}},
		{"negative", Config{Threshold: -1, Rest: -1, Probes: -3, ProbeTimeout: -1}, Config{Threshold: 8, Rest: 5 * time.Minute, RestMax: 5 * time.Minute, Probes: 2, ProbeTimeout: 45 * time.Second}},
		{"rest max follows rest", Config{Rest: time.Minute}, Config{Threshold: 8, Rest: time.Minute, RestMax: time.Minute, Probes: 2, ProbeTimeout: 45 * time.Second}},
		{"rest max below rest", Config{Rest: time.Hour, RestMax: time.Minute}, Config{Threshold: 8, Rest: time.Hour, RestMax: time.Hour, Probes: 2, ProbeTimeout: 45 * time.Second}},
		{"kept", Config{Threshold: 3, Rest: time.Second, RestMax: time.Hour, Probes: 5, ProbeTimeout: time.Second, Disabled: true},
			Config{Threshold: 3, Rest: time.Second, RestMax: time.Hour, Probes: 5, ProbeTimeout: time.Second, Disabled: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.WithDefaults(); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStrings(t *testing.T) {
	tests := []struct {
		got, want string
	}{
		{Closed.String(), "closed"},
		{Open.String(), "open"},
		{HalfOpen.String(), "half-open"},
		{State(9).String(), "State(9)"},
		{NoHold.String(), ""},
		{Paused.String(), "paused"},
		{Case.String(), "case"},
		{(Paused | Case).String(), "case+paused"},
		{(Case | Paused).String(), "case+paused"},
		{Hold(4).String(), "Hold(4)"},
		{Hold(7).String(), "Hold(7)"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
