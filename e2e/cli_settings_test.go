package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/fetch/fetchtest"
)

// oddPage matches the demo site's odd pages, "/p/1", "/p/3"...
const oddPage = `/p/[0-9]*[13579]$`

// requested lists the request targets a host got, robots.txt aside.
func requested(h *demosite.Host) []string {
	var out []string
	for _, r := range h.Requests() {
		if r.RequestURI != "/robots.txt" {
			out = append(out, r.RequestURI)
		}
	}
	return out
}

// The case: a first run with --exclude and --max-pages, then the
// README's resume with no flags at all. The resume keeps the exclusion
// (and --allow-private, which the site needs), and --max-pages, a limit of
// one run, is not kept.
func TestResumeKeepsTheCrawlsSettings(t *testing.T) {
	site := startSite(t, 1, 12)
	db := tempDB(t)
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--exclude", oddPage, "--max-pages", "2", "--workers", "1", site.Roots()[0])...)
	mustRun(t, cli.ExitOK, "crawl", "--db", db, "--log-format", "text", "--log-level", "warn")

	odd := regexp.MustCompile(oddPage)
	got := requested(site.Hosts()[0])
	for _, uri := range got {
		if odd.MatchString(uri) {
			t.Errorf("excluded page %s was fetched on resume", uri)
		}
	}
	if len(got) != 6 { // "/" and the even pages 2..10
		t.Errorf("requests %v, want the 6 pages not excluded, each once", got)
	}

	st := mustRun(t, cli.ExitOK, "status", "--db", db, "--json")
	var status struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if got := string(status.Settings["exclude"]); !strings.Contains(got, "13579") {
		t.Errorf("status settings exclude = %s, want the stored pattern", got)
	}
	if got := string(status.Settings["recrawl-after"]); got != `"0s"` {
		t.Errorf("status settings recrawl-after = %s, want the stored \"0s\"", got)
	}
	if _, ok := status.Settings["max-pages"]; ok {
		t.Errorf("status settings hold max-pages, a limit of one run: %v", status.Settings)
	}
}

// --max-pages-per-host is a setting of the crawl: a resume with no flags
// keeps it and counts the host's pages from the file, so the host gets the
// cap over both runs; the URLs it held back are exported as host-page-cap.
// A resume that finds the host at its cap fetches nothing and fails
// nothing: the URLs the cap holds back are the crawl's choice, like those
// robots.txt refuses, and the run ends well.
func TestMaxPagesPerHostIsKeptOnResume(t *testing.T) {
	site := startSite(t, 1, 12)
	db := tempDB(t)
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--max-pages-per-host", "5", "--max-pages", "5", "--workers", "1", site.Roots()[0])...)
	r := mustRun(t, cli.ExitOK, "crawl", "--db", db, "--log-format", "text", "--log-level", "warn")
	if !strings.Contains(r.stdout, "this run 0 fetched, 0 failed") {
		t.Errorf("the resume's summary: %s, want 0 fetched, 0 failed", r.stdout)
	}

	if got := requested(site.Hosts()[0]); len(got) != 5 {
		t.Errorf("requests %v over both runs, want the cap, 5", got)
	}
	capped := 0
	for _, row := range export(t, db) {
		if row["error_class"] == "host-page-cap" {
			capped++
		}
	}
	if capped == 0 {
		t.Error("no URL exported as host-page-cap")
	}
	st := mustRun(t, cli.ExitOK, "status", "--db", db, "--json")
	var status struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if got := string(status.Settings["max-pages-per-host"]); got != "5" {
		t.Errorf("status settings max-pages-per-host = %s, want the stored 5", got)
	}
}

// A flag given on a later run changes the stored setting, logs the change,
// and URLs queued before that the narrowed scope excludes are recorded
// out-of-scope, not fetched and not dropped.
func TestNarrowedScopeRecordsQueuedURLsOutOfScope(t *testing.T) {
	site := startSite(t, 1, 12)
	db := tempDB(t)
	// One worker, one page: the root is fetched and all its links queued.
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--max-pages", "1", "--workers", "1", site.Roots()[0])...)
	r := mustRun(t, cli.ExitOK, "crawl", "--db", db, "--exclude", oddPage, "--log-format", "text", "--log-level", "info")
	if !strings.Contains(r.stderr, "crawl setting changed") || !strings.Contains(r.stderr, "setting=exclude") {
		t.Errorf("the run does not log the exclude change:\n%s", r.stderr)
	}
	odd := regexp.MustCompile(oddPage)
	for _, uri := range requested(site.Hosts()[0]) {
		if odd.MatchString(uri) {
			t.Errorf("excluded page %s was fetched", uri)
		}
	}
	outOfScope := 0
	for _, row := range export(t, db) {
		u := row["url"].(string)
		switch {
		case odd.MatchString(u) && row["error_class"] == "out-of-scope":
			outOfScope++
		case odd.MatchString(u):
			t.Errorf("%s recorded %v, want out-of-scope", u, row["error_class"])
		}
	}
	if outOfScope == 0 {
		t.Errorf("no URL recorded out-of-scope")
	}
}

// Secret header values are stored but shown masked.
func TestStatusMasksSecretHeaders(t *testing.T) {
	site := startSite(t, 1, 2)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, "--header", "Authorization: Bearer s3cr3t-token-value",
		"--header", "X-Team: crawlers", site.Roots()[0])...)
	st := mustRun(t, cli.ExitOK, "status", "--db", db)
	if strings.Contains(st.stdout, "s3cr3t") {
		t.Errorf("status shows the secret header value:\n%s", st.stdout)
	}
	if !strings.Contains(st.stdout, "X-Team: crawlers") || !strings.Contains(st.stdout, "Authorization: Bea") {
		t.Errorf("status should show the headers, the secret one masked:\n%s", st.stdout)
	}
}

// Exit codes tell cron what happened.
func TestExitCodes(t *testing.T) {
	site := startSite(t, 1, 3)
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.txt")
	writeFile(t, empty, "# nothing here\n\n")
	closed := "http://127.0.0.1:1/" // nothing listens on port 1
	shut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nDisallow: /\n")
			return
		}
		fmt.Fprint(w, "<html>a page robots.txt keeps out</html>")
	}))
	t.Cleanup(shut.Close)
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string // a fragment of the message
	}{
		{"every seed blocked by the address guard", []string{"crawl", "--db", filepath.Join(dir, "b.db"), site.Roots()[0]},
			cli.ExitUsage, "--allow-private"},
		{"an empty seeds file", []string{"crawl", "--db", filepath.Join(dir, "e.db"), "--seeds", empty}, cli.ExitUsage, "no seed URLs"},
		{"an empty --db", []string{"crawl", "--db", "", site.Roots()[0]}, cli.ExitUsage, "--db"},
		{"a seed that is not a URL", []string{"crawl", "--db", filepath.Join(dir, "n.db"), "not a url"}, cli.ExitUsage, "contains a space"},
		{"a seed of another scheme", []string{"crawl", "--db", filepath.Join(dir, "f.db"), "ftp://example.com/"}, cli.ExitUsage, `"ftp" is not http or https`},
		{"every seed unreachable", crawlArgs(filepath.Join(dir, "u.db"), "--retries", "0", closed), cli.ExitFailed, "every seed failed"},
		{"every seed blocked by robots.txt", crawlArgs(filepath.Join(dir, "r.db"), shut.URL+"/", shut.URL+"/docs/"),
			cli.ExitFailed, "every seed is blocked by robots.txt (2)"},
		{"success", crawlArgs(filepath.Join(dir, "ok.db"), site.Roots()[0]), cli.ExitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRun(t, tc.code, tc.args...)
			quoted, _ := json.Marshal(tc.stderr) // off a terminal the log, the ending included, is JSON
			if !strings.Contains(r.stderr, tc.stderr) && !strings.Contains(r.stderr, strings.Trim(string(quoted), `"`)) {
				t.Errorf("stderr does not say %q:\n%s", tc.stderr, r)
			}
			if tc.code == cli.ExitUsage {
				if matches, _ := filepath.Glob(filepath.Join(dir, "[bnef].db")); len(matches) > 0 {
					t.Errorf("a refused run left %v behind", matches)
				}
			}
		})
	}
}

// More failures than --fail-ratio allows: exit 4, and the last line says why.
func TestFailRatio(t *testing.T) {
	// The refusal names another crawler: a plain 403, a permanent failure.
	specs := []demosite.HostSpec{{Name: "ok", Pages: 4},
		{Name: "forbidden", Pages: 4, Behavior: demosite.Refusing, RefuseToken: "othercrawler"}}
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	db := tempDB(t)
	r := mustRun(t, cli.ExitFailed, crawlArgs(db, "--fail-ratio", "0.2", "--scope", "any", site.Roots()[0], site.Roots()[1])...)
	if !strings.Contains(r.stderr, "--fail-ratio 0.2") {
		t.Errorf("stderr should name --fail-ratio:\n%s", r)
	}
	if !strings.Contains(r.stdout, "no URL left to fetch") {
		t.Errorf("the last line should say why the run ended:\n%s", r.stdout)
	}
}

// --seeds - reads standard input once; a seed without a scheme is read as
// http:// and said so.
func TestSeedsFromStandardInput(t *testing.T) {
	site := startSite(t, 1, 3)
	db := tempDB(t)
	bin := buildBinary(t)
	schemeless := strings.TrimPrefix(site.Roots()[0], "http://")
	cmd := exec.Command(bin, crawlArgs(db, "--seeds", "-", "--log-level", "info")...)
	cmd.Stdin = strings.NewReader("  " + schemeless + "  \n# a comment\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("crawl --seeds -: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "read as http://") {
		t.Errorf("the schemeless seed is not said to be read as http://:\n%s", out)
	}
	if n := len(requested(site.Hosts()[0])); n != 3 {
		t.Errorf("%d pages requested, want 3", n)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(db), cli.SeedsCopyPrefix(db)+"*"))
	if len(left) > 0 {
		t.Errorf("the copy of standard input was left behind: %v", left)
	}
	// A copy a killed run left behind goes with the next run of the file.
	stale := filepath.Join(filepath.Dir(db), cli.SeedsCopyPrefix(db)+"123")
	writeFile(t, stale, site.Roots()[0]+"\n")
	mustRun(t, cli.ExitOK, "crawl", "--db", db, "--log-level", "warn")
	if _, err := os.Stat(stale); err == nil {
		t.Errorf("a stale copy of piped seeds was left: %s", stale)
	}
}

// The README's first example, as written: the demo site served on a port,
// then a crawl of it with --allow-private (it is on loopback).
func TestReadmeFirstExample(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan result, 1)
	go func() { served <- runCLI(t, ctx, "demo", "--serve", addr) }()
	waitFor(t, 10*time.Second, "the demo site to listen", func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	db := tempDB(t)
	r := mustRun(t, cli.ExitOK, "crawl", "--db", db, "--allow-private", "--delay", "0", "--log-level", "warn", "http://"+addr+"/")
	stop()
	if s := <-served; s.code != cli.ExitOK {
		t.Errorf("demo --serve: %s", s)
	}
	if !strings.Contains(r.stdout, "40 fetched") {
		t.Errorf("want the first host's 40 pages fetched:\n%s", r)
	}
}

// A crawl through --proxy: every request goes through the proxy, the
// setting is stored and a resume keeps using it.
func TestCrawlThroughProxy(t *testing.T) {
	site := startSite(t, 1, 4)
	proxy := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{User: "u", Password: "p4ss"})
	db := tempDB(t)
	proxyURL := "http://u:p4ss@" + proxy.Addr
	mustRun(t, cli.ExitOK, crawlArgs(db, "--proxy", proxyURL, site.Roots()[0])...)
	forwarded := proxy.Forwarded()
	if len(forwarded) != 5 { // robots.txt and 4 pages
		t.Errorf("the proxy forwarded %d requests, want 5: %v", len(forwarded), forwarded)
	}
	if n := len(requested(site.Hosts()[0])); n != 4 {
		t.Errorf("the site got %d page requests, want 4", n)
	}
	st := mustRun(t, cli.ExitOK, "status", "--db", db)
	if strings.Contains(st.stdout, "p4ss") || !strings.Contains(st.stdout, proxy.Addr) {
		t.Errorf("status should show the proxy without its password:\n%s", st.stdout)
	}
}

// Cookies: a cookies.txt is sent where it matches, a cookie the site sets
// comes back on later requests, and a malformed file is a usage error
// naming the line.
func TestCrawlCookies(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // path -> Cookie header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.Header.Get("Cookie")
		mu.Unlock()
		switch r.URL.Path {
		case "/":
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
			fmt.Fprint(w, `<a href="/a">a</a>`)
		case "/a":
			fmt.Fprint(w, `<a href="/b">b</a>`)
		default:
			fmt.Fprint(w, `done`)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	jar := filepath.Join(dir, "cookies.txt")
	writeFile(t, jar, "# Netscape HTTP Cookie File\n127.0.0.1\tFALSE\t/\tFALSE\t0\tlogin\tl1\n")
	mustRun(t, cli.ExitOK, crawlArgs(filepath.Join(dir, "c.db"), "--cookies", jar, srv.URL+"/")...)
	mu.Lock()
	defer mu.Unlock()
	if got := seen["/"]; got != "login=l1" {
		t.Errorf("first request sent Cookie %q, want the loaded login=l1", got)
	}
	for _, p := range []string{"/a", "/b"} {
		if got := seen[p]; !strings.Contains(got, "session=s1") || !strings.Contains(got, "login=l1") {
			t.Errorf("%s sent Cookie %q, want the site's session and the loaded login", p, got)
		}
	}
	bad := filepath.Join(dir, "bad.txt")
	writeFile(t, bad, "127.0.0.1\tFALSE\t/\tFALSE\tsoon\tx\ty\n")
	r := mustRun(t, cli.ExitUsage, crawlArgs(filepath.Join(dir, "bad.db"), "--cookies", bad, srv.URL+"/")...)
	if !strings.Contains(r.stderr, "line 1") {
		t.Errorf("a malformed cookies file should name its line:\n%s", r)
	}
}

// Bad request settings are usage errors that name the input.
func TestBadRequestSettings(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		flag, value, says string
	}{
		{"--header", "NoColon", "no colon"},
		{"--header", "Host: other.example", "Host"},
		{"--header", "User-Agent: x", "--user-agent"},
		{"--proxy", "ftp://127.0.0.1:21", "ftp"},
		{"--cookies", filepath.Join(dir, "missing.txt"), "missing.txt"},
	} {
		r := mustRun(t, cli.ExitUsage, crawlArgs(filepath.Join(dir, "x.db"), tc.flag, tc.value, "http://127.0.0.1:1/")...)
		if !strings.Contains(r.stderr, tc.says) {
			t.Errorf("%s %q: stderr does not say %q:\n%s", tc.flag, tc.value, tc.says, r)
		}
		if _, err := os.Stat(filepath.Join(dir, "x.db")); err == nil {
			t.Errorf("%s %q left a database file behind", tc.flag, tc.value)
		}
	}
}

// Runs that did not fail exit 0: a resume whose leftover URLs of depth 0
// fail while the rest succeed, and a resume whose narrowed scope records
// queued URLs out-of-scope (not failures).
func TestExitZeroWhenTheRunDidNotFail(t *testing.T) {
	site := startSite(t, 1, 12)
	db := tempDB(t)
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--max-pages", "1", "--workers", "1", site.Roots()[0])...)
	// Everything queued but the root's links to odd pages is now out of scope.
	r := mustRun(t, cli.ExitOK, "crawl", "--db", db, "--exclude", `/p/[0-9]*[02468]$`, "--log-level", "warn")
	if !strings.Contains(r.stdout, "no URL left to fetch") {
		t.Errorf("want the run finished:\n%s", r)
	}
}

// --seeds from a pipe is read once, like standard input.
func TestSeedsFromAPipe(t *testing.T) {
	site := startSite(t, 1, 2)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "seeds.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	go func() {
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		fmt.Fprintln(f, site.Roots()[0])
		f.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := runCLI(t, ctx, crawlArgs(filepath.Join(dir, "p.db"), "--seeds", fifo)...)
	if r.code != cli.ExitOK || !strings.Contains(r.stdout, "2 fetched") {
		t.Errorf("crawl --seeds FIFO: %s", r)
	}
}

// The cron case: a resume that gives no flags keeps notifying,
// and status shows the webhook without its path (a token, often).
func TestResumeKeepsNotifying(t *testing.T) {
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	site := startSite(t, 1, 4)
	db := tempDB(t)
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--notify", srv.URL+"/hook/t0k3n", "--max-pages", "1", "--workers", "1", site.Roots()[0])...)
	mustRun(t, cli.ExitWorkLeft, "crawl", "--db", db, "--max-pages", "1", "--workers", "1", "--log-level", "warn")
	if got := h.kinds(); len(got) != 2 || got[1] != "run-ended" {
		t.Errorf("events %v, want run-ended from both runs", got)
	}
	st := mustRun(t, cli.ExitOK, "status", "--db", db)
	if strings.Contains(st.stdout, "t0k3n") || !flagLineHas(st.stdout, "notify", srv.URL) {
		t.Errorf("status should show the webhook's host, not its path:\n%s", st.stdout)
	}
}

// --exclude "" clears the stored exclusions: the resume follows the links
// the first run would have excluded (the even pages link to odd ones),
// and status shows the list empty.
func TestAnEmptyExcludeClearsTheStoredOne(t *testing.T) {
	site := startSite(t, 1, 6)
	db := tempDB(t)
	// One page: the root, whose links to even pages are queued.
	mustRun(t, cli.ExitWorkLeft, crawlArgs(db, "--exclude", oddPage, "--max-pages", "1", "--workers", "1", site.Roots()[0])...)
	odd := regexp.MustCompile(oddPage)
	r := mustRun(t, cli.ExitOK, "crawl", "--db", db, "--exclude", "", "--log-format", "text", "--log-level", "info")
	if !strings.Contains(r.stderr, "setting=exclude") {
		t.Errorf("the change is not logged:\n%s", r.stderr)
	}
	fetchedOdd := 0
	for _, uri := range requested(site.Hosts()[0]) {
		if odd.MatchString(uri) {
			fetchedOdd++
		}
	}
	if fetchedOdd == 0 {
		t.Errorf("no odd page fetched after --exclude \"\": %v", requested(site.Hosts()[0]))
	}
	st := mustRun(t, cli.ExitOK, "status", "--db", db)
	if !flagLineHas(st.stdout, "exclude", "-") {
		t.Errorf("status should show --exclude empty:\n%s", st.stdout)
	}
}

// flagLineHas reports whether status's line for the setting flag holds s.
func flagLineHas(status, flag, s string) bool {
	return strings.Contains(flagLine(status, flag), s)
}
