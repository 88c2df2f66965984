package crawl

import (
	"time"

	"breakwater/breaker"
	"breakwater/control"
)

// Progress is how a running crawl stands, for the progress line and the
// periodic progress log.
type Progress struct {
	Fetched, Failed, Queued, Deferred int64 // the file's, as last committed
	InFlight                          int
	// Started is the pages requested this run and MaxPages the run's
	// --max-pages (0: none), for a bar and an ETA.
	Started, MaxPages int64
	Elapsed           time.Duration
	// Hosts not closed: by state, and the holds apart.
	Open, HalfOpen, Paused, Cases int
	// NextProbe is when the soonest open host (not held) is asked again,
	// and GiveUpIn when the soonest is given up on; zero when none is open.
	NextProbe, GiveUpIn time.Duration
	// LocalFault is set while the local-fault guard pauses the crawl.
	LocalFault *control.LocalFault
}

// Progress reads the crawl's figures; it is safe while the crawl runs.
func (e *Engine) Progress() Progress {
	now := e.opts.Now()
	p := Progress{InFlight: e.front.InFlight(), Started: e.pageCap.started.Load(), MaxPages: int64(e.pageCap.limit)}
	if !e.runStart.IsZero() {
		p.Elapsed = now.Sub(e.runStart)
	}
	if c, err := e.db.Counts(); err == nil {
		p.Fetched, p.Failed, p.Queued, p.Deferred = c.Fetched, c.Failed, c.Queued, c.Deferred
	}
	p.LocalFault = e.guard.status()
	c := e.census(now)
	p.Open, p.HalfOpen, p.Paused, p.Cases, p.NextProbe, p.GiveUpIn = c.Open, c.HalfOpen, c.Paused, c.Cases, c.NextProbe, c.GiveUpIn
	return p
}

// census is the hosts that are not closed, from the live registry.
type census struct {
	Open, HalfOpen, Paused, Cases int
	// NotClosed maps each such host to the design reference's level: 1
	// half-open, 2 open.
	NotClosed map[string]int
	// NextProbe is when the soonest open host (not held) is asked again,
	// and GiveUpIn when the soonest is given up on; zero when none.
	NextProbe, GiveUpIn time.Duration
}

func (e *Engine) census(now time.Time) census {
	c := census{NotClosed: map[string]int{}}
	for host, b := range e.breakers.Snapshot() {
		if b.Hold.Has(breaker.Paused) {
			c.Paused++
		}
		if b.Hold.Has(breaker.Case) {
			c.Cases++
		}
		switch b.State {
		case breaker.HalfOpen:
			c.HalfOpen++
			c.NotClosed[host] = 1
		case breaker.Open:
			c.Open++
			c.NotClosed[host] = 2
			if b.Hold != breaker.NoHold {
				continue
			}
			if next := b.ReadyAt().Sub(now); c.NextProbe == 0 || next < c.NextProbe {
				c.NextProbe = max(next, time.Second)
			}
			if !b.DownSince.IsZero() {
				if in := b.DownSince.Add(e.opts.GiveUpAfter).Sub(now); c.GiveUpIn == 0 || in < c.GiveUpIn {
					c.GiveUpIn = max(in, time.Second)
				}
			}
		}
	}
	return c
}

// logProgress is the progress line of a crawl off a terminal: the same
// figures, one structured line.
func (e *Engine) logProgress() {
	p := e.Progress()
	attrs := []any{"fetched", p.Fetched, "failed", p.Failed, "queued", p.Queued, "deferred", p.Deferred,
		"in_flight", p.InFlight, "open", p.Open, "half_open", p.HalfOpen, "paused", p.Paused, "cases", p.Cases,
		"elapsed_s", p.Elapsed.Seconds()}
	if p.Elapsed > 0 {
		attrs = append(attrs, "pages_per_s", float64(p.Fetched)/p.Elapsed.Seconds())
	}
	if p.NextProbe > 0 {
		attrs = append(attrs, "next_probe_s", p.NextProbe.Seconds(), "give_up_in_s", p.GiveUpIn.Seconds())
	}
	if lf := p.LocalFault; lf != nil {
		attrs = append(attrs, "local_fault", true, "local_fault_failing_hosts", lf.FailingHosts,
			"local_fault_paused_s", e.opts.Now().Sub(lf.TrippedAt).Seconds())
	}
	e.log.Info("progress", attrs...)
}
