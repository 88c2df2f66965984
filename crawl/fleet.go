package crawl

import (
	"fmt"
	"os"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/store"
)

// A store several processes crawl at once (a fleet's, --store) runs this
// engine in every process. What changes is below the request path, and
// the store says it (Capabilities): its frontier hands a process the
// hosts it alone fetches, and each host's breaker is shared. The registry
// of each process still decides admissions from its copy of the breakers
// of the hosts it holds, so admitting a request costs no round trip;
// every outcome that can change a breaker goes to the shared breaker,
// which is the authority, and a half-open probe must also take the
// store's probe gate.

// FleetOptions tune a crawl of a store several processes crawl at once.
type FleetOptions struct {
	// ID names the process in the fleet; default HOSTNAME-PID.
	ID string
	// Lease is how long a process holds a host without renewing it: a
	// process that dies gives its hosts back within a lease. Default 10s.
	Lease time.Duration
}

// needsCapability lists the options a store may lack the means for: a
// store without the capability refuses the option, all in one message.
var needsCapability = []struct {
	flag string
	set  func(o *Options) bool
	has  func(c store.Capabilities) bool
}{
	{"--recrawl-after", func(o *Options) bool { return o.RecrawlAfter > 0 }, func(c store.Capabilities) bool { return c.Refresh }},
	{"--retry-failed", func(o *Options) bool { return o.RetryFailed }, func(c store.Capabilities) bool { return c.RetryFailed }},
	{"--max-pages-per-host", func(o *Options) bool { return o.MaxPagesPerHost > 0 }, func(c store.Capabilities) bool { return c.HostPageCap }},
}

// ValidateFor refuses the options the store cannot carry out, and, on a
// store several processes crawl, a bad --fleet-id or --fleet-lease.
func (o *Options) ValidateFor(c store.Capabilities) error {
	if !c.SoleWriter {
		switch {
		case o.Fleet.ID != "" && !validFleetID(o.Fleet.ID):
			return fmt.Errorf("--fleet-id %q: use letters, digits, '.', '_' and '-' only (it names the process's WARC files)", o.Fleet.ID)
		case o.Fleet.Lease != 0 && o.Fleet.Lease < 100*time.Millisecond:
			return fmt.Errorf("--fleet-lease %s: at least 100ms", o.Fleet.Lease)
		}
	}
	for _, n := range needsCapability {
		if n.set(o) && !n.has(c) {
			return fmt.Errorf("%s is not supported with %s yet", n.flag, c.Name)
		}
	}
	return nil
}

func validFleetID(id string) bool {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return len(id) <= 64
}

// openFrontier opens the store's frontier.
func (e *Engine) openFrontier() (frontier.Queue, error) {
	opts := e.opts
	cfg := frontier.Config{Process: e.processID(), HostConcurrency: opts.HostConcurrency, Workers: opts.Workers,
		Lease: opts.Fleet.Lease, Breaker: opts.breakerConfig(), OnClaim: e.claimed, OnBreaker: e.sharedBreaker,
		Now: opts.Now, Logger: opts.Logger}
	if e.archive != nil {
		cfg.Archive = e.archive
	}
	return e.db.OpenFrontier(cfg)
}

// processID names this process among those crawling the store:
// --fleet-id, or HOSTNAME-PID.
func (e *Engine) processID() string {
	if e.opts.Fleet.ID == "" {
		host, _ := os.Hostname()
		e.opts.Fleet.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	return e.opts.Fleet.ID
}

// sharedBreaker takes in a host's shared breaker: when the process takes
// the host, and when someone else changed it (a pause from the command
// line).
func (e *Engine) sharedBreaker(host string, b breaker.Breaker) {
	e.breakers.Load(host, b)
	e.syncHold(host)
}

// shareOutcome hands an outcome to the host's shared breaker, unless it
// cannot change it: an answer from a host whose breaker is clean (the
// common case, which so costs the store nothing).
func (e *Engine) shareOutcome(t breaker.Ticket, before breaker.Breaker, known bool, v Verdict, now time.Time) {
	if v.Class != breaker.Transient && v.Class != breaker.Refused && (!known || before.Clean()) {
		return
	}
	e.front.Outcome(t, v.Class, v.Detail, now)
}

// takeProbeGate takes the store's probe gate for a half-open probe: one
// process at a time probes a host, whatever its own registry admits.
func (e *Engine) takeProbeGate(t breaker.Ticket) bool {
	if !t.Probe {
		return true
	}
	won, err := e.front.TryProbe(t.Host, t.Generation)
	if err != nil {
		e.log.Warn("take the fleet's probe gate", "host", t.Host, "err", err)
		return false
	}
	return won
}
