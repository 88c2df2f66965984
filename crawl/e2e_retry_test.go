package crawl_test

// Retries end to end: 429 with Retry-After, transient failures that must
// not hold up a worker, and a flaky host that is finished without its
// breaker opening.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"breakwater/demosite"
)

func TestThrottledHostHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	const retryAfter = 2 * time.Second
	site := startSite(t, []demosite.HostSpec{{Name: "slowpoke", Pages: 8, Behavior: demosite.Throttling,
		MaxRPS: 2, RetryAfterSeconds: int(retryAfter / time.Second)}}, demosite.SiteOptions{Seed: 20})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)
	opts.Delay = 0
	opts.RetryMax = 10 * time.Second // Retry-After is capped at --retry-max

	sum := runCrawl(t, testContext(t, 30*time.Second), db, opts)

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true")
	}
	h := site.Hosts()[0]
	reqs := h.Requests()
	throttled, violations := 0, 0
	for i, r := range reqs {
		if r.Status != http.StatusTooManyRequests {
			continue
		}
		throttled++
		for _, later := range reqs[i+1:] {
			if d := later.Time.Sub(r.Time); d > 0 && d < retryAfter {
				violations++
				t.Errorf("%s at +%v arrived %v after a 429 asking for %v",
					later.RequestURI, later.Time.Sub(reqs[0].Time), d, retryAfter)
			}
		}
	}
	t.Logf("request log: %d requests, %d answered 429, %d inside a Retry-After", len(reqs), throttled, violations)
	if throttled == 0 {
		t.Errorf("no 429 at all: the test did not exercise Retry-After")
	}
	res := results(t, db)
	for i, p := range pagePaths(h.Spec().Pages) {
		r, ok := res[hostKey(t, h)+" "+p]
		if !ok {
			t.Errorf("page %s has no result", p)
			continue
		}
		checkPageResult(t, r, fmt.Sprintf("%s page %d", h.Name, i), i == 0)
	}
}

// failingServer answers 404 for robots.txt and 500 for everything else,
// logging the arrival of each request.
type failingServer struct {
	*httptest.Server
	mu    sync.Mutex
	times []time.Time // arrivals of non-robots requests
}

func startFailingServer(t testing.TB) *failingServer {
	t.Helper()
	fs := &failingServer{}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		fs.mu.Lock()
		fs.times = append(fs.times, time.Now())
		fs.mu.Unlock()
		http.Error(w, "internal error", http.StatusInternalServerError)
	}))
	t.Cleanup(fs.Close)
	return fs
}

func (fs *failingServer) arrivals() []time.Time {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return append([]time.Time(nil), fs.times...)
}

// With one worker, a host whose URL keeps failing must not hold the worker
// through its backoff: the healthy host is crawled meanwhile, and the
// failing URL ends failed after exactly Retries+1 attempts.
func TestTransientFailuresDoNotBlockTheWorker(t *testing.T) {
	t.Parallel()
	const retries = 3
	tests := []struct {
		name string
		// failing starts the failing host; requests returns the arrival
		// times of the requests that count as attempts of its root URL.
		failing func(t *testing.T) (root string, attempts func() []time.Time)
	}{
		{
			name: "page answers 500",
			failing: func(t *testing.T) (string, func() []time.Time) {
				fs := startFailingServer(t)
				return fs.URL + "/", fs.arrivals
			},
		},
		{
			// robots.txt itself fails: each attempt of the URL is a robots fetch.
			name: "robots.txt answers 500",
			failing: func(t *testing.T) (string, func() []time.Time) {
				s := startSite(t, []demosite.HostSpec{{Name: "broken", Pages: 3, Behavior: demosite.Flaky,
					FlakyRate: 1}}, demosite.SiteOptions{Seed: 21})
				h := s.Hosts()[0]
				return s.Roots()[0], func() []time.Time {
					var out []time.Time
					for _, r := range h.Requests() {
						out = append(out, r.Time)
					}
					return out
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			healthy := startSite(t, healthySpecs(1, 10), demosite.SiteOptions{Seed: 22, CrossLinks: -1})
			failRoot, attempts := tt.failing(t)
			db := openDB(t, "")
			opts := testOptions(t, healthy.Roots()[0], failRoot)
			opts.Workers = 1
			opts.Delay = 50 * time.Millisecond
			opts.Retries = retries
			opts.RetryBase = 300 * time.Millisecond
			opts.Rand = func() float64 { return 0.99 } // backoffs ~0.3, 0.6, 1.2 s
			opts.Breaker.Threshold = 100               // this test is about retries, not the breaker

			sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

			if !sum.Exhausted {
				t.Errorf("Exhausted = false, want true")
			}
			h := healthy.Hosts()[0]
			checkAllPagesOnce(t, h)
			failed := attempts()
			if len(failed) != retries+1 {
				t.Fatalf("failing host got %d attempts, want Retries+1 = %d", len(failed), retries+1)
			}
			reqs := h.Requests()
			lastHealthy := reqs[len(reqs)-1].Time
			if !lastHealthy.Before(failed[len(failed)-1]) {
				t.Errorf("healthy host finished at %v, after the failing host's last retry at %v: the worker waited out backoffs",
					lastHealthy.Format(time.StampMilli), failed[len(failed)-1].Format(time.StampMilli))
			}
			r, ok := results(t, db)[pageKey(t, failRoot)]
			switch {
			case !ok:
				t.Errorf("no result for the failing URL")
			case r.ErrorClass != "transient" || r.Attempts != retries+1:
				t.Errorf("failing URL recorded as class %q after %d attempts, want transient after %d",
					r.ErrorClass, r.Attempts, retries+1)
			}
			checkNoURLLost(t, db)
		})
	}
}

func TestFlakyHostFinishedWithoutOpeningBreaker(t *testing.T) {
	t.Parallel()
	site := startSite(t, []demosite.HostSpec{{Name: "wobbly", Pages: 20, Behavior: demosite.Flaky,
		FlakyRate: 0.3}}, demosite.SiteOptions{Seed: 23})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)
	opts.Retries = 5
	opts.RetryBase = 20 * time.Millisecond
	opts.RetryMax = 200 * time.Millisecond
	opts.RetryBudget = 1 // the budget has its own tests; here retries must not wait a window
	opts.Breaker.Threshold = 8

	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true")
	}
	h := site.Hosts()[0]
	fails := 0
	for _, r := range h.Requests() {
		if r.Status == http.StatusInternalServerError {
			fails++
		}
	}
	t.Logf("%d requests, %d answered 500", h.RequestCount(), fails)
	if fails == 0 {
		t.Errorf("no failure at all: the test did not exercise retries")
	}
	res := results(t, db)
	for i, p := range pagePaths(h.Spec().Pages) {
		r, ok := res[hostKey(t, h)+" "+p]
		switch {
		case !ok:
			t.Errorf("page %d: no result", i)
		case r.Status != http.StatusOK || r.ErrorClass != "":
			t.Errorf("page %d: status %d class %q after %d attempts, want fetched", i, r.Status, r.ErrorClass, r.Attempts)
		}
	}
	for _, tr := range transitions(t, db) {
		if tr.To == "open" {
			t.Errorf("breaker opened on a 30%%-flaky host: %+v", tr)
		}
	}
}
