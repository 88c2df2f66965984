package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/storage"
)

// CrawlResult is the crawl section: the engine over the ceiling's site.
type CrawlResult struct {
	Site           Size          `json:"site"`
	Fetched        int64         `json:"fetched"`
	Failed         int64         `json:"failed"`
	Exhausted      bool          `json:"exhausted"`
	Wall           time.Duration `json:"wall_ns"`
	PagesPerSec    float64       `json:"pages_per_sec"`    // distinct pages stored per second of wall time
	RatioToCeiling float64       `json:"ratio_to_ceiling"` // 0 when the ceiling did not run
	Traffic        Traffic       `json:"traffic"`
	DBBytes        int64         `json:"db_bytes"`
}

// ceilingAndCrawl runs both sections on one site, the ceiling first: the
// same server goroutines and the same pages serve both figures.
func (r *runner) ceilingAndCrawl(ctx context.Context) error {
	cfg := r.cfg
	site, err := startSite(cfg.Site, 0, 0)
	if err != nil {
		return err
	}
	defer site.Close()
	if cfg.runs(SectionCeiling) {
		cfg.logf("ceiling: raw fetch loop over %s", cfg.Site)
		res, err := ceiling(ctx, cfg, interleave(site.URLs(), cfg.Site))
		if err != nil {
			return err
		}
		res.Site = cfg.Site
		r.report.Ceiling = res
	}
	if !cfg.runs(SectionCrawl) {
		return nil
	}
	cfg.logf("crawl: %s from its roots", cfg.Site)
	mark := markLogs(site)
	run, err := r.runEngine(ctx, "crawl", r.crawlOptions(site), nil)
	if err != nil {
		return err
	}
	res := &CrawlResult{Site: cfg.Site, Fetched: run.sum.Counts.Fetched, Failed: run.sum.Counts.Failed,
		Exhausted: run.sum.Exhausted, Wall: run.wall, DBBytes: run.dbBytes, Traffic: trafficSince(site, mark)}
	res.PagesPerSec = float64(res.Fetched) / run.wall.Seconds()
	if c := r.report.Ceiling; c != nil && c.PagesPerSec > 0 {
		res.RatioToCeiling = res.PagesPerSec / c.PagesPerSec
	}
	r.report.Crawl = res
	return nil
}

// crawlOptions are the crawl settings over site: from its roots,
// --delay 0, 64 workers, 4 per host, everything persisted as usual.
func (r *runner) crawlOptions(site *demosite.Site) crawl.Options {
	o := crawl.DefaultOptions()
	o.Seeds = site.Roots()
	o.Workers = r.cfg.Workers
	o.HostConcurrency = r.cfg.HostConcurrency
	o.Delay = 0
	o.AllowPrivate = true
	o.Logger = r.cfg.logger()
	o.Sitemaps = false // the bench site has none: their 404s are not pages
	return o
}

// engineRun is one crawl's outcome.
type engineRun struct {
	sum     crawl.Summary
	wall    time.Duration // storage.Open to the end of Run: everything a user waits for
	dbBytes int64
}

// runEngine crawls into a fresh file named after the run; inspect (if set)
// reads the file after the crawl, before it is closed.
func (r *runner) runEngine(ctx context.Context, name string, opts crawl.Options, inspect func(*storage.DB) error) (engineRun, error) {
	path := filepath.Join(r.dir, name+".db")
	start := r.cfg.now()
	db, err := storage.Open(path, nil)
	if err != nil {
		return engineRun{}, err
	}
	sum, err := crawlDB(ctx, opts, db)
	run := engineRun{sum: sum, wall: r.cfg.since(start)}
	if err == nil && inspect != nil {
		err = inspect(db)
	}
	err = errors.Join(err, db.Close())
	if err != nil {
		return engineRun{}, fmt.Errorf("%s run: %w", name, err)
	}
	if st, serr := os.Stat(path); serr == nil {
		run.dbBytes = st.Size()
	}
	return run, nil
}

func crawlDB(ctx context.Context, opts crawl.Options, db *storage.DB) (crawl.Summary, error) {
	e, err := crawl.New(opts, db)
	if err != nil {
		return crawl.Summary{}, err
	}
	return e.Run(ctx)
}
