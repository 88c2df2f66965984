package bench

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"breakwater/backend"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/store"
)

// TargetGraphToCrawl: storing the link graph costs at most 15% of the
// crawl's pages/s.
const TargetGraphToCrawl = 0.85

// GraphRun is the link graph's figures: what it took in the crawl
// section's file, and the same crawl again on a store that keeps no graph
// (the file's backend with the capability taken away: nothing else
// differs).
type GraphRun struct {
	Pages int64 `json:"pages"` // pages with links stored
	Edges int64 `json:"edges"`
	URLs  int64 `json:"urls"` // distinct URLs it names: pages and targets
	// Bytes are the file pages the graph's buckets take; BytesPerEdge
	// divides them by Edges.
	Bytes        int64   `json:"bytes"`
	BytesPerEdge float64 `json:"bytes_per_edge"`
	// The graph's cost is measured in graphPairs pairs, each the crawl
	// with the graph then without it, on the same site: one crawl against
	// another run minutes apart said more of the machine than of the
	// graph. Fetched and PagesPerSecWithout are the median pair's crawl
	// without it; Ratios with over without, pair by pair; RatioToCrawl
	// their median.
	Fetched            int64     `json:"fetched_without"`
	PagesPerSecWithout float64   `json:"pages_per_sec_without"`
	Ratios             []float64 `json:"ratios"`
	RatioToCrawl       float64   `json:"ratio_to_crawl"`
}

// graphPairs is how many pairs (with, then without the graph) measure the
// graph's cost.
const graphPairs = 3

// noGraph is a file backend that says it keeps no link graph.
type noGraph struct{ backend.Backend }

func (n noGraph) Capabilities() store.Capabilities {
	c := n.Backend.Capabilities()
	c.LinkGraph = false
	return c
}

func (r *runner) graphCrawl(ctx context.Context, site *demosite.Site, size storage.GraphSize) (*GraphRun, error) {
	g := &GraphRun{Pages: size.Pages, Edges: size.Edges, URLs: size.URLs, Bytes: size.Bytes}
	if size.Edges > 0 {
		g.BytesPerEdge = float64(size.Bytes) / float64(size.Edges)
	}
	type pair struct {
		ratio, without float64
		fetched        int64
	}
	var pairs []pair
	for i := range graphPairs {
		var rate [2]float64
		var fetched int64
		for k, keep := range []bool{true, false} {
			var wrap func(backend.Backend) backend.Backend
			if !keep {
				wrap = func(b backend.Backend) backend.Backend { return noGraph{b} }
			}
			run, err := r.runEngineOn(ctx, fmt.Sprintf("crawl-graph-%d-%v", i, keep), r.crawlOptions(site), nil, wrap)
			if err != nil {
				return nil, err
			}
			if run.wall > 0 {
				rate[k] = float64(run.sum.Counts.Fetched) / run.wall.Seconds()
			}
			fetched = run.sum.Counts.Fetched
		}
		if rate[1] > 0 {
			pairs = append(pairs, pair{rate[0] / rate[1], rate[1], fetched})
			g.Ratios = append(g.Ratios, rate[0]/rate[1])
		}
		r.cfg.logf("crawl: link graph, pair %d: %.0f pages/s with it, %.0f without", i+1, rate[0], rate[1])
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Compare(a.ratio, b.ratio) })
	if len(pairs) > 0 {
		m := pairs[len(pairs)/2]
		g.RatioToCrawl, g.PagesPerSecWithout, g.Fetched = m.ratio, m.without, m.fetched
	}
	return g, nil
}

func graphFigures(g *GraphRun) []Figure {
	const p = "link graph: "
	return []Figure{
		num(p+"links stored", Count, g.Edges, "every link of every page fetched, in and out of scope"),
		num(p+"URLs it names", Count, g.URLs, "each page and target once"),
		num(p+"bytes", Bytes, g.Bytes, "the file pages its records take (each names its page and targets)"),
		num(p+"bytes per link", EdgeBytes, g.BytesPerEdge, "those bytes over the links stored"),
		num(p+"pages/s without it", PagesPerSec, g.PagesPerSecWithout, "the same crawl into a file that keeps no graph (the median pair's)"),
		num(p+"ratio to the crawl without it", Share, g.RatioToCrawl, fmt.Sprintf("what storing the graph costs the crawl: the median of %d pairs, "+
			"each the crawl with the graph then without, on one site; pairs %s", len(g.Ratios), shares(g.Ratios))).
			want(AtLeast, TargetGraphToCrawl),
	}
}
