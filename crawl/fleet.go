package crawl

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/redisstore"
	"breakwater/storage"
)

// A fleet crawl (--store redis://...) runs this engine in every process
// of the fleet over one Redis store. What changes is below the request
// path: the frontier is the fleet's (redisstore.Frontier), which hands a
// process the hosts it alone fetches, and each host's breaker is shared.
// The registry of each process still decides admissions from its copy of
// the breakers of the hosts it holds, so admitting a request costs no
// round trip; every outcome that can change a breaker goes to the shared
// breaker's script, which is the authority, and a half-open probe must
// also take the fleet's probe gate.

// FleetOptions tune a fleet crawl.
type FleetOptions struct {
	// ID names the process in the fleet; default HOSTNAME-PID.
	ID string
	// Lease is how long a process holds a host without renewing it: a
	// process that dies gives its hosts back within a lease. Default 10s.
	Lease time.Duration
}

// ValidateFleet refuses the options a fleet store does not support yet,
// and a bad --fleet-id or --fleet-lease.
func (o *Options) ValidateFleet() error {
	switch {
	case o.Fleet.ID != "" && !validFleetID(o.Fleet.ID):
		return fmt.Errorf("--fleet-id %q: use letters, digits, '.', '_' and '-' only (it names the process's WARC files)", o.Fleet.ID)
	case o.Fleet.Lease != 0 && o.Fleet.Lease < 100*time.Millisecond:
		return fmt.Errorf("--fleet-lease %s: at least 100ms", o.Fleet.Lease)
	case o.RecrawlAfter > 0:
		return errors.New("--recrawl-after is not supported with --store redis:// yet")
	case o.RetryFailed:
		return errors.New("--retry-failed is not supported with --store redis:// yet")
	case o.MaxPagesPerHost > 0:
		return errors.New("--max-pages-per-host is not supported with --store redis:// yet")
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

// openFrontier opens the file's frontier, or a fleet frontier on a
// fleet's store.
func (e *Engine) openFrontier() (crawlFrontier, error) {
	opts := e.opts
	if rs, ok := e.db.(*redisstore.Store); ok {
		fo := redisstore.FrontierOptions{ID: e.fleetID(),
			HostConcurrency: opts.HostConcurrency, Hosts: FleetHosts(opts.Workers, opts.HostConcurrency), Lease: opts.Fleet.Lease,
			Breakers: redisstore.NewBreakers(rs.Client(), opts.breakerConfig()),
			OnClaim:  e.sharedBreaker, OnBreaker: e.sharedBreaker, Now: opts.Now, Logger: opts.Logger}
		if e.archive != nil {
			fo.Archive = e.archive
		}
		e.fleet = fleetAdapter{redisstore.OpenFrontier(rs, fo)}
		return e.fleet, nil
	}
	db, ok := e.db.(*storage.DB)
	if !ok {
		return nil, fmt.Errorf("crawl: a store of type %T has no frontier", e.db)
	}
	fo := frontier.Options{HostConcurrency: opts.HostConcurrency, Now: opts.Now, Logger: opts.Logger}
	if e.archive != nil {
		fo.Archive = e.archive
	}
	return frontier.Open(db, fo)
}

// FleetHosts is how many hosts with work a process holds: enough to keep
// its workers busy twice over, and no more, so that the hosts of a crawl
// are spread over the fleet instead of held by the first process.
func FleetHosts(workers, hostConcurrency int) int {
	return max(8, 2*((workers+hostConcurrency-1)/hostConcurrency))
}

// fleetID names this process in the fleet: --fleet-id, or HOSTNAME-PID.
func (e *Engine) fleetID() string {
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
// common case, which so costs Redis nothing).
func (e *Engine) shareOutcome(t breaker.Ticket, before breaker.Breaker, known bool, v Verdict, now time.Time) {
	if v.Class != breaker.Transient && v.Class != breaker.Refused && (!known || before.Clean()) {
		return
	}
	e.fleet.Outcome(t, v.Class, v.Detail, now)
}

// takeProbeGate takes the fleet's probe gate for a half-open probe: one
// process at a time probes a host, whatever its own registry admits.
func (e *Engine) takeProbeGate(t breaker.Ticket) bool {
	if e.fleet == nil || !t.Probe {
		return true
	}
	won, err := e.fleet.TryProbe(t.Host, t.Generation)
	if err != nil {
		e.log.Warn("take the fleet's probe gate", "host", t.Host, "err", err)
		return false
	}
	return won
}

// fleetAdapter gives the fleet frontier the engine's names.
type fleetAdapter struct{ *redisstore.Frontier }

func (a fleetAdapter) TryProbe(host string, generation uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return a.Frontier.TryProbe(ctx, host, generation)
}
