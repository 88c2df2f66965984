package crawl_test

// End-to-end tests of the engine: real crawls of a demosite on loopback into
// a bbolt file in t.TempDir(), judged by the file's results and by the
// site's own request logs (what actually reached each host).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"breakwater/backend"
	"breakwater/breaker"
	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
)

// testLogger discards engine logs unless BREAKWATER_TEST_LOG is set.
func testLogger(t testing.TB) *slog.Logger {
	t.Helper()
	if os.Getenv("BREAKWATER_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

var _ io.Writer = tWriter{}

func startSite(t testing.TB, specs []demosite.HostSpec, so demosite.SiteOptions) *demosite.Site {
	t.Helper()
	site, err := demosite.Start(specs, so)
	if err != nil {
		t.Fatalf("start demo site: %v", err)
	}
	t.Cleanup(func() {
		if err := site.Close(); err != nil {
			t.Errorf("close demo site: %v", err)
		}
	})
	return site
}

// openDB opens a fresh file in t.TempDir() (or reopens path when given).
func openDB(t testing.TB, path string) *storage.DB {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "crawl.db")
	}
	db, err := storage.Open(path, nil)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
	})
	return db
}

// testOptions are fast defaults for loopback crawls: short timeouts and
// delays, a breaker that trips and rests quickly, retries in milliseconds.
func testOptions(t testing.TB, seeds ...string) crawl.Options {
	t.Helper()
	o := crawl.DefaultOptions()
	o.Seeds = seeds
	o.AllowPrivate = true
	o.Workers = 8
	o.Delay = 20 * time.Millisecond
	o.Timeout = 2 * time.Second
	o.ConnectTimeout = 500 * time.Millisecond
	o.StopGrace = 500 * time.Millisecond
	o.Breaker = breaker.Config{Threshold: 3, Rest: 2 * time.Second, Probes: 1}
	o.GiveUpAfter = 3 * time.Second
	o.RetryBase = 50 * time.Millisecond
	o.RetryMax = time.Second
	o.Logger = testLogger(t)
	// These tests count every request a host gets; the demo site has no
	// sitemaps. sitemaps_test.go turns them on.
	o.Sitemaps = false
	return o
}

// runCrawl runs one engine to its end; ctx bounds it so a hung engine fails
// the test instead of the whole package.
func runCrawl(t testing.TB, ctx context.Context, db *storage.DB, opts crawl.Options) crawl.Summary {
	t.Helper()
	e, err := crawl.New(opts, backend.File(db))
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	sum, err := e.Run(ctx)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return sum
}

func testContext(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// results returns every stored result keyed by host key and canonical path
// ("127.0.0.1:123 /p/4"), failing on two results for one page.
func results(t testing.TB, db *storage.DB) map[string]store.Result {
	t.Helper()
	out := map[string]store.Result{}
	err := db.ForEachResult(func(r *store.Result) error {
		k := pageKey(t, r.URL)
		if prev, dup := out[k]; dup {
			t.Errorf("two results for %s: %q and %q", k, prev.URL, r.URL)
		}
		out[k] = *r
		return nil
	})
	if err != nil {
		t.Fatalf("read results: %v", err)
	}
	return out
}

// pageKey identifies a URL by host key and canonical path, so "/p/2?" and
// "/p/2" are one page.
func pageKey(t testing.TB, raw string) string {
	t.Helper()
	canon, err := frontier.Canonicalize(raw)
	if err != nil {
		t.Fatalf("canonicalize %q: %v", raw, err)
	}
	host, err := frontier.HostKey(canon)
	if err != nil {
		t.Fatalf("host of %q: %v", raw, err)
	}
	u, err := url.Parse(canon)
	if err != nil {
		t.Fatalf("parse %q: %v", canon, err)
	}
	return host + " " + u.Path
}

func hostKey(t testing.TB, h *demosite.Host) string {
	t.Helper()
	k, err := frontier.HostKey(h.BaseURL() + "/")
	if err != nil {
		t.Fatalf("host key of %s: %v", h.BaseURL(), err)
	}
	return k
}

// pageRequests counts a host's requests per path, robots.txt excluded.
func pageRequests(h *demosite.Host) map[string]int {
	out := map[string]int{}
	for _, r := range h.Requests() {
		if r.Path != "/robots.txt" {
			out[r.Path]++
		}
	}
	return out
}

func robotsRequests(h *demosite.Host) int {
	n := 0
	for _, r := range h.Requests() {
		if r.Path == "/robots.txt" {
			n++
		}
	}
	return n
}

// pagePaths lists the paths of the first n pages of a demosite host.
func pagePaths(n int) []string {
	out := []string{"/"}
	for i := 1; i < n; i++ {
		out = append(out, fmt.Sprintf("/p/%d", i))
	}
	return out
}

func counts(t testing.TB, db *storage.DB) store.Counts {
	t.Helper()
	c, err := db.Counts()
	if err != nil {
		t.Fatalf("counts: %v", err)
	}
	return c
}

// checkNoURLLost asserts the file's conservation law: every URL ever seen
// is fetched, failed, queued or deferred.
func checkNoURLLost(t testing.TB, db *storage.DB) {
	t.Helper()
	c := counts(t, db)
	if got := c.Fetched + c.Failed + c.Queued + c.Deferred; got != c.Seen {
		t.Errorf("counts %+v: fetched+failed+queued+deferred = %d, want seen = %d", c, got, c.Seen)
	}
}

func transitions(t testing.TB, db *storage.DB) []store.Transition {
	t.Helper()
	var out []store.Transition
	err := db.ForEachTransition(func(tr store.Transition) error {
		out = append(out, tr)
		return nil
	})
	if err != nil {
		t.Fatalf("read transitions: %v", err)
	}
	return out
}

func healthySpecs(n, pages int) []demosite.HostSpec {
	specs := make([]demosite.HostSpec, n)
	for i := range specs {
		specs[i] = demosite.HostSpec{Name: fmt.Sprintf("healthy-%d", i), Pages: pages}
	}
	return specs
}

// checkAllPagesOnce asserts that each listed host had every one of its pages
// requested exactly once and nothing else but one robots.txt.
func checkAllPagesOnce(t testing.TB, hosts ...*demosite.Host) {
	t.Helper()
	for _, h := range hosts {
		got := pageRequests(h)
		for _, p := range pagePaths(h.Spec().Pages) {
			if got[p] != 1 {
				t.Errorf("%s: %s requested %d times, want 1", h.Name, p, got[p])
			}
			delete(got, p)
		}
		if len(got) > 0 {
			t.Errorf("%s: unexpected requests %v", h.Name, got)
		}
		if n := robotsRequests(h); n != 1 {
			t.Errorf("%s: robots.txt requested %d times, want 1", h.Name, n)
		}
	}
}

func TestCrawlFetchesEveryPageOnce(t *testing.T) {
	t.Parallel()
	site := startSite(t, healthySpecs(3, 20), demosite.SiteOptions{Seed: 1})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)

	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true (summary %+v)", sum)
	}
	if sum.Counts.Queued != 0 || sum.Counts.Deferred != 0 {
		t.Errorf("counts %+v: want nothing queued or deferred", sum.Counts)
	}
	if want := int64(len(site.URLs())); sum.Counts.Fetched != want || sum.Counts.Seen != want {
		t.Errorf("counts %+v: want fetched = seen = %d (noise links must not add URLs)", sum.Counts, want)
	}
	checkAllPagesOnce(t, site.Hosts()...)

	res := results(t, db)
	roots := map[string]bool{}
	for _, r := range site.Roots() {
		roots[pageKey(t, r)] = true
	}
	for _, h := range site.Hosts() {
		for i, p := range pagePaths(h.Spec().Pages) {
			k := hostKey(t, h) + " " + p
			r, ok := res[k]
			if !ok {
				t.Errorf("no result for %s", k)
				continue
			}
			checkPageResult(t, r, fmt.Sprintf("%s page %d", h.Name, i), roots[k])
		}
	}
}

func checkPageResult(t testing.TB, r store.Result, title string, seed bool) {
	t.Helper()
	switch {
	case r.Status != 200 || r.ErrorClass != "":
		t.Errorf("%s: status %d class %q, want 200 and no error", r.URL, r.Status, r.ErrorClass)
	case r.Title != title:
		t.Errorf("%s: title %q, want %q", r.URL, r.Title, title)
	case !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(r.SHA256):
		t.Errorf("%s: sha256 %q is not 64 hex digits", r.URL, r.SHA256)
	case r.Outlinks <= 0:
		t.Errorf("%s: outlinks %d, want > 0", r.URL, r.Outlinks)
	case r.Attempts != 1:
		t.Errorf("%s: attempts %d, want 1", r.URL, r.Attempts)
	case seed && r.Depth != 0, !seed && r.Depth < 1:
		t.Errorf("%s: depth %d (seed %v)", r.URL, r.Depth, seed)
	case r.Length <= 0 || r.FetchedAt.IsZero():
		t.Errorf("%s: length %d fetched_at %v", r.URL, r.Length, r.FetchedAt)
	}
}

func TestCrawlScope(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		pages int
		opts  func(o *crawl.Options)
		seeds func(s *demosite.Site) []string
		// want maps host index to the page paths it must have served,
		// each exactly once; hosts not listed must get no request at all.
		want map[int][]string
	}{
		{
			name:  "seed host only",
			pages: 12,
			seeds: func(s *demosite.Site) []string { return s.Roots()[:1] },
			want:  map[int][]string{0: pagePaths(12)},
		},
		{
			name:  "max depth 0 fetches only the seeds",
			pages: 12,
			opts:  func(o *crawl.Options) { o.MaxDepth = 0 },
			seeds: func(s *demosite.Site) []string { return s.Roots()[:2] },
			want:  map[int][]string{0: {"/"}, 1: {"/"}},
		},
		{
			// Only "/" and /p/1 … /p/9 match; they chain through i -> i+1.
			name:  "include",
			pages: 20,
			opts: func(o *crawl.Options) {
				o.Include = []*regexp.Regexp{regexp.MustCompile(`/(p/[0-9])?$`)}
			},
			seeds: func(s *demosite.Site) []string { return s.Roots()[:1] },
			want:  map[int][]string{0: pagePaths(10)},
		},
		{
			name:  "exclude",
			pages: 20,
			opts: func(o *crawl.Options) {
				o.Exclude = []*regexp.Regexp{regexp.MustCompile(`/p/1[0-9]`), regexp.MustCompile(`/p/[2-5]\b`)}
			},
			seeds: func(s *demosite.Site) []string { return s.Roots()[:1] },
			want:  map[int][]string{0: {"/", "/p/1", "/p/6", "/p/7", "/p/8", "/p/9"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			site := startSite(t, healthySpecs(3, tt.pages), demosite.SiteOptions{Seed: 2, LinksPerPage: 6})
			db := openDB(t, "")
			opts := testOptions(t, tt.seeds(site)...)
			if tt.opts != nil {
				tt.opts(&opts)
			}
			sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)
			if !sum.Exhausted {
				t.Errorf("Exhausted = false, want true")
			}
			for i, h := range site.Hosts() {
				want, listed := tt.want[i]
				got := pageRequests(h)
				if !listed {
					if n := h.RequestCount(); n != 0 {
						t.Errorf("%s is out of scope but got %d requests: %v", h.Name, n, got)
					}
					continue
				}
				wantSet := map[string]int{}
				for _, p := range want {
					wantSet[p] = 1
				}
				if !mapsEqual(got, wantSet) {
					t.Errorf("%s: requests %v, want each of %v once", h.Name, got, want)
				}
			}
			checkNoURLLost(t, db)
		})
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestCrawlMaxPages(t *testing.T) {
	t.Parallel()
	const maxPages = 7
	site := startSite(t, healthySpecs(3, 20), demosite.SiteOptions{Seed: 3})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)
	opts.MaxPages = maxPages

	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if sum.Exhausted {
		t.Errorf("Exhausted = true, want false: pages were left")
	}
	requested := 0
	for _, h := range site.Hosts() {
		for _, n := range pageRequests(h) {
			requested += n
		}
	}
	if requested != maxPages {
		t.Errorf("%d page requests reached the site, want exactly --max-pages = %d", requested, maxPages)
	}
	if sum.Counts.Fetched != maxPages || sum.Counts.Queued == 0 {
		t.Errorf("counts %+v: want %d fetched and the rest queued", sum.Counts, maxPages)
	}
	checkNoURLLost(t, db)
}

func TestCrawlRobots(t *testing.T) {
	t.Parallel()
	specs := healthySpecs(2, 10)
	specs[0].Robots = "User-agent: *\nDisallow: /private/\n"
	specs[0].PrivatePage = true
	site := startSite(t, specs, demosite.SiteOptions{Seed: 4})
	db := openDB(t, "")

	sum := runCrawl(t, testContext(t, 20*time.Second), db, testOptions(t, site.Roots()...))

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true")
	}
	guarded := site.Hosts()[0]
	if n := pageRequests(guarded)[demosite.PrivatePath]; n != 0 {
		t.Errorf("%s requested %d times despite robots.txt", demosite.PrivatePath, n)
	}
	// Both hosts: robots.txt once (one serves it, one answers 404), every page once.
	checkAllPagesOnce(t, site.Hosts()...)
	r, ok := results(t, db)[hostKey(t, guarded)+" "+demosite.PrivatePath]
	switch {
	case !ok:
		t.Errorf("no result for the disallowed %s", demosite.PrivatePath)
	case r.ErrorClass != "robots" || r.Status != 0:
		t.Errorf("disallowed page recorded as status %d class %q, want class robots and no status", r.Status, r.ErrorClass)
	}
}

func TestCrawlResume(t *testing.T) {
	t.Parallel()
	site := startSite(t, healthySpecs(2, 15), demosite.SiteOptions{Seed: 5})
	path := filepath.Join(t.TempDir(), "crawl.db")

	db := openDB(t, path)
	opts := testOptions(t, site.Roots()...)
	opts.MaxPages = 10
	first := runCrawl(t, testContext(t, 20*time.Second), db, opts)
	if first.Exhausted || first.Counts.Fetched == 0 || first.Counts.Queued == 0 {
		t.Fatalf("first run: %+v, want a partial crawl", first)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openDB(t, path)
	opts = testOptions(t) // no seeds: the file remembers them and their scope
	second := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !second.Exhausted {
		t.Errorf("second run: Exhausted = false, want true")
	}
	if want := int64(len(site.URLs())); second.Counts.Fetched != want {
		t.Errorf("after both runs: %d fetched, want %d", second.Counts.Fetched, want)
	}
	// MaxPages lets in-flight requests finish, so nothing is fetched twice,
	// and the cached robots.txt carries over.
	checkAllPagesOnce(t, site.Hosts()...)
	checkNoURLLost(t, db)
}

func TestCrawlCancel(t *testing.T) {
	t.Parallel()
	site := startSite(t, healthySpecs(3, 20), demosite.SiteOptions{Seed: 6})
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openDB(t, path)
	opts := testOptions(t, site.Roots()...)
	opts.Delay = 50 * time.Millisecond
	ctx, cancel := context.WithCancel(testContext(t, 20*time.Second))
	defer cancel()

	cancelled := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil && total(site) < 12 {
			time.Sleep(2 * time.Millisecond)
		}
		cancelled <- time.Now()
		cancel()
	}()
	sum := runCrawl(t, ctx, db, opts)
	stopped := time.Since(<-cancelled)

	if sum.Exhausted {
		t.Errorf("Exhausted = true after a cancel mid-crawl")
	}
	if limit := opts.StopGrace + time.Second; stopped > limit {
		t.Errorf("Run returned %v after cancel, want under %v", stopped, limit)
	}
	checkNoURLLost(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Nothing was lost: a second run completes the crawl, refetching at most
	// the requests in flight at the stop (one per host).
	db = openDB(t, path)
	second := runCrawl(t, testContext(t, 20*time.Second), db, testOptions(t))
	if !second.Exhausted || second.Counts.Fetched != int64(len(site.URLs())) {
		t.Errorf("resumed run: %+v, want exhausted with %d fetched", second, len(site.URLs()))
	}
	twice := 0
	for _, h := range site.Hosts() {
		for p, n := range pageRequests(h) {
			if n > 1 {
				twice += n - 1
				t.Logf("%s %s requested %d times", h.Name, p, n)
			}
		}
	}
	if twice > len(site.Hosts())*opts.HostConcurrency {
		t.Errorf("%d refetches, want at most the %d requests that can be in flight", twice, len(site.Hosts()))
	}
}

func total(site *demosite.Site) int {
	n := 0
	for _, h := range site.Hosts() {
		n += h.RequestCount()
	}
	return n
}

// A crawl whose every seed is on an address the guard refuses is refused
// before it starts, naming a seed and the flag that allows it; nothing
// reaches the host. (A blocked address met later, by a link or a name
// resolving to it, is recorded "blocked": see TestProcessCompletes.)
func TestCrawlRefusesBlockedSeeds(t *testing.T) {
	t.Parallel()
	site := startSite(t, healthySpecs(1, 3), demosite.SiteOptions{Seed: 7})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()[0], "http://localhost:1/x")
	opts.AllowPrivate = false

	_, err := crawl.New(opts, backend.File(db))

	var blocked *crawl.SeedsBlockedError
	if !errors.As(err, &blocked) || blocked.Seeds != 2 ||
		!strings.Contains(err.Error(), site.Roots()[0]) || !strings.Contains(err.Error(), "--allow-private") {
		t.Fatalf("New = %v, want a SeedsBlockedError for both seeds naming one and --allow-private", err)
	}
	if n := total(site); n != 0 {
		t.Errorf("%d requests reached a loopback host with AllowPrivate off", n)
	}
	if c, err := db.Counts(); err != nil || c.Seen != 0 {
		t.Errorf("counts %+v, %v: want nothing queued", c, err)
	}
}
