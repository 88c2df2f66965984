package crawl

// Sitemaps (--sitemaps, on by default) seed the frontier. When a host's
// robots.txt is fetched, the sitemaps it names (its Sitemap: lines), or
// the host's /sitemap.xml when it names none, are queued as sitemap items
// (store.KindSitemap), if in scope. A sitemap item is leased and fetched
// like any URL, down the same request path: robots.txt, the breaker, the
// rate token and politeness apply, and it counts toward --max-pages (each
// is a request; an index may list thousands of them). Its body is read by
// the sitemap package instead of the link extractor, with a body cap of the
// sitemap limit (50 MiB) in place of --max-body.
//
// Depth. A sitemap item's Depth is its nesting: 1 for a sitemap robots.txt
// names (or /sitemap.xml), 2 for one an index at 1 lists, 3 for one below
// that; an index at maxSitemapDepth has its sitemaps left out (logged).
// The pages a sitemap lists are queued at depth 1, whatever the nesting:
// the site lists them as its own entry points, one hop from its root, and
// their links are followed from there. For scope (--max-depth) a sitemap
// counts as depth 1 too, so --max-depth 0 (seeds only) reads no sitemap,
// and the index nesting is bounded by maxSitemapDepth alone.
//
// Scope. Sitemap URLs and the URLs they list pass the crawl's scope like
// discovered links (--scope, --include, --exclude); the seen set drops
// those already queued or fetched, so a sitemap is read once per crawl and
// a resumed crawl does not read it again. robots.txt is fetched again when
// its cache expires (24h): its sitemaps are then seen already.
//
// Outcomes. A missing sitemap (404 or 410: most hosts have no
// /sitemap.xml) is stored like any 404 but is not counted as a failure of
// the run, and logged at debug only; so is a guessed /sitemap.xml (one
// robots.txt did not name) that is no sitemap at all, such as the HTML
// page a site serves for any path: it is stored as the page it is, with no
// URL taken from it. A malformed or oversized one (not
// XML, not a sitemap, corrupt gzip, over 50,000 entries or 50 MiB) is
// logged once at warn, stored with error class "sitemap", and none of its
// URLs are queued; the crawl goes on. A redirect is followed as for any
// URL, and its target is still read as a sitemap, at the same nesting.

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/sitemap"
	"breakwater/store"
)

const (
	// maxSitemapDepth is the deepest sitemap nesting read: an index at
	// this depth has its sitemaps left out.
	maxSitemapDepth = 3
	// sitemapScopeDepth is the depth of sitemaps and of the pages they
	// list, as the scope sees them.
	sitemapScopeDepth = 1
	// classSitemap is the error class of a malformed or oversized sitemap.
	classSitemap = "sitemap"
)

// queueSitemaps queues the sitemaps of it's host, whose robots.txt yielded
// rules: the ones robots.txt names or, if none, /sitemap.xml. It runs
// before the rules are stored, so the sitemaps are committed no later than
// the rules: a run that finds the rules in the file has queued them.
func (e *Engine) queueSitemaps(it store.Item, rules *robots.Rules) {
	if !e.opts.Sitemaps || rules == nil {
		return
	}
	u, err := url.Parse(it.URL)
	if err != nil {
		return
	}
	root := u.Scheme + "://" + it.Host
	urls, referrer := rules.Sitemaps(), root+"/robots.txt"
	if len(urls) == 0 {
		// Nothing names it: the guess has no referrer (see guessedSitemap).
		urls, referrer = []string{root + "/sitemap.xml"}, ""
	}
	var items []store.Item
	for _, raw := range urls {
		link, err := frontier.ParseLink(raw)
		if err != nil {
			e.log.Debug("sitemap URL unusable", "host", it.Host, "url", raw, "err", err)
			continue
		}
		if next, ok := e.sitemapItem(link, 1, referrer, ""); ok {
			items = append(items, next)
		}
	}
	if err := e.front.Add(items...); err != nil {
		e.log.Error("queue sitemaps", "host", it.Host, "err", err)
	}
}

// sitemapItem is link as a sitemap item at nesting depth, if the scope
// takes it and it was not seen before.
func (e *Engine) sitemapItem(link frontier.Link, depth int, referrer, lastmod string) (store.Item, bool) {
	if !e.scope.allows(link.URL, link.Host, sitemapScopeDepth) || e.db.Seen(link.Hash) {
		return store.Item{}, false
	}
	it := link.Item(depth, 0)
	it.Kind, it.Referrer, it.Lastmod = store.KindSitemap, referrer, lastmod
	return it, true
}

// scopeDepth is the depth the scope judges it at (see sitemapScopeDepth).
func scopeDepth(it store.Item) int {
	if it.Kind == store.KindSitemap {
		return sitemapScopeDepth
	}
	return it.Depth
}

// sitemapLimits are the limits of one sitemap file.
func (e *Engine) sitemapLimits() sitemap.Limits {
	lim := e.opts.sitemapLimits
	if lim.MaxURLs <= 0 {
		lim.MaxURLs = sitemap.DefaultMaxURLs
	}
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = sitemap.DefaultMaxBytes
	}
	return lim
}

// bodyCap is the body cap of it's request: a sitemap's limit for a
// sitemap, 0 (the fetcher's --max-body) for a page. A gzipped sitemap is
// smaller than that on the wire; one served with a Content-Encoding is
// decoded by the fetcher, so its cap applies to the uncompressed bytes.
func (e *Engine) bodyCap(it store.Item) int64 {
	if it.Kind != store.KindSitemap {
		return 0
	}
	return e.sitemapLimits().MaxBytes
}

// readSitemap is succeeded for a sitemap: a 2xx body is read as a sitemap
// (never as HTML), a 3xx is followed as a sitemap. It returns the URLs to
// queue and fills r.
func (e *Engine) readSitemap(it store.Item, resp *fetch.Response, r *store.Result) []store.Item {
	if resp.Status >= 300 && resp.Status < 400 {
		return e.sitemapRedirect(it, resp, r)
	}
	if resp.Status < 200 || resp.Status >= 300 {
		return nil
	}
	lim := e.sitemapLimits()
	if resp.Truncated {
		return e.badSitemap(it, r, fmt.Errorf("%w: more than %d bytes", sitemap.ErrOversized, lim.MaxBytes))
	}
	var entries []sitemap.Entry
	kind, err := sitemap.Read(bytes.NewReader(resp.Body), lim, func(en sitemap.Entry) error {
		entries = append(entries, en)
		return nil
	})
	if err != nil {
		if kind == sitemap.Unknown && errors.Is(err, sitemap.ErrMalformed) && guessedSitemap(it) {
			e.log.Debug("no sitemap", "url", it.URL, "status", resp.Status, "err", err)
			return nil
		}
		return e.badSitemap(it, r, err)
	}
	r.Outlinks = len(entries)
	if kind == sitemap.Index && it.Depth >= maxSitemapDepth {
		e.log.Warn("sitemap index nested too deep: the sitemaps it lists are not read", "url", it.URL,
			"depth", it.Depth, "max", maxSitemapDepth, "sitemaps", len(entries))
		return nil
	}
	return e.sitemapEntries(it, kind, entries)
}

// sitemapEntries turns a sitemap's entries into items: pages of a urlset
// at depth 1, sitemaps of an index one level deeper than it. Each keeps
// the sitemap as its referrer and its lastmod.
func (e *Engine) sitemapEntries(it store.Item, kind sitemap.Kind, entries []sitemap.Entry) []store.Item {
	base, err := frontier.ParseBaseURL(it.URL)
	if err != nil {
		return nil
	}
	var out []store.Item
	for _, en := range entries {
		link, err := base.ResolveLink(en.Loc)
		if err != nil {
			continue // not http(s), unparsable
		}
		if kind == sitemap.Index {
			if next, ok := e.sitemapItem(link, it.Depth+1, it.URL, en.Lastmod); ok {
				out = append(out, next)
			}
			continue
		}
		if e.scope.allows(link.URL, link.Host, sitemapScopeDepth) && !e.db.Seen(link.Hash) {
			page := link.Item(sitemapScopeDepth, 0)
			page.Referrer, page.Lastmod = it.URL, en.Lastmod
			out = append(out, page)
		}
	}
	return out
}

// sitemapRedirect queues a sitemap's redirect target as a sitemap, at the
// same nesting and with the same referrer, like redirect does for a page.
func (e *Engine) sitemapRedirect(it store.Item, resp *fetch.Response, r *store.Result) []store.Item {
	judged := it
	judged.Depth = sitemapScopeDepth
	found := e.redirect(judged, resp, r)
	for i := range found {
		found[i].Depth, found[i].Kind, found[i].Referrer, found[i].Lastmod = it.Depth, store.KindSitemap, it.Referrer, it.Lastmod
	}
	return found
}

// guessedSitemap reports whether it is a host's /sitemap.xml queued for
// want of a Sitemap: line (or where a redirect of one led).
func guessedSitemap(it store.Item) bool {
	return it.Kind == store.KindSitemap && it.Depth == 1 && it.Referrer == ""
}

// badSitemap records a sitemap that could not be read, with one warning.
func (e *Engine) badSitemap(it store.Item, r *store.Result, err error) []store.Item {
	problem := "malformed"
	if errors.Is(err, sitemap.ErrOversized) {
		problem = "oversized"
	}
	e.log.Warn("sitemap skipped", "url", it.URL, "problem", problem, "err", err)
	r.ErrorClass, r.Error = classSitemap, err.Error()
	return nil
}

// missingSitemap reports whether r is a sitemap's 404 or 410: normal for a
// host's /sitemap.xml, so not a failure of the run (see countResult).
func (e *Engine) missingSitemap(it store.Item, r *store.Result) bool {
	if it.Kind != store.KindSitemap || r.Status != http.StatusNotFound && r.Status != http.StatusGone {
		return false
	}
	e.log.Debug("no sitemap", "url", it.URL, "status", r.Status)
	return true
}
