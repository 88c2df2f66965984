package breaker

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const host = "example.org"

// recorder collects transitions; the registry may call it concurrently.
type recorder struct {
	mu  sync.Mutex
	all []Transition
}

func (rc *recorder) add(tr Transition) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.all = append(rc.all, tr)
}

func (rc *recorder) list() []Transition {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]Transition(nil), rc.all...)
}

func newReg(tb testing.TB, cfg Config) (*Registry, *recorder) {
	tb.Helper()
	rc := &recorder{}
	return NewRegistry(cfg, rc.add), rc
}

func mustAdmit(tb testing.TB, r *Registry, h string, now time.Time) Ticket {
	tb.Helper()
	d := r.Admit(h, now)
	if !d.Allowed {
		tb.Fatalf("Admit(%s, %v) refused: %+v", h, now.Sub(t0), d)
	}
	return d.Ticket
}

func mustDeny(tb testing.TB, r *Registry, h string, now time.Time) Decision {
	tb.Helper()
	d := r.Admit(h, now)
	if d.Allowed {
		tb.Fatalf("Admit(%s, %v) allowed: %+v", h, now.Sub(t0), d)
	}
	return d
}

// outcome admits a request at now and reports c for it at once.
func outcome(tb testing.TB, r *Registry, h string, c Class, now time.Time) {
	tb.Helper()
	r.Report(mustAdmit(tb, r, h, now), c, string(c), now)
}

func wantState(tb testing.TB, r *Registry, h string, want State, wantHold Hold) Breaker {
	tb.Helper()
	b, _ := r.Get(h)
	if b.State != want || b.Hold != wantHold {
		tb.Fatalf("%s: state %v hold %q, want %v hold %q (%+v)", h, b.State, b.Hold, want, wantHold, b)
	}
	return b
}

// openHost drives h open with Threshold failures at now.
func openHost(tb testing.TB, r *Registry, h string, now time.Time) {
	tb.Helper()
	for range r.cfg.Threshold {
		outcome(tb, r, h, Transient, now)
	}
	wantState(tb, r, h, Open, NoHold)
}

func TestRegistryOpensAfterThreshold(t *testing.T) {
	for _, threshold := range []int{1, 3, 8} {
		t.Run(fmt.Sprint(threshold), func(t *testing.T) {
			r, _ := newReg(t, Config{Threshold: threshold, Rest: time.Minute})
			for i := range threshold - 1 {
				outcome(t, r, host, Transient, at(time.Duration(i)))
			}
			wantState(t, r, host, Closed, NoHold)
			outcome(t, r, host, Transient, at(time.Second))
			d := mustDeny(t, r, host, at(time.Second))
			if d.State != Open || !d.RetryAt.Equal(at(time.Second+time.Minute)) {
				t.Fatalf("decision %+v, want open until rest end", d)
			}
		})
	}
}

func TestRegistryIntermittentFailuresNeverOpen(t *testing.T) {
	const n, threshold = 5000, 8
	r, rc := newReg(t, Config{Threshold: threshold})
	rng := rand.New(rand.NewPCG(1, 2))
	run, longest, failures := 0, 0, 0
	for i := range n {
		c := OK
		if rng.Float64() < 0.3 {
			c = Transient
			failures++
			run++
		} else {
			run = 0
		}
		longest = max(longest, run)
		outcome(t, r, host, c, at(time.Duration(i)*time.Second))
	}
	// Guard the seed: the test only means something if the sequence has
	// the expected error rate and no genuine run of threshold failures.
	if rate := float64(failures) / n; rate < 0.28 || rate > 0.32 || longest >= threshold {
		t.Fatalf("seed gives rate %.3f and longest run %d; pick another seed", rate, longest)
	}
	wantState(t, r, host, Closed, NoHold)
	if len(rc.list()) != 0 {
		t.Fatalf("transitions fired: %+v", rc.list())
	}
}

func TestRegistryRestBoundary(t *testing.T) {
	rest := time.Minute
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest})
	outcome(t, r, host, Transient, t0)
	d := mustDeny(t, r, host, at(rest-time.Nanosecond))
	if d.State != Open || !d.RetryAt.Equal(at(rest)) {
		t.Fatalf("at rest-1ns: %+v, want open until %v", d, rest)
	}
	tk := mustAdmit(t, r, host, at(rest))
	if !tk.Probe {
		t.Fatalf("ticket at rest end is not a probe: %+v", tk)
	}
	wantState(t, r, host, HalfOpen, NoHold)
}

func TestRegistryRefusalHolds(t *testing.T) {
	r, rc := newReg(t, Config{Threshold: 99, Rest: time.Minute})
	early := mustAdmit(t, r, host, t0)
	outcome(t, r, host, Refused, t0)
	b := wantState(t, r, host, Open, Case)
	if b.HoldReason != string(Refused) {
		t.Fatalf("hold reason %q, want the refusal's detail", b.HoldReason)
	}
	forged := Ticket{Host: host, Generation: b.Generation, Probe: true, At: t0}
	for i := range 1000 {
		now := at(time.Duration(i) * time.Hour)
		r.Report(early, OK, "200", now)
		r.Report(forged, OK, "200", now)
		if d := mustDeny(t, r, host, now); d.Hold != Case || !d.RetryAt.IsZero() {
			t.Fatalf("held decision %+v, want case hold and no RetryAt", d)
		}
	}
	wantState(t, r, host, Open, Case)
	if r.GiveUp(host, time.Second, at(1000*time.Hour)) {
		t.Fatal("GiveUp on a held host")
	}
	if err := r.Unpause(host, t0); !errors.Is(err, ErrCaseOpen) {
		t.Fatalf("Unpause = %v, want ErrCaseOpen", err)
	}
	if err := r.ResolveCase(host, at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if tk := mustAdmit(t, r, host, at(time.Hour)); !tk.Probe {
		t.Fatal("no probe after ResolveCase")
	}
	trs := rc.list()
	if len(trs) != 2 || trs[0].Hold != Case || trs[0].Class != Refused || trs[1].Reason != "case resolved" {
		t.Fatalf("transitions %+v", trs)
	}
}

func TestRegistryPause(t *testing.T) {
	r, rc := newReg(t, Config{Rest: time.Minute})
	before := mustAdmit(t, r, host, t0)
	r.Pause(host, "complaint #12", t0)
	for i := range 100 {
		now := at(time.Duration(i) * time.Hour)
		r.Report(before, OK, "200", now)
		mustDeny(t, r, host, now)
	}
	wantState(t, r, host, Open, Paused)
	if err := r.ResolveCase(host, t0); !errors.Is(err, ErrNoCase) {
		t.Fatalf("ResolveCase on a pause = %v, want ErrNoCase", err)
	}
	if err := r.Unpause(host, at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantState(t, r, host, HalfOpen, NoHold)
	if err := r.Unpause(host, at(time.Hour)); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("second Unpause = %v, want ErrNotPaused", err)
	}
	if err := r.Unpause("never.seen", t0); !errors.Is(err, ErrNotPaused) {
		t.Fatalf("Unpause unknown host = %v, want ErrNotPaused", err)
	}
	trs := rc.list()
	if len(trs) != 2 || trs[0].Reason != "complaint #12" || trs[0].Hold != Paused || trs[1].Reason != "unpaused" || trs[1].To != HalfOpen {
		t.Fatalf("transitions %+v", trs)
	}
}

// A late refusal on a paused host adds a case and keeps the pause; a
// second pause on a host with a case records it too.
func TestRegistryLateRefusalKeepsPause(t *testing.T) {
	r, _ := newReg(t, Config{})
	tk := mustAdmit(t, r, host, t0)
	r.Pause(host, "maintenance", t0)
	r.Report(tk, Refused, "403 breakwater", at(time.Second))
	if b := wantState(t, r, host, Open, Paused|Case); b.HoldReason != "403 breakwater" || b.PauseReason != "maintenance" {
		t.Fatalf("refusal replaced the pause: %+v", b)
	}
	r.Pause(host, "again", at(2*time.Second))
	if b := wantState(t, r, host, Open, Paused|Case); b.HoldReason != "403 breakwater" || b.PauseReason != "again" {
		t.Fatalf("second pause: %+v", b)
	}
}

// The two holds are independent: releasing one leaves the other, and the
// host goes half-open only when neither remains. Both orders.
func TestRegistryHoldsAreIndependent(t *testing.T) {
	type tr struct {
		to     State
		hold   Hold
		reason string
	}
	check := func(t *testing.T, rc *recorder, want []tr) {
		t.Helper()
		var got []tr
		for _, x := range rc.list() {
			got = append(got, tr{x.To, x.Hold, x.Reason})
		}
		if !slices.Equal(got, want) {
			t.Fatalf("transitions:\n got %+v\nwant %+v", got, want)
		}
	}
	held := func(t *testing.T, r *Registry, hold Hold, now time.Time) {
		t.Helper()
		if d := mustDeny(t, r, host, now); d.Hold != hold || !d.RetryAt.IsZero() || !d.DownSince.IsZero() {
			t.Fatalf("decision %+v, want held %v", d, hold)
		}
		if r.GiveUp(host, time.Second, now) {
			t.Fatal("GiveUp on a held host")
		}
	}
	long := 1000 * time.Hour

	t.Run("pause, refuse, resolve: still paused", func(t *testing.T) {
		r, rc := newReg(t, Config{Rest: time.Minute})
		tk := mustAdmit(t, r, host, t0)
		r.Pause(host, "complaint", t0)
		r.Report(tk, Refused, "403 breakwater", at(time.Second))
		held(t, r, Paused|Case, at(time.Second))
		if err := r.ResolveCase(host, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if b := wantState(t, r, host, Open, Paused); b.PauseReason != "complaint" || b.HoldReason != "" {
			t.Fatalf("after ResolveCase: %+v, want the pause and its reason kept", b)
		}
		held(t, r, Paused, at(long))
		if err := r.ResolveCase(host, at(long)); !errors.Is(err, ErrNoCase) {
			t.Fatalf("second ResolveCase = %v, want ErrNoCase", err)
		}
		if err := r.Unpause(host, at(long)); err != nil {
			t.Fatal(err)
		}
		if b := wantState(t, r, host, HalfOpen, NoHold); !b.DownSince.Equal(at(long)) || b.PauseReason != "" {
			t.Fatalf("after Unpause: %+v", b)
		}
		check(t, rc, []tr{
			{Open, Paused, "complaint"},
			{Open, Paused | Case, "403 breakwater"},
			{Open, Paused, "case resolved"},
			{HalfOpen, NoHold, "unpaused"},
		})
	})

	t.Run("refuse, pause, unpause: still a case; resolve: half-open", func(t *testing.T) {
		r, rc := newReg(t, Config{Rest: time.Minute})
		outcome(t, r, host, Refused, t0)
		r.Pause(host, "notice", at(time.Second))
		if b := wantState(t, r, host, Open, Case|Paused); b.PauseReason != "notice" || b.HoldReason != "refused" {
			t.Fatalf("after Pause: %+v", b)
		}
		r.Pause(host, "notice 2", at(2*time.Second)) // only the reason changes
		if err := r.Unpause(host, at(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if b := wantState(t, r, host, Open, Case); b.HoldReason != "refused" || b.PauseReason != "" {
			t.Fatalf("after Unpause: %+v, want the case and its detail kept", b)
		}
		held(t, r, Case, at(long))
		if err := r.Unpause(host, at(long)); !errors.Is(err, ErrCaseOpen) {
			t.Fatalf("second Unpause = %v, want ErrCaseOpen", err)
		}
		if err := r.ResolveCase(host, at(long)); err != nil {
			t.Fatal(err)
		}
		if b := wantState(t, r, host, HalfOpen, NoHold); !b.DownSince.Equal(at(long)) || b.HoldReason != "" {
			t.Fatalf("after ResolveCase: %+v", b)
		}
		if tk := mustAdmit(t, r, host, at(long)); !tk.Probe {
			t.Fatal("no probe after the last hold was released")
		}
		if err := r.Unpause(host, at(long)); !errors.Is(err, ErrNotPaused) {
			t.Fatalf("Unpause of a released host = %v, want ErrNotPaused", err)
		}
		check(t, rc, []tr{
			{Open, Case, "refused"},
			{Open, Case | Paused, "notice"},
			{Open, Case, "unpaused"},
			{HalfOpen, NoHold, "case resolved"},
		})
	})
}

// Before the holds were independent a paused breaker was stored with the
// pause reason in HoldReason; Load moves it to PauseReason.
func TestRegistryLoadMovesOldPauseReason(t *testing.T) {
	r, _ := newReg(t, Config{})
	r.Load(host, Breaker{State: Open, Hold: Paused, HoldReason: "complaint", Generation: 5})
	r.Load("case.test", Breaker{State: Open, Hold: Case, HoldReason: "403", Generation: 5})
	if b := wantState(t, r, host, Open, Paused); b.PauseReason != "complaint" || b.HoldReason != "" {
		t.Fatalf("old pause loaded as %+v", b)
	}
	if b := wantState(t, r, "case.test", Open, Case); b.HoldReason != "403" || b.PauseReason != "" {
		t.Fatalf("old case loaded as %+v", b)
	}
}

func TestRegistryFailedProbeReopensWithFreshRest(t *testing.T) {
	rest := time.Minute
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest})
	outcome(t, r, host, Transient, t0)
	probe := mustAdmit(t, r, host, at(rest))
	failAt := at(rest + 30*time.Second)
	r.Report(probe, Transient, "timeout", failAt)
	if b := wantState(t, r, host, Open, NoHold); !b.OpenedAt.Equal(failAt) || b.Rest != rest {
		t.Fatalf("reopened %+v, want fresh rest from the failure", b)
	}
	mustDeny(t, r, host, failAt.Add(rest-time.Nanosecond))
	mustAdmit(t, r, host, failAt.Add(rest))
}

func TestRegistryEscalationDoublesToCapAndResets(t *testing.T) {
	rest := time.Minute
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest, RestMax: 3 * rest, Probes: 2})
	outcome(t, r, host, Transient, t0)
	wantRests := []time.Duration{2 * rest, 3 * rest, 3 * rest}
	now := t0
	for i, want := range wantRests {
		b, _ := r.Get(host)
		now = b.ReadyAt()
		mustDeny(t, r, host, now.Add(-time.Nanosecond))
		outcome(t, r, host, Transient, now)
		if b, _ = r.Get(host); b.Rest != want || b.Level != min(i+1, 2) {
			t.Fatalf("failed probe %d: rest %v level %d, want %v", i, b.Rest, b.Level, want)
		}
	}
	now = now.Add(3 * rest)
	outcome(t, r, host, OK, now)
	outcome(t, r, host, OK, now)
	if _, ok := r.Get(host); ok {
		t.Fatal("closed host kept an entry")
	}
	outcome(t, r, host, Transient, now)
	if b := wantState(t, r, host, Open, NoHold); b.Rest != rest || b.Level != 0 {
		t.Fatalf("reopened after close: rest %v level %d, want %v 0", b.Rest, b.Level, rest)
	}
}

func TestRegistryStaleOutcomesIgnored(t *testing.T) {
	rest := time.Minute
	tests := []struct {
		name  string
		class Class
		probe bool // report a stale probe ticket instead of a closed one
		want  State
	}{
		{"slow success from before opening does not close", OK, false, HalfOpen},
		{"slow failure from before opening does not reopen", Transient, false, HalfOpen},
		{"stale probe success from an earlier half-open", OK, true, HalfOpen},
		{"stale probe failure from an earlier half-open", Transient, true, HalfOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newReg(t, Config{Threshold: 2, Rest: rest, Probes: 1})
			slow := mustAdmit(t, r, host, t0)
			openHost(t, r, host, t0)
			if tt.probe {
				slow = mustAdmit(t, r, host, at(rest))
				r.Report(mustAdmit(t, r, host, at(rest+r.cfg.ProbeTimeout)), Transient, "", at(rest+r.cfg.ProbeTimeout))
			}
			r.Report(slow, OK, "", at(time.Second)) // while open: ignored too
			wantState(t, r, host, Open, NoHold)
			b, _ := r.Get(host)
			probe := mustAdmit(t, r, host, b.ReadyAt())
			r.Report(slow, tt.class, "", b.ReadyAt())
			b = wantState(t, r, host, tt.want, NoHold)
			if b.ProbeSuccesses != 0 {
				t.Fatalf("stale outcome counted: %+v", b)
			}
			mustDeny(t, r, host, b.ReadyAt()) // the stale ticket did not free the gate
			r.Report(probe, OK, "", b.ReadyAt())
			wantState(t, r, host, Closed, NoHold)
		})
	}
}

func TestRegistryEvictionStaleTickets(t *testing.T) {
	rest := time.Minute
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest, Probes: 1})
	outcome(t, r, host, Transient, t0)
	oldProbe := mustAdmit(t, r, host, at(rest))
	r.Report(mustAdmit(t, r, host, at(rest+time.Hour)), OK, "", at(rest+time.Hour)) // gate expired; closes
	if _, ok := r.Get(host); ok {
		t.Fatal("closed host kept an entry")
	}
	// A new life of the host: the old probe must not match its half-open.
	outcome(t, r, host, Transient, at(2*time.Hour))
	probe := mustAdmit(t, r, host, at(2*time.Hour+rest))
	r.Report(oldProbe, OK, "", at(2*time.Hour+rest))
	if b := wantState(t, r, host, HalfOpen, NoHold); oldProbe.Generation >= b.Generation {
		t.Fatalf("new generation %d not above old ticket %d", b.Generation, oldProbe.Generation)
	}
	r.Report(probe, OK, "", at(2*time.Hour+rest))
	wantState(t, r, host, Closed, NoHold)
}

func TestRegistryLateProbeIgnoredWhenClosed(t *testing.T) {
	rest, pt := time.Minute, 10*time.Second
	r, _ := newReg(t, Config{Threshold: 3, Rest: rest, ProbeTimeout: pt, Probes: 1})
	openHost(t, r, host, t0)
	lost := mustAdmit(t, r, host, at(rest))
	outcome(t, r, host, OK, at(rest+pt)) // a second probe closes the host
	outcome(t, r, host, Transient, at(rest+pt))
	outcome(t, r, host, Transient, at(rest+pt))
	r.Report(lost, OK, "", at(rest+pt))
	outcome(t, r, host, Transient, at(rest+pt))
	wantState(t, r, host, Open, NoHold)
}

func TestRegistryProbeGateConcurrent(t *testing.T) {
	r, _ := newReg(t, Config{Threshold: 1, Rest: time.Minute})
	outcome(t, r, host, Transient, t0)
	now := at(time.Minute)
	var allowed, probes atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			d := r.Admit(host, now)
			if d.Allowed {
				allowed.Add(1)
				if d.Ticket.Probe {
					probes.Add(1)
				}
			} else if !d.RetryAt.Equal(now.Add(r.cfg.ProbeTimeout)) {
				t.Errorf("refused with RetryAt %v, want the gate deadline", d.RetryAt)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 1 || probes.Load() != 1 {
		t.Fatalf("allowed %d (probes %d), want exactly one probe", allowed.Load(), probes.Load())
	}
}

func TestRegistryUnreportedProbeReleases(t *testing.T) {
	rest, pt := time.Minute, 10*time.Second
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest, ProbeTimeout: pt, Probes: 2})
	outcome(t, r, host, Transient, t0)
	lost := mustAdmit(t, r, host, at(rest))
	if d := mustDeny(t, r, host, at(rest+pt-time.Nanosecond)); !d.RetryAt.Equal(at(rest + pt)) {
		t.Fatalf("RetryAt %v, want the gate deadline", d.RetryAt)
	}
	second := mustAdmit(t, r, host, at(rest+pt))
	// The lost probe finally reports: it counts (same half-open) but must
	// not free the gate that now belongs to the second probe.
	r.Report(lost, OK, "", at(rest+pt+time.Second))
	if b := wantState(t, r, host, HalfOpen, NoHold); b.ProbeSuccesses != 1 {
		t.Fatalf("late probe success not counted: %+v", b)
	}
	mustDeny(t, r, host, at(rest+pt+time.Second))
	r.Report(second, OK, "", at(rest+pt+2*time.Second))
	wantState(t, r, host, Closed, NoHold)
}

func TestRegistryNeutralProbeReleasesGate(t *testing.T) {
	r, _ := newReg(t, Config{Threshold: 1, Rest: time.Minute, Probes: 2})
	outcome(t, r, host, Transient, t0)
	now := at(time.Minute)
	outcome(t, r, host, OK, now)
	for _, c := range []Class{Permanent, Throttled, "unknown"} {
		outcome(t, r, host, c, now)
		if b := wantState(t, r, host, HalfOpen, NoHold); b.ProbeSuccesses != 1 {
			t.Fatalf("%s probe changed the streak: %+v", c, b)
		}
	}
	outcome(t, r, host, OK, now)
	wantState(t, r, host, Closed, NoHold)
}

func TestRegistryTakeDirty(t *testing.T) {
	r, _ := newReg(t, Config{Threshold: 3})
	if c, rm := r.TakeDirty(); c != nil || rm != nil {
		t.Fatalf("fresh registry dirty: %v %v", c, rm)
	}
	outcome(t, r, "a.test", Transient, t0)
	outcome(t, r, "b.test", Transient, t0)
	outcome(t, r, "c.test", OK, t0)
	c, rm := r.TakeDirty()
	if len(c) != 2 || c["a.test"].Failures != 1 || c["b.test"].Failures != 1 || rm != nil {
		t.Fatalf("changed %v removed %v", c, rm)
	}
	if c, rm = r.TakeDirty(); c != nil || rm != nil {
		t.Fatalf("not cleared: %v %v", c, rm)
	}
	outcome(t, r, "a.test", OK, t0)
	r.Pause("d.test", "ops", t0)
	c, rm = r.TakeDirty()
	if len(c) != 1 || c["d.test"].Hold != Paused || len(rm) != 1 || rm[0] != "a.test" {
		t.Fatalf("changed %v removed %v, want d.test changed and a.test removed", c, rm)
	}
	outcome(t, r, "b.test", OK, t0)
	outcome(t, r, "b.test", Transient, t0) // evicted, then back within one window
	if c, rm = r.TakeDirty(); len(c) != 1 || c["b.test"].Failures != 1 || rm != nil {
		t.Fatalf("changed %v removed %v, want b.test changed only", c, rm)
	}
}

// TakeDirtyHosts names what TakeDirty would hand over, and Visit reads
// each as it is then: a host evicted since reads as absent.
func TestRegistryTakeDirtyHostsAndVisit(t *testing.T) {
	r, _ := newReg(t, Config{Threshold: 3})
	outcome(t, r, "b.test", Transient, t0)
	outcome(t, r, "a.test", Transient, t0)
	outcome(t, r, "c.test", OK, t0)
	c, rm := r.TakeDirtyHosts()
	if !slices.Equal(c, []string{"a.test", "b.test"}) || rm != nil {
		t.Fatalf("changed %v removed %v, want a.test and b.test changed", c, rm)
	}
	outcome(t, r, "a.test", Transient, t0) // changed again
	outcome(t, r, "b.test", OK, t0)        // evicted
	got := map[string]Breaker{}
	r.Visit(append(c, "never.test"), func(host string, b Breaker, ok bool) {
		if ok {
			got[host] = b
		} else if b != (Breaker{}) {
			t.Errorf("absent %s visited as %+v", host, b)
		}
	})
	if len(got) != 1 || got["a.test"].Failures != 2 {
		t.Errorf("visited %+v, want a.test alone, with its 2 failures", got)
	}
	if c, rm = r.TakeDirtyHosts(); !slices.Equal(c, []string{"a.test"}) || !slices.Equal(rm, []string{"b.test"}) {
		t.Fatalf("changed %v removed %v, want a.test changed and b.test removed", c, rm)
	}
	if c, rm = r.TakeDirtyHosts(); c != nil || rm != nil {
		t.Fatalf("not cleared: %v %v", c, rm)
	}
}

func TestRegistryLoadKeepsOpenUntilRestEnd(t *testing.T) {
	rest := time.Minute
	r1, _ := newReg(t, Config{Threshold: 1, Rest: rest})
	outcome(t, r1, host, Transient, t0)
	r1.Pause("paused.test", "ops", t0)
	saved := r1.Snapshot()

	r2, rc := newReg(t, Config{Threshold: 1, Rest: rest})
	for h, b := range saved {
		r2.Load(h, b)
	}
	r2.Load("clean.test", Breaker{})
	if c, rm := r2.TakeDirty(); c != nil || rm != nil || len(rc.list()) != 0 {
		t.Fatalf("Load dirtied %v %v or fired %v", c, rm, rc.list())
	}
	if len(r2.Snapshot()) != 2 {
		t.Fatalf("snapshot %v", r2.Snapshot())
	}
	if d := mustDeny(t, r2, host, at(rest-time.Nanosecond)); !d.RetryAt.Equal(at(rest)) {
		t.Fatalf("restored RetryAt %v, want %v", d.RetryAt, at(rest))
	}
	mustAdmit(t, r2, host, at(rest))
	mustDeny(t, r2, "paused.test", at(time.Hour))
}

// A host restored after the crawler was stopped for hours is given up on
// only once it has been down for GiveUp's window of running time.
func TestRegistryResumedNotGivenUpAtOnce(t *testing.T) {
	const after = time.Hour
	rest := time.Minute
	r1, _ := newReg(t, Config{Threshold: 1, Rest: rest})
	openHost(t, r1, host, t0)
	saved, _ := r1.Get(host)
	lastRunning, restart := at(50*time.Minute), at(10*time.Hour)

	r2, _ := newReg(t, Config{Threshold: 1, Rest: rest})
	r2.Load(host, saved.Resumed(lastRunning, restart))
	due := restart.Add(10 * time.Minute)
	if r2.GiveUp(host, after, due.Add(-time.Nanosecond)) {
		t.Fatal("given up on at once: the crawler's downtime counted as the host's")
	}
	if !r2.GiveUp(host, after, due) {
		t.Fatal("not given up on after an hour of running time")
	}
	if tk := mustAdmit(t, r2, host, restart); !tk.Probe {
		t.Fatal("rest passed while stopped, yet no probe at once")
	}
}

func TestRegistryHealthyHostsLeaveNoEntry(t *testing.T) {
	r, _ := newReg(t, Config{})
	for i := range 100_000 {
		h := fmt.Sprintf("h%d.test", i)
		outcome(t, r, h, []Class{OK, Permanent, Throttled}[i%3], t0)
	}
	outcome(t, r, host, Transient, t0)
	outcome(t, r, host, OK, t0)
	if n := len(r.Snapshot()); n != 0 {
		t.Fatalf("%d entries after a healthy crawl, want 0", n)
	}
}

func TestRegistryGiveUp(t *testing.T) {
	rest := time.Minute
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest, Probes: 1})
	if r.GiveUp(host, 0, t0) {
		t.Fatal("GiveUp on an unknown host")
	}
	outcome(t, r, host, Transient, t0)
	for i := range 5 { // failed probes keep the down clock running
		outcome(t, r, host, Transient, at(time.Duration(i+1)*rest))
	}
	if r.GiveUp(host, time.Hour, at(time.Hour-time.Nanosecond)) || !r.GiveUp(host, time.Hour, at(time.Hour)) {
		t.Fatal("GiveUp not exactly at DownSince+after")
	}
	r.Pause(host, "ops", at(time.Hour))
	if r.GiveUp(host, time.Hour, at(2*time.Hour)) {
		t.Fatal("GiveUp on a paused host")
	}
	if err := r.Unpause(host, at(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if r.GiveUp(host, time.Hour, at(2*time.Hour)) {
		t.Fatal("unpause did not restart the down clock")
	}
	outcome(t, r, host, OK, at(2*time.Hour))
	if r.GiveUp(host, 0, at(10*time.Hour)) {
		t.Fatal("GiveUp on a recovered host")
	}
}

// A half-open host that answers its probe with a 429 (or a 404) is alive:
// the answer restarts the down clock, so it is not given up on as
// unreachable, and it frees the gate for the next probe.
func TestRegistryAnsweredProbeRestartsDownClock(t *testing.T) {
	const after = time.Hour
	rest := time.Minute
	for _, c := range []Class{Throttled, Permanent} {
		t.Run(string(c), func(t *testing.T) {
			r, rc := newReg(t, Config{Threshold: 1, Rest: rest, Probes: 2})
			openHost(t, r, host, t0)
			probe := mustAdmit(t, r, host, at(after)) // rest long passed
			if !probe.Probe {
				t.Fatalf("ticket %+v is not a probe", probe)
			}
			before, _ := r.Get(host)
			n := len(rc.list())
			now := at(after + time.Second)
			r.Report(probe, c, string(c), now)
			b := wantState(t, r, host, HalfOpen, NoHold)
			if !b.DownSince.Equal(now) || b.Generation != before.Generation || len(rc.list()) != n {
				t.Fatalf("after a %s probe: %+v (%d transitions, %d before); want DownSince %v, generation %d, no transition",
					c, b, len(rc.list()), n, now, before.Generation)
			}
			if r.GiveUp(host, after, now.Add(after-time.Nanosecond)) {
				t.Fatalf("given up on a host that answered its probe with %s", c)
			}
			if !r.GiveUp(host, after, now.Add(after)) {
				t.Fatal("not given up on at the restarted DownSince+after")
			}
			if next := mustAdmit(t, r, host, now); !next.Probe {
				t.Fatalf("next ticket %+v is not a probe", next)
			}
		})
	}
}

// A refusal tells the caller when the host went down, so it can wake the
// host's URLs when they fall due to be given up on; a held host waits for a
// person and is never given up on, so it gets none.
func TestRegistryRefusalCarriesDownSince(t *testing.T) {
	rest := time.Minute
	r, _ := newReg(t, Config{Threshold: 1, Rest: rest, Probes: 1})
	if d := r.Admit(host, t0); !d.Allowed || !d.DownSince.IsZero() {
		t.Fatalf("healthy host: %+v, want allowed without DownSince", d)
	}
	openHost(t, r, host, t0)
	d := mustDeny(t, r, host, at(time.Second))
	if !d.DownSince.Equal(t0) {
		t.Fatalf("open: DownSince %v, want %v", d.DownSince, t0)
	}
	if due, ok := d.GiveUpAt(time.Hour); !ok || !due.Equal(at(time.Hour)) {
		t.Fatalf("open: GiveUpAt(1h) = %v, %v; want %v, true", due, ok, at(time.Hour))
	}
	probe := mustAdmit(t, r, host, at(rest)) // half-open, probe in flight
	if d := mustDeny(t, r, host, at(rest+time.Second)); !d.DownSince.Equal(t0) {
		t.Fatalf("half-open: DownSince %v, want %v (a probe does not restart the down clock)", d.DownSince, t0)
	}
	r.Report(probe, Transient, "timeout", at(rest+time.Second))
	r.Pause(host, "ops", at(2*rest))
	if d := mustDeny(t, r, host, at(2*rest)); !d.DownSince.IsZero() {
		t.Fatalf("paused: DownSince %v, want zero", d.DownSince)
	} else if _, ok := d.GiveUpAt(0); ok {
		t.Fatal("paused: GiveUpAt reports a due time for a held host")
	}
}

func TestRegistryTransitions(t *testing.T) {
	var r *Registry
	var got []Transition
	r = NewRegistry(Config{Threshold: 2, Rest: time.Minute, Probes: 1}, func(tr Transition) {
		r.Get(tr.Host) // would deadlock if called under the lock
		got = append(got, tr)
	})
	outcome(t, r, host, Transient, t0)
	outcome(t, r, host, Transient, at(1))
	tk := mustAdmit(t, r, host, at(time.Minute+1))
	r.Report(tk, OK, "200", at(time.Minute+2))
	want := []Transition{
		{At: at(1), Host: host, From: Closed, To: Open, Class: Transient, Detail: "transient", Generation: 2},
		{At: at(time.Minute + 1), Host: host, From: Open, To: HalfOpen, Generation: 3},
		{At: at(time.Minute + 2), Host: host, From: HalfOpen, To: Closed, Class: OK, Detail: "200", Generation: 4},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("transitions:\n got %+v\nwant %+v", got, want)
	}
}

// Transitions reach the callback in the order they were committed. The
// first callback blocks; meanwhile another goroutine commits the host's
// next transition, and its call must return without waiting for the first
// callback, yet the next transition must not overtake the blocked one.
func TestRegistryTransitionsInCommitOrder(t *testing.T) {
	entered, unblock, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var gens []uint64
	var calls atomic.Int32
	r := NewRegistry(Config{Threshold: 1, Rest: time.Minute}, func(tr Transition) {
		if calls.Add(1) == 1 {
			close(entered)
			<-unblock
		}
		mu.Lock()
		defer mu.Unlock()
		gens = append(gens, tr.Generation)
	})
	var release sync.Once
	free := func() { release.Do(func() { close(unblock); <-done }) }
	defer free()

	tk := mustAdmit(t, r, host, t0)
	go func() {
		defer close(done)
		r.Report(tk, Transient, "503", t0) // opens the host
	}()
	<-entered
	mustAdmit(t, r, host, at(time.Minute)) // half-open, while the open's callback blocks
	free()

	mu.Lock()
	defer mu.Unlock()
	if len(gens) != 2 || gens[0] >= gens[1] {
		t.Fatalf("callback saw generations %v, want two in increasing order", gens)
	}
}

// A callback may call back into the registry, even to cause another
// transition: nothing deadlocks, the nested transition is delivered after
// the one being delivered, and both before the outermost call returns.
func TestRegistryTransitionCallbackReenters(t *testing.T) {
	var r *Registry
	var got []Transition
	r = NewRegistry(Config{Threshold: 1, Rest: time.Minute}, func(tr Transition) {
		got = append(got, tr)
		if tr.To == Open && tr.Hold == NoHold {
			r.Pause(tr.Host, "opened: paused by the callback", tr.At)
			r.Get(tr.Host)
		}
	})
	outcome(t, r, host, Transient, t0)
	if len(got) != 2 || got[0].Hold != NoHold || got[1].Hold != Paused || got[0].Generation >= got[1].Generation {
		t.Fatalf("transitions %+v, want the open then the callback's pause", got)
	}
	outcome(t, r, "other.test", Transient, t0) // delivery still works afterwards
	if len(got) != 4 {
		t.Fatalf("%d transitions, want 4", len(got))
	}
}

// TestRegistryTransitionOrderConcurrent hammers hosts from many goroutines
// with outcomes, pauses and releases: each host's transitions must reach
// the callback with strictly increasing generations, and the callback is
// never run concurrently with itself.
func TestRegistryTransitionOrderConcurrent(t *testing.T) {
	const workers, ops = 16, 3000
	hosts := []string{"a.test", "b.test", "c.test", "d.test"}
	var mu sync.Mutex
	last := map[string]uint64{}
	var inside, fired atomic.Int32
	r := NewRegistry(Config{Threshold: 2, Rest: time.Millisecond, Probes: 1, ProbeTimeout: time.Millisecond}, func(tr Transition) {
		if inside.Add(1) != 1 {
			t.Error("callback run concurrently")
		}
		defer inside.Add(-1)
		fired.Add(1)
		mu.Lock()
		defer mu.Unlock()
		if g, ok := last[tr.Host]; ok && tr.Generation <= g {
			t.Errorf("%s: generation %d delivered after %d", tr.Host, tr.Generation, g)
		}
		last[tr.Host] = tr.Generation
	})
	var clock atomic.Int64
	now := func() time.Time { return at(time.Duration(clock.Add(int64(100 * time.Microsecond)))) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for range ops {
				h := hosts[rng.IntN(len(hosts))]
				switch rng.IntN(40) {
				case 0:
					r.Pause(h, "ops", now())
				case 1:
					r.Unpause(h, now())
				case 2:
					r.ResolveCase(h, now())
				default:
					if d := r.Admit(h, now()); d.Allowed {
						c := []Class{OK, OK, Transient, Transient, Throttled, Permanent}[rng.IntN(6)]
						if rng.IntN(100) == 0 {
							c = Refused
						}
						r.Report(d.Ticket, c, "", now())
					}
				}
			}
		})
	}
	wg.Wait()
	if fired.Load() < workers {
		t.Fatalf("only %d transitions: the test exercises nothing", fired.Load())
	}
}

func TestRegistryDisabled(t *testing.T) {
	r, rc := newReg(t, Config{Threshold: 1, Disabled: true})
	for i := range 12 {
		outcome(t, r, host, []Class{Transient, OK, Permanent, Throttled}[i%4], at(time.Duration(i)))
	}
	if len(r.Snapshot()) != 0 || len(rc.list()) != 0 {
		t.Fatalf("disabled registry recorded %v %v", r.Snapshot(), rc.list())
	}
	r.Pause(host, "ops", t0)
	mustDeny(t, r, host, at(time.Hour))
	if err := r.Unpause(host, at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, r, host, at(time.Hour))
	mustAdmit(t, r, host, at(time.Hour))
	// With the automatic breaker off no host is down by its account, not
	// even one left half-open by a release.
	if r.GiveUp(host, time.Hour, at(100*time.Hour)) {
		t.Fatal("GiveUp on a disabled registry")
	}
}

// The comparison mode turns the automatic breaker off, not the cases: a
// refusal that names the crawler still holds the host for a person.
func TestRegistryDisabledKeepsCases(t *testing.T) {
	r, rc := newReg(t, Config{Threshold: 1, Rest: time.Minute, Disabled: true})
	early := mustAdmit(t, r, host, t0)
	outcome(t, r, host, Refused, at(time.Second))
	if b := wantState(t, r, host, Open, Case); b.HoldReason != string(Refused) {
		t.Fatalf("hold reason %q, want the refusal's detail", b.HoldReason)
	}
	for i := range 10 {
		now := at(time.Duration(i) * time.Hour)
		r.Report(early, OK, "200", now)
		r.Report(early, Transient, "503", now)
		if d := mustDeny(t, r, host, now); d.Hold != Case || !d.RetryAt.IsZero() {
			t.Fatalf("held decision %+v, want case hold and no RetryAt", d)
		}
	}
	if r.GiveUp(host, time.Second, at(10*time.Hour)) {
		t.Fatal("GiveUp on a held host")
	}
	if err := r.ResolveCase(host, at(10*time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustAdmit(t, r, host, at(10*time.Hour))
	outcome(t, r, host, Transient, at(10*time.Hour))
	mustAdmit(t, r, host, at(10*time.Hour))
	trs := rc.list()
	if len(trs) != 2 || trs[0].To != Open || trs[0].Hold != Case || trs[0].Class != Refused ||
		trs[1].Reason != "case resolved" || trs[1].Hold != NoHold {
		t.Fatalf("transitions %+v", trs)
	}
}

// TestRegistryConcurrent hammers several hosts from many goroutines with
// random outcomes, then checks that every host recovers once it answers.
func TestRegistryConcurrent(t *testing.T) {
	const workers, ops = 16, 2000
	rest := time.Second
	r, _ := newReg(t, Config{Threshold: 3, Rest: rest, RestMax: 4 * rest, ProbeTimeout: rest})
	hosts := []string{"a.test", "b.test", "c.test", "d.test", "e.test"}
	var clock atomic.Int64
	now := func() time.Time { return at(time.Duration(clock.Add(int64(time.Millisecond)))) }
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range ops {
				h := hosts[rng.IntN(len(hosts))]
				d := r.Admit(h, now())
				if !d.Allowed {
					continue
				}
				c := []Class{OK, Transient, Transient, Permanent, Throttled}[rng.IntN(5)]
				r.Report(d.Ticket, c, "", now())
				if rng.IntN(50) == 0 {
					r.TakeDirty()
					r.Snapshot()
				}
			}
		})
	}
	wg.Wait()
	end := at(time.Duration(clock.Load()) + time.Hour)
	for _, h := range hosts {
		for i := 0; i < 10; i++ {
			if d := r.Admit(h, end); d.Allowed {
				r.Report(d.Ticket, OK, "", end)
			}
		}
	}
	if snap := r.Snapshot(); len(snap) != 0 {
		t.Fatalf("hosts did not recover: %+v", snap)
	}
}

// A probe ticket whose request was never sent is cancelled: the gate is
// free for the next probe, and the host's down clock does not move, as it
// would for an answer.
func TestRegistryCancelFreesTheGateOnly(t *testing.T) {
	r, rc := newReg(t, Config{Threshold: 1, Rest: time.Minute, Probes: 2})
	openHost(t, r, host, t0)
	probe := mustAdmit(t, r, host, at(time.Hour))
	before, _ := r.Get(host)
	n := len(rc.list())
	if !r.Cancel(probe) {
		t.Fatal("Cancel of the outstanding probe did not free the gate")
	}
	b := wantState(t, r, host, HalfOpen, NoHold)
	if b != before || len(rc.list()) != n {
		t.Fatalf("Cancel changed the breaker: %+v -> %+v, %d transitions", before, b, len(rc.list())-n)
	}
	if next := mustAdmit(t, r, host, at(time.Hour+time.Second)); !next.Probe {
		t.Fatalf("after Cancel, ticket %+v is not a probe", next)
	}
	if r.Cancel(probe) {
		t.Error("a stale probe ticket freed the gate a second time")
	}
	if r.Cancel(Ticket{Host: host, At: at(time.Hour)}) {
		t.Error("a non-probe ticket freed the gate")
	}
}

// Reprieve ends an incident of ours: the hosts that went down during it get
// a probe at once instead of a rest, with a fresh down clock and rest; a
// host down before it has the incident taken off its down time; a closed
// host's failures are forgotten; held hosts wait for a person.
func TestRegistryReprieve(t *testing.T) {
	cfg := Config{Threshold: 2, Rest: time.Minute, RestMax: 8 * time.Minute, Probes: 1}
	r, rc := newReg(t, cfg)
	openHost(t, r, "before.example", t0) // down before the incident
	since := at(10 * time.Minute)
	openHost(t, r, "during.example", since)
	// A failed probe during the incident escalated its rest.
	outcome(t, r, "during.example", Transient, since.Add(time.Minute))
	if b := wantState(t, r, "during.example", Open, NoHold); b.Rest != 2*time.Minute {
		t.Fatalf("rest %v, want escalated to 2m", b.Rest)
	}
	openHost(t, r, "paused.example", since)
	r.Pause("paused.example", "ops", since)
	outcome(t, r, "closed.example", Transient, since) // one failure, still closed
	now := since.Add(3 * time.Minute)

	before := len(rc.list())
	openGen := wantState(t, r, "during.example", Open, NoHold).Generation
	got := r.Reprieve(since, now)
	if want := []Reprieved{{Host: "during.example", Opened: openGen}}; !slices.Equal(got, want) {
		t.Fatalf("Reprieve = %+v, want %+v (the generation of the open circuit it ended)", got, want)
	}
	changed, removed := r.TakeDirty()
	for _, h := range []string{"during.example", "before.example"} {
		if _, ok := changed[h]; !ok {
			t.Errorf("%s not dirty after Reprieve: the file would not learn of it", h)
		}
	}
	if !slices.Contains(removed, "closed.example") {
		t.Errorf("removed = %v, want closed.example: its stored failure must go", removed)
	}
	b := wantState(t, r, "during.example", HalfOpen, NoHold)
	if !b.DownSince.Equal(now) || b.Rest != cfg.Rest || b.Level != 0 || b.Generation != openGen+1 {
		t.Errorf("during.example after reprieve: %+v, want down since now, rest %v, level 0, generation %d", b, cfg.Rest, openGen+1)
	}
	trs := rc.list()[before:]
	if len(trs) != 1 || trs[0].Host != "during.example" || trs[0].From != Open || trs[0].To != HalfOpen ||
		trs[0].Reason != ReprieveReason {
		t.Errorf("transitions = %+v, want one during.example open -> half-open, reason %q", trs, ReprieveReason)
	}
	// The probe is admitted now, not after a rest, and one success closes it.
	outcome(t, r, "during.example", OK, now)
	wantState(t, r, "during.example", Closed, NoHold)

	b = wantState(t, r, "before.example", Open, NoHold)
	if want := t0.Add(now.Sub(since)); !b.DownSince.Equal(want) {
		t.Errorf("before.example down since %v, want %v: the incident's 3m taken off", b.DownSince.Sub(t0), want.Sub(t0))
	}
	if r.GiveUp("before.example", now.Sub(t0)-time.Second, now) {
		t.Error("before.example is given up on counting the incident as its down time")
	}
	wantState(t, r, "paused.example", Open, Paused)
	if _, ok := r.Get("closed.example"); ok {
		t.Error("closed.example keeps its failure: the incident's failures were ours")
	}
}

// DueToGiveUp lists exactly the hosts GiveUp says yes to.
func TestRegistryDueToGiveUpAgreesWithGiveUp(t *testing.T) {
	r, _ := newReg(t, Config{Threshold: 2, Rest: time.Minute, Probes: 1})
	outcome(t, r, "long.test", Transient, t0)
	outcome(t, r, "long.test", Transient, t0) // open since t0
	outcome(t, r, "recent.test", Transient, at(50*time.Minute))
	outcome(t, r, "recent.test", Transient, at(50*time.Minute)) // open since 50m
	outcome(t, r, "paused.test", Transient, t0)
	outcome(t, r, "paused.test", Transient, t0)
	r.Pause("paused.test", "ops", at(time.Minute))
	outcome(t, r, "failing.test", Transient, t0) // closed, one failure counted
	for _, now := range []time.Time{t0, at(59 * time.Minute), at(time.Hour), at(2 * time.Hour)} {
		due := r.DueToGiveUp(time.Hour, now)
		slices.Sort(due)
		var want []string
		for _, h := range []string{"failing.test", "long.test", "paused.test", "recent.test"} {
			if r.GiveUp(h, time.Hour, now) {
				want = append(want, h)
			}
		}
		if !slices.Equal(due, want) {
			t.Errorf("at %s: DueToGiveUp = %q, GiveUp says %q", now.Sub(t0), due, want)
		}
	}
	if due := r.DueToGiveUp(time.Hour, at(2*time.Hour)); len(due) != 2 {
		t.Errorf("at 2h: %q due, want long.test and recent.test", due)
	}
}
