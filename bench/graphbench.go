package bench

import (
	"context"

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
	// Without is the crawl without the graph; RatioToCrawl is the crawl
	// with it (the section's) over the one without, in pages/s.
	Fetched            int64   `json:"fetched_without"`
	PagesPerSecWithout float64 `json:"pages_per_sec_without"`
	RatioToCrawl       float64 `json:"ratio_to_crawl"`
}

// noGraph is a file backend that says it keeps no link graph.
type noGraph struct{ backend.Backend }

func (n noGraph) Capabilities() store.Capabilities {
	c := n.Backend.Capabilities()
	c.LinkGraph = false
	return c
}

func (r *runner) graphCrawl(ctx context.Context, site *demosite.Site, with *CrawlResult, size storage.GraphSize) (*GraphRun, error) {
	run, err := r.runEngineOn(ctx, "crawl-no-graph", r.crawlOptions(site), nil,
		func(b backend.Backend) backend.Backend { return noGraph{b} })
	if err != nil {
		return nil, err
	}
	g := &GraphRun{Pages: size.Pages, Edges: size.Edges, URLs: size.URLs, Bytes: size.Bytes,
		Fetched: run.sum.Counts.Fetched}
	if size.Edges > 0 {
		g.BytesPerEdge = float64(size.Bytes) / float64(size.Edges)
	}
	g.PagesPerSecWithout = float64(g.Fetched) / run.wall.Seconds()
	if g.PagesPerSecWithout > 0 {
		g.RatioToCrawl = with.PagesPerSec / g.PagesPerSecWithout
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
		num(p+"pages/s without it", PagesPerSec, g.PagesPerSecWithout, "the same crawl into a file that keeps no graph"),
		num(p+"ratio to the crawl without it", Share, g.RatioToCrawl, "what storing the graph costs the crawl").
			want(AtLeast, TargetGraphToCrawl),
	}
}
