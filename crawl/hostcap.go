package crawl

// --max-pages-per-host: the most pages of one host the crawl requests, in
// all its runs together. It bounds what a trap costs (a calendar of
// endless months, session IDs in every link, a faceted search) where
// --max-depth cannot, the trap being as shallow as the site.
//
// A page counts once, when it is first requested: its retries do not
// count again, nor do refreshes (--recrawl-after) of a page fetched once,
// but a failure queued again by --retry-failed does, as it is asked again.
// robots.txt does not count; sitemaps do, as they do for --max-pages. A
// URL of a host that has reached the cap is recorded as failed with the
// class host-page-cap, never fetched and never silently dropped: `status`
// and `export` show what the cap held back, and a later run with a higher
// cap and --retry-failed fetches it.
//
// The count is kept in the file (storage.HostPages), written with the
// group commit that follows each request, so a resumed run goes on from
// it. A kill can lose the last few writes, but then it loses the results
// of those requests too, and their pages are fetched and counted again:
// the cap never lets more through than a kill's pages in flight.
//
// A lease claims its page before the breaker and the rate token are
// asked (a URL over the cap costs the host nothing) and the claim counts
// against the cap until the lease ends, so concurrent workers on one host
// never start more than the cap; a URL that finds the pages left all
// claimed waits for those leases to end. A lease that ends without an
// attempt (the host was parked, robots.txt fetched first, a 429) gives
// its claim back.

import (
	"errors"
	"sync"
	"time"

	"breakwater/store"
)

// classHostPageCap is the error class of a URL not fetched because its host
// had reached --max-pages-per-host.
const classHostPageCap = "host-page-cap"

// hostPages counts, per host, the pages requested and the claims of leases
// on their way to a request. A host's entry is loaded from the file on its
// first claim of the run and kept for the run.
type hostPages struct {
	limit int64
	mu    sync.Mutex
	hosts map[string]*hostPageCount
}

type hostPageCount struct {
	requested int64 // pages requested, this run and before: what the file keeps
	claimed   int64 // leases holding a claim whose request has not ended
	// stale: the host was claimed from a fleet's store, where another
	// process may have requested its pages since this count was read.
	stale bool
}

// claimedFromFleet marks host's count to be read again from the store
// before its next page: the host comes back from the other processes.
func (p *hostPages) claimedFromFleet(host string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if c := p.hosts[host]; c != nil {
		c.stale = true
	}
	p.mu.Unlock()
}

func newHostPages(limit int) *hostPages {
	if limit <= 0 {
		return nil
	}
	return &hostPages{limit: int64(limit), hosts: map[string]*hostPageCount{}}
}

// pageClaim is one lease's claim on a page of its host; the zero value
// holds none.
type pageClaim struct {
	host string
	held bool
}

// claimHostPage claims one of the host's pages for x, or records the URL
// as host-page-cap when the host has none left. Leases that fetch
// robots.txt, retries and refreshes claim nothing: they are not new pages.
func (e *Engine) claimHostPage(x *exchange) (pageClaim, disposition, bool) {
	p := e.hostPages
	it := x.lease.Item
	if p == nil || x.robots || it.Attempts > 0 || e.isRefresh(it) || it.Kind == store.KindRequisite {
		return pageClaim{}, disposition{}, false
	}
	c, err := e.hostPageCount(it.Host)
	if err != nil {
		// The file cannot say how many the host had: the URL waits, as it
		// would for a host that is not ready, rather than risk the cap.
		e.log.Error("host page count", "host", it.Host, "err", err)
		return pageClaim{}, parked(e.opts.Now().Add(e.opts.RetryBase)), true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case c.requested >= p.limit:
		return pageClaim{}, failed(&store.Result{ErrorClass: classHostPageCap,
			Error: "not fetched: the host reached --max-pages-per-host"}), true
	case c.requested+c.claimed >= p.limit:
		// The pages left are claimed by leases in flight, which may yet give
		// them back (a 429): the URL waits to learn whether it is over.
		return pageClaim{}, parked(e.opts.Now().Add(50 * time.Millisecond)), true
	}
	c.claimed++
	return pageClaim{host: it.Host, held: true}, disposition{}, false
}

// endClaim settles x's claim as its lease ends as d says. A page whose
// request was an attempt (its result is stored, or its retry scheduled)
// counts for good, and the count is written with the next commit. Any
// other claim is given back: the URL returns to the queue unattempted (a
// 429, a local fault, our own stop, the archive's failure) and claims again when it is next
// leased, so it is counted once.
func (e *Engine) endClaim(x *exchange, claim pageClaim, d disposition) {
	if !claim.held {
		return
	}
	// A URL deferred for the archive's sake comes back unattempted.
	counts := x.requested && (d.ending == complete || d.ending == deferURL && d.reason != deferArchive)
	p := e.hostPages
	p.mu.Lock()
	c := p.hosts[claim.host]
	c.claimed--
	if counts {
		c.requested++
	}
	p.mu.Unlock()
	if counts {
		e.storeHostPages(claim.host, c)
	}
}

// storeHostPages writes host's count with the next commit. The count is
// read when the batch is built, not now, so a write never stores an older
// count than one before it. Never call it holding p.mu: a full writer
// queue makes submit wait for a commit, which may be building such a
// batch.
func (e *Engine) storeHostPages(host string, c *hostPageCount) {
	p := e.hostPages
	e.submit(func(b *store.Batch) {
		p.mu.Lock()
		n := c.requested
		p.mu.Unlock()
		b.PutHostPages(host, n)
	})
}

// hostPageCount returns host's entry, read from the file on first use. A
// host the file has no count for is given one at once (see
// storage.DB.HostPages), so a later run reads the same starting point.
func (e *Engine) hostPageCount(host string) (*hostPageCount, error) {
	p := e.hostPages
	p.mu.Lock()
	c, ok := p.hosts[host]
	stale := ok && c.stale
	p.mu.Unlock()
	if ok && !stale {
		return c, nil
	}
	n, stored, err := e.db.HostPages(host) // outside the lock: workers on other hosts go on
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if c, ok := p.hosts[host]; ok {
		// Loaded by another worker meanwhile, or read again for the fleet:
		// the claims in flight stay, and a count never goes down.
		c.requested = max(c.requested, n)
		c.stale = false
		p.mu.Unlock()
		return c, nil
	}
	c = &hostPageCount{requested: n}
	p.hosts[host] = c
	p.mu.Unlock()
	if !stored {
		e.storeHostPages(host, c)
	}
	return c, nil
}

// isRefresh reports whether it refreshes a page the crawl has (as opposed
// to a failure queued again, which is asked for anew).
func (e *Engine) isRefresh(it store.Item) bool {
	if it.Replaces == 0 {
		return false
	}
	_, err := e.db.Replaced(it)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.log.Warn("read the result a URL replaces", "url", it.URL, "err", err)
		return true // fetch it uncounted rather than record a page as capped
	}
	return err == nil
}
