package crawl_test

// Hostile sites, each a test (issue 16): real crawls over loopback of a
// demosite.Traps host, judged by what the host was asked (its request
// counts by target) and by what the file recorded. Each must end by
// itself, within its bound, without a panic.

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
)

func startTraps(t *testing.T) *demosite.Traps {
	t.Helper()
	tr, err := demosite.StartTraps()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tr.Close(); err != nil {
			t.Errorf("close traps: %v", err)
		}
	})
	return tr
}

// trapResults returns the stored results by request target ("/loop/a").
func trapResults(t *testing.T, db *storage.DB) map[string]store.Result {
	t.Helper()
	out := map[string]store.Result{}
	err := db.ForEachResult(func(r *store.Result) error {
		target := r.URL[strings.Index(r.URL[len("http://"):], "/")+len("http://"):]
		out[target] = *r
		return nil
	})
	if err != nil {
		t.Fatalf("read results: %v", err)
	}
	return out
}

// pagesAsked returns the host's request counts, robots.txt left out.
func pagesAsked(tr *demosite.Traps) map[string]int {
	got := tr.Requests()
	delete(got, "/robots.txt")
	return got
}

// checkAskedOnce fails unless the host was asked for exactly want, each
// once, and nothing else.
func checkAskedOnce(t *testing.T, tr *demosite.Traps, want []string) {
	t.Helper()
	got := pagesAsked(tr)
	for _, w := range want {
		if got[w] != 1 {
			t.Errorf("%s asked %d times, want once", w, got[w])
		}
		delete(got, w)
	}
	if len(got) > 0 {
		t.Errorf("asked for more than %d pages: also %v", len(want), got)
	}
}

func checkEnded(t *testing.T, sum crawl.Summary, db *storage.DB) {
	t.Helper()
	if !sum.Exhausted {
		t.Errorf("the crawl did not run out of work: %s (%+v)", sum.Why, sum.Counts)
	}
	checkNoURLLost(t, db)
}

func months(from, to int) []string {
	var out []string
	for m := from; m <= to; m++ {
		out = append(out, fmt.Sprintf("/calendar?month=%d", m))
	}
	return out
}

// A redirect loop ends: each hop is a URL, fetched once; the one it
// leads back to is known already.
func TestHostileRedirectLoop(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	db := openDB(t, "")
	sum := runCrawl(t, testContext(t, 20*time.Second), db, testOptions(t, tr.URL("/loop/a")))
	checkEnded(t, sum, db)
	checkAskedOnce(t, tr, []string{"/loop/a", "/loop/b"})
	res := trapResults(t, db)
	for _, target := range []string{"/loop/a", "/loop/b"} {
		if r := res[target]; r.Status != 302 || r.ErrorClass != "" {
			t.Errorf("%s: status %d class %q, want a 302 recorded as fetched", target, r.Status, r.ErrorClass)
		}
	}
}

// A chain of 30 redirects is followed for 10 hops: the page 10 hops from
// the seed is recorded as redirect-limit, and the 11th hop is never asked.
func TestHostileRedirectChain(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	db := openDB(t, "")
	sum := runCrawl(t, testContext(t, 20*time.Second), db, testOptions(t, tr.URL("/chain/0")))
	checkEnded(t, sum, db)
	var hops []string
	for i := 0; i <= 10; i++ {
		hops = append(hops, fmt.Sprintf("/chain/%d", i))
	}
	checkAskedOnce(t, tr, hops)
	res := trapResults(t, db)
	if r := res["/chain/10"]; r.ErrorClass != "redirect-limit" || r.Status != 302 {
		t.Errorf("/chain/10: status %d class %q, want 302 and redirect-limit", r.Status, r.ErrorClass)
	}
	if len(res) != len(hops) {
		t.Errorf("%d results, want %d: one per hop asked", len(res), len(hops))
	}
}

// A calendar, every month linking to the next and the one before, has no
// end; --max-depth bounds it to the months that many links from the seed.
func TestHostileCalendarTrapMaxDepth(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	db := openDB(t, "")
	opts := testOptions(t, tr.URL("/calendar?month=0"))
	opts.MaxDepth = 4
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)
	checkEnded(t, sum, db)
	checkAskedOnce(t, tr, months(-4, 4))
}

// checkHostPageCap checks a calendar crawl capped at limit pages: exactly
// limit months were asked, each once, with no gap; every URL found beyond
// them is recorded as host-page-cap and was never asked.
func checkHostPageCap(t *testing.T, tr *demosite.Traps, db *storage.DB, limit int) {
	t.Helper()
	asked := pagesAsked(tr)
	if len(asked) != limit {
		t.Errorf("%d pages asked, want the cap, %d: %v", len(asked), limit, asked)
	}
	capped := 0
	for target, r := range trapResults(t, db) {
		switch {
		case asked[target] > 1:
			t.Errorf("%s asked %d times, want once", target, asked[target])
		case asked[target] == 1 && (r.Status != 200 || r.ErrorClass != ""):
			t.Errorf("%s: status %d class %q, want fetched", target, r.Status, r.ErrorClass)
		case asked[target] == 0 && r.ErrorClass != "host-page-cap":
			t.Errorf("%s, never asked: status %d class %q, want host-page-cap", target, r.Status, r.ErrorClass)
		case asked[target] == 0:
			capped++
			if r.Status != 0 || !strings.Contains(r.Error, "--max-pages-per-host") {
				t.Errorf("%s: status %d error %q, want no status and an error naming the flag", target, r.Status, r.Error)
			}
		}
	}
	if capped == 0 {
		t.Error("no URL recorded as host-page-cap: the cap held nothing back")
	}
}

// --max-pages-per-host bounds the calendar where depth does not: exactly
// that many pages, even with several requests to the host at once, and
// the months found beyond them recorded, not dropped.
func TestHostileCalendarTrapHostCap(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	db := openDB(t, "")
	opts := testOptions(t, tr.URL("/calendar?month=0"))
	opts.MaxPagesPerHost = 12
	opts.HostConcurrency = 4
	opts.Delay = 0
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)
	checkEnded(t, sum, db)
	checkHostPageCap(t, tr, db, 12)
}

// The cap holds for the whole crawl: it is stored with the crawl's
// settings, and a resumed run counts the host's pages from the file, not
// from zero. Raised later, it lets --retry-failed fetch what it held back.
func TestHostPageCapSurvivesResume(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	path := filepath.Join(t.TempDir(), "crawl.db")
	run := func(opts crawl.Options, given ...string) crawl.Summary {
		t.Helper()
		db := openDB(t, path)
		defer db.Close()
		merged, _, err := crawl.ResolveSettings(db, opts, func(flag string) bool {
			return strings.Contains(strings.Join(given, " "), flag)
		})
		if err != nil {
			t.Fatalf("resolve settings: %v", err)
		}
		return runCrawl(t, testContext(t, 20*time.Second), db, merged)
	}

	first := testOptions(t, tr.URL("/calendar?month=0"))
	first.MaxPagesPerHost = 10
	first.MaxPages = 4 // a run cut short, as a kill or --max-duration would
	if sum := run(first, "max-pages-per-host"); sum.Exhausted {
		t.Fatalf("first run ran out of work: %+v", sum)
	}
	if n := len(pagesAsked(tr)); n != 4 {
		t.Fatalf("first run asked %d pages, want --max-pages 4", n)
	}

	sum := run(testOptions(t)) // a resume: no seeds, no cap given; the file has it
	db := openDB(t, path)
	checkEnded(t, sum, db)
	checkHostPageCap(t, tr, db, 10)
	db.Close()

	third := testOptions(t)
	third.MaxPagesPerHost = 14
	third.RetryFailed = true
	sum = run(third, "max-pages-per-host")
	db = openDB(t, path)
	checkEnded(t, sum, db)
	checkHostPageCap(t, tr, db, 14)
}

// Binary garbage served as text/html is parsed as HTML, as a browser
// would: the page is recorded as fetched and the link before the garbage
// is followed.
func TestHostileGarbageAsHTML(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	db := openDB(t, "")
	opts := testOptions(t, tr.URL("/garbage"))
	opts.MaxBody = 2 << 20
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)
	checkEnded(t, sum, db)
	checkAskedOnce(t, tr, []string{"/garbage", "/garbage/found"})
	r := trapResults(t, db)["/garbage"]
	if r.Status != 200 || r.ErrorClass != "" || r.Length < demosite.GarbageSize || r.Truncated {
		t.Errorf("/garbage: status %d class %q length %d truncated %v, want 200, all %d bytes kept",
			r.Status, r.ErrorClass, r.Length, r.Truncated, demosite.GarbageSize)
	}
	if !utf8.ValidString(r.Title) {
		t.Errorf("title %q is not valid UTF-8", r.Title)
	}
}

// Attribute values of 256 KiB (an inline image, a title, an href) neither
// stop the link extraction nor leak into the frontier: the links before,
// between and after them are followed, the URL of 256 KiB is dropped, and
// the title is cut to its cap.
func TestHostileBigAttribute(t *testing.T) {
	t.Parallel()
	tr := startTraps(t)
	db := openDB(t, "")
	sum := runCrawl(t, testContext(t, 20*time.Second), db, testOptions(t, tr.URL("/big-attribute")))
	checkEnded(t, sum, db)
	checkAskedOnce(t, tr, []string{"/big-attribute", "/big-attribute/before", "/big-attribute/after", "/big-attribute/last"})
	for target := range trapResults(t, db) {
		if len(target) > frontier.MaxURLLength {
			t.Errorf("a URL of %d bytes was recorded", len(target))
		}
	}
	r := trapResults(t, db)["/big-attribute"]
	if r.Status != 200 || r.Outlinks != 3 {
		t.Errorf("/big-attribute: status %d outlinks %d, want 200 and 3", r.Status, r.Outlinks)
	}
	if n := utf8.RuneCountInString(r.Title); n == 0 || n > 512 || strings.Trim(r.Title, "T") != "" {
		t.Errorf("title of %d runes (%.20q...), want the T's cut to at most 512", n, r.Title)
	}
}
