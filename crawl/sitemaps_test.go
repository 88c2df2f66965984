package crawl_test

// Sitemaps end to end: crawls of a small site on a loopback httptest
// server, judged by what reached the server and what the file holds.

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"breakwater/crawl"
	"breakwater/sitemap"
	"breakwater/storage"
	"breakwater/store"
)

// smFile is one canned answer of a smSite.
type smFile struct {
	status      int // 0: 200
	contentType string
	body        []byte
}

// smSite serves files by path (404 for the rest) and counts the requests
// for each path.
type smSite struct {
	srv   *httptest.Server
	files map[string]smFile // set before the crawl; read-only while it runs
	mu    sync.Mutex
	hits  map[string]int
}

func newSMSite(t *testing.T) *smSite {
	t.Helper()
	s := &smSite{files: map[string]smFile{}, hits: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.mu.Unlock()
		f, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if f.contentType != "" {
			w.Header().Set("Content-Type", f.contentType)
		}
		if f.status != 0 {
			w.WriteHeader(f.status)
		}
		w.Write(f.body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *smSite) url(path string) string { return s.srv.URL + path }

func (s *smSite) hit(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

// page serves an HTML page at path linking to links (paths on the site).
func (s *smSite) page(path string, links ...string) {
	var b strings.Builder
	b.WriteString("<html><head><title>" + path + "</title></head><body>")
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s">%s</a>`, l, l)
	}
	b.WriteString("</body></html>")
	s.files[path] = smFile{contentType: "text/html", body: []byte(b.String())}
}

func (s *smSite) robots(lines ...string) {
	s.files["/robots.txt"] = smFile{contentType: "text/plain", body: []byte("User-agent: *\n" + strings.Join(lines, "\n") + "\n")}
}

// urlset is a sitemap of locs (paths on the site, or absolute URLs), each
// with lastmod 2024-01-02.
func (s *smSite) urlset(locs ...string) []byte {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		fmt.Fprintf(&b, "<url><loc>%s</loc><lastmod>2024-01-02</lastmod></url>\n", s.abs(l))
	}
	b.WriteString("</urlset>")
	return []byte(b.String())
}

func (s *smSite) index(locs ...string) []byte {
	var b strings.Builder
	b.WriteString(`<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
	for _, l := range locs {
		fmt.Fprintf(&b, "<sitemap><loc>%s</loc></sitemap>\n", s.abs(l))
	}
	b.WriteString("</sitemapindex>")
	return []byte(b.String())
}

func (s *smSite) abs(loc string) string {
	if strings.HasPrefix(loc, "/") {
		return s.url(loc)
	}
	return loc
}

func (s *smSite) xml(path string, body []byte) {
	s.files[path] = smFile{contentType: "application/xml", body: body}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sitemapOptions crawl from the site's root with sitemaps on.
func sitemapOptions(t *testing.T, s *smSite) crawl.Options {
	t.Helper()
	o := testOptions(t, s.url("/"))
	o.Sitemaps = true
	o.Delay = 0
	return o
}

// resultsByPath are the stored results of the site's URLs by path.
func resultsByPath(t *testing.T, s *smSite, db *storage.DB) map[string]store.Result {
	t.Helper()
	out := map[string]store.Result{}
	for _, r := range results(t, db) {
		if rest, ok := strings.CutPrefix(r.URL, s.srv.URL); ok {
			out[rest] = r
		} else {
			out[r.URL] = r
		}
	}
	return out
}

// A page no link leads to is fetched because the sitemap robots.txt names
// lists it; /sitemap.xml is then not guessed. A URL of another host in the
// sitemap stays out of the crawl's scope, and the sitemap's body is never
// read for HTML links, even served as text/html. The crawl is stopped by
// --max-pages after the seed and resumed: nothing is asked twice.
func TestSitemapFromRobotsFetchesUnlinkedPage(t *testing.T) {
	t.Parallel()
	s := newSMSite(t)
	s.robots("Allow: /", "Sitemap: "+s.url("/maps/site.xml"), "Sitemap: http://elsewhere.test/map.xml")
	s.page("/", "/a")
	s.page("/a")
	s.page("/hidden", "/linked-from-hidden")
	s.page("/linked-from-hidden")
	body := bytes.Replace(s.urlset("/hidden", "/a", "http://elsewhere.test/page"), []byte("</urlset>"),
		[]byte(`<url><loc>`+s.url("/a")+`</loc><a href="/trap">an unknown element</a></url></urlset>`), 1)
	s.files["/maps/site.xml"] = smFile{contentType: "text/html", body: body}
	s.page("/trap")
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openDB(t, path)
	opts := sitemapOptions(t, s)
	opts.MaxPages = 1
	if first := runCrawl(t, testContext(t, 20*time.Second), db, opts); first.Exhausted {
		t.Fatalf("first run %+v: want stopped by --max-pages", first)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, path)
	opts = sitemapOptions(t, s)
	opts.Seeds = nil
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !sum.Exhausted || sum.Failed != 0 {
		t.Errorf("summary %+v: want exhausted, nothing failed", sum)
	}
	for _, p := range []string{"/", "/a", "/hidden", "/linked-from-hidden", "/maps/site.xml"} {
		if n := s.hit(p); n != 1 {
			t.Errorf("%s requested %d times, want 1", p, n)
		}
	}
	if n := s.hit("/sitemap.xml"); n != 0 {
		t.Errorf("/sitemap.xml requested %d times although robots.txt names a sitemap", n)
	}
	if n := s.hit("/trap"); n != 0 {
		t.Errorf("/trap, an <a href> in the sitemap, requested %d times: links were extracted from a sitemap", n)
	}
	got := resultsByPath(t, s, db)
	if r := got["/maps/site.xml"]; r.Status != 200 || r.ErrorClass != "" || r.Outlinks != 4 || r.Depth != 1 {
		t.Errorf("sitemap result %+v: want 200, no class, 4 entries, depth (nesting) 1", r)
	}
	if r := got["/hidden"]; r.Status != 200 || r.Depth != 1 {
		t.Errorf("/hidden result %+v: want 200 at depth 1", r)
	}
	if r := got["/linked-from-hidden"]; r.Depth != 2 {
		t.Errorf("/linked-from-hidden at depth %d, want 2 (links count from the sitemap's pages)", r.Depth)
	}
	for _, out := range []string{"http://elsewhere.test/page", "http://elsewhere.test/map.xml"} {
		if r, ok := got[out]; ok {
			t.Errorf("an out-of-scope URL was queued: %+v", r)
		}
	}
	if n := s.hit("/robots.txt"); n != 1 {
		t.Errorf("robots.txt requested %d times, want 1 (cached in the file)", n)
	}
}

// Without a Sitemap: line, /sitemap.xml is asked for; a gzip sitemap is
// read by its content whatever its Content-Type says.
func TestSitemapFallbackGzipByContent(t *testing.T) {
	t.Parallel()
	s := newSMSite(t)
	s.robots("Disallow: /private/")
	s.page("/")
	s.page("/hidden")
	s.files["/sitemap.xml"] = smFile{contentType: "text/html", body: gzipBytes(t, s.urlset("/hidden", "/private/p"))}
	db := openDB(t, "")

	sum := runCrawl(t, testContext(t, 20*time.Second), db, sitemapOptions(t, s))

	if !sum.Exhausted {
		t.Errorf("summary %+v: want exhausted", sum)
	}
	if n := s.hit("/hidden"); n != 1 {
		t.Errorf("/hidden requested %d times, want 1 (listed only in the gzipped /sitemap.xml)", n)
	}
	if n := s.hit("/private/p"); n != 0 {
		t.Errorf("/private/p requested %d times: a sitemap's URLs pass robots.txt too", n)
	}
	if r := resultsByPath(t, s, db)["/sitemap.xml"]; r.ErrorClass != "" || r.Outlinks != 2 {
		t.Errorf("/sitemap.xml result %+v: want read, 2 entries", r)
	}
}

// A sitemap may be larger than --max-body: its cap is the sitemap limit.
func TestSitemapLargerThanMaxBody(t *testing.T) {
	t.Parallel()
	s := newSMSite(t)
	s.page("/")
	s.page("/hidden")
	padded := bytes.Replace(s.urlset("/hidden"), []byte("<url>"), append(bytes.Repeat([]byte(" "), 64<<10), "<url>"...), 1)
	s.xml("/sitemap.xml", padded)
	db := openDB(t, "")
	opts := sitemapOptions(t, s)
	opts.MaxBody = 4 << 10

	runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if r := resultsByPath(t, s, db)["/sitemap.xml"]; r.ErrorClass != "" || r.Truncated || r.Length != int64(len(padded)) {
		t.Errorf("/sitemap.xml recorded %+v, want all %d bytes read", r, len(padded))
	}
	if n := s.hit("/hidden"); n != 1 {
		t.Errorf("/hidden requested %d times, want 1", n)
	}
}

// Sitemap fetches pass robots.txt like any request.
func TestSitemapDisallowedByRobots(t *testing.T) {
	t.Parallel()
	s := newSMSite(t)
	s.robots("Disallow: /maps/", "Sitemap: "+s.url("/maps/site.xml"))
	s.page("/")
	s.page("/hidden")
	s.xml("/maps/site.xml", s.urlset("/hidden"))
	db := openDB(t, "")

	runCrawl(t, testContext(t, 20*time.Second), db, sitemapOptions(t, s))

	if n := s.hit("/maps/site.xml"); n != 0 {
		t.Errorf("a disallowed sitemap was requested %d times", n)
	}
	if r := resultsByPath(t, s, db)["/maps/site.xml"]; r.ErrorClass != "robots" {
		t.Errorf("disallowed sitemap recorded %+v, want class robots", r)
	}
}

// An index of indexes is followed to nesting 3: the top index (1) lists an
// index (2) that lists a urlset (3, read) and an index (3) whose sitemap
// (4) is not asked for, nor its page.
func TestSitemapIndexOfIndexesStopsAtDepthLimit(t *testing.T) {
	t.Parallel()
	s := newSMSite(t)
	s.robots("Allow: /")
	s.page("/")
	for _, p := range []string{"/from-1", "/from-3", "/from-4"} {
		s.page(p)
	}
	s.xml("/sitemap.xml", s.index("/idx-2.xml", "/set-2.xml"))
	s.xml("/set-2.xml", s.urlset("/from-1"))
	s.xml("/idx-2.xml", s.index("/set-3.xml", "/idx-3.xml"))
	s.xml("/set-3.xml", s.urlset("/from-3"))
	s.xml("/idx-3.xml", s.index("/set-4.xml"))
	s.xml("/set-4.xml", s.urlset("/from-4"))
	db := openDB(t, "")
	var logs syncBuffer
	opts := sitemapOptions(t, s)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, nil))

	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !sum.Exhausted || sum.Failed != 0 {
		t.Errorf("summary %+v: want exhausted, nothing failed", sum)
	}
	for _, p := range []string{"/sitemap.xml", "/idx-2.xml", "/set-2.xml", "/set-3.xml", "/idx-3.xml", "/from-1", "/from-3"} {
		if n := s.hit(p); n != 1 {
			t.Errorf("%s requested %d times, want 1", p, n)
		}
	}
	for _, p := range []string{"/set-4.xml", "/from-4"} {
		if n := s.hit(p); n != 0 {
			t.Errorf("%s, below the nesting limit, requested %d times", p, n)
		}
	}
	got := resultsByPath(t, s, db)
	for p, depth := range map[string]int{"/sitemap.xml": 1, "/idx-2.xml": 2, "/idx-3.xml": 3, "/set-3.xml": 3, "/from-3": 1} {
		if got[p].Depth != depth {
			t.Errorf("%s recorded at depth %d, want %d", p, got[p].Depth, depth)
		}
	}
	if !strings.Contains(logs.String(), "nested too deep") || !strings.Contains(logs.String(), "/idx-3.xml") {
		t.Errorf("the index cut off is not logged; logs:\n%s", logs.String())
	}
}

// bombBytes is a gzip file that inflates to about mib MiB: a valid urlset
// opening, then white space. It is mib copies of one small gzip member
// (readers take concatenated members as one stream), so it costs a few
// hundred bytes per MiB to make.
func bombBytes(t *testing.T, head string, mib int) []byte {
	t.Helper()
	out := gzipBytes(t, []byte(head))
	member := gzipBytes(t, bytes.Repeat([]byte(" "), 1<<20))
	for range mib {
		out = append(out, member...)
	}
	return out
}

// Malformed, oversized (by count, by bytes, and a gzip bomb) and missing
// sitemaps: each bad one is logged once at warn and recorded as class
// sitemap with none of its URLs queued; a missing one is stored but no
// failure of the run; the good one and the rest of the crawl go on.
func TestSitemapBadFilesAreSkipped(t *testing.T) {
	t.Parallel()
	s := newSMSite(t)
	bad := []string{"/malformed.xml", "/too-many.xml", "/too-big.xml", "/bomb.xml.gz", "/html.xml"}
	s.robots(append([]string{"Allow: /", "Sitemap: " + s.url("/good.xml"), "Sitemap: " + s.url("/missing.xml")},
		prefixAll("Sitemap: "+s.srv.URL, bad)...)...)
	s.page("/", "/a")
	s.page("/a")
	s.page("/hidden")
	s.xml("/good.xml", s.urlset("/hidden"))
	s.xml("/malformed.xml", []byte(`<urlset><url><loc>`+s.url("/from-malformed")+`</loc></url>`)) // never closed
	s.xml("/too-many.xml", s.urlset("/m1", "/m2", "/m3", "/m4"))
	// 256 MiB inflated from about 260 KB: under the body cap, so only the
	// decompression cap can stop it.
	bomb := bombBytes(t, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>`+s.url("/from-bomb")+`</loc></url>`, 256)
	s.files["/bomb.xml.gz"] = smFile{contentType: "application/octet-stream", body: bomb}
	s.files["/html.xml"] = smFile{contentType: "text/html", body: []byte("<!DOCTYPE html><html><body>Not found</body></html>")}
	db := openDB(t, "")
	var logs syncBuffer
	opts := sitemapOptions(t, s)
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	lim := sitemap.Limits{MaxURLs: 3, MaxBytes: 1 << 20}
	if int64(len(bomb)) >= lim.MaxBytes {
		t.Fatalf("the bomb is %d bytes, not under the body cap %d", len(bomb), lim.MaxBytes)
	}
	s.xml("/too-big.xml", append(s.urlset("/big"), bytes.Repeat([]byte("\n"), int(lim.MaxBytes))...))
	opts = crawl.WithSitemapLimits(opts, lim)

	sum := runCrawl(t, testContext(t, 30*time.Second), db, opts)

	if !sum.Exhausted {
		t.Errorf("summary %+v: want exhausted", sum)
	}
	if sum.Failed != int64(len(bad)) {
		t.Errorf("this run failed %d, want the %d bad sitemaps (the missing one is no failure)", sum.Failed, len(bad))
	}
	for _, p := range []string{"/", "/a", "/hidden", "/good.xml", "/missing.xml"} {
		if n := s.hit(p); n != 1 {
			t.Errorf("%s requested %d times, want 1", p, n)
		}
	}
	for _, p := range []string{"/from-malformed", "/m1", "/big", "/from-bomb"} {
		if n := s.hit(p); n != 0 {
			t.Errorf("%s, listed by a bad sitemap, requested %d times", p, n)
		}
	}
	got := resultsByPath(t, s, db)
	want := map[string]string{"/malformed.xml": "malformed", "/too-many.xml": "more than 3 entries",
		"/too-big.xml": "more than 1048576 bytes", "/bomb.xml.gz": "more than 1048576 bytes uncompressed",
		"/html.xml": "root element <html>"}
	for p, detail := range want {
		r := got[p]
		if r.ErrorClass != "sitemap" || !strings.Contains(r.Error, detail) {
			t.Errorf("%s recorded class %q error %q, want class sitemap and %q", p, r.ErrorClass, r.Error, detail)
		}
		if n := strings.Count(logs.String(), s.url(p)+" "); n != 1 {
			t.Errorf("%s named in %d log lines, want 1 warning; logs:\n%s", p, n, logs.String())
		}
	}
	if r := got["/missing.xml"]; r.Status != 404 {
		t.Errorf("/missing.xml recorded %+v, want its 404", r)
	}
	if strings.Contains(logs.String(), "/missing.xml") {
		t.Errorf("a missing sitemap was logged at warn:\n%s", logs.String())
	}
}

func prefixAll(prefix string, ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = prefix + s
	}
	return out
}

// A guessed /sitemap.xml that answers 404, or with an HTML page as many
// sites do for any path, is no failure and no warning.
func TestSitemapGuessMissesQuietly(t *testing.T) {
	t.Parallel()
	for name, f := range map[string]*smFile{
		"404":                 nil,
		"soft 404":            {contentType: "text/html", body: []byte("<!DOCTYPE html><html><body>Home</body></html>")},
		"plain 404 with body": {status: 404, contentType: "text/html", body: []byte("<html>gone</html>")},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSMSite(t)
			s.page("/")
			if f != nil {
				s.files["/sitemap.xml"] = *f
			}
			db := openDB(t, "")
			var logs syncBuffer
			opts := sitemapOptions(t, s)
			opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))

			sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

			if n := s.hit("/sitemap.xml"); n != 1 {
				t.Fatalf("/sitemap.xml requested %d times, want 1", n)
			}
			if !sum.Exhausted || sum.Failed != 0 || sum.SeedsFetched != 1 {
				t.Errorf("summary %+v: want exhausted, nothing failed", sum)
			}
			if strings.Contains(logs.String(), "sitemap") {
				t.Errorf("logged at info or above:\n%s", logs.String())
			}
		})
	}
}

// --sitemaps=false reads none; --max-depth 0 (seeds only) neither.
func TestSitemapsOff(t *testing.T) {
	t.Parallel()
	for name, set := range map[string]func(*crawl.Options){
		"--sitemaps=false": func(o *crawl.Options) { o.Sitemaps = false },
		"--max-depth 0":    func(o *crawl.Options) { o.MaxDepth = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newSMSite(t)
			s.robots("Allow: /", "Sitemap: "+s.url("/maps/site.xml"))
			s.page("/")
			s.page("/hidden")
			s.xml("/maps/site.xml", s.urlset("/hidden"))
			s.xml("/sitemap.xml", s.urlset("/hidden"))
			db := openDB(t, "")
			opts := sitemapOptions(t, s)
			set(&opts)

			sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

			if !sum.Exhausted || s.hit("/") != 1 {
				t.Errorf("summary %+v, / requested %d times: want the crawl done", sum, s.hit("/"))
			}
			for _, p := range []string{"/maps/site.xml", "/sitemap.xml", "/hidden"} {
				if n := s.hit(p); n != 0 {
					t.Errorf("%s requested %d times, want none", p, n)
				}
			}
		})
	}
}

// syncBuffer is a bytes.Buffer for logs written by many workers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
