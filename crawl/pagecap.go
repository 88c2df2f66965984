package crawl

// --max-pages: the most pages a run requests. A page requested once keeps
// its place whatever comes back, so a 429 or a retry does not count it
// twice; a place taken for a page that was not requested after all
// (robots.txt was fetched instead, the host was not ready) is given back
// when its lease settles.
//
// On a store several processes crawl at once the limit is the fleet's:
// the processes crawling together take their places from one budget in
// the store (store.PageBudget), a few at a time so that a page costs no
// round trip, and give back the ones they did not use when they stop. A
// process killed loses the few it held; a page that two processes retry
// is counted by each.

import (
	"fmt"
	"sync"
	"sync/atomic"

	"breakwater/frontier"
	"breakwater/store"
)

// fleetPageChunk is the most places a process takes from the fleet's
// budget at once; fewer as the budget runs out (budget.lua).
const fleetPageChunk = 16

// pageCap counts a run's pages against --max-pages.
type pageCap struct {
	limit   int // 0: none
	mu      sync.Mutex
	pages   map[store.Hash]bool // the pages counted in started
	started atomic.Int64
	// fleet is the fleet's budget, when it is shared; allowance the
	// places taken from it and not yet used, and spent that it has none
	// left.
	fleet     store.PageBudget
	allowance int
	spent     atomic.Bool
}

func newPageCap(limit int) *pageCap { return &pageCap{limit: limit, pages: map[store.Hash]bool{}} }

// pageBudgetJoiner is a store whose processes share one --max-pages.
type pageBudgetJoiner interface {
	JoinPageBudget(cfg frontier.Config, limit int) (b store.PageBudget, runLimit, used int, err error)
}

// joinFleetPages makes the run's limit the fleet's, when its store shares one.
func (e *Engine) joinFleetPages() error {
	c := e.pageCap
	j, ok := e.db.(pageBudgetJoiner)
	if c.limit == 0 || !ok {
		return nil
	}
	b, runLimit, used, err := j.JoinPageBudget(e.frontierConfig(), c.limit)
	if err != nil {
		return fmt.Errorf("--max-pages: %w", err)
	}
	if runLimit != c.limit {
		e.log.Warn("the fleet's processes crawling now share another --max-pages, set by the first of them: this process follows it",
			"max_pages", runLimit, "this_process", c.limit)
	}
	e.log.Info("the fleet's page budget", "max_pages", runLimit, "used", used)
	c.fleet, c.limit = b, runLimit
	return nil
}

// leaveFleetPages gives the fleet back the places this process took and
// did not use.
func (e *Engine) leaveFleetPages() {
	c := e.pageCap
	if c.fleet == nil {
		return
	}
	c.mu.Lock()
	unused := c.allowance
	c.allowance = 0
	c.mu.Unlock()
	if err := c.fleet.Leave(unused); err != nil {
		e.log.Warn("give back the fleet's unused pages", "err", err, "pages", unused)
	}
}

// reserve takes a place for the page h. A page already counted needs
// none; false: the limit is reached.
func (c *pageCap) reserve(h store.Hash) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pages[h] {
		return true, nil
	}
	if c.fleet == nil {
		if len(c.pages) >= c.limit {
			return false, nil
		}
	} else {
		if c.allowance == 0 && !c.spent.Load() {
			n, err := c.fleet.Take(fleetPageChunk)
			if err != nil {
				return false, err
			}
			c.allowance = n
			c.spent.Store(n == 0)
		}
		if c.allowance == 0 {
			return false, nil
		}
		c.allowance--
	}
	c.pages[h] = true
	c.started.Store(int64(len(c.pages)))
	return true, nil
}

// unreserve gives back the place of a page that was not requested.
func (c *pageCap) unreserve(h store.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.pages[h] {
		return
	}
	delete(c.pages, h)
	if c.fleet != nil {
		c.allowance++
	}
	c.started.Store(int64(len(c.pages)))
}

// reached reports whether the run may start no more pages.
func (c *pageCap) reached() bool {
	if c.limit == 0 {
		return false
	}
	if c.fleet != nil {
		if !c.spent.Load() {
			return false
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.allowance == 0
	}
	return c.started.Load() >= int64(c.limit)
}

// why is the run's end when reached.
func (c *pageCap) why() string {
	if c.fleet != nil {
		return fmt.Sprintf("the fleet's --max-pages %d reached", c.limit)
	}
	return fmt.Sprintf("--max-pages %d reached", c.limit)
}
