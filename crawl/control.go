package crawl

import (
	"time"

	"breakwater/breaker"
	"breakwater/control"
	"breakwater/metrics"
	"breakwater/store"
)

// Control answers the control API for this crawl: breakers from its live
// registry, pace from its host table, retries from its budget. Manual
// changes go to the live registry, which logs them like any transition,
// and are written through the frontier's writer with every other write of
// the crawl. Reads of counters and logs see the file as last committed.
func (e *Engine) Control() control.API { return engineControl{e} }

// engineControl is the crawl's control.API; each method does what the
// API's says.
type engineControl struct{ e *Engine }

func (c engineControl) Status() (*control.Status, error) {
	st, err := control.ReadStatus(c.e.db)
	if err != nil {
		return nil, err
	}
	st.Running, st.InFlight = true, c.e.front.InFlight()
	st.LocalFault = c.e.guard.status()
	return st, nil
}

func (c engineControl) Hosts(state string) ([]control.HostRow, error) {
	now := c.e.opts.Now()
	pace := c.e.hosts.snapshot(now)
	live := func(host string) control.LiveHost {
		p := pace[host]
		retries, first := c.e.budget.Usage(host, now)
		return control.LiveHost{Interval: p.Interval, Throttles: p.Throttles, Retries: retries, FirstAttempts: first}
	}
	return control.HostRows(c.e.db, state, c.e.breakers.Snapshot(), live, now)
}

func (c engineControl) Transitions(host string, since time.Time) ([]store.Transition, error) {
	return control.ReadTransitions(c.e.db, host, since)
}

func (c engineControl) Cases() ([]store.Case, error) { return control.ReadCases(c.e.db) }

// Results reads the results in short read transactions while the crawl
// writes: each URL stored when the call began, once.
func (c engineControl) Results(failedOnly bool, fn func(*store.Result) error) error {
	return c.e.db.ScanResults(failedOnly, fn)
}

// Edges reads the link graph in short read transactions while the crawl
// writes it.
func (c engineControl) Edges(fn func(store.Edge) error) error {
	if !c.e.caps.LinkGraph {
		return store.Unsupported(c.e.caps.Name, "the link graph")
	}
	return c.e.db.ForEachEdge(fn)
}

// Inlinks reads the links to url as Edges does.
func (c engineControl) Inlinks(url string, fn func(store.Edge) error) error {
	if !c.e.caps.LinkGraph {
		return store.Unsupported(c.e.caps.Name, "the link graph")
	}
	return control.InlinksOf(c.e.db, url, fn)
}

func (c engineControl) Pause(host, reason string) error {
	ch, err := control.PauseChange(host, reason)
	if err != nil {
		return err
	}
	return c.apply(ch)
}

func (c engineControl) Unpause(host string) error {
	ch, err := control.UnpauseChange(host)
	if err != nil {
		return err
	}
	return c.apply(ch)
}

func (c engineControl) ResolveCase(host string) error {
	ch, err := control.ResolveChange(host)
	if err != nil {
		return err
	}
	return c.apply(ch)
}

// apply carries ch out on the live registry, makes the scheduler follow,
// and submits the host's breaker with ch's writes to the frontier's
// writer, in one batch: the breaker is read as the batch is built, so
// that it goes with ch's writes even when a housekeeping write took the
// change first. The error says the crawl can no longer write; the registry
// has changed by then, but a crawl that cannot write is ending, and the
// file keeps the state from before. A store whose breakers are shared
// refuses it: they are changed on the store, for every process at once.
func (c engineControl) apply(ch control.Change) error {
	e := c.e
	if e.caps.SharedBreakers {
		return store.Unsupported(e.caps.Name, "a breaker changed through one of the processes crawling it "+
			"(pause, unpause and resolve the host on the store: --store)")
	}
	now := e.opts.Now()
	if err := ch.Apply(e.breakers, now); err != nil {
		return err
	}
	e.syncHold(ch.Host)
	return e.writeBreakers(func(b *store.Batch) {
		if br, ok := e.breakers.Get(ch.Host); ok {
			b.PutBreaker(ch.Host, br)
		} else {
			b.DeleteBreaker(ch.Host)
		}
		if ch.Write != nil {
			ch.Write(b, now)
		}
	})
}

// syncHold makes the scheduler follow a manual change at once: a held host
// is held by the frontier too; a released one is offered again.
//
// It is serialized: two calls that read the breaker in one order must not
// apply to the frontier in the other, or a release could be undone by a
// hold read before it.
func (e *Engine) syncHold(host string) {
	e.holdMu.Lock()
	defer e.holdMu.Unlock()
	if b, ok := e.breakers.Get(host); ok && b.Hold != breaker.NoHold {
		e.front.Hold(host)
		return
	}
	e.front.Unhold(host)
}

// MetricsSnapshot is what the metrics' gauges show: the frontier's counts
// as last committed, URLs in flight, and the hosts by breaker state from
// the live registry.
func (e *Engine) MetricsSnapshot() (metrics.Snapshot, error) {
	st, err := control.ReadStatus(e.db)
	if err != nil {
		return metrics.Snapshot{}, err
	}
	c := e.census(e.opts.Now())
	s := metrics.Snapshot{Queued: st.Queued, Deferred: st.Deferred, Leased: int64(e.front.InFlight()),
		Done: st.Fetched, Failed: st.Failed, Paused: c.Paused, Cases: c.Cases, NotClosed: c.NotClosed,
		Hosts: map[string]int{"half-open": c.HalfOpen, "open": c.Open,
			"closed": max(st.Hosts-c.HalfOpen-c.Open, 0)}, LocalFault: e.guard.active()}
	return s, nil
}
