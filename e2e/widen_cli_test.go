package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"breakwater/cli"
	"breakwater/demosite"
)

// countRequests counts each request target the site's hosts got, robots.txt
// aside, keyed by host and target.
func countRequests(site *demosite.Site) map[string]int {
	n := map[string]int{}
	for _, h := range site.Hosts() {
		for _, uri := range requested(h) {
			n[h.BaseURL()+uri]++
		}
	}
	return n
}

// fetchedTwice lists the targets requested more than once.
func fetchedTwice(n map[string]int) []string {
	var out []string
	for k, c := range n {
		if c > 1 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// A crawl run with --exclude and resumed with --exclude "" fetches every
// page it had excluded, from the links its pages kept, without fetching
// those pages again; a second resume under the same scope fetches nothing.
func TestClearedExcludeFetchesWhatItKeptOut(t *testing.T) {
	site := startSite(t, 1, 12)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--exclude", oddPage, site.Roots()[0])...)
	odd := regexp.MustCompile(oddPage)
	for _, uri := range requested(site.Hosts()[0]) {
		if odd.MatchString(uri) {
			t.Fatalf("excluded page %s was fetched by the first run", uri)
		}
	}
	r := mustRun(t, cli.ExitOK, crawlArgs(db, "--exclude", "", "--log-level", "info")...)
	if !strings.Contains(r.stderr, "link graph") {
		t.Errorf("the resume does not log reading the link graph:\n%s", r.stderr)
	}
	got := countRequests(site)
	host := site.Hosts()[0].BaseURL()
	for i := 1; i < 12; i += 2 {
		if got[host+"/p/"+strconv.Itoa(i)] != 1 {
			t.Errorf("excluded page /p/%d fetched %d times over both runs, want once", i, got[host+"/p/"+strconv.Itoa(i)])
		}
	}
	if twice := fetchedTwice(got); len(twice) > 0 {
		t.Errorf("pages fetched again: %v", twice)
	}
	before := len(requested(site.Hosts()[0]))
	mustRun(t, cli.ExitOK, crawlArgs(db)...)
	if after := len(requested(site.Hosts()[0])); after != before {
		t.Errorf("a resume under the same scope made %d requests, want none", after-before)
	}
}

// A larger --max-depth, and --scope any on a crawl that kept to its seed's
// host, queue what the graph holds beyond the old bounds.
func TestWiderDepthAndScopeFetchWhatTheGraphHolds(t *testing.T) {
	site := startSite(t, 3, 15)
	db := tempDB(t)
	seed := site.Roots()[0]
	mustRun(t, cli.ExitOK, crawlArgs(db, "--max-depth", "1", seed)...)
	first := countRequests(site)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--max-depth", "-1")...)
	deeper := countRequests(site)
	if len(deeper) <= len(first) {
		t.Fatalf("--max-depth -1 fetched nothing more: %d then %d targets", len(first), len(deeper))
	}
	seedHost := site.Hosts()[0].BaseURL()
	for k := range deeper {
		if !strings.HasPrefix(k, seedHost) {
			t.Errorf("%s fetched while the scope is the seed's host", k)
		}
	}
	if n := len(requested(site.Hosts()[0])); n != 15 {
		t.Errorf("seed host: %d pages fetched, want all 15", n)
	}
	mustRun(t, cli.ExitOK, crawlArgs(db, "--scope", "any")...)
	wide := countRequests(site)
	for _, h := range site.Hosts()[1:] {
		if len(requested(h)) == 0 {
			t.Errorf("host %s: nothing fetched under --scope any", h.BaseURL())
		}
	}
	if twice := fetchedTwice(wide); len(twice) > 0 {
		t.Errorf("pages fetched again: %v", twice)
	}
}

// URLs queued and then refused by a narrowed scope are results
// (out-of-scope); a resume that widens it again fetches them.
func TestWidenedScopeFetchesWhatANarrowedOneRecorded(t *testing.T) {
	site := startSite(t, 1, 12)
	db := tempDB(t)
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--max-pages", "1", "--workers", "1", site.Roots()[0])...)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--exclude", oddPage)...)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--exclude", "")...)
	got := countRequests(site)
	host := site.Hosts()[0].BaseURL()
	for i := 1; i < 12; i++ {
		if got[host+"/p/"+strconv.Itoa(i)] != 1 {
			t.Errorf("/p/%d fetched %d times, want once", i, got[host+"/p/"+strconv.Itoa(i)])
		}
	}
	for _, row := range export(t, db) {
		if row["error_class"] == "out-of-scope" {
			t.Errorf("%v still recorded out-of-scope", row["url"])
		}
	}
}

// A redirect to another host is kept as the redirect's link: a resume
// under --scope any follows it, and export --links shows it.
func TestWiderScopeFollowsAKeptRedirect(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	count := func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			hits[r.Host+r.URL.Path]++
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	other := httptest.NewServer(count(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<html><title>landing</title></html>")
	})))
	t.Cleanup(other.Close)
	home := httptest.NewServer(count(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<html><a href="/go">go</a></html>`)
		case "/go":
			http.Redirect(w, r, other.URL+"/landing", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	})))
	t.Cleanup(home.Close)
	landing := strings.TrimPrefix(other.URL, "http://") + "/landing"
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, home.URL+"/")...)
	mu.Lock()
	fetchedEarly := hits[landing]
	mu.Unlock()
	if fetchedEarly != 0 {
		t.Fatalf("the other host was fetched under --scope seeds")
	}
	r := mustRun(t, cli.ExitOK, "export", "--db", db, "--links", "--format", "csv")
	if !strings.Contains(r.stdout, "redirect") || !strings.Contains(r.stdout, other.URL+"/landing") {
		t.Errorf("export --links lacks the redirect's link:\n%s", r.stdout)
	}
	mustRun(t, cli.ExitOK, crawlArgs(db, "--scope", "any")...)
	mu.Lock()
	defer mu.Unlock()
	if hits[landing] != 1 {
		t.Errorf("the redirect's target fetched %d times under --scope any, want once", hits[landing])
	}
	for k, n := range hits {
		if n > 1 && !strings.HasSuffix(k, "/robots.txt") {
			t.Errorf("%s fetched %d times", k, n)
		}
	}
}
