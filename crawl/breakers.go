package crawl

import (
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/store"
)

// onTransition logs every breaker transition and appends it to the file.
func (e *Engine) onTransition(t breaker.Transition) {
	rec := store.NewTransition(t)
	e.opts.Metrics.Transition(rec.From, rec.To)
	e.log.Info("breaker", "host", rec.Host, "from", rec.From, "to", rec.To, "hold", rec.Hold,
		"class", rec.Class, "detail", rec.Detail, "reason", rec.Reason)
	if t.To == breaker.Closed {
		e.givenUp.Delete(t.Host)
	}
	if t.To == breaker.Open && t.From == breaker.Closed {
		e.circuitOpened(t.Host, t.At)
	}
	if t.To == breaker.Open {
		if hs := e.hosts.lookup(t.Host, t.At); hs != nil {
			hs.abort()
		}
		// Its connections, idle or serving the requests just cut short,
		// would otherwise stay in the pool, open to a host known to be down;
		// those still being dialled are closed as they complete (see
		// circuitOpen).
		e.closeHost(t.Host)
	}
	if e.front == nil || e.caps.SharedBreakers {
		// A shared breaker logs its own transitions as its outcomes are
		// applied: this process's copy of it writes nothing.
		return
	}
	// The host's breaker goes in the same commit as its transition, read as
	// the batch is built (so at least as new as the transition): a kill
	// between a logged transition and the next housekeeping write would
	// otherwise bring the host back in its older state, and its next
	// transitions would log generations the log has already passed.
	e.submit(func(b *store.Batch) {
		b.AppendTransition(rec)
		if br, ok := e.breakers.Get(t.Host); ok {
			b.PutBreaker(t.Host, br)
		} else {
			b.DeleteBreaker(t.Host)
		}
	})
}

func (e *Engine) raiseCase(c store.Case) {
	e.log.Warn("refused by name: host held for a human", "host", c.Host, "url", c.URL,
		"status", c.Status, "excerpt", c.Excerpt)
	e.opts.Notify.Send("case", map[string]any{"host": c.Host, "url": c.URL, "status": c.Status, "excerpt": c.Excerpt})
	e.submit(func(b *store.Batch) { b.AppendCase(c) })
	e.syncHold(c.Host)
}

// loadBreakers restores persisted breaker state so an open host stays open
// for the rest of its rest period after a restart. The time the crawler
// was not running is taken off each open host's down time (a host is
// given up on only after --give-up-after of being tried), and the
// adjusted state is written back at once, so a crash right after does not
// count the same downtime twice.
func (e *Engine) loadBreakers() error {
	if e.caps.SharedBreakers {
		return nil // read as the frontier takes their hosts (fleet.go)
	}
	lastRunning, err := e.db.RunningAt()
	if err != nil {
		return err
	}
	now := e.opts.Now()
	var resumed store.Batch
	err = e.db.ForEachBreaker(func(host string, b breaker.Breaker) error {
		if r := b.Resumed(lastRunning, now); r != b {
			b = r
			resumed.PutBreaker(host, b)
		}
		e.breakers.Load(host, b)
		return nil
	})
	if err != nil || resumed.Len() == 0 {
		return err
	}
	// The running time starts again now: a run that stops before its first
	// heartbeat must not have the same stopped hour taken off twice.
	resumed.PutRunningAt(now)
	if _, err := e.db.Commit(&resumed); err != nil {
		return fmt.Errorf("store resumed breakers: %w", err)
	}
	return nil
}

// persistBreakers writes through the breakers that changed since last time.
func (e *Engine) persistBreakers() {
	if err := e.writeBreakers(nil); err != nil {
		e.log.Error("write", "err", err)
	}
}

// writeBreakers submits the breakers that changed since last time, and
// also's operations with them, to the frontier's writer: a write that
// follows a breaker change lands in the same commit or a later one. It
// returns the frontier's error when the crawl can no longer write.
func (e *Engine) writeBreakers(also func(*store.Batch)) error {
	e.persistMu.Lock()
	defer e.persistMu.Unlock()
	changed, removed := e.breakers.TakeDirtyHosts()
	if e.caps.SharedBreakers {
		// The store's breakers change only through Outcome: this
		// process's copies of them are never written.
		changed, removed = nil, nil
	}
	if len(changed) == 0 && len(removed) == 0 && also == nil {
		return nil
	}
	return e.front.Submit(func(b *store.Batch) {
		// Read as the batch is built, as onTransition's are: a breaker that
		// changed again meanwhile goes in its newer state, one evicted
		// meanwhile is deleted (and again with the next removals).
		e.breakers.Visit(changed, func(host string, br breaker.Breaker, ok bool) {
			if ok {
				b.PutBreaker(host, br)
			} else {
				b.DeleteBreaker(host)
			}
		})
		for _, host := range removed {
			b.DeleteBreaker(host)
		}
		if also != nil {
			also(b)
		}
	})
}

// giveUpHosts records the queued URLs of hosts that have been down for
// GiveUpAfter as failed ("host-down"), so a crawl can end. Held hosts are
// never given up on: their URLs wait for a human. Mostly the request path
// does it first: a refused host is parked until it falls due, and admit
// gives it up when its URL is offered then. This sweep catches the hosts
// with no URL offered, such as those whose URLs all wait as deferred
// retries.
func (e *Engine) giveUpHosts(now time.Time) {
	if e.guard.active() {
		return // the hosts are not down: we are (localfault.go)
	}
	n := 0
	for _, host := range e.breakers.DueToGiveUp(e.opts.GiveUpAfter, now) {
		if last, again := e.givenUp.Load(host); again && now.Sub(last.(time.Time)) < 10*time.Second {
			continue
		}
		if n == maxGiveUpsPerSweep {
			return // the rest are still due at the next sweep
		}
		e.giveUp(host, now)
		n++
	}
}

// maxGiveUpsPerSweep bounds the hosts one sweep gives up. Hosts that went
// down together fall due together: tens of thousands given up in one
// sweep would each have their queue read and failed in the same few
// commits, a wave of memory for a moment. A sweep every 500 ms gives up
// 8,000 hosts a second this way.
const maxGiveUpsPerSweep = 4096

// giveUp fails every queued URL of host as host-down.
func (e *Engine) giveUp(host string, now time.Time) {
	if _, again := e.givenUp.Swap(host, now); !again {
		e.log.Warn("giving up on host: its queued URLs are recorded as host-down", "host", host,
			"after", e.opts.GiveUpAfter.String())
		e.opts.Notify.Send("host-given-up", map[string]any{"host": host, "after_s": e.opts.GiveUpAfter.Seconds()})
	}
	err := e.front.FailHost(host, store.Result{ErrorClass: "host-down",
		Error:     fmt.Sprintf("host unreachable for %s without a successful probe", e.opts.GiveUpAfter),
		FetchedAt: now.UTC()})
	if err != nil {
		e.log.Error("give up on host", "host", host, "err", err)
	}
	// URLs of the host found from now on are offered at once, to be failed
	// by admit, instead of waiting parked for the rest of the circuit's rest.
	e.front.Unpark(host, now)
}
