package crawl

import (
	"breakwater/extract"
	"breakwater/frontier"
	"breakwater/store"
)

// A page's requisites are what a browser fetches to show it: its images,
// stylesheets (and what they import), scripts, fonts and frames. With
// --page-requisites they are queued as the page is read, whatever the
// scope (they make a page the crawl took), as items of KindRequisite one
// hop further from the page than what named them; --requisite-hops bounds
// the chain. They are fetched like any URL (robots.txt, the address
// guard, the breaker, politeness, --max-body), once each however many
// pages use them (the seen set), ahead of the new pages of their host
// (the frontier), and they count toward neither --max-depth, --max-pages
// nor --max-pages-per-host. A requisite is read only when it is a
// stylesheet (for its imports) or a document in a frame (for its own
// requisites, and for its links when it is in the crawl's scope: an
// off-scope requisite never brings navigation).

// maxRequisiteHops bounds --requisite-hops: a longer chain is a trap, not
// a page.
const maxRequisiteHops = 8

// discoverFrom turns the links read from the answer of it into frontier
// items: its navigation links as pages, when it is a page or an in-scope
// frame and follow (its robots directives let them be followed), except
// rel="nofollow" ones under --skip-rel-nofollow; its requisites as
// requisites, within --requisite-hops, whatever the directives.
func (e *Engine) discoverFrom(it store.Item, links []extract.Link, follow bool) []store.Item {
	// Most of a page's links are navigation: room for all of them at once.
	nav := make([]frontier.Link, 0, len(links))
	var req []frontier.Link
	for _, l := range links {
		switch {
		case l.Kind != extract.Navigation:
			req = append(req, l.Link)
		case follow && !(e.opts.SkipRelNofollow && l.Rel&store.RelNofollow != 0):
			nav = append(nav, l.Link)
		}
	}
	var found []store.Item
	if it.Kind != store.KindRequisite {
		found = e.discover(it.URL, nav, it.Depth+1, 0)
		if e.opts.PageRequisites {
			found = append(found, e.discoverRequisites(it.URL, req, it.Depth+1, 1, 0)...)
		}
		return found
	}
	// A frame's document: its links are the page's, one hop from it, and
	// only when the frame itself is one the crawl would take as a page.
	if len(nav) > 0 && e.scope.allows(it.URL, it.Host, it.Depth) {
		found = e.discover(it.URL, nav, it.Depth, 0)
	}
	if e.opts.PageRequisites && it.Hops < e.opts.RequisiteHops {
		found = append(found, e.discoverRequisites(it.URL, req, it.Depth, it.Hops+1, 0)...)
	}
	return found
}

// discoverRequisites queues the requisites not seen before, at hops from
// their page; from is their referrer.
func (e *Engine) discoverRequisites(from string, links []frontier.Link, depth, hops, redirects int) []store.Item {
	var out []store.Item
	for _, link := range links {
		if e.scope.allowsRequisite(link.URL) && !e.db.Seen(link.Hash) {
			it := link.Item(depth, redirects)
			it.Kind, it.Hops, it.Referrer = store.KindRequisite, hops, from
			out = append(out, it)
		}
	}
	return out
}
