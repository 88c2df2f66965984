package e2e

import (
	"strings"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/demosite"
)

func TestRecrawlAfterFlag(t *testing.T) {
	if line := flagLine(mustRun(t, cli.ExitOK, "crawl", "--help").stdout, "recrawl-after"); line == "" {
		t.Error("crawl --help does not list --recrawl-after")
	}
	for _, bad := range []string{"500ms", "-1h"} {
		db := tempDB(t)
		r := mustRun(t, cli.ExitUsage, "crawl", "--db", db, "--recrawl-after="+bad, "http://127.0.0.1:1/")
		if !strings.Contains(r.stderr, "--recrawl-after") {
			t.Errorf("--recrawl-after %s: stderr does not name the flag:\n%s", bad, r)
		}
		if fileExists(db) {
			t.Errorf("a rejected command created %s", db)
		}
	}
}

// Two crawls of a local site a second apart, through the real fetcher: the
// second asks for every page again with its validators, and the site
// answers 304 for all but the page that changed meanwhile.
func TestRecrawlLocalSite(t *testing.T) {
	site := startSite(t, 2, 5)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, site.Roots()...)...)
	before := map[string]map[string]any{}
	for _, row := range export(t, db) {
		before[row["url"].(string)] = row
	}
	changed := site.Hosts()[0]
	changed.Change(2)
	marks := map[*demosite.Host]int{}
	for _, h := range site.Hosts() {
		marks[h] = h.RequestCount()
	}
	time.Sleep(1100 * time.Millisecond)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--recrawl-after", "1s")...)

	asked := map[string]int{} // page URL -> status of its last request in the second run
	for _, h := range site.Hosts() {
		for _, r := range h.Requests()[marks[h]:] {
			if r.Path != "/robots.txt" {
				asked[h.BaseURL()+r.Path] = r.Status
			}
		}
	}
	rows := export(t, db)
	if len(rows) != len(site.URLs()) || len(asked) != len(site.URLs()) {
		t.Fatalf("second run asked for %d pages and left %d results; want all %d", len(asked), len(rows), len(site.URLs()))
	}
	for _, row := range rows {
		u, old := row["url"].(string), before[row["url"].(string)]
		if u == changed.PageURL(2) {
			if row["sha256"] == old["sha256"] || row["etag"] == old["etag"] {
				t.Errorf("changed page kept its old content: %v", row)
			}
			continue
		}
		if asked[u] != 304 || row["status"] != float64(304) || row["sha256"] != old["sha256"] || row["title"] != old["title"] {
			t.Errorf("%s: answered %d, stored %v; want 304 and the stored page kept", u, asked[u], row)
		}
	}
	if asked[changed.PageURL(2)] != 200 {
		t.Errorf("the changed page was answered %d, want 200", asked[changed.PageURL(2)])
	}
}
