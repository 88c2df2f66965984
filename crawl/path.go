package crawl

import (
	"context"
	"errors"
	"time"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/store"
)

// handle takes one leased URL down the request path and ends its lease.
func (e *Engine) handle(l *frontier.Lease) {
	x := &exchange{lease: l, host: e.hosts.get(l.Item.Host, e.opts.Now()), token: e.token}
	e.settle(x, e.process(x))
}

// process runs the stages of the request path in order. Each may end the
// lease by returning its disposition; the last, record, always does, and
// archived then makes sure a lease that completes its URL with an answer
// carries the answer's records (or turns it into a retry when they cannot
// be made).
//
// The breaker comes before the rate token so that an open host never spends
// a token and costs one map lookup, not a connect timeout; the host's page
// cap comes before both, so that a URL over it costs the host nothing.
func (e *Engine) process(x *exchange) (d disposition) {
	if d, end := e.reservePage(x); end {
		return d
	}
	if d, end := e.authorise(x); end {
		return d
	}
	claim, d, end := e.claimHostPage(x) // hostcap.go
	if end {
		return d
	}
	defer func() { e.endClaim(x, claim, d) }()
	return e.archived(x, e.ask(x)) // archive.go: done means archived
}

// ask runs the stages that ask the host: the breaker, the rate token, the
// request and the record of its outcome.
func (e *Engine) ask(x *exchange) disposition {
	if d, end := e.admit(x); end {
		return d
	}
	if d, end := e.takeToken(x); end {
		return d
	}
	if d, end := e.request(x); end {
		return d
	}
	return e.record(x, e.classify(x))
}

// The error classes of URLs the crawl chose not to fetch.
const (
	classRobots     = "robots"
	classOutOfScope = "out-of-scope"
)

// reservePage takes one of --max-pages (pagecap.go) for a page this run
// has not requested yet, so that concurrent workers never start more
// pages than the limit; settle gives it back when the page was not
// requested after all.
func (e *Engine) reservePage(x *exchange) (disposition, bool) {
	if e.pageCap.limit == 0 || x.lease.Item.Kind == store.KindRequisite {
		return disposition{}, false
	}
	ok, err := e.pageCap.reserve(x.lease.Item.Hash)
	if err != nil {
		e.halt(err)
		return released(), true
	}
	if !ok {
		return released(), true
	}
	x.reserved = true
	return disposition{}, false
}

// authorise checks the crawl's scope, its trap rules (traps.go) and
// robots.txt. Scope was checked when
// the URL was queued, but a later run may have narrowed it (the crawl's
// settings are stored, and a flag changes them): a queued URL now outside
// is recorded out-of-scope, never fetched and never silently dropped.
// Seeds are in scope by being given. When the host's rules are unknown or
// expired, the lease is used to fetch robots.txt instead, through the same
// breaker and politeness.
func (e *Engine) authorise(x *exchange) (disposition, bool) {
	it := x.lease.Item
	if e.outOfScope(it) && e.caps.SharedScope {
		e.refreshSeeds(false) // another process's new seeds may cover it (fleetscope.go)
	}
	if e.outOfScope(it) {
		return failed(&store.Result{ErrorClass: classOutOfScope,
			Error: "outside the crawl's scope, narrowed since the URL was queued"}), true
	}
	now := e.opts.Now()
	if rule, trapped := e.trapped(it, now); trapped {
		return failed(&store.Result{ErrorClass: classTrap, Error: rule}), true
	}
	rules, fetchRules := e.robotsFor(x.lease.Item.Host, x.host, now)
	switch {
	case fetchRules:
		x.robots = true
		return disposition{}, false
	case rules == nil:
		// Another worker is fetching this host's robots.txt right now.
		return parked(now.Add(50 * time.Millisecond)), true
	case !rules.Allowed(requestPath(x.lease.Item.URL), e.token):
		return failed(&store.Result{ErrorClass: classRobots, Error: "disallowed by robots.txt"}), true
	}
	return disposition{}, false
}

// outOfScope reports whether the scope refuses a queued it. Seeds are in
// scope by being given.
func (e *Engine) outOfScope(it store.Item) bool {
	if it.Kind == store.KindRequisite {
		return !e.scope.allowsRequisite(it.URL)
	}
	return (it.Depth > 0 || it.Redirects > 0) && !e.scope.allows(it.URL, it.Host, scopeDepth(it))
}

// admit asks the host's breaker. A refused URL is not an attempt: the host
// is parked until its rest ends (or held until a human releases it) and the
// worker moves on to another host.
func (e *Engine) admit(x *exchange) (disposition, bool) {
	if e.guard.active() {
		// A local fault pauses every fetch (localfault.go); the worker
		// waits for its end before taking another lease.
		return released(), true
	}
	now := e.opts.Now()
	d := e.breakers.Admit(x.lease.Item.Host, now)
	if d.Allowed && !e.takeProbeGate(d.Ticket) {
		// Another process of the fleet probes the host (fleet.go).
		e.cancelTicket(d.Ticket, now)
		return parked(now.Add(time.Second)), true
	}
	if d.Allowed {
		x.ticket, x.admitted = d.Ticket, true
		return disposition{}, false
	}
	if d.Hold != breaker.NoHold || d.RetryAt.IsZero() {
		return held(), true
	}
	giveUpAt, down := d.GiveUpAt(e.opts.GiveUpAfter)
	if down && !now.Before(giveUpAt) {
		// Due to be given up on (or found after it was): fail it now rather
		// than let it keep the crawl alive until the next sweep.
		return givenUp(), true
	}
	// The host wakes when its rest ends or, if sooner, when it falls due
	// to be given up on: the crawl then ends as soon as it may.
	until := d.RetryAt.Add(e.jitter(d.RetryAt.Sub(now)))
	if down && giveUpAt.Before(until) {
		until = giveUpAt
	}
	return parked(until), true
}

// jitter spreads the wake-ups of many hosts whose rests end together.
func (e *Engine) jitter(rest time.Duration) time.Duration {
	return time.Duration(e.opts.Rand() * float64(min(rest/10, 5*time.Second)))
}

// takeToken spends the host's rate token (and, for a retry, its retry
// budget). The token is taken at the time the request really starts, not
// when the lease was handed out: a stale time would let requests bunch up.
func (e *Engine) takeToken(x *exchange) (disposition, bool) {
	now := e.opts.Now()
	l, hs := x.lease, x.host
	hs.mu.Lock()
	if wait := hs.wait(now); wait > 0 {
		hs.mu.Unlock()
		return parked(now.Add(wait)), true
	}
	if l.Item.Attempts > 0 {
		if ok, at := e.budget.TryRetryPaced(l.Item.Host, hs.pace.Interval(), now); !ok {
			hs.mu.Unlock()
			return deferred(l.Item, at, deferBudget), true
		}
	} else {
		e.budget.RecordFirstAttempt(l.Item.Host, now)
	}
	hs.pace.Take(now)
	next := now.Add(hs.pace.Wait(now))
	hs.mu.Unlock()
	e.front.Started(l, next)
	return disposition{}, false
}

// request makes the request: the page, or the host's robots.txt. A request
// cut short by our own stop, or by the host's circuit opening meanwhile,
// never got the host's answer: it is not an attempt and the URL goes back.
func (e *Engine) request(x *exchange) (disposition, bool) {
	var page fetch.Request
	if !x.robots {
		page = e.pageRequest(x) // reads the file for a refresh: before the request counts as in flight
		page.MaxBody = e.bodyCap(x.lease.Item)
		if x.lease.Item.Kind != store.KindSitemap {
			page.Read = x.scanPage // sitemaps are read whole, by their own reader
			page.KeepHead = namesUsIn
		}
	}
	ctx, done := x.host.beginRequest(e.fetchCtx)
	defer done()
	if x.robots {
		if no := e.fetchRobots(ctx, x); no != nil {
			return e.hopRefused(x, no), true
		}
	} else {
		x.requested = true
		x.resp = e.fetcher.Fetch(ctx, page)
	}
	if x.resp != nil && cutShort(ctx, x.resp.Err) {
		x.requested = false
		return released(), true
	}
	return disposition{}, false
}

// hopRefused ends a robots.txt lease whose redirect led to a host that may
// not be asked. One that may be asked later parks the lease's host until
// then. One held for a person (paused, or with a case) may stay held for
// good: the URL counts a failed attempt, as when robots.txt is
// unreachable, so the crawl can end; the lease's host is not blamed.
func (e *Engine) hopRefused(x *exchange, no *hopRefused) disposition {
	if no.hold == breaker.NoHold && !no.until.IsZero() {
		return parked(no.until)
	}
	return e.retryOrFail(x, Verdict{Class: breaker.Transient, Detail: no.Error()}, e.opts.Now())
}

// cutShort reports whether a request ended by err never got the host's
// answer because we stopped it: our stop or the host's circuit opening
// cancelled ctx, or the circuit was open by the time its connection was
// made (see Engine.circuitOpen).
func cutShort(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, fetch.ErrHostRefused)
}

// classify turns the response into the outcome the breaker and the retry
// layer read. A robots.txt answer that yielded rules is a healthy host,
// whatever its status (RFC 9309: 4xx means allow all); one that yielded
// none failed like a page would have.
func (e *Engine) classify(x *exchange) Verdict {
	v := Classify(x.resp, e.token)
	if !x.robots || v.Class == breaker.Refused {
		return v
	}
	switch {
	case x.robotsErr == nil:
		v.Class = breaker.OK
	case v.Class == breaker.OK:
		// No rules from an answer that looked fine: a redirect chain that
		// ended nowhere usable, or no request at all.
		v.Class = breaker.Transient
		v.Detail = x.robotsErr.Error()
	case v.Class == breaker.Transient:
		v.Detail = x.robotsErr.Error()
	}
	return v
}
