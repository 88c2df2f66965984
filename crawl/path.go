package crawl

import (
	"context"
	"errors"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/storage"
)

// process takes one leased URL down the request path. The stages run in
// this order, each in its own function, and any of them may end the lease:
//
//	authorise -> admit (breaker) -> takeToken (pace, retry budget) -> request -> classify -> record
//
// The breaker comes before the rate token so that an open host never spends
// a token and costs one map lookup, not a connect timeout.
func (e *Engine) process(l *frontier.Lease) {
	if !e.reservePage(l) {
		e.front.Release(l)
		return
	}
	requested := false
	defer func() {
		if !requested {
			e.unreservePage(l)
		}
	}()
	now := e.opts.Now()
	hs := e.hosts.get(l.Item.Host, now)
	need, ok := e.authorise(l, hs, now)
	if !ok {
		return
	}
	if need == needRobots {
		// This worker holds the host's robots.txt fetch until the lease ends,
		// whichever stage ends it.
		defer e.robotsDone(hs)
	}
	ticket, ok := e.admit(l, now)
	if !ok {
		return
	}
	// The token is taken at the time the request really starts, not when the
	// lease was handed out: a stale time would let requests bunch up.
	if !e.takeToken(l, hs, ticket, e.opts.Now()) {
		return
	}
	if need == needRobots {
		e.fetchRobots(l, hs, ticket)
		return
	}
	requested = true
	ctx, done := hs.beginRequest(e.fetchCtx)
	resp := e.fetcher.Fetch(ctx, l.Item.URL)
	done()
	if resp.Err != nil && cutShort(ctx, resp.Err) {
		// Cut short by our own stop, or because the host's circuit opened
		// meanwhile: not the host's answer, and not an attempt.
		requested = false
		e.notAttempted(ticket, e.opts.Now())
		e.front.Release(l)
		return
	}
	verdict := Classify(resp, e.token)
	e.record(l, hs, ticket, resp, verdict)
}

// cutShort reports whether a request ended by err never got the host's
// answer because we stopped it: our stop or the host's circuit opening
// cancelled ctx, or the circuit was open by the time its connection was
// made (see Engine.circuitOpen).
func cutShort(ctx context.Context, err error) bool {
	return ctx.Err() != nil || errors.Is(err, errHostRefused)
}

// reservePage claims one of --max-pages for a URL's first attempt, so that
// concurrent workers never start more pages than the limit.
func (e *Engine) reservePage(l *frontier.Lease) bool {
	if e.opts.MaxPages == 0 || l.Item.Attempts > 0 {
		return true
	}
	if e.started.Add(1) > int64(e.opts.MaxPages) {
		e.started.Add(-1)
		return false
	}
	return true
}

// unreservePage gives the claim back when the lease ended without a request
// for the page (robots.txt fetched instead, host not ready, breaker open).
func (e *Engine) unreservePage(l *frontier.Lease) {
	if e.opts.MaxPages > 0 && l.Item.Attempts == 0 {
		e.started.Add(-1)
	}
}

type need int

const (
	needPage need = iota
	needRobots
)

// authorise checks robots.txt (scope was checked when the URL was queued).
// When the host's rules are unknown or expired, the lease is used to fetch
// robots.txt instead, through the same breaker and politeness.
func (e *Engine) authorise(l *frontier.Lease, hs *hostState, now time.Time) (need, bool) {
	rules, fetch := e.robotsFor(l.Item.Host, hs, now)
	if fetch {
		return needRobots, true
	}
	if rules == nil {
		// Another worker is fetching this host's robots.txt right now.
		e.front.Park(l.Item.Host, now.Add(50*time.Millisecond))
		e.front.Release(l)
		return 0, false
	}
	if !rules.Allowed(requestPath(l.Item.URL), e.token) {
		e.finish(l, &storage.Result{ErrorClass: "robots", Error: "disallowed by robots.txt"}, nil)
		return 0, false
	}
	return needPage, true
}

// admit asks the host's breaker. A refused URL is not an attempt: the host
// is parked until its rest ends (or held until a human releases it) and the
// worker moves on to another host.
func (e *Engine) admit(l *frontier.Lease, now time.Time) (breaker.Ticket, bool) {
	d := e.breakers.Admit(l.Item.Host, now)
	if d.Allowed {
		return d.Ticket, true
	}
	giveUpAt, down := d.GiveUpAt(e.opts.GiveUpAfter)
	switch {
	case d.Hold != breaker.NoHold || d.RetryAt.IsZero():
		e.front.Hold(l.Item.Host)
	case down && !now.Before(giveUpAt):
		// Due to be given up on (or found after it was): fail it now rather
		// than let it keep the crawl alive until the next sweep.
		e.front.Release(l)
		e.giveUp(l.Item.Host, now)
		return breaker.Ticket{}, false
	default:
		// The host wakes when its rest ends or, if sooner, when it falls due
		// to be given up on: the crawl then ends as soon as it may.
		until := d.RetryAt.Add(e.jitter(d.RetryAt.Sub(now)))
		if down && giveUpAt.Before(until) {
			until = giveUpAt
		}
		e.front.Park(l.Item.Host, until)
	}
	e.front.Release(l)
	return breaker.Ticket{}, false
}

// jitter spreads the wake-ups of many hosts whose rests end together.
func (e *Engine) jitter(rest time.Duration) time.Duration {
	return time.Duration(e.opts.Rand() * float64(min(rest/10, 5*time.Second)))
}

// takeToken spends the host's rate token (and, for a retry, its retry
// budget). A host that is not ready gives its lease back untouched.
func (e *Engine) takeToken(l *frontier.Lease, hs *hostState, t breaker.Ticket, now time.Time) bool {
	hs.mu.Lock()
	if wait := hs.wait(now); wait > 0 {
		hs.mu.Unlock()
		e.notAttempted(t, now)
		e.front.Park(l.Item.Host, now.Add(wait))
		e.front.Release(l)
		return false
	}
	if l.Item.Attempts > 0 {
		if ok, at := e.budget.TryRetry(l.Item.Host, now); !ok {
			hs.mu.Unlock()
			e.notAttempted(t, now)
			e.deferLease(l, l.Item, at)
			return false
		}
	} else {
		e.budget.RecordFirstAttempt(l.Item.Host, now)
	}
	hs.pace.Take(now)
	next := now.Add(hs.pace.Wait(now))
	hs.mu.Unlock()
	e.front.Started(l, next)
	return true
}

// notAttempted gives back a breaker ticket whose request was never made: a
// neutral outcome releases a probe gate and changes no counter.
func (e *Engine) notAttempted(t breaker.Ticket, now time.Time) {
	e.breakers.Report(t, breaker.Permanent, "not attempted", now)
}

// robotsFor returns the host's usable rules, or fetch=true when this worker
// must fetch them (it then holds the host's robots fetch), or neither when
// another worker is already fetching.
func (e *Engine) robotsFor(host string, hs *hostState, now time.Time) (*robots.Rules, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if hs.rules == nil && !hs.robotsChecked {
		hs.robotsChecked = true
		if r, err := e.db.Robots(host); err == nil {
			e.setRulesLocked(hs, r, now)
		}
	}
	if hs.rules != nil && !hs.rules.Expired(now, robots.DefaultTTL) {
		return hs.rules, false
	}
	// One attempt at a time while the host may be healthy: its other URLs
	// wait for the rules. Once an attempt has failed, each URL makes its own
	// attempt (still at most --host-concurrency at once, paced and admitted
	// like any request): otherwise a dead host's URLs would fail one timeout
	// at a time, and its breaker would take threshold x timeout to open.
	if hs.robotsFetching > 0 && !hs.robotsFailed {
		return nil, false
	}
	hs.robotsFetching++
	return nil, true
}

func (e *Engine) setRulesLocked(hs *hostState, r *robots.Rules, now time.Time) {
	hs.rules = r
	hs.floor = max(e.opts.Delay, r.CrawlDelay(e.token))
	hs.pace.SetFloor(hs.floor, now)
}

// fetchRobots is the request stage for robots.txt. Its outcome feeds the
// breaker like any request (a host whose robots.txt times out is a dead
// host). The lease's URL goes back to the queue untouched on success; when
// robots.txt is unavailable the URL counts a transient failure and is retried.
func (e *Engine) fetchRobots(l *frontier.Lease, hs *hostState, t breaker.Ticket) {
	var last *Response
	get := func(ctx context.Context, url string) (int, string, []byte, error) {
		last = e.fetcher.Fetch(ctx, url)
		return last.Status, last.Header.Get("Location"), last.Body, last.Err
	}
	scheme := "http"
	if len(l.Item.URL) >= 8 && l.Item.URL[:8] == "https://" {
		scheme = "https"
	}
	ctx, done := hs.beginRequest(e.fetchCtx)
	rules, err := robots.Fetch(ctx, get, scheme, l.Item.Host, e.opts.Now())
	done()
	now := e.opts.Now()
	var lastErr error
	if last != nil {
		lastErr = last.Err
	}
	if cutShort(ctx, lastErr) { // our stop, or the circuit opened: see process
		e.notAttempted(t, now)
		e.front.Release(l)
		return
	}
	hs.mu.Lock()
	hs.robotsFailed = err != nil
	hs.mu.Unlock()
	verdict := Verdict{Class: breaker.OK, Status: 200}
	if last != nil {
		verdict = Classify(last, e.token)
	}
	if err == nil && verdict.Class != breaker.Refused {
		verdict.Class = breaker.OK // any answer that yields rules is a healthy host
	}
	e.reportOutcome(t, l, verdict, now)
	switch {
	case verdict.Class == breaker.Refused:
		e.front.Release(l) // the host is now held for a human; its URLs wait
	case err == nil:
		e.storeRobots(l.Item.Host, hs, rules, now)
		e.front.Release(l)
	case verdict.Class == breaker.Throttled:
		e.throttled(l, hs, last, now)
	case last != nil && IsBlocked(last.Err):
		r := e.result(l.Item, last, l.Item.Attempts+1)
		r.ErrorClass, r.Error = "blocked", verdict.Detail
		e.finish(l, r, nil)
	case errors.Is(err, robots.ErrUnavailable):
		verdict.Class = breaker.Transient
		verdict.Detail = err.Error()
		e.retryOrFail(l, verdict, last, now)
	default:
		verdict.Detail = err.Error()
		e.retryOrFail(l, verdict, last, now)
	}
}

func (e *Engine) robotsDone(hs *hostState) {
	hs.mu.Lock()
	hs.robotsFetching--
	hs.mu.Unlock()
}

func (e *Engine) storeRobots(host string, hs *hostState, r *robots.Rules, now time.Time) {
	hs.mu.Lock()
	e.setRulesLocked(hs, r, now)
	hs.mu.Unlock()
	e.submit(func(b *storage.Batch) { b.PutRobots(host, r) })
}
