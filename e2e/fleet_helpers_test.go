package e2e

// Helpers of the fleet tests (fleet_cli_test.go): hosts whose every
// request is logged with the process that sent it, a fleet of real crawl
// processes on one Redis store, and the fleet commands' JSON read back.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/control"
	"breakwater/demosite"
	"breakwater/redisstore"
	"breakwater/store"

	"github.com/redis/go-redis/v9"
)

// linkHost serves pages "/" and "/p/1" ... "/p/N-1" on 127.0.0.1, each
// linking pages i+1, i+2 and 2i+1 (mod N), so every page is reachable
// from "/". /robots.txt answers 404 and is logged but not counted as a
// page request. A latency slows every page answer; flakyEvery > 0 makes
// every flakyEvery-th page request answer 503, at most once per URL: a
// URL that failed once succeeds on its retry, and two failures are never
// consecutive (with one request at a time, at least flakyEvery-1 answers
// lie between two failures).
type linkHost struct {
	srv        *httptest.Server
	pages      int
	latency    time.Duration
	flakyEvery int

	mu     sync.Mutex
	n      int             // page requests so far
	failed map[string]bool // paths that have had their 503
	log    []demosite.Request
}

func startLinkHost(t testing.TB, pages int, latency time.Duration, flakyEvery int) *linkHost {
	t.Helper()
	h := &linkHost{pages: pages, latency: latency, flakyEvery: flakyEvery, failed: map[string]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	return h
}

// startLinkHosts starts n link hosts, and returns them, their roots as
// seeds, and a count of the pages they answered 200 so far.
func startLinkHosts(t testing.TB, n, pages int, latency time.Duration) ([]*linkHost, []string, func() int) {
	var hosts []*linkHost
	var seeds []string
	for range n {
		h := startLinkHost(t, pages, latency, 0)
		hosts = append(hosts, h)
		seeds = append(seeds, h.base()+"/")
	}
	answers := func() int {
		n := 0
		for _, h := range hosts {
			for _, r := range h.requests() {
				if r.Status == 200 {
					n++
				}
			}
		}
		return n
	}
	return hosts, seeds, answers
}

func linkPath(i int) string {
	if i == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(i)
}

func (h *linkHost) base() string { return h.srv.URL }

// key is the host:port the crawler names the host by.
func (h *linkHost) key() string { return strings.TrimPrefix(h.srv.URL, "http://") }

func (h *linkHost) urls() []string {
	out := make([]string, h.pages)
	for i := range out {
		out[i] = h.srv.URL + linkPath(i)
	}
	return out
}

func (h *linkHost) requests() []demosite.Request {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.log)
}

func (h *linkHost) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	page := -1
	for i := range h.pages {
		if r.URL.Path == linkPath(i) {
			page = i
		}
	}
	status := http.StatusOK
	h.mu.Lock()
	switch {
	case r.URL.Path == "/robots.txt" || page < 0:
		status = http.StatusNotFound
	default:
		h.n++
		if h.flakyEvery > 0 && h.n%h.flakyEvery == 0 && !h.failed[r.URL.Path] {
			h.failed[r.URL.Path] = true
			status = http.StatusServiceUnavailable
		}
	}
	// Logged at arrival, before the answer: a request cut short by a kill
	// is in the log, as it reached the host.
	h.log = append(h.log, demosite.Request{Time: now, Method: r.Method, Path: r.URL.Path,
		RequestURI: r.RequestURI, Status: status, UserAgent: r.UserAgent()})
	h.mu.Unlock()
	if status == http.StatusOK && h.latency > 0 {
		select {
		case <-time.After(h.latency):
		case <-r.Context().Done():
			return
		}
	}
	if status != http.StatusOK {
		http.Error(w, http.StatusText(status), status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><title>page %d</title></head><body>\n", page)
	for _, next := range []int{page + 1, page + 2, 2*page + 1} {
		fmt.Fprintf(&b, "<a href=\"%s\">page %d</a>\n", linkPath(next%h.pages), next%h.pages)
	}
	b.WriteString("</body></html>\n")
	w.Write([]byte(b.String()))
}

// groupPageRequests groups the page requests of log (robots.txt aside) by URL,
// base being the host's scheme and authority.
func groupPageRequests(base string, log []demosite.Request, into map[string][]demosite.Request) {
	for _, r := range log {
		if r.Path == "/robots.txt" {
			continue
		}
		u := base + r.Path
		if r.Path == "" {
			u = base + "/" // a dead host's connection: no path known
		}
		into[u] = append(into[u], r)
	}
}

// fleetProc is one crawl process of a fleet.
type fleetProc struct {
	*proc
	id, agent string
}

// fleetUA is the User-Agent of fleet process id: its product token is
// the default's, "breakwater", and the rest tells the site which process
// sent a request.
func fleetUA(id string) string { return "breakwater/test (fleet " + id + ")" }

// startFleet starts n crawl processes with args on one store, named p1...
// pN, each with its own User-Agent.
func startFleet(t testing.TB, bin string, n int, args []string) []*fleetProc {
	t.Helper()
	var out []*fleetProc
	for i := range n {
		id := "p" + strconv.Itoa(i+1)
		a := append(slices.Clone(args[:1]), "--fleet-id", id, "--user-agent", fleetUA(id))
		a = append(a, args[1:]...)
		out = append(out, &fleetProc{proc: startProc(t, bin, a...), id: id, agent: fleetUA(id)})
	}
	return out
}

// procOf names the fleet process whose User-Agent sent r ("" if none).
func procOf(procs []*fleetProc, r demosite.Request) string {
	for _, p := range procs {
		if r.UserAgent == p.agent {
			return p.id
		}
	}
	return ""
}

// fleetArgs are a fleet crawl of seeds on store: fast timeouts, short
// rests and leases, a generous retry budget (it lives in each process),
// every request counted by the tests (no sitemaps).
func fleetArgs(storeURL string, extra []string, seeds ...string) []string {
	args := []string{"crawl", "--store", storeURL, "--allow-private", "--fleet-lease", "1s",
		"--workers", "4", "--host-concurrency", "2", "--delay", "10ms",
		"--timeout", "2s", "--connect-timeout", "1s",
		"--breaker-threshold", "3", "--breaker-rest", "500ms", "--breaker-probes", "1", "--give-up-after", "2s",
		"--retries", "2", "--retry-base", "50ms", "--retry-max", "500ms", "--retry-budget", "1",
		"--progress", "never", "--log-format", "json", "--log-level", "info", "--sitemaps=false"}
	args = append(args, extra...)
	return append(args, seeds...)
}

// storeJSON runs a read command on store with --json and decodes its
// output into v.
func storeJSON(t testing.TB, v any, cmd, storeURL string, extra ...string) {
	t.Helper()
	args := append([]string{cmd, "--store", storeURL, "--json"}, extra...)
	r := mustRun(t, cli.ExitOK, args...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("breakwater %s: not JSON: %v\n%s", strings.Join(args, " "), err, r)
	}
}

func storeStatus(t testing.TB, storeURL string) control.Status {
	var st control.Status
	storeJSON(t, &st, "status", storeURL)
	return st
}

func storeHosts(t testing.TB, storeURL string) map[string]control.HostRow {
	var rows []control.HostRow
	storeJSON(t, &rows, "hosts", storeURL)
	out := map[string]control.HostRow{}
	for _, r := range rows {
		out[r.Host] = r
	}
	return out
}

func storeTransitions(t testing.TB, storeURL string) []store.Transition {
	var ts []store.Transition
	storeJSON(t, &ts, "transitions", storeURL)
	return ts
}

func storeCases(t testing.TB, storeURL string) []store.Case {
	var cs []store.Case
	storeJSON(t, &cs, "cases", storeURL)
	return cs
}

// storeExport reads `export --store` (jsonl) back, by URL; a URL listed
// twice fails the test.
func storeExport(t testing.TB, storeURL string) map[string]map[string]any {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "export", "--store", storeURL, "--format", "jsonl")
	out := map[string]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("export line %d is not JSON: %v\n%s", n, err, sc.Text())
		}
		u, _ := row["url"].(string)
		if _, dup := out[u]; dup {
			t.Errorf("export lists %s twice", u)
		}
		out[u] = row
	}
	return out
}

// hostOf is the host:port of a URL.
func hostOf(t testing.TB, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// waitFleet waits up to d for every process and returns their outcomes.
func waitFleet(t testing.TB, procs []*fleetProc, d time.Duration) map[string]outcome {
	t.Helper()
	out := map[string]outcome{}
	deadline := time.Now().Add(d)
	for _, p := range procs {
		out[p.id] = p.wait(t, max(time.Until(deadline), time.Millisecond))
	}
	return out
}

// owners reads which process holds which host, from the shards' owner
// hashes (keys.go: bw:{sN}:owner, host -> process id).
func owners(t testing.TB, rdb redis.UniversalClient) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out := map[string]string{}
	for n := range redisstore.Shards {
		m, err := rdb.HGetAll(ctx, "bw:{s"+strconv.Itoa(n)+"}:owner").Result()
		if err != nil {
			t.Fatalf("read the owners of shard %d: %v", n, err)
		}
		maps.Copy(out, m)
	}
	return out
}
