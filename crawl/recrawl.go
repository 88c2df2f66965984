package crawl

// Refreshes (--recrawl-after). When a run starts, and every minute while it
// runs, a pass walks the stored results in the order they were stored,
// which is the order pages were fetched, and stages the pages fetched
// longer ago than RecrawlAfter for a refresh: storage keeps them in their
// host's refresh lane and tops a host's queue up from it only when the
// queue holds none of the host's new URLs (see storage/recrawl.go; a
// fleet's store walks its index of pages by fetch time instead, and queues
// refreshes behind the host's new URLs: redisstore/refresh.go). A
// refresh is then an ordinary lease down the request path, robots.txt,
// breaker and politeness included; it differs in two places only. Its
// request is conditional on the stored page's validators (pageRequest;
// with --warc, only when the archive holds the page in full),
// and record ends it by what the answer says about the stored page
// (refreshed): a 304 keeps the page, with the time of the check; a 404 or
// 410 records it gone. A changed page (200) is recorded like any page:
// it replaces the stored one, and its links are followed.
//
// A pass looks at refreshChunk results per transaction, for up to
// refreshBudget at the start of a run and then per housekeeping tick (a
// million stale pages take about 250 transactions of 50 ms), and the walk
// goes on from where the last pass stopped: a pass costs what became stale
// since, not what the file holds. While a pass runs the crawl holds a
// frontier feed, so it cannot end between staging pages and queueing them.

import (
	"errors"
	"net/http"
	"time"

	"breakwater/fetch"
	"breakwater/store"
)

const (
	refreshChunk  = 4096                   // results looked at per transaction
	refreshBudget = 100 * time.Millisecond // of staging per housekeeping tick
	refreshEvery  = time.Minute            // between passes, or RecrawlAfter if shorter
	gone          = "gone"                 // the error class of a page now 404 or 410
)

// refresher is where the walk over the stored results stands. Run touches
// it before the workers start, the housekeeping goroutine after.
type refresher struct {
	after  uint64    // every result up to this key was looked at
	done   func()    // ends the feed held while a pass runs; nil between passes
	nextAt time.Time // when the next pass starts
	staged int       // pages staged by the pass so far
	chunk  int       // results per transaction; zero means refreshChunk (tests shrink it)
}

// startRefresh queues the pages earlier runs staged and, with RecrawlAfter
// set, runs the first pass before the workers start.
func (e *Engine) startRefresh() {
	if !e.caps.Refresh {
		return // the store keeps no refresh lanes (and --recrawl-after was refused)
	}
	e.submit(func(b *store.Batch) { b.QueueRefreshes(nil) })
	e.refreshTick(e.opts.Now())
}

// refreshTick runs a pass, or its next part, when one is due.
func (e *Engine) refreshTick(now time.Time) {
	r := &e.refresh
	if e.opts.RecrawlAfter == 0 || (r.done == nil && now.Before(r.nextAt)) {
		return
	}
	if r.done == nil {
		r.done, r.staged = e.front.Feed(), 0
	}
	chunk := r.chunk
	if chunk == 0 {
		chunk = refreshChunk
	}
	for until := now.Add(refreshBudget); ; {
		scan, err := e.db.StageRefreshes(r.after, now.Add(-e.opts.RecrawlAfter), chunk)
		if err != nil {
			e.log.Error("stage refreshes", "err", err)
			e.endPass(now)
			return
		}
		r.after, r.staged = scan.After, r.staged+scan.Staged
		if hosts := scan.Hosts; len(hosts) > 0 {
			e.submit(func(b *store.Batch) { b.QueueRefreshes(hosts) })
		}
		if scan.Done {
			e.endPass(now)
			return
		}
		if !e.opts.Now().Before(until) {
			return // the rest at the next tick
		}
	}
}

func (e *Engine) endPass(now time.Time) {
	r := &e.refresh
	if r.staged > 0 {
		e.log.Info("pages queued for a refresh", "count", r.staged, "older_than", e.opts.RecrawlAfter.String())
	}
	r.done()
	r.done, r.nextAt = nil, now.Add(min(refreshEvery, e.opts.RecrawlAfter))
}

// pageRequest is the request for x's page (a sitemap's too), without the
// user's credentials when its host is not to get them (withoutSecrets). A
// refresh (an item replacing a stored page) asks only if the page changed
// since, with the page's validators; x.prior keeps the page for record. With --warc, a page the
// archive holds no full record of (fetched without --warc, or its records
// never written) is asked for unconditionally: a 304 would be a revisit
// of nothing, and the archive gets the page in full instead.
func (e *Engine) pageRequest(x *exchange) fetch.Request {
	it := x.lease.Item
	req := fetch.Request{URL: it.URL, WithoutSecrets: e.withoutSecrets(it.Host)}
	if it.Replaces == 0 {
		return req
	}
	prior, err := e.db.Replaced(it)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return req
	case err != nil:
		e.log.Warn("read the page a refresh replaces", "url", it.URL, "err", err)
		return req
	}
	x.prior = prior
	if e.archive != nil && prior.Archived.Date.IsZero() {
		return req
	}
	h := http.Header{}
	if prior.ETag != "" {
		h.Set("If-None-Match", prior.ETag)
	}
	if prior.LastModified != "" {
		h.Set("If-Modified-Since", prior.LastModified)
	}
	if len(h) > 0 {
		req.Header = h
	}
	return req
}

// unchanged records a 304: the stored page stays (title, digest, length,
// outlinks), with the status, time, duration and attempts of this check and
// any validators the answer updated. Its links are not looked at again.
func (e *Engine) unchanged(x *exchange, now time.Time) disposition {
	e.paceSucceeded(x, now)
	it := x.lease.Item
	check := e.result(it, x.resp, it.Attempts+1)
	r := *x.prior
	r.Status, r.FetchedAt, r.DurationMS, r.Attempts = check.Status, check.FetchedAt, check.DurationMS, check.Attempts
	r.Error = ""
	if check.ETag != "" {
		r.ETag = check.ETag
	}
	if check.LastModified != "" {
		r.LastModified = check.LastModified
	}
	return completed(&r, nil)
}
