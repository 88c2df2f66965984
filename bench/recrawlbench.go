package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/storage"
)

// RecrawlResult is the recrawl section: the crawl section's site crawled
// into one file, then twice more with --recrawl-after: once with no page
// changed, once with a tenth of the pages changed.
type RecrawlResult struct {
	Site      Size       `json:"site"`
	First     RecrawlRun `json:"first"`
	Unchanged RecrawlRun `json:"unchanged"`
	Changed   RecrawlRun `json:"changed"`
	// ChangedPages were given a new revision before the third run;
	// ChangedRefetched of them were answered 200 in it (the site's logs).
	ChangedPages     int `json:"changed_pages"`
	ChangedRefetched int `json:"changed_refetched"`
	// RawOK and RawNotModified are a raw keep-alive fetch loop over the
	// site, as the ceiling's, asking for every page plainly and then with
	// its ETag: what a 304 saves on this machine before any crawler runs.
	RawOK          float64 `json:"raw_ok_per_sec"`
	RawNotModified float64 `json:"raw_not_modified_per_sec"`
}

// RecrawlRun is one crawl of the recrawl section.
type RecrawlRun struct {
	Wall      time.Duration `json:"wall_ns"` // storage.Open to the end of Run
	Fetched   int64         `json:"fetched"`
	Failed    int64         `json:"failed"`
	Exhausted bool          `json:"exhausted"`
	// From the site's logs: page requests (robots.txt aside), those
	// answered 304, and every response body byte sent, robots.txt included.
	PageRequests int   `json:"page_requests"`
	NotModified  int   `json:"not_modified"`
	BodyBytes    int64 `json:"body_bytes"`
}

// recrawlAfter is the runs' --recrawl-after; each later run's clock is
// recrawlStep further on, so every page is stale again while robots.txt
// (cached 24h) is not.
const (
	recrawlAfter = time.Hour
	recrawlStep  = 2 * time.Hour
)

func (r *runner) recrawl(ctx context.Context) error {
	cfg := r.cfg
	site, err := startSizedSite(cfg.Site, RecrawlPageBytes)
	if err != nil {
		return err
	}
	defer site.Close()
	path := filepath.Join(r.dir, "recrawl.db")
	res := &RecrawlResult{Site: cfg.Site}
	opts := r.crawlOptions(site)
	cfg.logf("recrawl: first crawl of %s", cfg.Site)
	if res.First, err = r.recrawlRun(ctx, path, opts, site, nil); err != nil {
		return err
	}
	opts.Seeds, opts.RecrawlAfter = nil, recrawlAfter
	cfg.logf("recrawl: again with --recrawl-after %s, %s later, nothing changed", hours(recrawlAfter), hours(recrawlStep))
	opts.Now = shifted(recrawlStep)
	if res.Unchanged, err = r.recrawlRun(ctx, path, opts, site, nil); err != nil {
		return err
	}
	changed := changeTenth(site)
	res.ChangedPages = countPages(changed)
	cfg.logf("recrawl: again, %s later still, %d pages changed", hours(recrawlStep), res.ChangedPages)
	opts.Now = shifted(2 * recrawlStep)
	res.Changed, err = r.recrawlRun(ctx, path, opts, site, func(mark logMark) {
		res.ChangedRefetched = refetched(site, mark, changed)
	})
	if err != nil {
		return err
	}
	cfg.logf("recrawl: raw fetch loop, plain and conditional")
	if res.RawOK, res.RawNotModified, err = rawRevalidation(ctx, cfg, interleave(site.URLs(), cfg.Site)); err != nil {
		return err
	}
	r.report.Recrawl = res
	return nil
}

// rawRevalidation fetches urls as the ceiling does, once plainly and once
// with each page's ETag, and returns both rates. A plain answer must be a
// 200, a conditional one a 304.
func rawRevalidation(ctx context.Context, cfg *Config, urls []string) (ok, notModified float64, err error) {
	tr := &http.Transport{MaxIdleConnsPerHost: cfg.HostConcurrency, MaxConnsPerHost: cfg.HostConcurrency,
		IdleConnTimeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	etags := make([]string, len(urls))
	rates := [2]float64{}
	for pass := range rates {
		var next, failed atomic.Int64
		var wg sync.WaitGroup
		start := cfg.now()
		for range cfg.Workers {
			wg.Go(func() {
				for i := int(next.Add(1)) - 1; i < len(urls) && ctx.Err() == nil; i = int(next.Add(1)) - 1 {
					tag, good := getTagged(ctx, client, urls[i], etags[i], pass == 1)
					etags[i] = tag
					if !good {
						failed.Add(1)
					}
				}
			})
		}
		wg.Wait()
		rates[pass] = float64(len(urls)) / cfg.since(start).Seconds()
		if err := ctx.Err(); err != nil {
			return 0, 0, err
		}
		if n := failed.Load(); n > 0 {
			return 0, 0, fmt.Errorf("raw revalidation pass %d: %d answers not 200 or 304", pass, n)
		}
	}
	return rates[0], rates[1], nil
}

// getTagged fetches url to the end of its body, with If-None-Match etag
// when conditional, and returns the ETag answered and whether the status
// was the one expected (304 when conditional, else 200).
func getTagged(ctx context.Context, client *http.Client, url, etag string, conditional bool) (string, bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", false
	}
	want := http.StatusOK
	if conditional {
		req.Header.Set("If-None-Match", etag)
		want = http.StatusNotModified
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.Header.Get("ETag"), err == nil && resp.StatusCode == want
}

// RecrawlPageBytes is the size of the recrawl site's pages: the median
// HTML page on the web is about 30 KB, and a 3 KB page costs so little to
// send on loopback that a 304 would save nothing worth measuring.
const RecrawlPageBytes = 30_000

// startSizedSite serves size healthy hosts whose pages are padded to at
// least pageBytes, with the bench's fixed seed.
func startSizedSite(size Size, pageBytes int) (*demosite.Site, error) {
	specs := demosite.BenchSpecs(size.Hosts, size.Pages, false, 0)
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1, PageBytes: pageBytes})
	if err != nil {
		return nil, fmt.Errorf("start bench site (%s, %d-byte pages): %w", size, pageBytes, err)
	}
	return site, nil
}

func hours(d time.Duration) string { return fmt.Sprintf("%gh", d.Hours()) }

// shifted is the wall clock moved d on.
func shifted(d time.Duration) func() time.Time {
	return func() time.Time { return time.Now().Add(d) }
}

// recrawlRun crawls the file at path once and reads what the site saw;
// after, if set, reads the site's logs from the run's mark on.
func (r *runner) recrawlRun(ctx context.Context, path string, opts crawl.Options, site *demosite.Site, after func(logMark)) (RecrawlRun, error) {
	mark, bytes := markLogs(site), bodyBytes(site)
	start := r.cfg.now()
	db, err := storage.Open(path, nil)
	if err != nil {
		return RecrawlRun{}, err
	}
	sum, err := crawlDB(ctx, opts, db)
	run := RecrawlRun{Wall: r.cfg.since(start), Fetched: sum.Counts.Fetched, Failed: sum.Counts.Failed,
		Exhausted: sum.Exhausted, BodyBytes: bodyBytes(site) - bytes}
	if err = errors.Join(err, db.Close()); err != nil {
		return RecrawlRun{}, fmt.Errorf("recrawl run: %w", err)
	}
	run.PageRequests, run.NotModified = pageAnswers(site, mark)
	if after != nil {
		after(mark)
	}
	return run, nil
}

func bodyBytes(site *demosite.Site) int64 {
	var n int64
	for _, h := range site.Hosts() {
		n += h.BodyBytes()
	}
	return n
}

// pageAnswers counts the page requests logged after mark, and the 304s.
func pageAnswers(site *demosite.Site, mark logMark) (requests, notModified int) {
	for i, h := range site.Hosts() {
		for _, req := range h.Requests()[mark[i]:] {
			if req.Path == "/robots.txt" {
				continue
			}
			requests++
			if req.Status == 304 {
				notModified++
			}
		}
	}
	return requests, notModified
}

// changeTenth gives every tenth page of each host a new revision and
// returns the changed paths by host.
func changeTenth(site *demosite.Site) map[*demosite.Host]map[string]bool {
	out := make(map[*demosite.Host]map[string]bool)
	for _, h := range site.Hosts() {
		var pages []int
		out[h] = make(map[string]bool)
		for i := 0; i < h.Spec().Pages; i += 10 {
			pages = append(pages, i)
			out[h][h.PageURL(i)[len(h.BaseURL()):]] = true
		}
		h.Change(pages...)
	}
	return out
}

func countPages(changed map[*demosite.Host]map[string]bool) int {
	n := 0
	for _, paths := range changed {
		n += len(paths)
	}
	return n
}

// refetched counts the changed pages answered 200 after mark.
func refetched(site *demosite.Site, mark logMark, changed map[*demosite.Host]map[string]bool) int {
	n := 0
	for i, h := range site.Hosts() {
		seen := make(map[string]bool)
		for _, req := range h.Requests()[mark[i]:] {
			if req.Status == 200 && changed[h][req.Path] && !seen[req.Path] {
				seen[req.Path] = true
				n++
			}
		}
	}
	return n
}

// TimeRatio is the first crawl's wall time over run's.
func (r *RecrawlResult) TimeRatio(run RecrawlRun) float64 {
	return r.First.Wall.Seconds() / run.Wall.Seconds()
}

// BytesRatio is the first crawl's body bytes over run's, +Inf when run
// received none.
func (r *RecrawlResult) BytesRatio(run RecrawlRun) float64 {
	if run.BodyBytes == 0 {
		return math.Inf(1)
	}
	return float64(r.First.BodyBytes) / float64(run.BodyBytes)
}
