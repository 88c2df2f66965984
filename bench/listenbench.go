package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"time"

	"breakwater/backend"
	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/metrics"
	"breakwater/storage"
)

// ListenRun is the crawl section's third crawl: the same options with the
// metrics counted and served (--listen) and a scraper reading /metrics
// every second, into a fresh file.
type ListenRun struct {
	Fetched      int64         `json:"fetched"`
	Wall         time.Duration `json:"wall_ns"`
	PagesPerSec  float64       `json:"pages_per_sec"`
	RatioToCrawl float64       `json:"ratio_to_crawl"` // to the crawl without metrics just before
	Scrapes      int           `json:"scrapes"`        // answered while the crawl ran
}

// listenCrawl crawls site again as the crawl section did, with metrics.
func (r *runner) listenCrawl(ctx context.Context, site *demosite.Site, plain *CrawlResult) (*ListenRun, error) {
	db, err := storage.Open(filepath.Join(r.dir, "crawl-listen.db"), nil)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	opts := r.crawlOptions(site)
	var engine *crawl.Engine
	opts.Metrics = metrics.New(func() (metrics.Snapshot, error) { return engine.MetricsSnapshot() })
	start := r.cfg.now()
	if engine, err = crawl.New(opts, backend.File(db)); err != nil {
		ln.Close()
		return nil, err
	}
	srv := &http.Server{Handler: opts.Metrics.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	scrapes := make(chan int, 1)
	stop := make(chan struct{})
	go func() { scrapes <- scrapeEvery(stop, "http://"+ln.Addr().String()+"/metrics", time.Second) }()
	var sum crawl.Summary
	pprof.Do(ctx, pprof.Labels("run", "crawl-listen"), func(ctx context.Context) { sum, err = engine.Run(ctx) })
	wall := r.cfg.since(start)
	close(stop)
	res := &ListenRun{Fetched: sum.Counts.Fetched, Wall: wall, Scrapes: <-scrapes}
	if err != nil {
		return nil, fmt.Errorf("crawl-listen run: %w", err)
	}
	res.PagesPerSec = float64(res.Fetched) / wall.Seconds()
	if plain.PagesPerSec > 0 {
		res.RatioToCrawl = res.PagesPerSec / plain.PagesPerSec
	}
	return res, nil
}

// scrapeEvery reads url every interval, as Prometheus would, until stop,
// and returns how many scrapes were answered.
func scrapeEvery(stop <-chan struct{}, url string, every time.Duration) int {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t := time.NewTicker(every)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-stop:
			return n
		case <-t.C:
		}
		resp, err := client.Get(url)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			n++
		}
	}
}
