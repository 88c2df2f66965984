package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"breakwater/backend"
	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/warc"
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
	// WARC is the same crawl again with --warc, run right after this one
	// on the same site; nil when Config.NoWARC skipped it.
	WARC *WARCRun `json:"warc,omitempty"`
	// Listen is the same crawl again with its metrics served and scraped
	// every second.
	Listen *ListenRun `json:"listen,omitempty"`
	// Requisites is a site of the same size with requisites, crawled with
	// and without --page-requisites.
	Requisites *RequisitesRun `json:"requisites,omitempty"`
	// Graph is what the link graph took in this crawl's file, and the
	// same crawl again without it.
	Graph *GraphRun `json:"graph,omitempty"`
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
	var graph storage.GraphSize
	run, err := r.runEngine(ctx, "crawl", r.crawlOptions(site), func(db *storage.DB) (err error) {
		graph, err = db.GraphSize()
		return err
	})
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
	cfg.logf("crawl: %s again with --listen, scraped every second", cfg.Site)
	if res.Listen, err = r.listenCrawl(ctx, site, res); err != nil {
		return err
	}
	cfg.logf("crawl: %s with and without the link graph, %d pairs", cfg.Site, graphPairs)
	if res.Graph, err = r.graphCrawl(ctx, site, graph); err != nil {
		return err
	}
	cfg.logf("crawl: %s with a stylesheet and two images a page, with and without --page-requisites", cfg.Site)
	if res.Requisites, err = r.requisitesCrawl(ctx); err != nil {
		return err
	}
	if cfg.NoWARC {
		return nil
	}
	cfg.logf("crawl: %s again with --warc", cfg.Site)
	w, err := r.warcCrawl(ctx, site, res)
	if err != nil {
		return err
	}
	res.WARC = w
	cfg.logf("crawl: --warc against the same crawl without, %d pairs each on %s and on 30 KB pages", warcRatioRuns, cfg.Site)
	if w.Ratios, err = r.warcRatios(ctx, site); err != nil {
		return err
	}
	return nil
}

// crawlOptions are the crawl section's settings over site: from its roots,
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

// WARCRun is the crawl section's second crawl: the same options with
// WARC.Dir set, into a fresh file and an empty directory, then the archive
// read back with warc.Check (not in the wall time).
type WARCRun struct {
	Fetched        int64         `json:"fetched"`
	Failed         int64         `json:"failed"`
	Exhausted      bool          `json:"exhausted"`
	Wall           time.Duration `json:"wall_ns"`
	PagesPerSec    float64       `json:"pages_per_sec"`
	RatioToCeiling float64       `json:"ratio_to_ceiling"` // 0 when the ceiling did not run
	RatioToCrawl   float64       `json:"ratio_to_crawl"`   // to the crawl without --warc just before
	Traffic        Traffic       `json:"traffic"`
	DBBytes        int64         `json:"db_bytes"`
	// Files and Bytes are the finished .warc.gz files and their sizes summed;
	// BytesPerPage divides Bytes by Fetched (warcinfo and robots.txt
	// records included).
	Files        int     `json:"files"`
	Bytes        int64   `json:"bytes"`
	BytesPerPage float64 `json:"bytes_per_page"`
	// Records counts warc.Check's records by WARC-Type.
	Records map[string]int `json:"records"`
	// PagesArchived is the URIs other than robots.txt held by exactly one
	// response or revisit record, PagesArchivedTwice those held by more.
	PagesArchived      int `json:"pages_archived"`
	PagesArchivedTwice int `json:"pages_archived_twice"`
	// CheckOK is warc.Check's verdict: no problem and no unfinished file.
	CheckOK    bool     `json:"check_ok"`
	Problems   []string `json:"problems,omitempty"` // the first few of Check's
	NProblems  int      `json:"n_problems"`
	Unfinished []string `json:"unfinished,omitempty"`
	// IndexRecords is the lines of the index.cdxj the crawl wrote as it
	// ended (in Wall). IndexWall is writing it again from the files' own
	// indexes, IndexReadWall with those removed, each file read to index
	// it (an archive made before indexes were); neither is in Wall.
	IndexRecords  int64         `json:"index_records"`
	IndexWall     time.Duration `json:"index_wall_ns"`
	IndexReadWall time.Duration `json:"index_read_wall_ns"`
	// Ratios is --warc's cost measured in interleaved pairs on the bench
	// site and on one with 30 KB pages.
	Ratios []WARCRatio `json:"ratios,omitempty"`
}

// Clean is whether the archive read back clean and holds every fetched
// page in exactly one response or revisit record.
func (w *WARCRun) Clean() bool {
	return w.CheckOK && w.PagesArchivedTwice == 0 && int64(w.PagesArchived) == w.Fetched
}

// maxProblems is how many of Check's problems a report keeps.
const maxProblems = 10

// warcCrawl crawls site again as the crawl section did, archiving into a
// fresh directory, and reads the archive back.
func (r *runner) warcCrawl(ctx context.Context, site *demosite.Site, plain *CrawlResult) (*WARCRun, error) {
	dir := filepath.Join(r.dir, "crawl-warc")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, err
	}
	opts := r.crawlOptions(site)
	opts.WARC.Dir = dir
	mark := markLogs(site)
	run, err := r.runEngine(ctx, "crawl-warc", opts, nil)
	if err != nil {
		return nil, err
	}
	w := &WARCRun{Fetched: run.sum.Counts.Fetched, Failed: run.sum.Counts.Failed, Exhausted: run.sum.Exhausted,
		Wall: run.wall, DBBytes: run.dbBytes, Traffic: trafficSince(site, mark)}
	w.PagesPerSec = float64(w.Fetched) / run.wall.Seconds()
	if c := r.report.Ceiling; c != nil && c.PagesPerSec > 0 {
		w.RatioToCeiling = w.PagesPerSec / c.PagesPerSec
	}
	if plain.PagesPerSec > 0 {
		w.RatioToCrawl = w.PagesPerSec / plain.PagesPerSec
	}
	if w.Files, w.Bytes, err = warcFiles(dir); err != nil {
		return nil, err
	}
	if w.Fetched > 0 {
		w.BytesPerPage = float64(w.Bytes) / float64(w.Fetched)
	}
	rep, err := warc.Check(dir)
	if err != nil {
		return nil, err
	}
	w.Records, w.CheckOK, w.NProblems, w.Unfinished = rep.Records, rep.OK(), len(rep.Problems), rep.Unfinished
	w.Problems = rep.Problems[:min(len(rep.Problems), maxProblems)]
	for uri, n := range rep.Responses {
		switch {
		case strings.HasSuffix(uri, "/robots.txt"):
		case n == 1:
			w.PagesArchived++
		default:
			w.PagesArchivedTwice++
		}
	}
	if err := r.timeIndex(w, dir); err != nil {
		return nil, err
	}
	if !w.Clean() {
		r.cfg.logf("crawl: the WARC archive is NOT clean: Check OK %v (%d problems, %d unfinished), %d pages archived once, %d more than once, %d fetched",
			w.CheckOK, w.NProblems, len(w.Unfinished), w.PagesArchived, w.PagesArchivedTwice, w.Fetched)
	}
	return w, nil
}

// timeIndex counts the lines of the index the crawl wrote in dir, then
// times writing it again from the files' indexes, and from the files.
func (r *runner) timeIndex(w *WARCRun, dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, warc.IndexName))
	if err != nil {
		return fmt.Errorf("the crawl's index: %w", err)
	}
	w.IndexRecords = int64(bytes.Count(data, []byte("\n")))
	start := r.cfg.now()
	if _, err := warc.WriteIndex(dir); err != nil {
		return err
	}
	w.IndexWall = r.cfg.now().Sub(start)
	sides, err := filepath.Glob(filepath.Join(dir, "*.warc.gz.cdxj"))
	if err != nil {
		return err
	}
	for _, side := range sides {
		if err := os.Remove(side); err != nil {
			return err
		}
	}
	start = r.cfg.now()
	if _, err := warc.WriteIndex(dir); err != nil {
		return err
	}
	w.IndexReadWall = r.cfg.now().Sub(start)
	return nil
}

// warcFiles counts the finished WARC files in dir and sums their sizes.
func warcFiles(dir string) (n int, bytes int64, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, de := range entries {
		if de.IsDir() || !strings.HasSuffix(de.Name(), ".warc.gz") {
			continue
		}
		info, err := de.Info()
		if err != nil {
			return 0, 0, err
		}
		n++
		bytes += info.Size()
	}
	return n, bytes, nil
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
	return r.runEngineOn(ctx, name, opts, inspect, nil)
}

// runEngineOn is runEngine with the file's backend given to wrap, if set,
// before the crawl gets it (to take a capability away).
func (r *runner) runEngineOn(ctx context.Context, name string, opts crawl.Options, inspect func(*storage.DB) error,
	wrap func(backend.Backend) backend.Backend) (engineRun, error) {
	path := filepath.Join(r.dir, name+".db")
	start := r.cfg.now()
	db, err := storage.Open(path, nil)
	if err != nil {
		return engineRun{}, err
	}
	var sum crawl.Summary
	// The label lets one profile of several runs be split by run:
	// go tool pprof -tagfocus run=crawl-warc.
	pprof.Do(ctx, pprof.Labels("run", name), func(ctx context.Context) {
		var b backend.Backend = backend.File(db)
		if wrap != nil {
			b = wrap(b)
		}
		sum, err = crawlOn(ctx, opts, b)
	})
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
	return crawlOn(ctx, opts, backend.File(db))
}

func crawlOn(ctx context.Context, opts crawl.Options, b backend.Backend) (crawl.Summary, error) {
	e, err := crawl.New(opts, b)
	if err != nil {
		return crawl.Summary{}, err
	}
	return e.Run(ctx)
}
