package e2e

import (
	"bufio"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"breakwater/cli"
	"breakwater/demosite"
)

// exportedKinds maps every stored result's URL to its kind (page,
// requisite, robots, sitemap).
func exportedKinds(t *testing.T, db string) map[string]string {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "export", "--db", db, "--format", "jsonl")
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var row struct {
			URL  string `json:"url"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("export line: %v\n%s", err, sc.Text())
		}
		out[row.URL] = row.Kind
	}
	return out
}

// A crawl of the requisite site from its root: each page and each
// requisite (the chunked stylesheet's import and its font, the gzip
// script, srcset and picture candidates, the poster, the style url()s,
// both frames and their images, the favicon, the other host's image) is
// fetched exactly once though two pages share most of them; the other
// host, out of scope, gives up its requisites and nothing it links to;
// and every requisite is in the archive. With --page-requisites=false
// only the pages are fetched.
func TestRequisiteCrawlEndToEnd(t *testing.T) {
	t.Run("on", func(t *testing.T) {
		site := startRequisiteSite(t)
		db := tempDB(t)
		dir := filepath.Join(t.TempDir(), "warc")
		mustRun(t, cli.ExitOK, crawlArgs(db, "--warc", dir, site.Root())...)
		requests := site.Requests()
		for _, u := range slices.Concat(site.RequisitePages(), site.RequisiteURLs()) {
			if n := requests[u]; n != 1 {
				t.Errorf("%s fetched %d times, want once", u, n)
			}
		}
		assertNoNavigationOffScope(t, site, requests)
		rep := checkArchive(t, db, dir)
		for _, u := range site.RequisiteURLs() {
			if rep.Responses[u] != 1 {
				t.Errorf("requisite %s is in %d response records, want 1", u, rep.Responses[u])
			}
		}
		kinds := exportedKinds(t, db)
		for _, u := range site.RequisiteURLs() {
			if kinds[u] != "requisite" {
				t.Errorf("%s exported as kind %q, want requisite", u, kinds[u])
			}
		}
		for _, u := range site.RequisitePages() {
			if kinds[u] != "page" {
				t.Errorf("%s exported as kind %q, want page", u, kinds[u])
			}
		}
	})
	t.Run("off", func(t *testing.T) {
		site := startRequisiteSite(t)
		mustRun(t, cli.ExitOK, crawlArgs(tempDB(t), "--page-requisites=false", site.Root())...)
		requests := site.Requests()
		for _, u := range site.RequisitePages() {
			if n := requests[u]; n != 1 {
				t.Errorf("%s fetched %d times, want once", u, n)
			}
		}
		for _, u := range site.RequisiteURLs() {
			if n := requests[u]; n != 0 {
				t.Errorf("requisite %s fetched %d times with --page-requisites=false", u, n)
			}
		}
	})
}

// assertNoNavigationOffScope checks that the other host was asked for
// its requisites and robots.txt alone: none of its pages, though the
// main page and the other host's own frame link to them.
func assertNoNavigationOffScope(t *testing.T, site *demosite.Requisites, requests map[string]int) {
	t.Helper()
	other := "http://" + site.OtherHost() + "/"
	for u, n := range requests {
		if !strings.HasPrefix(u, other) {
			continue
		}
		if u == other+"robots.txt" {
			if n != 1 {
				t.Errorf("%s fetched %d times, want once", u, n)
			}
			continue
		}
		if !slices.Contains(site.RequisiteURLs(), u) {
			t.Errorf("off-scope %s fetched %d times: only requisites may be fetched there", u, n)
		}
	}
	for _, u := range site.OffScopePages() {
		if n := requests[u]; n != 0 {
			t.Errorf("off-scope page %s fetched %d times", u, n)
		}
	}
}
