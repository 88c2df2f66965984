package crawl

import (
	"breakwater/extract"
	"breakwater/frontier"
	"breakwater/store"
)

// The link graph: every link a page holds is stored with the result, in
// the batch that completes the page, whether the scope queued it or not:
// a later run with a wider scope finds there what this one refused.

// pageLinks are what a completed page's batch stores as its links: their
// record, encoded on the worker's goroutine, which names every URL.
type pageLinks struct{ rec []byte }

// outlinks converts a page's scanned links to the graph's, in page order.
func outlinks(links []extract.Link) []store.Outlink {
	out := make([]store.Outlink, len(links))
	for i := range links {
		l := &links[i]
		out[i] = store.Outlink{To: l.Hash, Edge: store.Edge{To: l.URL, Kind: linkKind(l.Kind), Rel: l.Rel,
			Text: l.Text, Element: l.Element, Attr: l.Attr}}
	}
	return out
}

func linkKind(k extract.Kind) store.LinkKind {
	switch k {
	case extract.Requisite:
		return store.LinkRequisite
	case extract.Frame:
		return store.LinkFrame
	}
	return store.LinkNavigation
}

// graphLinks returns the links x's completing batch is to store, or nil
// when it stores none: a store without the graph, or a page that has no
// links and had none stored (only a refresh may replace stored links).
// The record keeps the page's depth, kind and robots directives d, which
// a wider scope's resume reads to follow the links as this run would.
func (e *Engine) graphLinks(x *exchange, d store.Directives) *pageLinks {
	if !e.caps.LinkGraph || x.robots || len(x.links) == 0 && x.prior == nil {
		return nil
	}
	return &pageLinks{rec: store.EncodeLinks(store.LinksPageOf(x.lease.Item, d), outlinks(x.links))}
}

// put adds the page's links to b; a nil p adds nothing.
func (p *pageLinks) put(page store.Item) []func(*store.Batch) {
	if p == nil {
		return nil
	}
	return []func(*store.Batch){func(b *store.Batch) { b.PutLinks(page, nil, p.rec) }}
}

// graphRedirect returns the link a redirect's batch stores, its Location,
// or nil for none: a wider scope's resume follows it as the redirect
// would have been, and a report names the redirect among the URLs leading
// to a broken one.
func (e *Engine) graphRedirect(x *exchange, r *store.Result) *pageLinks {
	if !e.caps.LinkGraph || x.robots || r.ErrorClass != "" || r.FinalURL == "" || r.FinalURL == r.URL {
		return nil
	}
	target, err := frontier.ParseLink(r.FinalURL)
	if err != nil {
		return nil
	}
	links := []store.Outlink{{To: target.Hash, Edge: store.Edge{To: target.URL, Kind: store.LinkRedirect,
		Element: "http", Attr: "Location"}}}
	return &pageLinks{rec: store.EncodeLinks(store.LinksPageOf(x.lease.Item, 0), links)}
}
