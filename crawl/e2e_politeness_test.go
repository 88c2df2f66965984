package crawl_test

// Politeness end to end: the gaps the demo site's own request log shows
// between request starts to one host, and that hosts are crawled in
// parallel rather than one after another.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"breakwater/demosite"
)

// gapTolerance absorbs the difference between when the engine starts a
// request and when the server logs it (connect, scheduling under -race).
const gapTolerance = 20 * time.Millisecond

// checkGaps asserts that consecutive requests to h started at least want
// apart (as the server saw them) and returns the smallest gap.
func checkGaps(t testing.TB, h *demosite.Host, want time.Duration) time.Duration {
	t.Helper()
	reqs := h.Requests()
	if len(reqs) < 2 {
		t.Errorf("%s: only %d requests, cannot judge gaps", h.Name, len(reqs))
		return 0
	}
	smallest := time.Duration(1<<63 - 1)
	for i := 1; i < len(reqs); i++ {
		gap := reqs[i].Time.Sub(reqs[i-1].Time)
		smallest = min(smallest, gap)
		if gap < want-gapTolerance {
			t.Errorf("%s: %s then %s only %v apart, want at least %v",
				h.Name, reqs[i-1].RequestURI, reqs[i].RequestURI, gap, want)
		}
	}
	return smallest
}

func TestPolitenessDelayPerHostHostsInParallel(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	site := startSite(t, healthySpecs(3, 8), demosite.SiteOptions{Seed: 10})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)
	opts.Delay = delay
	opts.HostConcurrency = 1

	start := time.Now()
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)
	wall := time.Since(start)

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true")
	}
	checkAllPagesOnce(t, site.Hosts()...)
	for _, h := range site.Hosts() {
		t.Logf("%s: smallest gap %v", h.Name, checkGaps(t, h, delay))
	}
	// 27 requests one delay apart would take 5.4 s in a row; three hosts in
	// parallel need a third of that.
	serial := time.Duration(total(site)) * delay
	if wall > serial/2 {
		t.Errorf("crawl took %v, want well under the serial %v: hosts must be crawled in parallel", wall, serial)
	}
}

// slowRobotsServer serves a robots.txt with a Crawl-delay, slowly, and four
// small pages linking to each other; it logs when each request arrived.
type slowRobotsServer struct {
	*httptest.Server
	mu   sync.Mutex
	log  []demosite.Request
	slow time.Duration
}

func startSlowRobotsServer(t testing.TB, robots string, slow time.Duration) *slowRobotsServer {
	t.Helper()
	s := &slowRobotsServer{slow: slow}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.log = append(s.log, demosite.Request{Time: time.Now(), Path: r.URL.Path, RequestURI: r.RequestURI})
		s.mu.Unlock()
		switch r.URL.Path {
		case "/robots.txt":
			// A slow server, not a timing shortcut: the engine must measure
			// the gap from the robots.txt request's start, not its end.
			time.Sleep(s.slow)
			fmt.Fprint(w, robots)
		case "/", "/a", "/b", "/c":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><head><title>page</title></head><body>`+
				`<a href="/">home</a> <a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *slowRobotsServer) requests() []demosite.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]demosite.Request(nil), s.log...)
}

func TestPolitenessCrawlDelayWins(t *testing.T) {
	t.Parallel()
	const delay = 50 * time.Millisecond
	const crawlDelay = 500 * time.Millisecond
	// robots.txt takes longer than --delay to answer: a pace that switches
	// to the Crawl-delay keeping the tokens earned meanwhile would let the
	// first page follow robots.txt at once.
	srv := startSlowRobotsServer(t, "User-agent: *\nCrawl-delay: 0.5\n", 2*delay)
	db := openDB(t, "")
	opts := testOptions(t, srv.URL+"/")
	opts.Delay = delay

	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !sum.Exhausted || sum.Counts.Fetched != 4 {
		t.Errorf("summary %+v: want exhausted with 4 pages fetched", sum)
	}
	reqs := srv.requests()
	if len(reqs) != 5 {
		t.Errorf("requests %v: want robots.txt and 4 pages, once each", requestURIs(reqs))
	}
	for i := 1; i < len(reqs); i++ {
		if gap := reqs[i].Time.Sub(reqs[i-1].Time); gap < crawlDelay-gapTolerance {
			t.Errorf("%s then %s only %v apart, want the Crawl-delay %v (--delay is %v)",
				reqs[i-1].RequestURI, reqs[i].RequestURI, gap, crawlDelay, delay)
		}
	}
}

func TestPolitenessOneWorkerDoesNotWaitOnBusyHost(t *testing.T) {
	t.Parallel()
	const delay = 200 * time.Millisecond
	site := startSite(t, healthySpecs(2, 6), demosite.SiteOptions{Seed: 12})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)
	opts.Workers = 1
	opts.Delay = delay

	start := time.Now()
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)
	wall := time.Since(start)

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true")
	}
	checkAllPagesOnce(t, site.Hosts()...)
	for _, h := range site.Hosts() {
		checkGaps(t, h, delay)
	}
	// Each host needs 7 requests, 6 gaps: 1.2 s. One after the other the
	// worker would need 2.4 s or more.
	perHost := time.Duration(site.Hosts()[0].RequestCount()-1) * delay
	if wall > perHost+perHost/2 {
		t.Errorf("one worker took %v for two hosts of %v each: it slept on one host while the other was ready", wall, perHost)
	}
	t.Logf("wall %v, one host alone %v", wall, perHost)
}
