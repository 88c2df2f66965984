package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/redisstore/redistest"
)

// etagHost serves "/" linking "/p/1" ... "/p/N-1", each page with an ETag
// naming its revision, answering 304 to an If-None-Match that names it;
// a page changed gets a new revision, a page removed answers 410. Every
// request is logged with its If-None-Match and User-Agent.
type etagHost struct {
	srv   *httptest.Server
	pages int

	mu      sync.Mutex
	rev     map[string]int
	removed map[string]bool
	log     []etagRequest
}

type etagRequest struct {
	path, ifNoneMatch, agent string
	status                   int
}

func startETagHost(t testing.TB, pages int) *etagHost {
	t.Helper()
	h := &etagHost{pages: pages, rev: map[string]int{}, removed: map[string]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *etagHost) urls() []string {
	out := []string{h.srv.URL + "/"}
	for i := 1; i < h.pages; i++ {
		out = append(out, fmt.Sprintf("%s/p/%d", h.srv.URL, i))
	}
	return out
}

func (h *etagHost) change(path string) { h.mu.Lock(); h.rev[path]++; h.mu.Unlock() }
func (h *etagHost) remove(path string) { h.mu.Lock(); h.removed[path] = true; h.mu.Unlock() }

// requests returns the page requests logged from the n-th on (robots.txt aside).
func (h *etagHost) requests(from int) []etagRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []etagRequest
	for _, r := range h.log[min(from, len(h.log)):] {
		if r.path != "/robots.txt" {
			out = append(out, r)
		}
	}
	return out
}

func (h *etagHost) logged() int { h.mu.Lock(); defer h.mu.Unlock(); return len(h.log) }

func (h *etagHost) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	path := r.URL.Path
	known := path == "/"
	for i := 1; i < h.pages; i++ {
		known = known || path == fmt.Sprintf("/p/%d", i)
	}
	etag := fmt.Sprintf(`"%s-r%d"`, path, h.rev[path])
	status := http.StatusOK
	switch {
	case !known:
		status = http.StatusNotFound
	case h.removed[path]:
		status = http.StatusGone
	case r.Header.Get("If-None-Match") == etag:
		status = http.StatusNotModified
	}
	h.log = append(h.log, etagRequest{path: path, ifNoneMatch: r.Header.Get("If-None-Match"), agent: r.UserAgent(), status: status})
	rev := h.rev[path]
	h.mu.Unlock()
	if status != http.StatusOK {
		if status == http.StatusNotModified {
			w.Header().Set("ETag", etag)
			w.WriteHeader(status)
			return
		}
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>%s r%d</title></head><body>\n", path, rev)
	if path == "/" {
		for i := 1; i < h.pages; i++ {
			fmt.Fprintf(&b, "<a href=\"/p/%d\">page %d</a>\n", i, i)
		}
	}
	b.WriteString("</body></html>\n")
	w.Write([]byte(b.String()))
}

// A fleet crawl of two hosts with ETags, then a second fleet run of two
// processes with a short --recrawl-after: every page is asked again once,
// conditionally; 304s keep the pages, the changed page is replaced, the
// removed one recorded gone. A third run with a long --recrawl-after asks
// nothing.
func TestFleetRecrawlAfter(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	hosts := []*etagHost{startETagHost(t, 6), startETagHost(t, 6)}
	var seeds, all []string
	for _, h := range hosts {
		seeds = append(seeds, h.srv.URL+"/")
		all = append(all, h.urls()...)
	}
	run := func(n int, extra ...string) {
		t.Helper()
		procs := startFleet(t, bin, n, fleetArgs(rs.URL(), extra, seeds...))
		for id, o := range waitFleet(t, procs, 60*time.Second) {
			if o.code != cli.ExitOK {
				for _, p := range procs {
					t.Logf("%s:\n%s", p.id, p.output())
				}
				t.Fatalf("%s: %+v, want exit 0", id, o)
			}
		}
	}
	run(1)
	before := storeExport(t, rs.URL())
	if len(before) != len(all) {
		t.Fatalf("first run stored %d pages, want %d", len(before), len(all))
	}
	changed, removed := hosts[0].srv.URL+"/p/2", hosts[1].srv.URL+"/p/3"
	hosts[0].change("/p/2")
	hosts[1].remove("/p/3")
	marks := []int{hosts[0].logged(), hosts[1].logged()}

	const after = 2 * time.Second
	time.Sleep(after + 100*time.Millisecond) // every page of the first run is older than --recrawl-after
	run(2, "--recrawl-after", after.String())

	asked := map[string][]etagRequest{}
	for i, h := range hosts {
		for _, r := range h.requests(marks[i]) {
			asked[h.srv.URL+r.path] = append(asked[h.srv.URL+r.path], r)
		}
	}
	rows := storeExport(t, rs.URL())
	for _, u := range all {
		reqs, row, old := asked[u], rows[u], before[u]
		if len(reqs) != 1 {
			t.Errorf("%s asked %d times in the refresh run, want once: %+v", u, len(reqs), reqs)
			continue
		}
		r := reqs[0]
		if r.ifNoneMatch == "" || r.ifNoneMatch != old["etag"] {
			t.Errorf("%s asked with If-None-Match %q, want the stored ETag %v", u, r.ifNoneMatch, old["etag"])
		}
		switch u {
		case changed:
			if r.status != 200 || row["status"] != float64(200) || row["etag"] == old["etag"] || row["title"] == old["title"] {
				t.Errorf("changed page: answered %d, stored %v; want the new page stored", r.status, row)
			}
		case removed:
			if r.status != 410 || row["error_class"] != "gone" {
				t.Errorf("removed page: answered %d, stored %v; want it recorded gone", r.status, row)
			}
		default:
			if r.status != 304 || row["status"] != float64(304) || row["title"] != old["title"] || row["sha256"] != old["sha256"] {
				t.Errorf("%s: answered %d, stored %v; want 304 and the page kept", u, r.status, row)
			}
		}
	}
	for u := range asked {
		if _, ok := before[u]; !ok {
			t.Errorf("the refresh run asked for %s, which was never crawled", u)
		}
	}
	if len(rows) != len(all) {
		t.Errorf("%d results after the refresh run, want %d", len(rows), len(all))
	}
	mustRun(t, cli.ExitOK, "verify", "--store", rs.URL())

	marks = []int{hosts[0].logged(), hosts[1].logged()}
	run(2, "--recrawl-after", "1h")
	for i, h := range hosts {
		if reqs := h.requests(marks[i]); len(reqs) > 0 {
			t.Errorf("a run with --recrawl-after 1h asked %s for %d pages: %+v", h.srv.URL, len(reqs), reqs)
		}
	}
}
