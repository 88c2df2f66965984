package crawl

import (
	"context"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/store"
)

// hopRefused ends a robots.txt fetch whose redirect leads to a host that
// may not be asked now: its circuit is open or politeness says wait (ask
// again at until), or it is held for a person (hold), when no time will do.
type hopRefused struct {
	host  string
	until time.Time
	hold  breaker.Hold
}

func (h *hopRefused) Error() string {
	if h.hold != breaker.NoHold {
		return "robots.txt redirects to " + h.host + ", which is held (" + h.hold.String() + ")"
	}
	return "robots.txt redirects to " + h.host + ", which may not be asked before " + h.until.Format(time.RFC3339)
}

// fetchRobots is the request stage of a robots.txt lease. It follows the
// redirects itself (RFC 9309 §2.3.1.2), and a hop to another host goes
// through that host's breaker and politeness like any request to it: when
// either says no, the fetch stops there without touching the host, and
// refused says why. The last response is the one classified, for the
// lease's host.
func (e *Engine) fetchRobots(ctx context.Context, x *exchange) (refused *hopRefused) {
	host := x.lease.Item.Host
	get := func(ctx context.Context, url string) (int, string, []byte, error) {
		target, err := frontier.HostKey(url)
		switch {
		case err != nil:
			return 0, "", nil, err
		case target == host:
			x.resp = e.fetcher.Fetch(ctx, fetch.Request{URL: url, WithoutSecrets: e.withoutSecrets(host)})
		default:
			resp, no := e.hop(ctx, target, url)
			if no != nil {
				refused = no
				return 0, "", nil, no
			}
			x.resp = resp
		}
		if !cutShort(ctx, x.resp.Err) {
			// robots.txt is archived like any fetch, each hop as it came.
			if err := e.archiveAside(x.resp); err != nil && x.asideErr == nil {
				x.asideErr = err
			}
		}
		return x.resp.Status, x.resp.Header.Get("Location"), x.resp.Body, x.resp.Err
	}
	scheme := "http"
	if strings.HasPrefix(x.lease.Item.URL, "https://") {
		scheme = "https"
	}
	x.rules, x.robotsErr = robots.Fetch(ctx, get, scheme, host, e.opts.Now())
	if refused != nil {
		return refused
	}
	if x.resp == nil || !cutShort(ctx, x.resp.Err) {
		x.host.mu.Lock()
		x.host.robotsFailed = x.robotsErr != nil
		x.host.mu.Unlock()
	}
	return nil
}

// hop makes one robots.txt redirect hop to another host, admitted by that
// host's breaker and paced by its politeness, and feeds the outcome to its
// breaker. When the host may not be asked now, nothing is sent to it and
// refused says why. On a fleet the target's breaker is the store's, read
// first when another process may hold the host, and a half-open probe of
// it takes the fleet's probe gate like any other.
func (e *Engine) hop(ctx context.Context, host, url string) (resp *fetch.Response, refused *hopRefused) {
	now := e.opts.Now()
	b, shared, err := e.front.ForeignBreaker(host)
	if err != nil {
		e.log.Warn("read the fleet's breaker of a robots.txt redirect's target", "host", host, "err", err)
		return nil, &hopRefused{host: host, until: now.Add(time.Second)}
	}
	if shared {
		e.breakers.Load(host, b)
	}
	d := e.breakers.Admit(host, now)
	if !d.Allowed {
		return nil, &hopRefused{host: host, until: d.RetryAt, hold: d.Hold}
	}
	if !e.takeProbeGate(d.Ticket) {
		// Another process of the fleet probes the host.
		e.cancelTicket(d.Ticket, now)
		return nil, &hopRefused{host: host, until: now.Add(time.Second)}
	}
	hs := e.hosts.get(host, now)
	hs.mu.Lock()
	if wait := hs.wait(now); wait > 0 {
		hs.mu.Unlock()
		e.cancelTicket(d.Ticket, now)
		return nil, &hopRefused{host: host, until: now.Add(wait)}
	}
	hs.pace.Take(now)
	hs.mu.Unlock()
	// The target is a host the server chose, not the user: neither the
	// secret headers nor the user's cookies go, whatever --header-hosts says.
	resp = e.fetcher.Fetch(ctx, fetch.Request{URL: url, WithoutSecrets: true})
	now = e.opts.Now()
	if cutShort(ctx, resp.Err) {
		e.cancelTicket(d.Ticket, now)
	} else {
		e.reportOutcome(d.Ticket, url, Classify(resp, e.token), now)
	}
	return resp, nil
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

func (e *Engine) robotsDone(hs *hostState) {
	hs.mu.Lock()
	hs.robotsFetching--
	hs.mu.Unlock()
}

func (e *Engine) storeRobots(host string, hs *hostState, r *robots.Rules, now time.Time) {
	hs.mu.Lock()
	e.setRulesLocked(hs, r, now)
	hs.mu.Unlock()
	e.submit(func(b *store.Batch) { b.PutRobots(host, r) })
}
