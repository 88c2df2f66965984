package crawl

import (
	"fmt"
	"io"
	"time"

	"breakwater/breaker"
	"breakwater/extract"
	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/store"
	"breakwater/warc"
)

// exchange is one lease on its way down the request path: what the stages
// have learnt so far, and what settle must undo when the lease ends.
type exchange struct {
	lease *frontier.Lease
	host  *hostState
	// reserved: the lease holds one of --max-pages (see reservePage).
	reserved bool
	// robots: the lease fetches the host's robots.txt instead of its URL,
	// and holds one of the host's robots.txt attempts until it ends.
	robots bool
	// ticket is the breaker's admission; reported once an outcome is fed
	// to the breaker. An unreported ticket is given back by settle.
	ticket   breaker.Ticket
	admitted bool
	reported bool
	// requested: a request for the page itself went out (the page counts
	// toward --max-pages).
	requested bool

	resp  *fetch.Response
	prior *store.Result // a refresh: the stored page it replaces (recrawl.go)
	rules *robots.Rules // robots.txt lease: the rules obtained, if any
	// robotsErr is why a robots.txt lease obtained no rules.
	robotsErr error
	// asideErr is why the records of a robots.txt answer could not be
	// made (archiveAside), if that happened: see archived.
	asideErr error
	// scanned is set once the page's answer was read for its title and
	// links (scanPage), and scanErr says why that read failed, if it did.
	scanned bool
	title   string
	links   []extract.Link
	scanErr error
	// page is the scanned page whole: what it says about itself
	// (directives.go). token is the crawler's product token, for the
	// <meta> that names it.
	page  extract.Page
	token string
}

// scanPage reads a 2xx page for its title and links as its body streams
// (fetch.Request.Read), and a requisite that is a stylesheet for what it
// imports; the other answers' bodies are only hashed.
func (x *exchange) scanPage(resp *fetch.Response, body io.Reader) {
	if resp.Status < 200 || resp.Status >= 300 {
		return
	}
	x.scanned = true
	if x.lease.Item.Kind == store.KindRequisite && extract.IsCSS(resp.ContentType) {
		x.links, x.scanErr = extract.ScanCSS(resp.URL, resp.ContentType, body)
		return
	}
	page, err := extract.ScanHTMLWith(resp.URL, resp.ContentType, body, extract.ScanOptions{ProductToken: x.token})
	x.title, x.links, x.scanErr, x.page = page.Title, page.Links, err, page
}

// ending says how a lease ends. The zero value gives it back untouched.
type ending int

const (
	// giveBack returns the URL to the front of its host's queue, unattempted.
	giveBack ending = iota
	// parkHost gives the URL back and keeps its host from being offered
	// before until: a breaker rest, a Retry-After, a politeness wait.
	parkHost
	// holdHost gives the URL back and keeps its host from being offered
	// until a person releases it (a pause or a case).
	holdHost
	// deferURL parks the URL alone until until, in the deferred bucket;
	// item carries its attempts, counted or not.
	deferURL
	// complete stores result and queues the links found (a fetched page,
	// or a URL failed for good).
	complete
	// giveUpHost gives the URL back and records every queued URL of the
	// host as host-down: it has been unreachable for --give-up-after.
	giveUpHost
)

// disposition is what a stage decided should happen to its lease. Every
// stage that ends the request path returns one; settle alone carries it out.
type disposition struct {
	ending ending
	until  time.Time     // parkHost, deferURL
	item   store.Item    // deferURL
	reason string        // deferURL: why, for the metrics (a retry's backoff, the host's retry budget, the archive)
	result *store.Result // complete
	found  []store.Item  // complete
	// records are the answer's, for the commit that stores result
	// (complete, with --warc; see archived).
	records *warc.Entry
	// links are the page's, for the commit that stores result (complete;
	// see graphLinks).
	links *pageLinks
	// hostWait, if set, also parks the host until then (a 503's Retry-After).
	hostWait time.Time
}

func (d disposition) String() string {
	switch d.ending {
	case giveBack:
		return "give back"
	case parkHost:
		return "park host until " + d.until.Format(time.RFC3339Nano)
	case holdHost:
		return "hold host"
	case deferURL:
		return fmt.Sprintf("defer until %s (attempts %d)", d.until.Format(time.RFC3339Nano), d.item.Attempts)
	case complete:
		return fmt.Sprintf("complete (class %q, %d found)", d.result.ErrorClass, len(d.found))
	case giveUpHost:
		return "give up on host"
	}
	return fmt.Sprintf("ending(%d)", int(d.ending))
}

func released() disposition              { return disposition{ending: giveBack} }
func parked(until time.Time) disposition { return disposition{ending: parkHost, until: until} }
func held() disposition                  { return disposition{ending: holdHost} }
func givenUp() disposition               { return disposition{ending: giveUpHost} }
func failed(r *store.Result) disposition { return disposition{ending: complete, result: r} }

// Why a URL is deferred.
const (
	deferRetry  = "retry-backoff"
	deferBudget = "retry-budget"
	// deferArchive: the page's records could not be made (archive.go);
	// its attempts are as they were.
	deferArchive = "archive-failed"
)

func deferred(it store.Item, until time.Time, reason string) disposition {
	return disposition{ending: deferURL, item: it, until: until, reason: reason}
}

func completed(r *store.Result, found []store.Item) disposition {
	return disposition{ending: complete, result: r, found: found}
}

// settle ends x's lease as d says. It is the one place a lease ends, and
// it gives back what the stages took and did not use: an unreported
// breaker ticket (a neutral outcome frees a probe gate), a robots.txt
// attempt, a --max-pages reservation whose page was never requested.
func (e *Engine) settle(x *exchange, d disposition) {
	l := x.lease
	now := e.opts.Now()
	defer x.resp.Release() // its recorded bytes are archived by now, or not to be
	if x.admitted && !x.reported {
		e.cancelTicket(x.ticket, now)
	}
	if x.robots {
		e.robotsDone(x.host)
	}
	if x.reserved && !x.requested {
		e.pageCap.unreserve(l.Item.Hash)
	}
	if !d.hostWait.IsZero() {
		e.front.Park(l.Item.Host, d.hostWait)
	}
	var err error
	switch d.ending {
	case giveBack:
		e.front.Release(l)
	case parkHost:
		e.front.Park(l.Item.Host, d.until)
		e.front.Release(l)
	case holdHost:
		// The breaker says whether the host is still held: a person may
		// have released it since admit looked.
		e.syncHold(l.Item.Host)
		e.front.Release(l)
	case deferURL:
		e.opts.Metrics.Deferred(d.reason)
		if d.reason == deferArchive {
			e.archiveRetries.Add(1)
		}
		err = e.front.Defer(l, d.item, d.until)
	case complete:
		r := d.result
		if r.URL == "" {
			r = e.fill(l.Item, r)
		}
		e.countResult(l.Item, r)
		var records any // the page is done in the commit that archives it
		if d.records != nil {
			records = d.records
			noteArchived(r, x, d.records)
		}
		err = e.front.CompleteWith(l, r, d.found, records, d.links.put(l.Item)...)
	case giveUpHost:
		e.front.Release(l)
		e.giveUp(l.Item.Host, now)
	}
	if err != nil {
		e.log.Error("end lease", "url", l.Item.URL, "ending", d.String(), "err", err)
	}
}

// countResult counts a stored result for the run's summary, and apart the
// outcome of a seed or of a page a seed redirected to (depth 0): whether
// any seed worked at all.
func (e *Engine) countResult(it store.Item, r *store.Result) {
	switch {
	case r.ErrorClass == classRobots || r.ErrorClass == classOutOfScope || r.ErrorClass == classHostPageCap ||
		r.ErrorClass == classTrap || e.missingSitemap(it, r):
		// Not fetched by the crawl's own choice (robots.txt, the scope, the
		// host's page cap, a trap rule), or a sitemap the host does not have
		// (sitemaps.go): neither a page nor a failure.
		e.skipped.Add(1)
		if it.Depth == 0 && r.ErrorClass == classRobots && it.Kind != store.KindSitemap {
			e.seedsBlocked.Add(1)
		}
		return
	case r.Failed():
		e.failed.Add(1)
	default:
		e.fetched.Add(1)
	}
	switch {
	case it.Depth > 0:
	case r.Failed():
		e.seedsFailed.Add(1)
	case r.Status >= 200 && r.Status < 300:
		e.seedsFetched.Add(1)
	}
}

// cancelTicket gives back a breaker ticket whose request was never sent:
// the probe gate is freed (and the URLs that met it are woken), and the
// breaker learns nothing, as nothing was asked of the host.
func (e *Engine) cancelTicket(t breaker.Ticket, now time.Time) {
	if e.breakers.Cancel(t) {
		e.front.Unpark(t.Host, now)
	}
}
