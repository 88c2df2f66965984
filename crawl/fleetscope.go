package crawl

import (
	"fmt"
	"maps"
	"sync"
	"time"

	"breakwater/breaker"
	"breakwater/control"
)

// One scope for a fleet (Capabilities.SharedScope). Each process adds its
// seeds' hosts to the store's set and merges its settings setting by
// setting, so that processes started at any time, together or apart, crawl
// one scope. A process learns that the set grew from its version: every
// half lease period, whenever it claims a host its scope does not cover
// (a host of another process's new seed), and before it records a URL out
// of scope. A link found before the process learned of a new seed's host
// is refused, as its scope then said; the new seed's own pages are not.

// seedRefresh is a process's reading of the fleet's seed hosts.
type seedRefresh struct {
	mu      sync.Mutex
	version int64
	checked time.Time
}

// seedRecheck bounds how often a URL refused by the scope makes a process
// ask the store whether the seed hosts grew.
const seedRecheck = 50 * time.Millisecond

// shareScope adds this run's new seed hosts to the fleet's and merges
// the crawl's settings into the store's.
func (e *Engine) shareScope(fresh []string) error {
	if err := e.db.AddSeedHosts(fresh); err != nil {
		return fmt.Errorf("store the seeds' hosts: %w", err)
	}
	if s := e.opts.settings; s != nil {
		settings := maps.Clone(s)
		delete(settings, seedHostsKey)
		conflicts, err := e.db.MergeSettings(settings, e.opts.settingsRead, func(name string) bool { return e.opts.settingsGiven[name] })
		if err != nil {
			return fmt.Errorf("store crawl settings: %w", err)
		}
		for _, c := range conflicts {
			other, ours := control.MaskSetting(c.Name, c.Other), control.MaskSetting(c.Name, c.Ours)
			if c.Replaced {
				e.log.Warn("a setting was given to two processes at once: this one's is stored", "setting", c.Name,
					"other", string(other), "stored", string(ours))
			} else {
				e.log.Warn("another process stored a setting as this one started: this process keeps its own until it restarts",
					"setting", c.Name, "stored", string(other), "this_process", string(ours))
			}
		}
	}
	e.refreshSeeds(true)
	return nil
}

// refreshSeeds reads the fleet's seed hosts again when they grew; unless
// force, at most once per seedRecheck.
func (e *Engine) refreshSeeds(force bool) {
	if !e.caps.SharedScope {
		return
	}
	r := &e.seedsRead
	r.mu.Lock()
	defer r.mu.Unlock()
	now := e.opts.Now()
	if !force && now.Sub(r.checked) < seedRecheck {
		return
	}
	r.checked = now
	v, err := e.db.SeedHostsVersion()
	if err != nil {
		e.log.Warn("read the fleet's seed hosts", "err", err)
		return
	}
	if v == r.version && !force {
		return
	}
	hosts, v, err := e.db.SeedHosts()
	if err != nil {
		e.log.Warn("read the fleet's seed hosts", "err", err)
		return
	}
	before := len(e.scope.seeds.Load().hosts)
	e.scope.seeds.Store(newSeedSet(e.scope.mode, hosts))
	r.version = v
	if len(hosts) > before && !force {
		e.log.Info("the fleet's seed hosts grew", "hosts", len(hosts), "added", len(hosts)-before)
	}
}

// watchSeeds reads the seed hosts again every half lease period until
// stop is closed.
func (e *Engine) watchSeeds(stop <-chan struct{}) {
	every := e.opts.Fleet.Lease / 2
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			e.refreshSeeds(false)
		}
	}
}

// claimed takes in a host the process's frontier took: its shared
// breaker, its page count again (for --max-pages-per-host), and the seed
// hosts again when the scope does not cover it.
func (e *Engine) claimed(host string, b breaker.Breaker) {
	e.sharedBreaker(host, b)
	e.hostPages.claimedFromFleet(host)
	if !e.scope.coversHost(host) {
		e.refreshSeeds(true)
	}
}
