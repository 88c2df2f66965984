package crawl

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/store"
)

// maxRedirects is the longest redirect chain followed from one URL.
const maxRedirects = 10

// record is the last stage: it feeds the breaker the outcome and decides
// how the lease ends: with a result, a retry, or a return to the queue.
func (e *Engine) record(x *exchange, v Verdict) disposition {
	now := e.opts.Now()
	e.logFetch(x, v)
	if e.observeFault(x, v, now) {
		// A failure while the local-fault guard pauses the crawl is ours,
		// not the host's: no attempt, and the breaker is not told.
		return released()
	}
	e.reportOutcome(x.ticket, x.lease.Item.URL, v, now)
	x.reported = true
	switch v.Class {
	case breaker.OK:
		switch {
		case x.robots && x.asideErr != nil:
			// The rules are not kept without the records of the answer
			// they came from: robots.txt is asked again.
			return e.archiveFailed(x, x.asideErr)
		case x.robots:
			e.queueSitemaps(x.lease.Item, x.rules) // sitemaps.go
			e.storeRobots(x.lease.Item.Host, x.host, x.rules, now)
			return released() // the URL itself is fetched on its next lease
		case x.prior != nil && x.resp.Status == http.StatusNotModified:
			return e.unchanged(x, now) // a refresh of a page that did not change
		}
		return e.succeeded(x, now)
	case breaker.Throttled:
		return e.throttled(x, now)
	case breaker.Refused:
		// The host is held for a human (see raiseCase); the URL waits in the
		// queue behind the hold and is fetched once the case is resolved.
		return held()
	case breaker.Transient:
		d := e.retryOrFail(x, v, now)
		if x.resp != nil && x.resp.Status == 503 && x.resp.Header.Get("Retry-After") != "" {
			d.hostWait = e.waitRetryAfter(x.host, x.resp, now)
		}
		return d
	}
	r := e.result(x.lease.Item, x.resp, x.lease.Item.Attempts+1)
	r.ErrorClass, r.Error = string(v.Class), v.Detail
	switch {
	case x.resp != nil && fetch.IsBlocked(x.resp.Err):
		r.ErrorClass = "blocked"
	case x.prior != nil && (r.Status == http.StatusNotFound || r.Status == http.StatusGone):
		r.ErrorClass = gone // a refreshed page that is no more
	}
	d := failed(r)
	if x.prior != nil {
		d.links = e.graphLinks(x, r.Robots) // a refreshed page that failed links to nothing now
	}
	return d
}

// reportOutcome feeds the breaker the class, never the raw status, and
// raises a case when the host refused us by name.
func (e *Engine) reportOutcome(t breaker.Ticket, url string, v Verdict, now time.Time) {
	e.budget.RecordAnswer(t.Host, v.Class == breaker.OK || v.Class == breaker.Permanent, now)
	if e.caps.SharedBreakers {
		before, known := e.breakers.Get(t.Host)
		e.breakers.Report(t, v.Class, v.Detail, now)
		e.shareOutcome(t, before, known, v, now) // fleet.go
	} else {
		e.breakers.Report(t, v.Class, v.Detail, now)
	}
	if t.Probe {
		// URLs that met the busy probe gate wait for this report, not for
		// the gate's deadline.
		e.front.Unpark(t.Host, now)
	}
	if v.Class == breaker.Refused {
		e.raiseCase(store.Case{Host: t.Host, At: now, URL: url, Status: v.Status, Excerpt: v.Excerpt})
	}
}

func (e *Engine) succeeded(x *exchange, now time.Time) disposition {
	it, resp := x.lease.Item, x.resp
	e.paceSucceeded(x, now)
	r := e.result(it, resp, it.Attempts+1)
	var found []store.Item
	switch {
	case it.Kind == store.KindSitemap:
		found = e.readSitemap(it, resp, r) // sitemaps.go: never link extraction
	case resp.Status >= 300 && resp.Status < 400:
		found = e.redirect(it, resp, r)
	case resp.Status >= 200 && resp.Status < 300:
		if !resp.Streamed() {
			// A fetcher that does not stream (a test's) kept the body whole.
			x.scanPage(resp, bytes.NewReader(resp.Body))
		}
		if x.scanErr != nil {
			e.log.Debug("extract links", "url", it.URL, "err", x.scanErr)
		}
		r.Title, r.Outlinks = x.title, len(x.links)
		e.recordPageFacts(x, r)                                       // directives.go
		found = e.discoverFrom(it, x.links, e.followsLinks(r.Robots)) // requisites.go
	}
	d := completed(r, found)
	if resp.Status >= 300 && resp.Status < 400 {
		d.links = e.graphRedirect(x, r) // links.go
	} else {
		d.links = e.graphLinks(x, r.Robots) // links.go
	}
	return d
}

// redirect queues a redirect's target like a discovered link (so scope,
// robots and politeness apply to it) at the same depth.
func (e *Engine) redirect(it store.Item, resp *fetch.Response, r *store.Result) []store.Item {
	if resp.Location == "" {
		return nil
	}
	r.FinalURL = resp.Location
	if it.Redirects+1 > maxRedirects {
		r.ErrorClass = "redirect-limit"
		r.Error = fmt.Sprintf("more than %d redirects in a row", maxRedirects)
		return nil
	}
	link, err := frontier.ParseLink(resp.Location)
	if err != nil {
		return nil
	}
	if it.Kind == store.KindRequisite {
		// Still the page's requisite, wherever it moved to.
		return e.discoverRequisites(it.URL, []frontier.Link{link}, it.Depth, it.Hops, it.Redirects+1)
	}
	return e.discover(it.URL, []frontier.Link{link}, it.Depth, it.Redirects+1)
}

// discover turns links found on the page at from into frontier items,
// keeping those in scope. from is their referrer: the seen set keeps the
// first item of a URL, so a result names the page it was first found on.
func (e *Engine) discover(from string, links []frontier.Link, depth, redirects int) []store.Item {
	var out []store.Item
	for _, link := range links {
		// Links seen before (menus, footers: most of a page's links) are
		// dropped here, so they never cost the writer anything.
		if e.scope.allows(link.URL, link.Host, depth) && !e.db.Seen(link.Hash) {
			it := link.Item(depth, redirects)
			it.Referrer = from
			out = append(out, it)
		}
	}
	return out
}

// throttled handles a 429: the whole host waits out Retry-After, its pace is
// halved, and the URL goes back to the queue without spending an attempt.
func (e *Engine) throttled(x *exchange, now time.Time) disposition {
	until := e.waitRetryAfter(x.host, x.resp, now)
	x.host.mu.Lock()
	x.host.throttles++
	ch := x.host.pace.Throttled(now)
	x.host.mu.Unlock()
	if ch.Changed {
		e.log.Info("pace reduced", "host", x.lease.Item.Host, "interval", ch.Interval.Seconds(), "status", 429)
	}
	return parked(until)
}

// waitRetryAfter makes the whole host wait for the response's Retry-After
// (30s when absent or garbage, capped at --retry-max) and returns the end
// of the wait, for the scheduler to park the host until then.
func (e *Engine) waitRetryAfter(hs *hostState, resp *fetch.Response, now time.Time) time.Time {
	var value string
	if resp != nil && resp.Header != nil {
		value = resp.Header.Get("Retry-After")
	}
	until := now.Add(ParseRetryAfter(value, now, 30*time.Second, e.opts.RetryMax))
	hs.mu.Lock()
	if until.After(hs.notBefore) {
		hs.notBefore = until
	}
	hs.mu.Unlock()
	return until
}

// retryOrFail schedules a transient failure again with backoff and full
// jitter, through the deferred bucket so no worker waits for it, or records
// it as failed once its attempts are spent.
func (e *Engine) retryOrFail(x *exchange, v Verdict, now time.Time) disposition {
	it := x.lease.Item
	it.Attempts++
	if it.Attempts > e.opts.Retries {
		r := e.result(x.lease.Item, x.resp, it.Attempts)
		r.ErrorClass, r.Error = string(v.Class), v.Detail
		return failed(r)
	}
	return deferred(it, now.Add(Backoff(it.Attempts, e.opts.RetryBase, e.opts.RetryMax, e.opts.Rand)), deferRetry)
}

func (e *Engine) fill(it store.Item, r *store.Result) *store.Result {
	r.URL, r.FinalURL, r.Host, r.Depth = it.URL, it.URL, it.Host, it.Depth
	r.Referrer, r.Lastmod, r.Kind = it.Referrer, it.Lastmod, it.Kind
	if r.FetchedAt.IsZero() {
		r.FetchedAt = e.opts.Now().UTC()
	}
	if r.Attempts == 0 {
		r.Attempts = it.Attempts
	}
	return r
}

// result describes a response (or its absence) as a stored Result.
func (e *Engine) result(it store.Item, resp *fetch.Response, attempts int) *store.Result {
	r := e.fill(it, &store.Result{Attempts: attempts})
	if resp == nil {
		return r
	}
	r.Status, r.ContentType, r.Location = resp.Status, resp.ContentType, resp.Location
	r.ETag, r.LastModified = resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
	length, sum := resp.Digest()
	r.Length, r.Truncated = length, resp.Truncated
	r.FetchedAt = resp.Started.UTC()
	r.DurationMS = resp.Duration.Milliseconds()
	if resp.Status > 0 {
		r.SHA256 = hex.EncodeToString(sum[:])
	}
	if resp.Err != nil {
		r.Error = strings.TrimSpace(resp.Err.Error())
	}
	return r
}

// submit hands extra writes (robots, breaker state, transitions, cases) to
// the frontier's writer so they share its group commits.
func (e *Engine) submit(fn func(*store.Batch)) {
	if err := e.front.Submit(fn); err != nil {
		e.log.Error("write", "err", err)
	}
}

// paceSucceeded wins back some of the host's pace after an answer.
func (e *Engine) paceSucceeded(x *exchange, now time.Time) {
	x.host.mu.Lock()
	ch := x.host.pace.Succeeded(now)
	x.host.mu.Unlock()
	if ch.Changed {
		e.log.Info("pace recovered", "host", x.lease.Item.Host, "interval", ch.Interval.Seconds())
	}
}

// logFetch counts each request in the metrics and logs it, one line at
// debug level: the request's URL (robots.txt's for a robots.txt lease) and
// what came of it.
func (e *Engine) logFetch(x *exchange, v Verdict) {
	if x.resp == nil {
		return
	}
	r := x.resp
	length, _ := r.Digest()
	e.opts.Metrics.Fetched(string(v.Class), r.Status, x.lease.Item.Attempts > 0, int(length), r.Duration.Seconds())
	if !e.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []any{"url", r.URL, "status", r.Status, "class", string(v.Class), "ms", r.Duration.Milliseconds(),
		"bytes", length, "attempt", x.lease.Item.Attempts + 1}
	if r.Err != nil {
		attrs = append(attrs, "err", r.Err.Error())
	}
	e.log.Debug("fetch", attrs...)
}

// observeFault feeds the local-fault guard x's outcome and reports whether
// it is a failure met while the guard pauses the crawl.
func (e *Engine) observeFault(x *exchange, v Verdict, now time.Time) bool {
	g := e.guard
	if g == nil {
		return false
	}
	x.host.mu.Lock()
	suspect := x.host.signal.observe(v, x.lease.Item.URL, now)
	x.host.mu.Unlock()
	if suspect {
		g.suspectAt.Store(now.UnixNano())
	}
	return v.Class == breaker.Transient && g.active()
}
