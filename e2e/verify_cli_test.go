package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/warc"
)

// mustVerify runs verify and asserts it exits 0 saying ok.
func mustVerify(t *testing.T, args ...string) result {
	t.Helper()
	r := runCLI(t, t.Context(), append([]string{"verify"}, args...)...)
	if r.code != cli.ExitOK || !strings.HasSuffix(r.stdout, "ok\n") {
		t.Fatalf("verify %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// A real crawl's file (and archive) verify clean; each kind of damage
// done to them after is named, with exit 1; the file is never written.
func TestVerifyCommand(t *testing.T) {
	site := startSite(t, 3, 20)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, crawlArgs(db, append([]string{"--warc", dir}, site.Roots()...)...)...)
	r := mustVerify(t, "--db", db, "--warc", dir)
	if !strings.Contains(r.stdout, "60 pages, 0 failed") || !strings.Contains(r.stdout, "63 URLs archived") {
		t.Errorf("verify should count the 60 pages and archived URLs:\n%s", r)
	}
	js := runCLI(t, t.Context(), "verify", "--db", db, "--json")
	var rep cli.VerifyReport
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil || js.code != cli.ExitOK || !rep.OK || rep.Pages != 60 || len(rep.Problems) != 0 {
		t.Errorf("verify --json: %v %+v\n%s", err, rep, js)
	}
	data, _ := os.ReadFile(db)

	// A result deleted behind the crawl's back: a URL lost, the counters
	// off, and a page in the archive the database does not have.
	damaged := filepath.Join(t.TempDir(), "damaged.db")
	os.WriteFile(damaged, data, 0o644)
	bdb, err := bolt.Open(damaged, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		c := tx.Bucket([]byte("results")).Cursor()
		c.First()
		return c.Delete()
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, t.Context(), "verify", "--db", damaged, "--warc", dir)
	for _, want := range []string{"problem: the URL with fingerprint", "is lost", "problem: the stored count fetched is 60, the results hold pages: 59",
		"is in the archive (1 records) but has no result in the database", "problems\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("verify of a file with a result deleted does not say %q:\n%s", want, r)
		}
	}
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "verify found problems") {
		t.Errorf("verify of a damaged file: want exit 1 and a word on stderr, got %s", r)
	}
	if r := runCLI(t, t.Context(), "verify", "--db", damaged, "--max-problems", "1"); r.code != cli.ExitError ||
		strings.Count(r.stdout, "problem: ") != 1 || !strings.Contains(r.stdout, "more problems") {
		t.Errorf("verify --max-problems 1 should list one problem and count the rest: %s", r)
	}

	// A truncated file is refused by name, exit 1.
	short := filepath.Join(t.TempDir(), "short.db")
	os.WriteFile(short, data[:len(data)/3], 0o644)
	if r := runCLI(t, t.Context(), "verify", "--db", short); r.code != cli.ExitError ||
		!strings.Contains(r.stderr, "open database "+short+": damaged or not a database file: the file is truncated") {
		t.Errorf("verify of a truncated file: %s", r)
	}

	if after, _ := os.ReadFile(db); !bytes.Equal(after, data) {
		t.Error("verify changed the file")
	}

	// A running crawl holds the file: verify says so and exits 1.
	holder, err := storage.Open(db, nil)
	if err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, t.Context(), "verify", "--db", db)
	holder.Close()
	if r.code != cli.ExitError || !strings.Contains(r.stderr, "a crawl is running on it: verify it once the crawl has stopped") {
		t.Errorf("verify of a locked file: %s", r)
	}

	for _, bad := range [][]string{{}, {"--db", filepath.Join(t.TempDir(), "missing.db")}, {"--db", db, "extra"}} {
		if r := runCLI(t, t.Context(), append([]string{"verify"}, bad...)...); r.code != cli.ExitUsage {
			t.Errorf("verify %q: want exit 2, got %s", bad, r)
		}
	}
}

// A crawl of healthy and unhealthy hosts, archived and refreshed, killed
// with SIGKILL at random moments: after each kill the file verifies clean
// as it is, and after the last run the archive does too.
func TestVerifyAfterKills(t *testing.T) {
	bin := buildBinary(t)
	specs := demosite.BenchSpecs(3, 40, false, 0)
	specs = append(specs, demosite.HostSpec{Name: "flaky", Pages: 20, Behavior: demosite.Flaky},
		demosite.HostSpec{Name: "dead", Pages: 5, Behavior: demosite.Dead})
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 3})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	t.Cleanup(func() { site.Close() })
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 16))
	args := crawlArgs(db, append([]string{"--warc", dir, "--warc-size", "1048576", "--breaker-threshold", "2",
		"--breaker-rest", "1s", "--give-up-after", "3s", "--retries", "1", "--retry-base", "100ms", "--timeout", "500ms"}, site.Roots()...)...)
	kills := 0
	for kills < 4 {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		select {
		case err := <-exited:
			t.Logf("run %d ended by itself (%v): %s", kills+1, err, stderr.String())
		case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond):
			cmd.Process.Signal(syscall.SIGKILL)
			err := <-exited
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Logf("run %d ended by itself before the kill: %v", kills+1, err)
			}
		}
		kills++
		if fileExists(db) {
			verifyAfterKill(t, "--db", db)
		}
		args = crawlArgs(db)
	}
	out, err := exec.Command(bin, crawlArgs(db)...).CombinedOutput()
	if code := exitCodeOf(err); code != cli.ExitOK && code != cli.ExitFailed {
		t.Fatalf("final resume: %v\n%s", err, out)
	}
	verifyAfterKill(t, "--db", db, "--warc", dir)

	// A refresh of everything archives every page again: allowed, as the
	// stored settings say the crawl refreshes.
	time.Sleep(1100 * time.Millisecond)
	out, err = exec.Command(bin, crawlArgs(db, "--recrawl-after", "1s")...).CombinedOutput()
	if code := exitCodeOf(err); code != cli.ExitOK && code != cli.ExitFailed {
		t.Fatalf("refresh run: %v\n%s", err, out)
	}
	verifyAfterKill(t, "--db", db, "--warc", dir)
}

// verifyAfterKill is mustVerify after a kill: a kill may leave nothing
// verify finds. (It once left a breaker's transition logged and its state
// not: see Engine.onTransition.)
func verifyAfterKill(t *testing.T, args ...string) {
	t.Helper()
	r := runCLI(t, t.Context(), append([]string{"verify"}, args...)...)
	if r.code != cli.ExitOK || !strings.HasSuffix(r.stdout, "ok\n") {
		t.Fatalf("verify %s: %s", strings.Join(args, " "), r)
	}
}

func exitCodeOf(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A file whose page tree is damaged is reported, page by page, with exit
// 1: verify walks the pages before bbolt reads them, so a damaged one is
// a finding, never a crash, and the file is left as it was.
func TestVerifyDamagedPages(t *testing.T) {
	site := startSite(t, 1, 5)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, site.Roots()...)...)
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// The root bucket's page, named by the later of the two meta pages,
	// made to say it is another page.
	le := binary.LittleEndian
	pageSize := int(le.Uint32(data[16+8:]))
	meta := 0
	if le.Uint64(data[pageSize+16+48:]) > le.Uint64(data[16+48:]) {
		meta = pageSize
	}
	root := int(le.Uint64(data[meta+16+16:]))
	le.PutUint64(data[root*pageSize:], uint64(root+1))
	if err := os.WriteFile(db, data, 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, t.Context(), "verify", "--db", db)
	want := fmt.Sprintf("problem: bbolt pages: page %d (the root bucket), pointed at by the meta page, says it is page %d", root, root+1)
	if r.code != cli.ExitError || !strings.Contains(r.stdout, want) || !strings.Contains(r.stdout, "its bbolt pages are damaged, so its records were not read") {
		t.Errorf("verify of a file with a damaged page: want exit 1 and %q, got %s", want, r)
	}
	js := runCLI(t, t.Context(), "verify", "--db", db, "--json")
	var rep cli.VerifyReport
	if err := json.Unmarshal([]byte(js.stdout), &rep); err != nil || js.code != cli.ExitError || rep.OK || !rep.PagesDamaged || len(rep.Problems) != 1 {
		t.Errorf("verify --json of a file with a damaged page: %v %+v\n%s", err, rep, js)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(after, data) {
		t.Error("verify changed the damaged file")
	}
}

// A robots.txt that redirects, on its host and then to another host, has
// each hop archived: verify --warc counts the hops as robots.txt fetches,
// and still names a page archived without a result.
func TestVerifyRobotsRedirects(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/rules" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
	}))
	t.Cleanup(other.Close)
	var privateAsked atomic.Bool
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/moved/robots-file", http.StatusMovedPermanently)
		case "/moved/robots-file":
			http.Redirect(w, r, other.URL+"/rules", http.StatusFound)
		case "/":
			fmt.Fprint(w, `<title>home</title><a href="/a">a</a> <a href="/b">b</a> <a href="/private/x">x</a>`)
		case "/a", "/b":
			fmt.Fprintf(w, "<title>%s</title>", r.URL.Path)
		default:
			if strings.HasPrefix(r.URL.Path, "/private/") {
				privateAsked.Store(true)
			}
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	db := tempDB(t)
	dir := filepath.Join(t.TempDir(), "warc")
	mustRun(t, cli.ExitOK, crawlArgs(db, "--warc", dir, site.URL+"/")...)
	if privateAsked.Load() {
		t.Error("the rules at the end of the redirects were not followed: /private/x was asked for")
	}
	rep, err := warc.Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, hop := range []string{site.URL + "/robots.txt", site.URL + "/moved/robots-file", other.URL + "/rules"} {
		if rep.Responses[hop] != 1 {
			t.Errorf("%s is in %d records, want 1: %v", hop, rep.Responses[hop], rep.Responses)
		}
	}
	mustVerify(t, "--db", db, "--warc", dir)

	// A page's result deleted: the page is in the archive for no result,
	// and said to be; the hops are not.
	bdb, err := bolt.Open(db, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		results := tx.Bucket([]byte("results"))
		return results.ForEach(func(k, v []byte) error {
			if bytes.Contains(v, []byte(site.URL+"/a")) {
				return results.Delete(k)
			}
			return nil
		})
	})
	bdb.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, t.Context(), "verify", "--db", db, "--warc", dir)
	if r.code != cli.ExitError || !strings.Contains(r.stdout, "problem: "+site.URL+"/a is in the archive (1 records) but has no result in the database") ||
		strings.Contains(r.stdout, "robots-file") || strings.Contains(r.stdout, "/rules") {
		t.Errorf("verify of an archive with a page the database lost: want it named, and no hop, got %s", r)
	}
}
