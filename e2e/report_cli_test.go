package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"breakwater/cli"
	"breakwater/report"
)

// hostileTitle is a page title that would run if a report pasted it in.
const hostileTitle = `<script>window.pwned = 1</script>Page A`

// auditSite is a loopback site with the findings a report must list:
// /missing (404) linked from /a and /b, /gone (410) from /b and /c, the
// image /broken.png (404) on /a and /b, a two-hop redirect chain, a
// redirect loop and a page robots.txt disallows. A clean site links only
// to pages that work.
type auditSite struct {
	*httptest.Server
	clean bool
}

func startAuditSite(t *testing.T, clean bool) *auditSite {
	t.Helper()
	s := &auditSite{clean: clean}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *auditSite) serve(w http.ResponseWriter, r *http.Request) {
	page := func(title string, body ...string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>%s</title></head><body>%s</body></html>", title, strings.Join(body, "\n"))
	}
	switch r.URL.Path {
	case "/robots.txt":
		fmt.Fprint(w, "User-agent: *\nDisallow: /private\n")
	case "/":
		if s.clean {
			page("Home", `<a href="/ok">fine</a>`)
			return
		}
		page("Home", `<a href="/a">A</a>`, `<a href="/b">B</a>`, `<a href="/c">C</a>`, `<a href="/redir1">moved</a>`,
			`<a href="/loop1">loop</a>`, `<a href="/private">private</a>`)
	case "/a":
		page("&lt;script&gt;window.pwned = 1&lt;/script&gt;Page A", `<a href="/missing">Missing page</a>`, `<img src="/broken.png" alt="logo">`)
	case "/b":
		page("Page B", `<a href="/missing">also missing</a>`, `<a href="/gone">gone</a>`, `<img src="/broken.png">`)
	case "/c":
		page("Page C", `<a href="/gone">gone again</a>`, `<a href="/ok">fine</a>`)
	case "/ok", "/private":
		page("OK")
	case "/redir1":
		http.Redirect(w, r, "/redir2", http.StatusMovedPermanently)
	case "/redir2":
		http.Redirect(w, r, "/ok", http.StatusMovedPermanently)
	case "/loop1":
		http.Redirect(w, r, "/loop2", http.StatusFound)
	case "/loop2":
		http.Redirect(w, r, "/loop1", http.StatusFound)
	case "/gone":
		http.Error(w, "gone", http.StatusGone)
	default:
		http.NotFound(w, r)
	}
}

// linkingPages are the pages of the audit site linking to each broken URL.
func (s *auditSite) linkingPages() map[string][]string {
	u := func(p ...string) []string {
		for i := range p {
			p[i] = s.URL + p[i]
		}
		return p
	}
	return map[string][]string{s.URL + "/missing": u("/a", "/b"), s.URL + "/gone": u("/b", "/c"), s.URL + "/broken.png": u("/a", "/b")}
}

// crawlAudit crawls the site into a new file and returns its path.
func crawlAudit(t *testing.T, s *auditSite) string {
	t.Helper()
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--delay", "0", s.URL+"/")...)
	return db
}

func readReport(t *testing.T, db string) *report.Report {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "report", "--db", db, "--format", "json")
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, r.stdout)
	}
	return &rep
}

// assertReferrers checks each broken target's referrers: every page
// linking to it when the crawl kept its link graph, else the first page
// it was found on, one of them.
func assertReferrers(t *testing.T, rep *report.Report, ts report.Targets, want map[string][]string) {
	t.Helper()
	if ts.Total != len(want) {
		t.Errorf("%d broken targets, want %d: %+v", ts.Total, len(want), ts.Items)
	}
	for _, tg := range ts.Items {
		pages, ok := want[tg.URL]
		if !ok {
			t.Errorf("unexpected broken target %s", tg.URL)
			continue
		}
		var from []string
		for _, r := range tg.Referrers {
			from = append(from, r.From)
		}
		switch rep.LinkGraph {
		case "edges":
			if !slices.Equal(from, pages) {
				t.Errorf("%s linked from %q, want %q", tg.URL, from, pages)
			}
		default:
			if len(from) != 1 || !slices.Contains(pages, from[0]) {
				t.Errorf("%s: referrers %q, want one of %q", tg.URL, from, pages)
			}
		}
	}
}

func TestReportFindsWhatIsBroken(t *testing.T) {
	site := startAuditSite(t, false)
	db := crawlAudit(t, site)
	rep := readReport(t, db)
	links := site.linkingPages()
	assertReferrers(t, rep, rep.BrokenLinks, map[string][]string{site.URL + "/missing": links[site.URL+"/missing"],
		site.URL + "/gone": links[site.URL+"/gone"]})
	assertReferrers(t, rep, rep.BrokenRequisites, map[string][]string{site.URL + "/broken.png": links[site.URL+"/broken.png"]})
	if rep.RedirectChains.Total != 1 || len(rep.RedirectChains.Items[0].Hops) != 2 ||
		rep.RedirectChains.Items[0].Final != site.URL+"/ok" || rep.RedirectChains.Items[0].FinalStatus != 200 {
		t.Errorf("redirect chains: %+v, want /redir1 -> /redir2 -> /ok (200)", rep.RedirectChains)
	}
	if rep.RedirectLoops.Total != 1 || len(rep.RedirectLoops.Items[0].Hops) != 2 {
		t.Errorf("redirect loops: %+v, want /loop1 <-> /loop2", rep.RedirectLoops)
	}
	if rep.RobotsBlocked.Total != 1 || rep.RobotsBlocked.Items[0].URL != site.URL+"/private" {
		t.Errorf("robots blocked: %+v", rep.RobotsBlocked)
	}
	if rep.Summary.Pages < 6 || rep.Summary.ByClass["permanent"] != 3 {
		t.Errorf("summary %+v", rep.Summary)
	}

	r := mustRun(t, cli.ExitFindings, "report", "--db", db, "-o", filepath.Join(t.TempDir(), "r.html"),
		"--fail-on", "broken-links,redirect-loops")
	if !strings.Contains(r.stderr, "broken-links 2, redirect-loops 1") {
		t.Errorf("--fail-on does not print the counts:\n%s", r)
	}
	mustRun(t, cli.ExitFindings, "report", "--db", db, "--format", "json", "-o", filepath.Join(t.TempDir(), "r.json"),
		"--fail-on", "broken-requisites")
	r = mustRun(t, cli.ExitUsage, "report", "--db", db, "--fail-on", "broken-links,typos")
	if !strings.Contains(r.stderr, `"typos"`) || !strings.Contains(r.stderr, "broken-requisites, redirect-loops, noindex") {
		t.Errorf("an unknown finding is not named with the known ones:\n%s", r)
	}

	dir := filepath.Join(t.TempDir(), "csv")
	mustRun(t, cli.ExitOK, "report", "--db", db, "--format", "csv", "-o", dir)
	for _, name := range report.CSVFiles() {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("csv report lacks %s: %v", name, err)
		}
	}
}

func TestReportOfACleanSiteExitsZero(t *testing.T) {
	site := startAuditSite(t, true)
	db := crawlAudit(t, site)
	r := mustRun(t, cli.ExitOK, "report", "--db", db, "-o", filepath.Join(t.TempDir(), "r.html"),
		"--fail-on", strings.Join(report.Findings(), ","))
	if !strings.Contains(r.stderr, "no findings: broken-links 0, broken-requisites 0, redirect-loops 0, noindex 0") {
		t.Errorf("a clean report does not say so:\n%s", r)
	}
}
