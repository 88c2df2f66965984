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
	"sync"
	"testing"

	"breakwater/cli"
	"breakwater/redisstore/redistest"
	"breakwater/report"
)

// hostileTitle is a page title that would run if a report pasted it in.
const hostileTitle = `<script>window.pwned = 1</script>Page A`

// auditSite is a loopback site with the findings a report must list:
// /missing (404) linked from /a and /b, /gone (410) from /b and /c, the
// image /broken.png (404) on /a and /b, a two-hop redirect chain, a
// redirect loop and a page robots.txt disallows. A clean site links only
// to pages that work.
//
// Its robots directives: /meta-noindex (meta robots "noindex, nofollow")
// and /header-noindex (the same in X-Robots-Tag) each link to a page
// nothing else links to; /rel links to /sponsored with rel="nofollow
// sponsored"; /dup is /c's body, naming /c canonical.
type auditSite struct {
	*httptest.Server
	clean bool

	mu        sync.Mutex
	requested map[string]int
}

// got reports how often path was requested.
func (s *auditSite) got(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requested[path]
}

func startAuditSite(t *testing.T, clean bool) *auditSite {
	t.Helper()
	s := &auditSite{clean: clean, requested: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *auditSite) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requested[r.URL.Path]++
	s.mu.Unlock()
	head := ""
	page := func(title string, body ...string) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!DOCTYPE html><html><head><title>%s</title>%s</head><body>%s</body></html>", title, head, strings.Join(body, "\n"))
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
			`<a href="/loop1">loop</a>`, `<a href="/private">private</a>`, `<a href="/meta-noindex">M</a>`,
			`<a href="/header-noindex">H</a>`, `<a href="/rel">R</a>`, `<a href="/dup">D</a>`)
	case "/meta-noindex":
		head = `<meta name="robots" content="noindex, nofollow">`
		page("Hidden by meta", `<a href="/secret-meta">secret</a>`)
	case "/header-noindex":
		w.Header().Set("X-Robots-Tag", "noindex, nofollow")
		page("Hidden by header", `<a href="/secret-header">secret</a>`)
	case "/rel":
		page("Sponsored", `<a href="/sponsored" rel="nofollow sponsored">an advert</a>`)
	case "/sponsored", "/secret-meta", "/secret-header":
		page("Leaf " + r.URL.Path)
	case "/dup":
		head = `<link rel="canonical" href="/c">`
		page("Page C", `<a href="/gone">gone again</a>`, `<a href="/ok">fine</a>`)
	case "/a":
		page("&lt;script&gt;window.pwned = 1&lt;/script&gt;Page A", `<a href="/missing">Missing page</a>`, `<img src="/broken.png" alt="logo">`)
	case "/b":
		page("Page B", `<a href="/missing">also missing</a>`, `<a href="/gone">gone</a>`, `<img src="/broken.png">`)
	case "/c":
		head = `<link rel="canonical" href="/c">`
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
	return map[string][]string{s.URL + "/missing": u("/a", "/b"), s.URL + "/gone": u("/b", "/c", "/dup"), s.URL + "/broken.png": u("/a", "/b")}
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

// inlinks runs export --inlinks and returns each linking page's anchor text
// and rel values.
func inlinks(t *testing.T, db, url string) map[string]string {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "export", "--db", db, "--inlinks", url, "--format", "jsonl")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if line == "" {
			continue
		}
		var row struct {
			From, Text string
			Rel        []string
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("export --inlinks line %q: %v", line, err)
		}
		got[row.From] = strings.Join(append([]string{row.Text}, row.Rel...), " ")
	}
	return got
}

// The audit of one crawl: robots directives obeyed (the pages a noindex,
// nofollow page links to are never requested, whether meta or header
// says so), rel="nofollow" recorded and followed, a canonical duplicate
// and every broken link found with every page linking to it and its text.
func TestAuditOfACrawlEndToEnd(t *testing.T) {
	site := startAuditSite(t, false)
	db := crawlAudit(t, site)
	for _, p := range []string{"/secret-meta", "/secret-header"} {
		if n := site.got(p); n != 0 {
			t.Errorf("%s, linked only from a nofollow page, was requested %d times", p, n)
		}
	}
	if site.got("/meta-noindex") != 1 || site.got("/header-noindex") != 1 || site.got("/sponsored") != 1 {
		t.Errorf("requests: meta %d, header %d, sponsored %d; want each once",
			site.got("/meta-noindex"), site.got("/header-noindex"), site.got("/sponsored"))
	}

	u := site.URL
	want := map[string]map[string]string{
		u + "/missing":   {u + "/a": "Missing page", u + "/b": "also missing"},
		u + "/gone":      {u + "/b": "gone", u + "/c": "gone again", u + "/dup": "gone again"},
		u + "/sponsored": {u + "/rel": "an advert nofollow sponsored"},
	}
	for target, pages := range want {
		got := inlinks(t, db, target)
		if len(got) != len(pages) {
			t.Errorf("inlinks of %s: %v, want %v", target, got, pages)
		}
		for from, text := range pages {
			if got[from] != text {
				t.Errorf("inlinks of %s: from %s %q, want %q", target, from, got[from], text)
			}
		}
	}
	if got := inlinks(t, db, u+"/broken.png"); len(got) != 2 || got[u+"/a"] != "logo" {
		t.Errorf("inlinks of /broken.png: %v, want /a (its alt text, logo) and /b", got)
	}

	rep := readReport(t, db)
	noindex := map[string]bool{}
	for _, p := range rep.Noindex.Items {
		noindex[p.URL] = true
	}
	if rep.Noindex.Total != 2 || !noindex[u+"/meta-noindex"] || !noindex[u+"/header-noindex"] {
		t.Errorf("noindex pages: %+v, want /meta-noindex and /header-noindex", rep.Noindex)
	}
	found := false
	for _, c := range rep.Canonicals.Items {
		if c.URL == u+"/dup" && c.Canonical == u+"/c" {
			found = true
		} else {
			t.Errorf("canonical conflict %+v, want only /dup -> /c", c)
		}
	}
	if !found {
		t.Errorf("canonical conflicts %+v lack /dup -> /c", rep.Canonicals)
	}
	dup := false
	for _, g := range rep.DuplicateContent.Items {
		dup = dup || slices.Contains(g.URLs, u+"/dup") && slices.Contains(g.URLs, u+"/c")
	}
	if !dup {
		t.Errorf("duplicate content %+v lacks /c and /dup", rep.DuplicateContent)
	}
	r := mustRun(t, cli.ExitFindings, "report", "--db", db, "-o", filepath.Join(t.TempDir(), "r.html"), "--fail-on", "noindex")
	if !strings.Contains(r.stderr, "noindex 2") {
		t.Errorf("--fail-on noindex does not count the pages:\n%s", r)
	}
	mustRun(t, cli.ExitFindings, "report", "--db", db, "-o", filepath.Join(t.TempDir(), "r.html"), "--fail-on", "broken-links")
}

// --skip-rel-nofollow: a rel="nofollow" link is recorded, not requested.
func TestSkipRelNofollowLeavesTheLinkUnrequested(t *testing.T) {
	site := startAuditSite(t, false)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--delay", "0", "--skip-rel-nofollow", site.URL+"/")...)
	if n := site.got("/sponsored"); n != 0 {
		t.Errorf("/sponsored requested %d times under --skip-rel-nofollow", n)
	}
	if got := inlinks(t, db, site.URL+"/sponsored"); got[site.URL+"/rel"] != "an advert nofollow sponsored" {
		t.Errorf("the nofollow link is not recorded: %v", got)
	}
}

// A report reads a fleet's store too: it keeps no link graph, so each
// broken URL is listed with the page it was found on.
func TestReportOfAFleetStore(t *testing.T) {
	rs := redistest.Start(t)
	site := startAuditSite(t, false)
	// Timeouts generous: under a loaded machine a page timed out is a
	// transient failure, neither broken nor noindex.
	mustRun(t, cli.ExitOK, fleetArgs(rs.URL(), []string{"--delay", "0", "--timeout", "15s", "--connect-timeout", "5s"}, site.URL+"/")...)
	r := mustRun(t, cli.ExitOK, "report", "--store", rs.URL(), "--format", "json")
	var rep report.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, r.stdout)
	}
	if rep.LinkGraph == "edges" {
		t.Errorf("a fleet's report claims the link graph")
	}
	links := site.linkingPages()
	assertReferrers(t, &rep, rep.BrokenLinks, map[string][]string{site.URL + "/missing": links[site.URL+"/missing"],
		site.URL + "/gone": links[site.URL+"/gone"]})
	if rep.Noindex.Total != 2 {
		t.Errorf("noindex pages on the fleet: %+v, want 2", rep.Noindex)
	}
	mustRun(t, cli.ExitFindings, "report", "--store", rs.URL(), "-o", filepath.Join(t.TempDir(), "r.html"), "--fail-on", "broken-links")
}
