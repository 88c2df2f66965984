package e2e

// Helpers of the crash and disk tests (crash_cli_test.go, disk_cli_test.go):
// the site they crawl, a real crawl process they can kill, the site's
// request logs read as fetches, and verifyClean, the invariants a crawl's
// file and archive keep whatever happened to the process.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
)

// crashSite is the site the crash and disk tests crawl: a demosite of
// healthy hosts plus the hosts a crawl must survive, a dead one (every
// live page links one of its 20 URLs), a 10%-flaky one and one that
// throttles with 429 above 10 requests a second; and bulky hosts, whose
// pages are large and do not compress, so that a crawl of a few hundred
// pages fills WARC files of the smallest --warc-size (1 MiB) several
// times over: the demosite's pages are 1 KB a record once compressed.
type crashSite struct {
	*demosite.Site
	bulky []*bulkyHost
}

func startCrashSite(t testing.TB, healthy, pages, bulkyHosts, bulkyPages int, seed int64) *crashSite {
	t.Helper()
	specs := demosite.BenchSpecs(healthy, pages, false, 0)
	specs = append(specs,
		demosite.HostSpec{Name: "dead", Pages: 20, Behavior: demosite.Dead},
		demosite.HostSpec{Name: "flaky", Pages: 20, Behavior: demosite.Flaky, FlakyRate: 0.1},
		demosite.HostSpec{Name: "throttled", Pages: 20, Behavior: demosite.Throttling, MaxRPS: 10, RetryAfterSeconds: 1})
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: seed, DeadLinksPerPage: 1})
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	t.Cleanup(func() {
		if err := site.Close(); err != nil {
			t.Errorf("close demo site: %v", err)
		}
	})
	s := &crashSite{Site: site}
	for i := range bulkyHosts {
		s.bulky = append(s.bulky, startBulky(t, bulkyPages, 48<<10, uint64(seed)+uint64(i)))
	}
	return s
}

// Roots are the seeds: every host's root.
func (s *crashSite) Roots() []string {
	roots := s.Site.Roots()
	for _, b := range s.bulky {
		roots = append(roots, b.url("/"))
	}
	return roots
}

// pages are the URLs of every page the site serves, and whether the host
// serving it always answers (healthy and bulky hosts).
func (s *crashSite) pages() map[string]bool {
	out := map[string]bool{}
	for _, h := range s.Hosts() {
		if h.Spec().Behavior == demosite.Dead {
			continue
		}
		for i := range h.Spec().Pages {
			out[h.PageURL(i)] = h.Spec().Behavior == demosite.Healthy
		}
	}
	for _, b := range s.bulky {
		for i := range b.pages {
			out[b.url(bulkyPath(i))] = true
		}
	}
	return out
}

// requests is how many requests (connections, for a dead host) the site
// has logged.
func (s *crashSite) requests() int {
	n := 0
	for _, h := range s.Hosts() {
		n += h.RequestCount()
	}
	for _, b := range s.bulky {
		n += b.requestCount()
	}
	return n
}

// answer is one answer a live host gave a page request.
type answer struct {
	at     time.Time
	status int
}

// answers are the site's answers of 200 or 304 to page requests
// (robots.txt and the private page aside) logged in [from, to), by URL:
// the answers a crawl stores. Failed attempts (500, 429) are retries by
// design and are left out.
func (s *crashSite) answers(from, to time.Time) map[string][]answer {
	out := map[string][]answer{}
	add := func(base string, log []demosite.Request) {
		for _, r := range log {
			if r.Path == "" || r.Path == "/robots.txt" || r.Path == demosite.PrivatePath ||
				r.Time.Before(from) || !r.Time.Before(to) || (r.Status != 200 && r.Status != 304) {
				continue
			}
			out[base+r.Path] = append(out[base+r.Path], answer{at: r.Time, status: r.Status})
		}
	}
	for _, h := range s.Hosts() {
		add(h.BaseURL(), h.Requests())
	}
	for _, b := range s.bulky {
		add(b.url(""), b.requests())
	}
	return out
}

// bulkyHost serves pages "/" and "/b/1"... of size bytes of random text,
// each linking the next two, with an ETag that change moves on.
type bulkyHost struct {
	srv   *httptest.Server
	pages int
	size  int
	seed  uint64
	mu    sync.Mutex
	gen   int
	log   []demosite.Request
}

func startBulky(t testing.TB, pages, size int, seed uint64) *bulkyHost {
	b := &bulkyHost{pages: pages, size: size, seed: seed}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve)) // on 127.0.0.1
	t.Cleanup(b.srv.Close)
	return b
}

func bulkyPath(i int) string {
	if i == 0 {
		return "/"
	}
	return "/b/" + strconv.Itoa(i)
}

func (b *bulkyHost) url(path string) string { return b.srv.URL + path }

// change gives every page new content and a new ETag.
func (b *bulkyHost) change() {
	b.mu.Lock()
	b.gen++
	b.mu.Unlock()
}

func (b *bulkyHost) requests() []demosite.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.log)
}

func (b *bulkyHost) requestCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.log)
}

func (b *bulkyHost) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	b.mu.Lock()
	gen := b.gen
	b.mu.Unlock()
	i := -1
	for n := range b.pages {
		if r.URL.Path == bulkyPath(n) {
			i = n
		}
	}
	status := http.StatusOK
	etag := fmt.Sprintf(`"b%d-g%d"`, i, gen)
	switch {
	case i < 0:
		status = http.StatusNotFound
	case r.Header.Get("If-None-Match") == etag:
		status = http.StatusNotModified
	}
	// Logged before the answer is written, as demosite does: a client
	// that has its answer finds its request in the log.
	b.mu.Lock()
	b.log = append(b.log, demosite.Request{Time: now, Method: r.Method, Path: r.URL.Path, RequestURI: r.RequestURI,
		Status: status, UserAgent: r.UserAgent()})
	b.mu.Unlock()
	if status != http.StatusOK {
		w.WriteHeader(status)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("ETag", etag)
	var body bytes.Buffer
	fmt.Fprintf(&body, "<!DOCTYPE html>\n<html><head><title>bulky page %d</title></head><body>\n", i)
	for _, next := range []int{(i + 1) % b.pages, (i + 2) % b.pages} {
		fmt.Fprintf(&body, "<a href=\"%s\">page %d</a>\n", bulkyPath(next), next)
	}
	body.WriteString("<p>")
	rng := rand.New(rand.NewPCG(b.seed, uint64(i)<<16|uint64(gen)))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	for range b.size {
		body.WriteByte(letters[rng.IntN(len(letters))])
	}
	body.WriteString("</p></body></html>\n")
	w.Header().Set("Content-Length", strconv.Itoa(body.Len()))
	w.Write(body.Bytes())
}

// crashArgs are a crawl of site into db that ends by itself in a few
// seconds: short timeouts and rests, so that the dead host is given up on
// quickly, and a short Retry-After cap for the throttling host. A failed
// attempt is retried once, soon, with as many retries allowed as first
// attempts: the retry budget lives in the process, so a run resumed with
// only retries left on a host starts from the budget's floor and earns
// more from the host's healthy answers (hence also a flaky host that
// fails only one request in ten, which earns them quickly).
func crashArgs(db string, site *crashSite, extra ...string) []string {
	args := []string{"crawl", "--db", db, "--allow-private", "--workers", "8", "--delay", "10ms",
		"--timeout", "1s", "--connect-timeout", "1s",
		"--breaker-threshold", "3", "--breaker-rest", "500ms", "--give-up-after", "1s",
		"--retries", "1", "--retry-budget", "1", "--retry-base", "50ms", "--retry-max", "500ms",
		"--log-format", "text", "--log-level", "warn", "--progress", "never", "--sitemaps=false",
		"--max-depth", "-1"} // the crash sites chain their pages, deeper than the default 20 hops
	args = append(args, extra...)
	return append(args, site.Roots()...)
}

// proc is one crawl process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	exited         chan error // Wait's error, once
	started        time.Time
}

func startProc(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	return startProcAs(t, nil, bin, args...)
}

// startProcAs starts the crawl as the user cred names (nil: this one).
func startProcAs(t testing.TB, cred *syscall.Credential, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin, args...), exited: make(chan error, 1)}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if cred != nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.started = time.Now()
	go func() { p.exited <- p.cmd.Wait() }()
	t.Cleanup(func() { p.cmd.Process.Kill() }) // a test that failed half way leaves no crawl behind
	return p
}

// outcome is how a process ended: its exit code, or the signal that
// killed it.
type outcome struct {
	code   int
	signal syscall.Signal
	err    error
}

func outcomeOf(err error) outcome {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return outcome{}
	case errors.As(err, &ee):
		ws := ee.Sys().(syscall.WaitStatus)
		if ws.Signaled() {
			return outcome{code: -1, signal: ws.Signal(), err: err}
		}
		return outcome{code: ws.ExitStatus(), err: err}
	}
	return outcome{code: -1, err: err}
}

// wait waits up to d for the process to end.
func (p *proc) wait(t testing.TB, d time.Duration) outcome {
	t.Helper()
	select {
	case err := <-p.exited:
		return outcomeOf(err)
	case <-time.After(d):
		p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("crawl still running after %s:\n%s", d, p.output())
	}
	return outcome{}
}

func (p *proc) output() string {
	return fmt.Sprintf("--- stdout:\n%s--- stderr:\n%s", p.stdout.String(), p.stderr.String())
}

// duplicates checks that every page answered more than once in answers
// was asked again only after a kill that caught the answer before in
// flight: a kill that came after it, soon enough that its result may not
// have been committed yet (a commit gathers answers for 100 ms, then
// flushes the WARC file and the database; 1 s allows for a loaded
// machine), and before the next answer. A request the crawler sent just before a kill
// can be logged by the site just after it (the site's handler runs in
// this process, under the race detector), hence the slack. It returns the
// number of repeats, the most of one URL, the most one kill caught and the
// longest time from a caught answer to its kill.
func duplicates(t testing.TB, answers map[string][]answer, kills []time.Time) (total, mostURL, mostKill int, maxLag time.Duration) {
	t.Helper()
	const slack, window = 250 * time.Millisecond, time.Second
	caught := map[time.Time]int{}
	for u, as := range answers {
		slices.SortFunc(as, func(a, b answer) int { return a.at.Compare(b.at) })
		for i := 1; i < len(as); i++ {
			prev, next := as[i-1].at, as[i].at
			k := slices.IndexFunc(kills, func(k time.Time) bool { return k.After(prev.Add(-slack)) })
			if k < 0 || !kills[k].Before(next) || kills[k].Sub(prev) > window {
				t.Errorf("%s answered at %s and asked again at %s with no kill that could have caught it between: "+
					"a result was lost or the URL queued twice", u, prev.Format("15:04:05.000"), next.Format("15:04:05.000"))
				continue
			}
			caught[kills[k]]++
			if lag := kills[k].Sub(prev); lag > maxLag {
				maxLag = lag
			}
		}
		total += len(as) - 1
		mostURL = max(mostURL, len(as)-1)
	}
	for _, n := range caught {
		mostKill = max(mostKill, n)
	}
	return total, mostURL, mostKill, maxLag
}

// results reads every stored result of the crawl in db.
func results(t testing.TB, db string) map[string]*store.Result {
	t.Helper()
	d, err := storage.Open(db, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := map[string]*store.Result{}
	if err := d.ForEachResult(func(r *store.Result) error { out[r.URL] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkSiteDone asserts that the crawl in db has a result for every page
// of the site, and that every page of a host that always answers has an
// answer (200, or 304 to a refresh): every reachable page was fetched. It
// returns the results.
func checkSiteDone(t testing.TB, db string, site *crashSite) map[string]*store.Result {
	t.Helper()
	res := results(t, db)
	pages := site.pages()
	missing := 0
	for u, answers := range pages {
		r, ok := res[u]
		switch {
		case !ok:
			if missing++; missing <= 10 {
				t.Errorf("%s: no result", u)
			}
		case answers && r.Status != 200 && r.Status != 304:
			t.Errorf("%s: status %d (%s %s), want the page", u, r.Status, r.ErrorClass, r.Error)
		}
	}
	if missing > 0 {
		t.Errorf("%d of the site's %d pages have no result", missing, len(pages))
	}
	return res
}

// verifyClean asserts the invariants of a crawl's file, and of its archive
// when warcDir is not "": they hold after any run, however it ended (the
// archive's once that file has been resumed: a killed run leaves its WARC
// file open for the next to finish). The file: bbolt's own check; the
// counters equal what they count (results, queue entries, per host and in
// all); no URL is both queued and done but a refresh; every URL seen is
// done, queued or deferred. The archive: warc.Check finds no problem and no
// unfinished file, every page done with an answer is in it, and nothing is
// in it that the file does not have done. It returns what warc.Check
// found, nil without warcDir: reading an archive back is the slow part.
func verifyClean(t testing.TB, db, warcDir string) *warc.Report {
	t.Helper()
	args := []string{"verify", "--db", db}
	if warcDir != "" {
		args = append(args, "--warc", warcDir)
	}
	if r := runCLI(t, context.Background(), args...); r.code != cli.ExitOK || !strings.HasSuffix(r.stdout, "ok\n") {
		t.Errorf("breakwater %s: %s", strings.Join(args, " "), r)
	}
	b, err := bolt.Open(db, 0o644, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatalf("verify %s: %v", db, err)
	}
	err = b.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			t.Errorf("verify %s: bbolt: %v", db, err)
		}
		return nil
	})
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("verify %s: %v", db, err)
	}

	d, err := storage.Open(db, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("verify %s: %v", db, err)
	}
	defer d.Close()
	counts, err := d.Counts()
	if err != nil {
		t.Fatalf("verify %s: %v", db, err)
	}
	done := map[string]*store.Result{}
	var failed int64
	if err := d.ForEachResult(func(r *store.Result) error {
		if _, dup := done[r.URL]; dup {
			t.Errorf("verify %s: %s has two results", db, r.URL)
		}
		done[r.URL] = r
		if r.Failed() {
			failed++
		}
		return nil
	}); err != nil {
		t.Fatalf("verify %s: %v", db, err)
	}
	if int64(len(done)) != counts.Fetched+counts.Failed || failed != counts.Failed {
		t.Errorf("verify %s: counts say %d fetched and %d failed; the results are %d, %d of them failed",
			db, counts.Fetched, counts.Failed, len(done), failed)
	}
	var sum store.HostCounts
	var hosts []string
	if err := d.ForEachHost(func(host string, c store.HostCounts) error {
		hosts = append(hosts, host)
		sum.Queued, sum.Deferred, sum.Fetched, sum.Failed = sum.Queued+c.Queued, sum.Deferred+c.Deferred,
			sum.Fetched+c.Fetched, sum.Failed+c.Failed
		items, err := d.LoadQueued(host, 0, 1<<30)
		if err != nil {
			return err
		}
		if int64(len(items)) != c.Queued {
			t.Errorf("verify %s: host %s counts %d queued, its queue holds %d", db, host, c.Queued, len(items))
		}
		return nil
	}); err != nil {
		t.Fatalf("verify %s: %v", db, err)
	}
	if sum.Queued != counts.Queued || sum.Deferred != counts.Deferred || sum.Fetched != counts.Fetched || sum.Failed != counts.Failed {
		t.Errorf("verify %s: the hosts' counts add up to %+v, the crawl's are %+v", db, sum, counts)
	}
	queued := map[string]bool{}
	refreshes := int64(0) // queued URLs that replace their result by design
	for _, host := range hosts {
		items, err := d.LoadQueued(host, 0, 1<<30)
		if err != nil {
			t.Fatalf("verify %s: %v", db, err)
		}
		for _, it := range items {
			if queued[it.URL] {
				t.Errorf("verify %s: %s is queued twice", db, it.URL)
			}
			queued[it.URL] = true
			switch _, isDone := done[it.URL]; {
			case it.Replaces != 0:
				refreshes++
			case isDone:
				t.Errorf("verify %s: %s is both queued and done", db, it.URL)
			}
		}
	}
	// Deferred URLs are not listed one by one here; the bounds still catch
	// a URL lost from every bucket, and equality holds when none is
	// deferred.
	inBuckets := counts.Fetched + counts.Failed + counts.Queued - refreshes + counts.Deferred
	if counts.Seen < counts.Fetched+counts.Failed || counts.Seen > inBuckets ||
		(counts.Deferred == 0 && counts.Seen != inBuckets) {
		t.Errorf("verify %s: %d URLs seen, but %d done, %d queued (%d of them refreshes) and %d deferred",
			db, counts.Seen, counts.Fetched+counts.Failed, counts.Queued, refreshes, counts.Deferred)
	}

	if warcDir == "" {
		return nil
	}
	checkMu.Lock()
	rep, err := warc.Check(warcDir)
	checkMu.Unlock()
	if err != nil {
		t.Fatalf("verify %s: %v", warcDir, err)
	}
	for _, p := range rep.Problems {
		t.Errorf("verify %s: %s", warcDir, p)
	}
	for _, f := range rep.Unfinished {
		t.Errorf("verify %s: unfinished file %s", warcDir, f)
	}
	for u, r := range done {
		if archived(r) && rep.Responses[u] == 0 {
			t.Errorf("verify %s: %s is done (status %d) but in no record", warcDir, u, r.Status)
		}
	}
	for u := range rep.Responses {
		if _, ok := done[u]; !ok && !strings.HasSuffix(u, "/robots.txt") {
			t.Errorf("verify %s: %s is archived but not done in %s", warcDir, u, db)
		}
	}
	return rep
}

// checkMu serializes warc.Check for the disk tests, which run in
// parallel: gowarc's reader sets a global of package uuid
// (uuid.EnableRandPool) each time one is made, and two at once race.
var checkMu sync.Mutex

// archived reports whether r's answer is in the archive: the URL got an
// answer, and not one of its host's robots.txt (a URL that fails because
// robots.txt could not be had was never asked; robots.txt's own answer is
// archived under its URL).
func archived(r *store.Result) bool {
	return r.Status != 0 && !strings.HasSuffix(r.FinalURL, "/robots.txt") && !strings.Contains(r.Error, "robots.txt")
}

// archivedOnce asserts that every page in want (URL -> how many times a
// run stored an answer for it) is in exactly that many response or revisit
// records of rep: no capture was lost, and none was written twice.
func archivedOnce(t testing.TB, rep *warc.Report, want map[string]int) {
	t.Helper()
	bad := 0
	for u, n := range want {
		if got := rep.Responses[u]; got != n {
			if bad++; bad <= 10 {
				t.Errorf("%s is in %d response or revisit records, want %d", u, got, n)
			}
		}
	}
	if bad > 10 {
		t.Errorf("... and %d more URLs with the wrong number of records", bad-10)
	}
}

// dirNames lists the names in dir; a missing directory lists none.
func dirNames(dir string) []string {
	entries, _ := os.ReadDir(dir)
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
