package breaker

import (
	"errors"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The model is a second, deliberately naive reading of the rules. It never
// evicts anything and knows nothing of generations: a ticket is current if
// it was issued in the host's present period (periods end at transitions),
// and the probe gate remembers which ticket holds it.

type modelHost struct {
	state    State
	hold     Hold   // a set of flags
	detail   string // the case's refusal detail
	why      string // the pause's reason
	failures int
	probeOK  int
	openedAt time.Time
	rest     time.Duration
	level    int
	down     time.Time
	period   int
	gate     int // id of the ticket holding the probe gate, or -1
	gateAt   time.Time
}

func (m *modelHost) clean() bool { return m.state == Closed && m.failures == 0 && m.hold == NoHold }

type modelTicket struct {
	id     int
	host   string
	probe  bool
	period int
	real   Ticket
}

type model struct {
	cfg         Config
	now         time.Time
	hosts       map[string]*modelHost
	transitions int
	nextID      int
}

func (m *model) host(h string) *modelHost {
	if m.hosts[h] == nil {
		m.hosts[h] = &modelHost{gate: -1}
	}
	return m.hosts[h]
}

func (m *model) moved(mh *modelHost) {
	mh.period++
	mh.gate = -1
	m.transitions++
}

func (m *model) open(mh *modelHost) {
	if mh.state == Closed {
		mh.down, mh.rest, mh.level = m.now, m.cfg.Rest, 0
	}
	mh.state, mh.openedAt, mh.failures, mh.probeOK = Open, m.now, 0, 0
	m.moved(mh)
}

// admit returns the model's decision and, if allowed, the ticket it issues.
func (m *model) admit(h string) (Decision, *modelTicket) {
	mh := m.host(h)
	if mh.hold == NoHold && mh.state == Open && !m.now.Before(mh.openedAt.Add(mh.rest)) {
		mh.state, mh.probeOK = HalfOpen, 0
		m.moved(mh)
	}
	d := Decision{State: mh.state, Hold: mh.hold}
	switch {
	case mh.hold != NoHold:
		return d, nil
	case mh.state == Open:
		d.RetryAt = mh.openedAt.Add(mh.rest)
		return d, nil
	case mh.state == HalfOpen && mh.gate >= 0 && m.now.Before(mh.gateAt.Add(m.cfg.ProbeTimeout)):
		d.RetryAt = mh.gateAt.Add(m.cfg.ProbeTimeout)
		return d, nil
	}
	m.nextID++
	tk := &modelTicket{id: m.nextID, host: h, probe: mh.state == HalfOpen, period: mh.period}
	if tk.probe {
		mh.gate, mh.gateAt = tk.id, m.now
	}
	d.Allowed = true
	return d, tk
}

func (m *model) report(tk *modelTicket, c Class, detail string) {
	mh := m.host(tk.host)
	if mh.gate == tk.id {
		mh.gate = -1
	}
	if c == Refused {
		if mh.hold&Case == 0 {
			m.addHold(mh, Case)
			mh.detail = detail
		}
		return
	}
	switch {
	case mh.state == Closed && !tk.probe:
		m.closedOutcome(mh, c)
	case mh.state == HalfOpen && tk.probe && tk.period == mh.period:
		m.probeOutcome(mh, c)
	}
}

func (m *model) closedOutcome(mh *modelHost, c Class) {
	switch c {
	case OK:
		mh.failures = 0
	case Transient:
		if mh.failures++; mh.failures == m.cfg.Threshold {
			m.open(mh)
		}
	}
}

func (m *model) probeOutcome(mh *modelHost, c Class) {
	switch c {
	case OK:
		if mh.probeOK++; mh.probeOK == m.cfg.Probes {
			mh.state, mh.probeOK, mh.down, mh.rest, mh.level = Closed, 0, time.Time{}, m.cfg.Rest, 0
			m.moved(mh)
		}
	case Transient:
		if doubled := min(2*mh.rest, m.cfg.RestMax); doubled > mh.rest {
			mh.rest, mh.level = doubled, mh.level+1
		}
		m.open(mh)
	case Permanent, Throttled:
		mh.down = m.now // the host answered
	}
}

// addHold: an unheld host opens; a held one is open already and only
// gains the flag, which is a transition all the same.
func (m *model) addHold(mh *modelHost, h Hold) {
	if mh.hold == NoHold {
		m.open(mh)
	} else {
		m.moved(mh)
	}
	mh.hold |= h
}

func (m *model) pause(h, reason string) {
	mh := m.host(h)
	if mh.hold&Paused == 0 {
		m.addHold(mh, Paused)
	}
	mh.why = reason
}

// release returns the sentinel the registry must return, or nil.
func (m *model) release(h string, want Hold) error {
	mh := m.host(h)
	if mh.hold&want == 0 {
		switch {
		case want == Case:
			return ErrNoCase
		case mh.hold&Case != 0:
			return ErrCaseOpen
		}
		return ErrNotPaused
	}
	mh.hold &^= want
	if want == Case {
		mh.detail = ""
	} else {
		mh.why = ""
	}
	if mh.hold == NoHold {
		mh.state, mh.probeOK, mh.down = HalfOpen, 0, m.now
	}
	m.moved(mh)
	return nil
}

func TestRegistryMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		cfg := Config{Threshold: 3, Rest: 10 * time.Second, RestMax: 40 * time.Second, Probes: 2, ProbeTimeout: 4 * time.Second}
		s := newModelRun(cfg)
		for range 4 {
			rt.Repeat(s.actions())
		}
	})
}

type modelRun struct {
	r       *Registry
	rc      *recorder
	m       *model
	pool    []*modelTicket // issued, unreported
	lastGen map[string]uint64
	lastPer map[string]int
}

var modelHosts = []string{"a.test", "b.test"}

func newModelRun(cfg Config) *modelRun {
	rc := &recorder{}
	return &modelRun{
		r:       NewRegistry(cfg, rc.add),
		rc:      rc,
		m:       &model{cfg: cfg.WithDefaults(), now: t0, hosts: map[string]*modelHost{}},
		lastGen: map[string]uint64{},
		lastPer: map[string]int{},
	}
}

func (s *modelRun) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"admit":   s.admit,
		"report":  s.report,
		"wait":    s.wait,
		"jump":    s.jump,
		"pause":   s.pause,
		"unpause": func(t *rapid.T) { s.release(t, Paused) },
		"resolve": func(t *rapid.T) { s.release(t, Case) },
		"":        s.check,
	}
}

func (s *modelRun) admit(t *rapid.T) {
	h := rapid.SampledFrom(modelHosts).Draw(t, "host")
	got := s.r.Admit(h, s.m.now)
	want, tk := s.m.admit(h)
	if got.Allowed && got.Hold != NoHold {
		t.Fatalf("held host %s admitted: %+v", h, got)
	}
	if got.Allowed != want.Allowed || got.State != want.State || got.Hold != want.Hold ||
		!got.RetryAt.Equal(want.RetryAt) || (tk != nil && got.Ticket.Probe != tk.probe) {
		t.Fatalf("Admit(%s) = %+v, model %+v (probe %v)", h, got, want, tk != nil && tk.probe)
	}
	if tk != nil {
		tk.real = got.Ticket
		s.pool = append(s.pool, tk)
	}
}

func (s *modelRun) report(t *rapid.T) {
	if len(s.pool) == 0 {
		t.Skip("no ticket outstanding")
	}
	i := rapid.IntRange(0, len(s.pool)-1).Draw(t, "ticket")
	// Refusals are rarer than the rest so that cases do not swamp the run.
	c := rapid.SampledFrom([]Class{OK, OK, OK, Transient, Transient, Transient, Permanent, Throttled, Refused}).Draw(t, "class")
	tk := s.pool[i]
	s.pool = slices.Delete(s.pool, i, i+1)
	s.r.Report(tk.real, c, "d"+string(c), s.m.now)
	s.m.report(tk, c, "d"+string(c))
}

func (s *modelRun) wait(t *rapid.T) {
	rest, pt := s.m.cfg.Rest, s.m.cfg.ProbeTimeout
	d := rapid.SampledFrom([]time.Duration{0, time.Nanosecond, time.Second, pt, rest, 4 * rest}).Draw(t, "wait")
	s.m.now = s.m.now.Add(d)
}

// jump moves the clock onto (or 1ns before) a host's rest end or probe
// deadline, where off-by-one mistakes live.
func (s *modelRun) jump(t *rapid.T) {
	mh := s.m.host(rapid.SampledFrom(modelHosts).Draw(t, "host"))
	var target time.Time
	switch {
	case mh.state == Open && mh.hold == NoHold:
		target = mh.openedAt.Add(mh.rest)
	case mh.state == HalfOpen && mh.gate >= 0:
		target = mh.gateAt.Add(s.m.cfg.ProbeTimeout)
	default:
		t.Skip("no boundary ahead")
	}
	target = target.Add(-time.Duration(rapid.IntRange(0, 1).Draw(t, "before")))
	if target.Before(s.m.now) {
		t.Skip("boundary passed")
	}
	s.m.now = target
}

func (s *modelRun) pause(t *rapid.T) {
	h := rapid.SampledFrom(modelHosts).Draw(t, "host")
	reason := rapid.SampledFrom([]string{"complaint", "notice"}).Draw(t, "reason")
	s.r.Pause(h, reason, s.m.now)
	s.m.pause(h, reason)
}

func (s *modelRun) release(t *rapid.T, hold Hold) {
	h := rapid.SampledFrom(modelHosts).Draw(t, "host")
	var err error
	if hold == Paused {
		err = s.r.Unpause(h, s.m.now)
	} else {
		err = s.r.ResolveCase(h, s.m.now)
	}
	if want := s.m.release(h, hold); !errors.Is(err, want) || (want == nil) != (err == nil) {
		t.Fatalf("release %s of %s = %v, model %v", hold, h, err, want)
	}
}

func (s *modelRun) check(t *rapid.T) {
	snap := s.r.Snapshot()
	for _, h := range modelHosts {
		mh := s.m.host(h)
		b, ok := s.r.Get(h)
		if _, inSnap := snap[h]; ok != !mh.clean() || inSnap != ok {
			t.Fatalf("%s: entry %v (snapshot %v), model clean %v: %+v", h, ok, inSnap, mh.clean(), b)
		}
		s.checkHost(t, h, mh, b)
		if ok {
			s.checkGeneration(t, h, mh, b)
		}
		s.checkOneProbe(t, h, b)
	}
	if n := len(s.rc.list()); n != s.m.transitions {
		t.Fatalf("%d transitions fired, model made %d", n, s.m.transitions)
	}
}

func (s *modelRun) checkHost(t *rapid.T, h string, mh *modelHost, b Breaker) {
	if b.State != mh.state || b.Hold != mh.hold || b.HoldReason != mh.detail || b.PauseReason != mh.why ||
		b.Failures != mh.failures || b.ProbeSuccesses != mh.probeOK {
		t.Fatalf("%s: registry %+v, model %+v", h, b, *mh)
	}
	if mh.state == Closed {
		return
	}
	if b.Rest != mh.rest || b.Level != mh.level || !b.OpenedAt.Equal(mh.openedAt) || !b.DownSince.Equal(mh.down) {
		t.Fatalf("%s: registry %+v, model %+v", h, b, *mh)
	}
}

// checkGeneration: generations never go back, even across eviction, and
// every transition the model saw moved them on.
func (s *modelRun) checkGeneration(t *rapid.T, h string, mh *modelHost, b Breaker) {
	last, seen := s.lastGen[h]
	if seen && (b.Generation < last || (mh.period != s.lastPer[h] && b.Generation == last)) {
		t.Fatalf("%s: generation %d after %d (model period %d after %d)", h, b.Generation, last, mh.period, s.lastPer[h])
	}
	s.lastGen[h], s.lastPer[h] = b.Generation, mh.period
}

// checkOneProbe: at most one unreported, unexpired probe of the current
// generation.
func (s *modelRun) checkOneProbe(t *rapid.T, h string, b Breaker) {
	n := 0
	for _, tk := range s.pool {
		if tk.host == h && tk.real.Probe && tk.real.Generation == b.Generation &&
			s.m.now.Before(tk.real.At.Add(s.m.cfg.ProbeTimeout)) {
			n++
		}
	}
	if n > 1 {
		t.Fatalf("%s: %d probes outstanding", h, n)
	}
}
