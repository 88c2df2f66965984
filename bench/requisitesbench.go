package bench

import (
	"context"
	"fmt"
	"time"

	"breakwater/demosite"
)

// RequisitesRun is the crawl section's requisite figures: a site of the
// same size whose every page has a stylesheet and two images, crawled
// with --page-requisites and without, one after the other.
type RequisitesRun struct {
	Pages int64 `json:"pages"` // the site's pages
	Hosts int   `json:"hosts"`
	// With and Without are the two crawls: URLs stored (pages and
	// requisites) and the wall time.
	With, Without struct {
		Fetched int64         `json:"fetched"`
		Wall    time.Duration `json:"wall_ns"`
	}
	// PagesPerSec are the site's pages over each wall time: what a user
	// waits for a site with its requisites, or without them.
	PagesPerSecWith    float64 `json:"pages_per_sec_with"`
	PagesPerSecWithout float64 `json:"pages_per_sec_without"`
	// URLsPerSecWith is every URL the crawl with requisites stored, over
	// its wall time: what the engine does per second either way.
	URLsPerSecWith float64 `json:"urls_per_sec_with"`
	// RequisitesServed counts the requisite requests the site answered in
	// the crawl with them: three per page at most (the stylesheet and logo
	// of each host once, each page's own image).
	RequisitesServed int `json:"requisites_served"`
}

func (r *runner) requisitesCrawl(ctx context.Context) (*RequisitesRun, error) {
	size := r.cfg.Site
	specs := demosite.BenchSpecs(size.Hosts, size.Pages, false, 0)
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1, Requisites: true})
	if err != nil {
		return nil, fmt.Errorf("start requisite site (%s): %w", size, err)
	}
	defer site.Close()
	res := &RequisitesRun{Pages: int64(size.URLs()), Hosts: size.Hosts}
	opts := r.crawlOptions(site)
	opts.PageRequisites = false
	run, err := r.runEngine(ctx, "crawl-no-requisites", opts, nil)
	if err != nil {
		return nil, err
	}
	res.Without.Fetched, res.Without.Wall = run.sum.Counts.Fetched, run.wall
	mark := markLogs(site)
	opts.PageRequisites = true
	if run, err = r.runEngine(ctx, "crawl-requisites", opts, nil); err != nil {
		return nil, err
	}
	res.With.Fetched, res.With.Wall = run.sum.Counts.Fetched, run.wall
	for i, h := range site.Hosts() {
		for _, req := range h.Requests()[mark[i]:] {
			if req.Status == 200 && isRequisitePath(req.Path) {
				res.RequisitesServed++
			}
		}
	}
	res.PagesPerSecWith = float64(res.Pages) / res.With.Wall.Seconds()
	res.PagesPerSecWithout = float64(res.Pages) / res.Without.Wall.Seconds()
	res.URLsPerSecWith = float64(res.With.Fetched) / res.With.Wall.Seconds()
	return res, nil
}

func isRequisitePath(p string) bool {
	return p == "/site.css" || p == "/logo.png" || p == "/bg.png" || len(p) > 5 && p[:5] == "/img/"
}

func requisiteFigures(q *RequisitesRun) []Figure {
	const g = "requisite site: "
	wantRequisites := q.Pages + 3*int64(q.Hosts) // each page's image, each host's stylesheet, background and logo
	return []Figure{
		num(g+"pages/s without --page-requisites", PagesPerSec, q.PagesPerSecWithout,
			"a site of the same size whose every page has a stylesheet and two images, pages only"),
		num(g+"pages/s with --page-requisites", PagesPerSec, q.PagesPerSecWith,
			"the same site with every page's stylesheet and images: what a user waits for a whole site"),
		num(g+"URLs/s with --page-requisites", PagesPerSec, q.URLsPerSecWith,
			"every URL stored (pages and requisites) over the wall time: the engine's rate either way"),
		num(g+"requisites fetched", Count, q.RequisitesServed,
			"each page's own image and each host's stylesheet, background and logo, once each").
			check(Equal, float64(wantRequisites)),
	}
}
