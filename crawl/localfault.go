package crawl

// The local-fault guard. Hosts fail one by one and their breakers deal
// with it; when many unrelated hosts that were answering start failing at
// once, the fault is almost always ours: DNS, egress, certificates, the
// machine's network. Fed to the breakers host by host, such an outage
// opens every circuit the crawl touches, rests each for a full rest after
// the network is back, and counts toward giving up on all of them. The
// guard sees the pattern instead, pauses every fetch, probes a few of the
// hosts at growing intervals, and when one answers resumes and sends the
// hosts it opened back to half-open (breaker.Registry.Reprieve, and on a
// fleet the shared breakers too, frontier.Queue.Reprieve): a probe, not a
// rest. No host is given up on during an incident, and its time is
// not counted as any host's down time.

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unique"

	"breakwater/breaker"
	"breakwater/control"
	"breakwater/fetch"
)

// LocalFaultOptions tune the guard.
type LocalFaultOptions struct {
	// Hosts is the least number of hosts failing at once that trips the
	// guard; zero turns it off. Default 5.
	Hosts int
	// Share is the least fraction of the recently active hosts those must
	// be. Default 0.5.
	Share float64
	// Window is how close together "at once" is, and how recent a host's
	// last outcome must be for it to count as active. Default 60s.
	Window time.Duration
}

// A host counts as failing once this many transient failures follow its
// last answer: one failure on each of several hosts in the same second
// is the web's normal noise; two in a row on most of them is not.
const suspectFailures = 2

// The probes of an incident: a sample of a few of the failing hosts and,
// when there are any, a few still answering (if those answer while the
// others do not, the network works), probeEach of them a round, in turn.
// The gap between rounds is a quarter of the incident's age, within
// bounds: the crawl is back within about a quarter of an outage's length
// after it ends, and a long one costs a probe or two a minute.
const (
	probeFailing      = 3
	probeAnswering    = 2
	probeEach         = 2
	minProbeInterval  = time.Second
	maxProbeInterval  = time.Minute
	maxRoundsInFlight = 3
	probeMaxBody      = 64 << 10
)

// probeInterval is the gap after a round started at now in an incident
// tripped at tripped.
func probeInterval(tripped, now time.Time) time.Duration {
	return min(max(now.Sub(tripped)/4, minProbeInterval), maxProbeInterval)
}

// hostSignal is what the guard knows of one host, kept in its hostState.
type hostSignal struct {
	answeredAt  time.Time // last answer of any status
	answeredURL string    // the URL it answered, which a probe asks again
	// failingSince is the first of the transient failures since the last
	// answer, failures their number, failedAt the last and failKind its
	// kind ("timeout", "dns", "status 5xx").
	failingSince time.Time
	failures     int
	failedAt     time.Time
	failKind     string
}

// observe takes one outcome; it reports whether the host has just become
// a suspect: it had answered, and now fails suspectFailures times in a row.
func (s *hostSignal) observe(v Verdict, url string, now time.Time) bool {
	if v.Class != breaker.Transient {
		if v.Status > 0 {
			s.answeredAt, s.answeredURL = now, url
			s.failingSince, s.failures = time.Time{}, 0
		}
		return false
	}
	if s.failures == 0 {
		s.failingSince = now
	}
	s.failures++
	s.failedAt, s.failKind = now, failureKind(v)
	return s.failures == suspectFailures && !s.answeredAt.IsZero()
}

// opened takes the host's circuit opening at now: as good as failing
// twice (a threshold of 1 opens it at the first failure, and the opening
// cuts its other requests short, so no second failure would come). It
// reports whether the host has just become a suspect.
func (s *hostSignal) opened(now time.Time) bool {
	if s.failures >= suspectFailures {
		return false
	}
	if s.failures == 0 {
		s.failingSince, s.failKind = now, "circuit opened"
	}
	s.failures, s.failedAt = suspectFailures, now
	return !s.answeredAt.IsZero()
}

// circuitOpened tells the guard that host's circuit opened from closed.
func (e *Engine) circuitOpened(host string, now time.Time) {
	g := e.guard
	if g == nil {
		return
	}
	hs := e.hosts.lookup(host, now)
	if hs == nil {
		return
	}
	hs.mu.Lock()
	suspect := hs.signal.opened(now)
	hs.mu.Unlock()
	if suspect {
		g.suspectAt.Store(now.UnixNano())
	}
}

// failureKind is the kind of a transient failure, for the incident's
// evidence: the error's kind, or the status class. It is interned: a
// slice of the detail would keep the whole error text alive in the
// signal of every failing host, where a few kinds are all there is.
func failureKind(v Verdict) string {
	if v.Status >= 500 {
		return "status 5xx"
	}
	kind, _, _ := strings.Cut(v.Detail, ": ")
	return unique.Make(kind).Value()
}

// hostReading is one host's signal as the guard reads it.
type hostReading struct {
	host string
	hostSignal
}

// probeTarget is a URL a host answered before, asked again by a probe.
type probeTarget struct{ host, url string }

// incident is a local fault in progress.
type incident struct {
	since   time.Time // the first failure of the evidence
	tripped time.Time
	failing int // hosts failing at once, of active
	active  int
	kinds   map[string]int // the failing hosts' last error kinds
	targets []probeTarget
	// nextProbe is when the next round of probes starts; inFlight counts
	// rounds not yet back, rounds all of them.
	nextProbe time.Time
	inFlight  int
	rounds    int
}

// assess decides whether the readings show a local fault at now. A host
// is active if its last outcome is at most Window old, and failing if it
// had answered and has failed suspectFailures times in a row since, the
// first of them within Window and after ended (the end of the last
// incident: a host that failed through it is no new evidence).
func assess(cfg LocalFaultOptions, readings []hostReading, ended, now time.Time) (*incident, bool) {
	var failing, answering []hostReading
	active := 0
	recent := func(t time.Time) bool { return !t.IsZero() && now.Sub(t) <= cfg.Window }
	for _, r := range readings {
		if !recent(r.answeredAt) && !recent(r.failedAt) {
			continue
		}
		active++
		switch {
		case r.failures == 0:
			answering = append(answering, r)
		case r.failures >= suspectFailures && !r.answeredAt.IsZero() && recent(r.failingSince) &&
			!r.failingSince.Before(ended):
			failing = append(failing, r)
		}
	}
	if cfg.Hosts <= 0 || len(failing) < cfg.Hosts || float64(len(failing)) < cfg.Share*float64(active) {
		return nil, false
	}
	inc := &incident{since: now, tripped: now, failing: len(failing), active: active,
		kinds: map[string]int{}, nextProbe: now.Add(minProbeInterval)}
	for _, r := range failing {
		inc.kinds[r.failKind]++
		if r.failingSince.Before(inc.since) {
			inc.since = r.failingSince
		}
	}
	// The hosts that answered last are the likeliest to answer first.
	byAnswer := func(rs []hostReading) {
		sort.Slice(rs, func(i, j int) bool {
			if !rs[i].answeredAt.Equal(rs[j].answeredAt) {
				return rs[i].answeredAt.After(rs[j].answeredAt)
			}
			return rs[i].host < rs[j].host
		})
	}
	byAnswer(failing)
	byAnswer(answering)
	for _, r := range failing[:min(len(failing), probeFailing)] {
		inc.targets = append(inc.targets, probeTarget{r.host, r.answeredURL})
	}
	for _, r := range answering {
		if len(inc.targets) == probeFailing+probeAnswering {
			break
		}
		if r.answeredURL != "" {
			inc.targets = append(inc.targets, probeTarget{r.host, r.answeredURL})
		}
	}
	return inc, true
}

// faultGuard holds the guard's state. Workers read paused on every lease,
// an atomic; everything else is under mu.
type faultGuard struct {
	cfg    LocalFaultOptions
	paused atomic.Bool
	// suspectAt is when a host last became a suspect (Unix ns): the hosts
	// are read only while one did within the window, so a healthy crawl
	// never reads them.
	suspectAt atomic.Int64

	endMu    sync.Mutex // serializes endIncident: one reprieve per incident
	mu       sync.Mutex
	incident *incident
	resume   chan struct{} // closed when the incident ends
	ended    time.Time     // when the last incident ended
	probing  map[string]int
	// probeCtx ends the probes when the workers stop; rounds counts the
	// rounds still running, which Run waits for.
	probeCtx    context.Context
	cancelProbe context.CancelFunc
	rounds      sync.WaitGroup
}

func newFaultGuard(cfg LocalFaultOptions) *faultGuard {
	if cfg.Hosts <= 0 {
		return nil
	}
	return &faultGuard{cfg: cfg, probing: map[string]int{}}
}

// start ties the probes to parent, the crawl's fetch context.
func (g *faultGuard) start(parent context.Context) {
	if g != nil {
		g.probeCtx, g.cancelProbe = context.WithCancel(parent)
	}
}

// stop ends the probes under way and waits for them.
func (g *faultGuard) stop() {
	if g != nil {
		g.cancelProbe()
		g.rounds.Wait()
	}
}

// active reports whether fetching is paused for an incident; false for a
// guard that is off (nil).
func (g *faultGuard) active() bool { return g != nil && g.paused.Load() }

// wait blocks while an incident pauses fetching, until it ends or ctx is
// done; it returns ctx's error in the second case.
func (g *faultGuard) wait(ctx context.Context) error {
	if !g.active() {
		return nil
	}
	g.mu.Lock()
	resume := g.resume
	g.mu.Unlock()
	if resume == nil {
		return nil
	}
	select {
	case <-resume:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// probes reports whether host is being probed: its connections must not
// be refused for its open circuit.
func (g *faultGuard) probes(host string) bool {
	if !g.active() {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.probing[host] > 0
}

// trip starts inc unless an incident is under way.
func (g *faultGuard) trip(inc *incident) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.incident != nil {
		return false
	}
	g.incident, g.resume = inc, make(chan struct{})
	g.paused.Store(true)
	return true
}

// end ends the incident, if one is under way, and returns it.
func (g *faultGuard) end(now time.Time) *incident {
	g.mu.Lock()
	defer g.mu.Unlock()
	inc := g.incident
	if inc == nil {
		return nil
	}
	g.incident, g.ended = nil, now
	g.paused.Store(false)
	close(g.resume)
	g.resume = nil
	return inc
}

// dueRound returns the targets of a round of probes due at now, and books
// the round, or nil when none is due.
func (g *faultGuard) dueRound(now time.Time) []probeTarget {
	g.mu.Lock()
	defer g.mu.Unlock()
	inc := g.incident
	if inc == nil || now.Before(inc.nextProbe) || inc.inFlight >= maxRoundsInFlight || len(inc.targets) == 0 {
		return nil
	}
	inc.nextProbe = now.Add(probeInterval(inc.tripped, now))
	var targets []probeTarget
	for i := range min(probeEach, len(inc.targets)) {
		targets = append(targets, inc.targets[(inc.rounds*probeEach+i)%len(inc.targets)])
	}
	inc.inFlight++
	inc.rounds++
	for _, t := range targets {
		g.probing[t.host]++
	}
	return targets
}

// roundDone books the end of a round started for inc.
func (g *faultGuard) roundDone(inc *incident, targets []probeTarget) {
	g.mu.Lock()
	defer g.mu.Unlock()
	inc.inFlight--
	for _, t := range targets {
		if g.probing[t.host]--; g.probing[t.host] <= 0 {
			delete(g.probing, t.host)
		}
	}
}

// status describes the incident under way, nil when none.
func (g *faultGuard) status() *control.LocalFault {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	inc := g.incident
	if inc == nil {
		return nil
	}
	st := &control.LocalFault{Since: inc.since, TrippedAt: inc.tripped, FailingHosts: inc.failing,
		ActiveHosts: inc.active, ErrorKinds: maps.Clone(inc.kinds), NextProbe: inc.nextProbe, ProbeRounds: inc.rounds}
	for _, t := range inc.targets {
		st.Probing = append(st.Probing, t.host)
	}
	return st
}

// watchLocalFault is the guard's housekeeping at now: while no incident is
// under way it looks for one, and during one it starts the probes due.
func (e *Engine) watchLocalFault(now time.Time) {
	g := e.guard
	if g == nil {
		return
	}
	if g.active() {
		e.probeRound(now)
		return
	}
	if now.Sub(time.Unix(0, g.suspectAt.Load())) > g.cfg.Window {
		return
	}
	g.mu.Lock()
	ended := g.ended
	g.mu.Unlock()
	inc, ok := assess(g.cfg, e.hosts.signals(), ended, now)
	if !ok || !g.trip(inc) {
		return
	}
	// Requests in flight are waiting on the same fault: cut them short,
	// which gives their URLs back unattempted.
	e.hosts.abortAll()
	kinds := control.DescribeKinds(inc.kinds)
	e.log.Error("local fault suspected: many hosts that were answering fail at once, so the fault is "+
		"likely ours (DNS, egress, certificates, the network); all fetching is paused and a few hosts are "+
		"probed until one answers. No host is given up on meanwhile.",
		"failing_hosts", inc.failing, "active_hosts", inc.active, "errors", kinds,
		"since", inc.since.UTC().Format(time.RFC3339), "probing", len(inc.targets))
	e.opts.Metrics.LocalFault()
	e.opts.Notify.Send("local-fault", map[string]any{"failing_hosts": inc.failing, "active_hosts": inc.active,
		"errors": inc.kinds, "since": inc.since.UTC().Format(time.RFC3339)})
}

// probeRound starts the round of probes due at now, if any. Each probe
// asks a URL its host answered before; any HTTP answer, whatever its
// status, shows our network works again and ends the incident. Rounds may
// overlap: a probe to a host that hangs takes --timeout to fail, longer
// than the first intervals.
func (e *Engine) probeRound(now time.Time) {
	g := e.guard
	targets := g.dueRound(now)
	if targets == nil {
		return
	}
	g.mu.Lock()
	inc := g.incident
	g.mu.Unlock()
	g.rounds.Go(func() {
		defer g.roundDone(inc, targets)
		answered := make(chan string, len(targets))
		var wg sync.WaitGroup
		for _, t := range targets {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(g.probeCtx, e.opts.Timeout)
				defer cancel()
				// Any answer will do, a 401 too: no credential need go.
				r := e.fetcher.Fetch(ctx, fetch.Request{URL: t.url, MaxBody: probeMaxBody, WithoutSecrets: true})
				r.Release()
				if r.Err == nil && r.Status > 0 {
					answered <- t.host
				}
			})
		}
		wg.Wait()
		close(answered)
		var hosts []string
		for h := range answered {
			hosts = append(hosts, h)
		}
		if len(hosts) > 0 && g.probeCtx.Err() == nil {
			slices.Sort(hosts)
			e.endIncident(inc, hosts, e.opts.Now())
		}
	})
}

// endIncident ends inc, once some probes were answered: every host that
// went down during it goes to half-open before the workers resume, so
// that none waits out a rest for a fault that was ours.
func (e *Engine) endIncident(inc *incident, answered []string, now time.Time) {
	g := e.guard
	g.endMu.Lock()
	defer g.endMu.Unlock()
	g.mu.Lock()
	current := g.incident == inc
	g.mu.Unlock()
	if !current {
		return // another round ended it already
	}
	reprieved := e.breakers.Reprieve(inc.since, now)
	// On a fleet the shared breakers are the authority: reprieved here
	// alone, they would stay open for every other process, and this one
	// would load them open again at its next claim of the host.
	if len(reprieved) > 0 {
		e.front.Reprieve(reprieved, inc.since, now)
	}
	g.end(now)
	for _, r := range reprieved {
		e.front.Unpark(r.Host, now)
	}
	e.persistBreakers()
	lasted := now.Sub(inc.tripped)
	e.log.Warn("local fault cleared: probes were answered, fetching resumes; the hosts opened during it "+
		"are probed again at once", "answered", strings.Join(answered, " "), "paused_s", lasted.Seconds(),
		"probe_rounds", inc.rounds, "hosts_to_half_open", len(reprieved))
	e.opts.Notify.Send("local-fault-cleared", map[string]any{"paused_s": lasted.Seconds(),
		"hosts_to_half_open": len(reprieved), "answered": answered})
}
