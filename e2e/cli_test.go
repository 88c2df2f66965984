package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/cli"
	"breakwater/control"
	"breakwater/demosite"
)

// exportKeys are the keys of one exported line (the documented format);
// "host" may come too, "etag" and "last_modified" when the page sent them,
// "location" for a redirect, "lastmod" for a URL a sitemap listed, and
// what a page says of itself (robots, canonical, hreflang, description,
// h1, lang) when it says it.
var exportKeys = []string{"url", "final_url", "status", "content_type", "length", "truncated",
	"fetched_at", "duration_ms", "depth", "title", "outlinks", "sha256", "attempts", "error_class", "error", "referrer", "kind"}

var optionalExportKeys = []string{"host", "etag", "last_modified", "location", "lastmod",
	"robots", "canonical", "hreflang", "description", "h1", "lang"}

// export runs `export --format jsonl` and decodes every line, checking that
// each is one JSON object with exactly the documented keys.
func export(t *testing.T, db string) []map[string]any {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "export", "--db", db, "--format", "jsonl")
	var rows []map[string]any
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("export line %d is not one JSON object: %v\n%s", n, err, sc.Text())
		}
		keys := make([]string, 0, len(row))
		for k := range row {
			if !slices.Contains(optionalExportKeys, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(exportKeys))
		if !slices.Equal(keys, want) {
			t.Fatalf("export line %d keys = %v, want %v", n, keys, want)
		}
		rows = append(rows, row)
	}
	return rows
}

// fetchedURLs are the URLs of rows that hold a page (status 200, no error).
func fetchedURLs(t *testing.T, rows []map[string]any) []string {
	t.Helper()
	var out []string
	for _, row := range rows {
		if row["status"] != float64(200) || row["error_class"] != "" {
			t.Errorf("row is not a fetched page: %v", row)
			continue
		}
		out = append(out, row["url"].(string))
	}
	slices.Sort(out)
	return out
}

func sortedURLs(site *demosite.Site) []string {
	return slices.Sorted(slices.Values(site.URLs()))
}

func TestCrawlStatusExport(t *testing.T) {
	site := startSite(t, 3, 10)
	db := tempDB(t)
	r := mustRun(t, cli.ExitOK, crawlArgs(db, site.Roots()...)...)
	if !strings.Contains(r.stdout, "crawl finished") || !strings.Contains(r.stdout, "30 fetched") {
		t.Errorf("crawl summary should say finished with 30 fetched:\n%s", r)
	}

	st := mustRun(t, cli.ExitOK, "status", "--db", db)
	for _, re := range []string{`(?m)^fetched\s+30$`, `(?m)^queued\s+0$`, `(?m)^crawl\s+not running$`} {
		if !regexp.MustCompile(re).MatchString(st.stdout) {
			t.Errorf("status does not match %s:\n%s", re, st)
		}
	}

	rows := export(t, db)
	if got, want := fetchedURLs(t, rows), sortedURLs(site); !slices.Equal(got, want) {
		t.Errorf("exported URLs = %v\nwant %v", got, want)
	}
	for _, row := range rows {
		if _, err := time.Parse(time.RFC3339, row["fetched_at"].(string)); err != nil {
			t.Errorf("fetched_at of %v: %v", row["url"], err)
		}
	}
	if r := mustRun(t, cli.ExitUsage, "export", "--db", db, "--format", "xml"); !strings.Contains(r.stderr, `--format "xml": want jsonl or csv`) {
		t.Errorf("export --format xml should name the flag and the formats:\n%s", r)
	}
}

func TestMaxPagesThenResume(t *testing.T) {
	site := startSite(t, 3, 10)
	db := tempDB(t)
	r := mustRun(t, cli.ExitWorkLeft, crawlArgs(db, append([]string{"--max-pages", "5"}, site.Roots()...)...)...)
	if !strings.Contains(r.stdout, "crawl stopped") || !strings.Contains(r.stderr, "run the same command again") {
		t.Errorf("a stopped crawl should say so and how to resume:\n%s", r)
	}
	if got := len(export(t, db)); got != 5 {
		t.Errorf("after --max-pages 5: %d results, want 5", got)
	}
	mustRun(t, cli.ExitOK, crawlArgs(db)...)
	if got, want := fetchedURLs(t, export(t, db)), sortedURLs(site); !slices.Equal(got, want) {
		t.Errorf("after resume: fetched %d URLs %v\nwant %d: %v", len(got), got, len(want), want)
	}
	st := mustRun(t, cli.ExitOK, "status", "--db", db)
	if !regexp.MustCompile(`(?m)^fetched\s+30$`).MatchString(st.stdout) {
		t.Errorf("status after resume should show 30 fetched:\n%s", st)
	}
}

func TestMaxDurationStopsWithWorkLeft(t *testing.T) {
	site := startSite(t, 3, 10) // 10 pages at 500ms a host: about 5 s of work
	db := tempDB(t)
	args := crawlArgs(db, append([]string{"--delay", "500ms", "--max-duration", "1s"}, site.Roots()...)...)
	r := mustRun(t, cli.ExitWorkLeft, args...)
	if r.elapsed > 4*time.Second {
		t.Errorf("--max-duration 1s took %s", r.elapsed)
	}
	if !strings.Contains(r.stdout, "crawl stopped") {
		t.Errorf("summary should say stopped:\n%s", r)
	}
}

// bgCrawl is a crawl running in a goroutine until its context is cancelled.
type bgCrawl struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the crawl returned; res is then set
	res    result
}

// startBackgroundCrawl starts a crawl and waits until its control socket
// answers. The test's cleanup stops it.
func startBackgroundCrawl(t *testing.T, args []string) *bgCrawl {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	bg := &bgCrawl{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(bg.done)
		bg.res = runCLI(t, ctx, args...)
	}()
	t.Cleanup(func() {
		cancel()
		<-bg.done
	})
	sock := control.SocketPath(args[slices.Index(args, "--db")+1])
	waitFor(t, 5*time.Second, "the crawl's control socket", func() bool {
		select {
		case <-bg.done:
			t.Fatalf("crawl ended before its socket answered: %s", bg.res)
		default:
		}
		_, err := control.NewClient(sock).Status()
		return err == nil
	})
	return bg
}

func TestRunningCrawlLocksFileAndAnswersOnSocket(t *testing.T) {
	site := startSite(t, 3, 10) // 10 pages at 1 s a host: the crawl outlives the test
	db := tempDB(t)
	bg := startBackgroundCrawl(t, crawlArgs(db, append([]string{"--delay", "1s"}, site.Roots()...)...))

	second := mustRun(t, cli.ExitError, crawlArgs(db)...)
	if !strings.Contains(second.stderr, "database is locked") || !strings.Contains(second.stderr, db) {
		t.Errorf("second crawl should say %s is locked:\n%s", db, second)
	}
	if second.elapsed > 2500*time.Millisecond {
		t.Errorf("second crawl took %s to give up on the lock", second.elapsed)
	}

	if st := mustRun(t, cli.ExitOK, "status", "--db", db); !regexp.MustCompile(`(?m)^crawl\s+running`).MatchString(st.stdout) {
		t.Errorf("status should say running:\n%s", st)
	}
	hosts := mustRun(t, cli.ExitOK, "hosts", "--db", db)
	for _, h := range site.Hosts() {
		if !strings.Contains(hosts.stdout, hostKey(t, h)) {
			t.Errorf("hosts lacks %s:\n%s", hostKey(t, h), hosts)
		}
	}
	mustRun(t, cli.ExitOK, "transitions", "--db", db)

	target := site.Hosts()[0]
	key := hostKey(t, target)
	mustRun(t, cli.ExitOK, "pause", key, "--db", db, "--reason", "x")
	atPause := target.RequestCount()
	time.Sleep(200 * time.Millisecond) // a request admitted before the pause may still land
	settled := target.RequestCount()
	if settled-atPause > 1 {
		t.Errorf("%d requests reached %s after the pause returned", settled-atPause, key)
	}
	time.Sleep(1300 * time.Millisecond) // longer than --delay: an unpaused host gets a request
	if n := target.RequestCount(); n != settled {
		t.Errorf("paused host %s received %d more requests", key, n-settled)
	}
	if ps := mustRun(t, cli.ExitOK, "hosts", "--db", db, "--state", "paused"); !strings.Contains(ps.stdout, key) {
		t.Errorf("hosts --state paused lacks %s:\n%s", key, ps)
	}

	mustRun(t, cli.ExitOK, "unpause", key, "--db", db)
	waitFor(t, 3*time.Second, "a request to the unpaused host", func() bool { return target.RequestCount() > settled })

	bg.cancel()
	<-bg.done
	if r := bg.res; r.code != cli.ExitWorkLeft {
		t.Errorf("cancelled crawl: want exit %d, got %s", cli.ExitWorkLeft, r)
	}
	if fileExists(control.SocketPath(db)) {
		t.Errorf("control socket %s left after the crawl ended", control.SocketPath(db))
	}
}

func TestOfflineAdmin(t *testing.T) {
	site := startSite(t, 1, 3)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, site.Roots()...)...)
	key := hostKey(t, site.Hosts()[0])

	if r := mustRun(t, cli.ExitOK, "cases", "--db", db); strings.TrimSpace(r.stdout) != "no cases" {
		t.Errorf("cases on a clean crawl:\n%s", r)
	}
	if r := mustRun(t, cli.ExitUsage, "pause", key, "--db", db); !strings.Contains(r.stderr, "--reason") {
		t.Errorf("pause without a reason should ask for one:\n%s", r)
	}
	mustRun(t, cli.ExitOK, "pause", key, "--db", db, "--reason", "maintenance window")
	if r := mustRun(t, cli.ExitOK, "hosts", "--db", db, "--state", "paused"); !strings.Contains(r.stdout, key) {
		t.Errorf("hosts --state paused lacks %s:\n%s", key, r)
	}
	tr := mustRun(t, cli.ExitOK, "transitions", "--db", db, "--host", key)
	if !regexp.MustCompile(regexp.QuoteMeta(key) + `.*paused.*maintenance window`).MatchString(tr.stdout) {
		t.Errorf("transitions should log the pause with its reason:\n%s", tr)
	}

	mustRun(t, cli.ExitOK, "unpause", key, "--db", db)
	if r := mustRun(t, cli.ExitOK, "hosts", "--db", db, "--state", "half-open"); !strings.Contains(r.stdout, key) {
		t.Errorf("an unpaused host should be half-open:\n%s", r)
	}
	if r := mustRun(t, cli.ExitOK, "hosts", "--db", db, "--state", "paused"); strings.Contains(r.stdout, key) {
		t.Errorf("an unpaused host is still listed as paused:\n%s", r)
	}
	if r := runCLI(t, context.Background(), "unpause", key, "--db", db); r.code == cli.ExitOK || !strings.Contains(r.stderr, key) {
		t.Errorf("unpause of a host that is not paused should fail naming it:\n%s", r)
	}
	if r := mustRun(t, cli.ExitUsage, "hosts", "--db", db, "--state", "sleepy"); !strings.Contains(r.stderr, "--state") {
		t.Errorf("hosts --state sleepy should name the flag:\n%s", r)
	}
	if r := mustRun(t, cli.ExitUsage, "cases", "resolve", "--db", db); !strings.Contains(r.stderr, "resolve HOST") {
		t.Errorf("cases resolve without a host:\n%s", r)
	}
}

func TestDamagedDatabase(t *testing.T) {
	db := tempDB(t)
	junk := make([]byte, 16<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range junk {
		junk[i] = byte(rng.Uint32())
	}
	writeFile(t, db, string(junk))
	for _, args := range [][]string{crawlArgs(db, "http://127.0.0.1:1/"), crawlArgs(db), {"status", "--db", db}} {
		r := mustRun(t, cli.ExitError, args...)
		if !strings.Contains(r.stderr, db) || !strings.Contains(r.stderr, "damaged") {
			t.Errorf("%s: stderr should name %s as damaged:\n%s", args[0], db, r)
		}
	}
	if got, err := os.ReadFile(db); err != nil || !bytes.Equal(got, junk) {
		t.Errorf("the damaged file was changed (err %v)", err)
	}
}

func TestNewerSchema(t *testing.T) {
	db := tempDB(t)
	b, err := bolt.Open(db, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return meta.Put([]byte("schema"), []byte{0, 0, 0, 99})
	})
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(db)
	r := mustRun(t, cli.ExitError, crawlArgs(db, "http://127.0.0.1:1/")...)
	if !strings.Contains(r.stderr, "schema version 99") || !strings.Contains(r.stderr, db) {
		t.Errorf("stderr should name the file and its schema version:\n%s", r)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Errorf("a crawl changed a file of a newer schema")
	}
}

// TestCrashResume kills a real crawl process mid-run and resumes it: no page
// is lost, and only pages in flight (or fetched but not yet committed) at
// the kill are requested twice.
func TestCrashResume(t *testing.T) {
	bin := buildBinary(t)
	site := startSite(t, 3, 40)
	db := tempDB(t)
	args := crawlArgs(db, append([]string{"--delay", "50ms"}, site.Roots()...)...)
	var firstErr bytes.Buffer
	first := exec.Command(bin, args...)
	first.Stderr = &firstErr
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "about a third of the site fetched", func() bool { return pageRequests(site) >= 40 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := first.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("first crawl should have been killed, got %v\n%s", err, firstErr.String())
	}
	atKill := pageRequests(site)

	second := exec.Command(bin, crawlArgs(db)...)
	out, err := second.CombinedOutput()
	if err != nil {
		t.Fatalf("resumed crawl: %v\n%s", err, out)
	}
	if got, want := fetchedURLs(t, export(t, db)), sortedURLs(site); !slices.Equal(got, want) {
		t.Errorf("after resume: %d pages fetched, want %d", len(got), len(want))
	}
	twice := 0
	for _, h := range site.Hosts() {
		n := map[string]int{}
		for _, req := range h.Requests() {
			if req.Path != "/robots.txt" {
				n[req.Path]++
			}
		}
		for _, c := range n {
			twice += c - 1
		}
	}
	t.Logf("killed after %d page requests; %d pages requested twice", atKill, twice)
	if twice > 32 {
		t.Errorf("%d pages requested twice, more than the 32 workers in flight", twice)
	}
}

// pageRequests counts requests for pages (not robots.txt) across the site.
func pageRequests(site *demosite.Site) int {
	n := 0
	for _, h := range site.Hosts() {
		for _, r := range h.Requests() {
			if r.Path != "/robots.txt" {
				n++
			}
		}
	}
	return n
}
