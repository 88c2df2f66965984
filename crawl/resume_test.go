package crawl_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/breaker"
	"breakwater/crawl"
	"breakwater/fetch"
	"breakwater/storage"
	"breakwater/store"
)

// slowFetcher answers every request with a small page after delay of
// (fake) time, and counts the requests.
type slowFetcher struct {
	delay time.Duration
	mu    sync.Mutex
	urls  []string
}

var _ crawl.Fetcher = (*slowFetcher)(nil)

func (f *slowFetcher) Fetch(ctx context.Context, req fetch.Request) *fetch.Response {
	start := time.Now()
	f.mu.Lock()
	f.urls = append(f.urls, req.URL)
	f.mu.Unlock()
	select {
	case <-time.After(f.delay):
	case <-ctx.Done():
		return &fetch.Response{URL: req.URL, Started: start, Err: ctx.Err()}
	}
	return &fetch.Response{URL: req.URL, Status: 200, Header: http.Header{"Content-Type": {"text/html"}},
		ContentType: "text/html", Body: []byte("<title>ok</title>"), Started: start, Duration: f.delay}
}

// A host open when the crawler stopped an hour ago is not given up on at
// restart: the hour the crawler did not run is not the host's downtime.
// Before, the stored DownSince made it due at once, and its queued URLs
// were recorded host-down while its first probe was still in flight.
func TestRestartDoesNotCountCrawlerDowntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "crawl.db")
		db, err := storage.Open(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		now := time.Now()
		stopped := now.Add(-time.Hour)
		down := breaker.Breaker{State: breaker.Open, OpenedAt: stopped.Add(-time.Minute),
			DownSince: stopped.Add(-time.Minute), Rest: 5 * time.Minute, Generation: 7}
		var b store.Batch
		b.PutBreaker("a.test", down)
		b.PutRunningAt(stopped)
		if _, err := db.Commit(&b); err != nil {
			t.Fatal(err)
		}

		f := &slowFetcher{delay: 2 * time.Second}
		opts := crawl.DefaultOptions()
		opts.Seeds = []string{"http://a.test/", "http://a.test/b"}
		opts.Fetcher = f
		opts.Delay = 0
		opts.GiveUpAfter = 30 * time.Minute
		opts.Logger = testLogger(t)
		opts.Sitemaps = false // the fake answers every URL with a page
		sum := runCrawl(t, testContext(t, time.Hour), db, opts)

		if !sum.Exhausted || sum.Counts.Fetched != 2 || sum.Counts.Failed != 0 {
			t.Errorf("crawl ended exhausted=%v with %d fetched, %d failed; want both pages fetched",
				sum.Exhausted, sum.Counts.Fetched, sum.Counts.Failed)
		}
		for k, r := range results(t, db) {
			if r.ErrorClass != "" {
				t.Errorf("%s: recorded %s (%s), want fetched", k, r.ErrorClass, r.Error)
			}
		}
	})
}
