package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/redisstore/redistest"
)

// parityHost serves "/" linking "/p/1" ... "/p/N-1"; while broken, every
// third page answers 404. Page requests are counted by path.
type parityHost struct {
	srv    *httptest.Server
	pages  int
	broken atomic.Bool

	mu    sync.Mutex
	asked map[string]int
}

func startParityHost(t testing.TB, pages int) *parityHost {
	t.Helper()
	h := &parityHost{pages: pages, asked: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *parityHost) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	h.mu.Lock()
	h.asked[r.URL.Path]++
	h.mu.Unlock()
	var k int
	if r.URL.Path != "/" {
		if _, err := fmt.Sscanf(r.URL.Path, "/p/%d", &k); err != nil || k <= 0 || k >= h.pages {
			http.NotFound(w, r)
			return
		}
	}
	if h.broken.Load() && k%3 == 2 {
		http.NotFound(w, r)
		return
	}
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><title>page</title></head><body>\n")
	if k == 0 {
		for i := 1; i < h.pages; i++ {
			fmt.Fprintf(&b, "<a href=\"/p/%d\">page %d</a>\n", i, i)
		}
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(b.String()))
}

// take returns the page requests by path since the last take.
func (h *parityHost) take() map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.asked
	h.asked = map[string]int{}
	return out
}

func runFleetOf(t *testing.T, bin, storeURL string, n int, seeds []string, want int, extra ...string) {
	t.Helper()
	procs := startFleet(t, bin, n, fleetArgs(storeURL, extra, seeds...))
	for id, o := range waitFleet(t, procs, 60*time.Second) {
		if o.code != want {
			for _, p := range procs {
				t.Logf("%s:\n%s", p.id, p.output())
			}
			t.Fatalf("%s: %+v, want exit %d", id, o, want)
		}
	}
}

// A fleet crawl whose site answered 404 for a third of its pages, then,
// the site mended, two processes with --retry-failed: every failure is
// asked for again exactly once, nothing else is, and none is left failed.
func TestFleetRetryFailed(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	hosts := []*parityHost{startParityHost(t, 12), startParityHost(t, 12), startParityHost(t, 12)}
	var seeds []string
	for _, h := range hosts {
		h.broken.Store(true)
		seeds = append(seeds, h.srv.URL+"/")
	}
	runFleetOf(t, bin, rs.URL(), 1, seeds, cli.ExitOK)
	failed := map[string]bool{}
	for u, row := range storeExport(t, rs.URL()) {
		if row["error_class"] != nil && row["error_class"] != "" {
			failed[u] = true
		}
	}
	if len(failed) != 3*4 {
		t.Fatalf("first run: %d failures, want 12: %v", len(failed), failed)
	}
	for _, h := range hosts {
		h.take()
		h.broken.Store(false)
	}

	runFleetOf(t, bin, rs.URL(), 2, seeds, cli.ExitOK, "--retry-failed")
	for _, h := range hosts {
		for path, n := range h.take() {
			u := h.srv.URL + path
			if !failed[u] {
				t.Errorf("the retry run asked for %s (%d times), which had not failed", u, n)
			} else if n != 1 {
				t.Errorf("the retry run asked for %s %d times, want once", u, n)
			}
			delete(failed, u)
		}
	}
	for u := range failed {
		t.Errorf("the retry run never asked for the failed %s", u)
	}
	for u, row := range storeExport(t, rs.URL()) {
		if row["error_class"] != nil && row["error_class"] != "" || row["status"] != float64(200) {
			t.Errorf("after the retry run %s: %v, want a page", u, row)
		}
	}
	mustRun(t, cli.ExitOK, "verify", "--store", rs.URL())
}

// --max-pages-per-host 5 on two processes: each host is asked for 5
// pages in all, and a later run with the same cap asks for none: the
// count is the fleet's, kept in the store.
func TestFleetMaxPagesPerHost(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	hosts := []*parityHost{startParityHost(t, 20), startParityHost(t, 20), startParityHost(t, 20)}
	var seeds []string
	for _, h := range hosts {
		seeds = append(seeds, h.srv.URL+"/")
	}
	runFleetOf(t, bin, rs.URL(), 2, seeds, cli.ExitOK, "--max-pages-per-host", "5")
	for _, h := range hosts {
		total := 0
		for path, n := range h.take() {
			if n != 1 {
				t.Errorf("%s%s asked %d times", h.srv.URL, path, n)
			}
			total += n
		}
		if total != 5 {
			t.Errorf("%s: %d pages asked for, want 5", h.srv.URL, total)
		}
	}
	runFleetOf(t, bin, rs.URL(), 2, seeds, cli.ExitOK, "--max-pages-per-host", "5")
	for _, h := range hosts {
		if asked := h.take(); len(asked) != 0 {
			t.Errorf("a second run with the cap asked %s for %v", h.srv.URL, asked)
		}
	}
	mustRun(t, cli.ExitOK, "verify", "--store", rs.URL())
}

// --max-pages 30 on three processes is one budget: the fleet asks for 30
// pages at most between them (a few fewer when a process stops holding
// places it gives back too late for the others), all three stop with work
// left, and the next run, once they are gone, has 30 of its own.
func TestFleetMaxPages(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	hosts := []*parityHost{startParityHost(t, 25), startParityHost(t, 25), startParityHost(t, 25), startParityHost(t, 25)}
	var seeds []string
	for _, h := range hosts {
		seeds = append(seeds, h.srv.URL+"/")
	}
	seen := map[string]int{}
	for run := 1; run <= 2; run++ {
		runFleetOf(t, bin, rs.URL(), 3, seeds, cli.ExitWorkLeft, "--max-pages", "30")
		total := 0
		for _, h := range hosts {
			for path, n := range h.take() {
				total += n
				seen[h.srv.URL+path] += n
			}
		}
		t.Logf("run %d: %d pages asked for", run, total)
		if total > 30 || total < 24 {
			t.Errorf("run %d: three processes with --max-pages 30 asked for %d pages, want 24-30", run, total)
		}
	}
	for u, n := range seen {
		if n != 1 {
			t.Errorf("%s asked %d times over the two runs", u, n)
		}
	}
	mustRun(t, cli.ExitOK, "verify", "--store", rs.URL())
}
