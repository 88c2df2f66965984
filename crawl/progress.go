package crawl

import (
	"time"

	"breakwater/breaker"
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
}

// Progress reads the crawl's figures; it is safe while the crawl runs.
func (e *Engine) Progress() Progress {
	now := e.opts.Now()
	p := Progress{InFlight: e.front.InFlight(), Started: e.started.Load(), MaxPages: int64(e.opts.MaxPages)}
	if !e.runStart.IsZero() {
		p.Elapsed = now.Sub(e.runStart)
	}
	if c, err := e.db.Counts(); err == nil {
		p.Fetched, p.Failed, p.Queued, p.Deferred = c.Fetched, c.Failed, c.Queued, c.Deferred
	}
	for _, b := range e.breakers.Snapshot() {
		if b.Hold.Has(breaker.Paused) {
			p.Paused++
		}
		if b.Hold.Has(breaker.Case) {
			p.Cases++
		}
		switch b.State {
		case breaker.HalfOpen:
			p.HalfOpen++
		case breaker.Open:
			p.Open++
			if b.Hold != breaker.NoHold {
				continue
			}
			if next := b.ReadyAt().Sub(now); p.NextProbe == 0 || next < p.NextProbe {
				p.NextProbe = max(next, time.Second)
			}
			if !b.DownSince.IsZero() {
				if in := b.DownSince.Add(e.opts.GiveUpAfter).Sub(now); p.GiveUpIn == 0 || in < p.GiveUpIn {
					p.GiveUpIn = max(in, time.Second)
				}
			}
		}
	}
	return p
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
	e.log.Info("progress", attrs...)
}
