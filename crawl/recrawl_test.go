package crawl

// Refreshes (--recrawl-after) over whole crawls in a synctest bubble: one
// file crawled by successive engines, as successive `crawl --db` runs do,
// with fake time passing between them, over a fake site that answers
// conditional requests from its pages' validators.

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/backend"
	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/storage"
	"breakwater/store"
)

// asked is one request as the site saw it, with its conditional headers.
type asked struct {
	URL, IfNoneMatch, IfModifiedSince string
	At                                time.Time
}

// refreshRig crawls one file again and again, a new Engine each run.
type refreshRig struct {
	t    *testing.T
	db   *storage.DB
	fake *fakeFetcher

	mu    sync.Mutex
	site  site
	asked []asked
}

type condHeaders struct{}

func newRefreshRig(t *testing.T, s site) *refreshRig {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "crawl.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &refreshRig{t: t, db: db, site: s}
	r.fake = &fakeFetcher{serve: r.serve}
	return r
}

// Fetch records the request's validators and lets the fake answer it.
func (r *refreshRig) Fetch(ctx context.Context, req fetch.Request) *fetch.Response {
	r.mu.Lock()
	r.asked = append(r.asked, asked{URL: req.URL, IfNoneMatch: req.Header.Get("If-None-Match"),
		IfModifiedSince: req.Header.Get("If-Modified-Since"), At: time.Now()})
	r.mu.Unlock()
	return r.fake.Fetch(context.WithValue(ctx, condHeaders{}, req.Header), req)
}

// serve answers from the site, 304 when the request's validators match.
// Its 304s carry a body linking to /from-304, which a server should not
// send and a crawler must not read.
func (r *refreshRig) serve(ctx context.Context, _ int, url string) page {
	r.mu.Lock()
	p, ok := r.site[url]
	r.mu.Unlock()
	if !ok {
		return page{status: 404}
	}
	if h, _ := ctx.Value(condHeaders{}).(http.Header); notModifiedFor(p, h) {
		return page{status: 304, header: http.Header{"Etag": p.header["Etag"]}, latency: p.latency,
			body: `<a href="/from-304">stray</a>`}
	}
	return p
}

// notModifiedFor is RFC 9110's rule: If-None-Match when sent, else
// If-Modified-Since against Last-Modified.
func notModifiedFor(p page, h http.Header) bool {
	if p.status != 200 {
		return false
	}
	if inm := h.Get("If-None-Match"); inm != "" {
		return inm == p.header.Get("ETag")
	}
	since, err1 := http.ParseTime(h.Get("If-Modified-Since"))
	modified, err2 := http.ParseTime(p.header.Get("Last-Modified"))
	return err1 == nil && err2 == nil && !modified.After(since)
}

func (r *refreshRig) set(url string, p page) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.site[url] = p
}

// run crawls the file once to the end with opts; before, if set, sees the
// engine first.
func (r *refreshRig) run(opts Options, before func(*Engine)) Summary {
	r.t.Helper()
	opts.Fetcher, opts.Now, opts.Logger = r, time.Now, rigLogger(r.t)
	e, err := New(opts, backend.File(r.db))
	if err != nil {
		r.t.Fatal(err)
	}
	r.fake.refuse = e.circuitOpen
	if before != nil {
		before(e)
	}
	sum, err := e.Run(r.t.Context())
	if err != nil {
		r.t.Fatalf("run: %v", err)
	}
	return sum
}

// since returns the requests made after the first n.
func (r *refreshRig) since(n int) []asked {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked[n:])
}

func (r *refreshRig) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.asked)
}

func (r *refreshRig) results() map[string]store.Result {
	r.t.Helper()
	out := map[string]store.Result{}
	n := 0
	err := r.db.ForEachResult(func(res *store.Result) error {
		out[res.URL] = *res
		n++
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	if n != len(out) {
		r.t.Fatalf("%d results for %d URLs: a refresh must replace the result", n, len(out))
	}
	return out
}

func pagesAsked(reqs []asked) []string {
	var out []string
	for _, a := range reqs {
		if !strings.HasSuffix(a.URL, "/robots.txt") {
			out = append(out, a.URL)
		}
	}
	return out
}

// validated is an HTML page with the given validators ("" for none).
func validated(etag, lastModified, title string, links ...string) page {
	p := htmlPage(title, links...)
	if etag != "" {
		p.header.Set("ETag", etag)
	}
	if lastModified != "" {
		p.header.Set("Last-Modified", lastModified)
	}
	return p
}

const aRootURL = "http://a.test/"

func aURL(path string) string { return "http://a.test" + path }

func refreshOptions(seeds ...string) Options {
	o := rigOptions(seeds...)
	o.RecrawlAfter = time.Hour
	return o
}

// The second run, two hours on, asks for every page again with the
// validators stored; unchanged pages answered 304 keep their results, a
// changed one is replaced and its new link followed, pages now 410 or 404
// are recorded gone. A run with nothing stale asks nothing and ends.
func TestRecrawlRevalidates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lastMod := time.Now().UTC().Format(http.TimeFormat)
		s := site{
			aRootURL:       validated(`"root-1"`, lastMod, "home", "/p/1", "/p/2", "/p/3", "/p/4", "/p/5", "/p/6"),
			aURL("/p/1"):   validated(`"one-1"`, "", "one", "/"),
			aURL("/p/2"):   validated("", lastMod, "two", "/"),
			aURL("/p/3"):   validated(`"three-1"`, lastMod, "three", "/"),
			aURL("/p/4"):   validated(`"four-1"`, "", "four"),
			aURL("/p/5"):   validated(`"five-1"`, "", "five"),
			aURL("/p/6"):   validated("", "", "six, no validators", "/"),
			aURL("/p/new"): validated(`"new-1"`, "", "new"),
		}
		r := newRefreshRig(t, s)
		opts := refreshOptions(aRootURL)
		first := r.run(opts, nil)
		before := r.results()
		if !first.Exhausted || first.Counts.Fetched != 7 || len(before) != 7 {
			t.Fatalf("first run %+v, results %v; want the 7 linked pages", first, sortedKeys(before))
		}
		for _, a := range r.since(0) {
			if a.IfNoneMatch != "" || a.IfModifiedSince != "" {
				t.Errorf("first fetch of %s was conditional: %+v", a.URL, a)
			}
		}
		if got := before[aRootURL]; got.ETag != `"root-1"` || got.LastModified != lastMod {
			t.Fatalf("stored validators %q, %q; want the response's", got.ETag, got.LastModified)
		}

		time.Sleep(2 * time.Hour)
		r.set(aURL("/p/3"), validated(`"three-2"`, time.Now().UTC().Format(http.TimeFormat), "three, changed", "/", "/p/new"))
		r.set(aURL("/p/4"), page{status: 410})
		delete(s, aURL("/p/5")) // 404
		mark := r.mark()
		second := r.run(opts, nil)
		// The run's own counts: every page answered is fetched (the 304s
		// too), the two gone ones failed. The file's counts alone would say
		// "nothing fetched": a refresh replaces a result.
		if want := int64(len(before) - 1); second.Fetched != want || second.Failed != 2 {
			t.Errorf("second run counted %d fetched, %d failed; want %d and 2", second.Fetched, second.Failed, want)
		}

		reqs := r.since(mark)
		want := append(sortedKeys(before), aURL("/p/new"))
		if got := pagesAsked(reqs); !slices.Equal(sortedCopy(got), sortedCopy(want)) {
			t.Fatalf("second run asked %v, want each page once and the new link: %v", got, want)
		}
		for _, a := range reqs {
			if a.URL == aURL("/p/new") {
				if a.IfNoneMatch != "" || a.IfModifiedSince != "" {
					t.Errorf("a first fetch was conditional: %+v", a)
				}
				continue
			}
			if old := before[a.URL]; a.IfNoneMatch != old.ETag || a.IfModifiedSince != old.LastModified {
				t.Errorf("%s asked with If-None-Match %q, If-Modified-Since %q; want the stored %q, %q",
					a.URL, a.IfNoneMatch, a.IfModifiedSince, old.ETag, old.LastModified)
			}
		}
		after := r.results()
		for _, u := range []string{aRootURL, aURL("/p/1"), aURL("/p/2")} {
			got, old := after[u], before[u]
			if got.Status != 304 || got.Failed() || got.Title != old.Title || got.SHA256 != old.SHA256 ||
				got.Length != old.Length || got.Outlinks != old.Outlinks || got.ETag != old.ETag ||
				got.ContentType != old.ContentType || !got.FetchedAt.After(old.FetchedAt) {
				t.Errorf("%s after a 304:\n%+v\nwant the stored page\n%+v\nwith status 304 and a later fetched_at", u, got, old)
			}
		}
		for u, got := range after {
			if old, ok := before[u]; ok && got.Referrer != old.Referrer {
				t.Errorf("%s: referrer %q after the refresh, %q before", u, got.Referrer, old.Referrer)
			}
		}
		if before[aURL("/p/3")].Referrer != aRootURL {
			t.Errorf("a linked page's referrer is %q, want the page linking to it", before[aURL("/p/3")].Referrer)
		}
		if got := after[aURL("/p/3")]; got.Status != 200 || got.Title != "three, changed" ||
			got.SHA256 == before[aURL("/p/3")].SHA256 || got.ETag != `"three-2"` || got.Outlinks != 2 {
			t.Errorf("changed page = %+v, want its new content", got)
		}
		if got := after[aURL("/p/6")]; got.Status != 200 || !got.FetchedAt.After(before[aURL("/p/6")].FetchedAt) {
			t.Errorf("page without validators = %+v, want fetched again", got)
		}
		if got := after[aURL("/p/new")]; got.Status != 200 || got.Title != "new" {
			t.Errorf("the changed page's new link = %+v, want fetched", got)
		}
		for u, status := range map[string]int{aURL("/p/4"): 410, aURL("/p/5"): 404} {
			if got := after[u]; got.ErrorClass != "gone" || got.Status != status {
				t.Errorf("%s = %+v, want recorded gone with status %d", u, got, status)
			}
		}
		if _, ok := after[aURL("/from-304")]; ok {
			t.Error("a link in a 304's body was followed")
		}
		if !second.Exhausted || second.Counts.Fetched != 6 || second.Counts.Failed != 2 || second.Counts.Queued != 0 {
			t.Errorf("second run %+v, want 6 pages, 2 gone, exhausted", second)
		}
		tallies, err := r.db.Tallies()
		if err != nil || tallies.Status[304] != 3 || tallies.Status[200] != 3 || tallies.Failed["gone"] != 2 {
			t.Errorf("tallies %+v, %v; want 3 not modified, 3 fetched, 2 gone", tallies, err)
		}
		for u, res := range after {
			old, ok := before[u]
			if !ok {
				continue
			}
			if !res.FetchedAt.After(old.FetchedAt) {
				t.Errorf("%s keeps its first fetch time %v: the check's time should replace it", u, res.FetchedAt)
			}
			if res.Status == 304 && (res.Outlinks != old.Outlinks || res.Title != old.Title || res.SHA256 != old.SHA256) {
				t.Errorf("%s after a 304 = %+v, want the stored page's title, digest and outlinks kept from %+v", u, res, old)
			}
		}

		// An hour on, nothing is stale: the run asks nothing and ends.
		time.Sleep(30 * time.Minute)
		mark = r.mark()
		third := r.run(opts, nil)
		if got := r.since(mark); len(got) != 0 || !third.Exhausted {
			t.Errorf("a run with nothing stale asked %v and ended %+v; want nothing, exhausted", got, third)
		}

		// Two hours on, the pages are refreshed a second time, each keeping
		// one result (results checks); the pages gone are not pages any more.
		time.Sleep(2 * time.Hour)
		mark = r.mark()
		fourth := r.run(opts, nil)
		want = []string{aRootURL, aURL("/p/1"), aURL("/p/2"), aURL("/p/3"), aURL("/p/6"), aURL("/p/new")}
		if got := pagesAsked(r.since(mark)); !slices.Equal(sortedCopy(got), sortedCopy(want)) {
			t.Errorf("fourth run asked %v, want %v", got, want)
		}
		again := r.results()
		for _, u := range []string{aRootURL, aURL("/p/3"), aURL("/p/new")} {
			if got := again[u]; got.Status != 304 || got.SHA256 != after[u].SHA256 || !got.FetchedAt.After(after[u].FetchedAt) {
				t.Errorf("%s refreshed twice = %+v, want 304 keeping %s", u, got, after[u].SHA256)
			}
		}
		if !fourth.Exhausted || fourth.Counts != second.Counts {
			t.Errorf("fourth run %+v, want the second's counts %+v", fourth, second.Counts)
		}
	})
}

func sortedCopy(s []string) []string { return slices.Sorted(slices.Values(s)) }

// A host's new URLs are fetched before its refreshes: those queued when the
// run starts, and a link a changed page yields, which waits behind at most
// the refreshes already in the host's queue, not behind all of them.
func TestRecrawlNewURLsFirst(t *testing.T) {
	const n = 40
	chainSite := func() site {
		s := site{}
		for i := range n {
			s[chainURL("a.test", i)] = validated(fmt.Sprintf(`"%d"`, i), "", fmt.Sprint(i),
				chainURL("a.test", (i+1)%n), chainURL("a.test", (i+2)%n), chainURL("a.test", 0))
		}
		return s
	}
	t.Run("queued when the run starts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			r := newRefreshRig(t, chainSite())
			opts := refreshOptions(chainURL("a.test", 0))
			opts.MaxPages = 10
			if sum := r.run(opts, nil); sum.Counts.Fetched != 10 || sum.Counts.Queued == 0 {
				t.Fatalf("first run %+v, want 10 pages and some queued", sum)
			}
			old := r.results()
			time.Sleep(2 * time.Hour)
			mark := r.mark()
			opts.MaxPages = 0
			if sum := r.run(opts, nil); !sum.Exhausted || sum.Counts.Fetched != n {
				t.Fatalf("second run %+v, want all %d pages", sum, n)
			}
			got := pagesAsked(r.since(mark))
			firstRefresh := slices.IndexFunc(got, func(u string) bool { _, ok := old[u]; return ok })
			if firstRefresh != n-10 || len(got) != n {
				t.Fatalf("second run asked %v; want the %d new pages, then the 10 refreshes", got, n-10)
			}
		})
	})
	t.Run("found by a refresh", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			s := chainSite()
			r := newRefreshRig(t, s)
			opts := refreshOptions(chainURL("a.test", 0))
			r.run(opts, nil)
			firstOrder := pagesAsked(r.since(0))
			time.Sleep(2 * time.Hour)
			changed := chainURL("a.test", 3)
			r.set(changed, validated(`"3b"`, "", "3 changed", aURL("/new")))
			r.set(aURL("/new"), validated(`"new"`, "", "new"))
			mark := r.mark()
			r.run(opts, func(e *Engine) { e.refresh.chunk = 7 }) // a pass of six transactions
			got := pagesAsked(r.since(mark))
			refreshes := slices.DeleteFunc(slices.Clone(got), func(u string) bool { return u == aURL("/new") })
			if !slices.Equal(refreshes, firstOrder) {
				t.Errorf("refreshed in the order\n%v\nwant the first run's, oldest first:\n%v", refreshes, firstOrder)
			}
			at, from := slices.Index(got, aURL("/new")), slices.Index(got, changed)
			if at < 0 || at-from > store.RefreshDepth+1 {
				t.Errorf("the new link was asked %d requests after the page that links it (%v); want within %d",
					at-from, got, store.RefreshDepth+1)
			}
		})
	})
}

// Refreshes keep every host's pace, and robots.txt, fetched again once
// expired, applies to them.
func TestRecrawlPolitenessAndRobots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{}.chain("a.test", 6).chain("b.test", 6)
		r := newRefreshRig(t, s)
		opts := refreshOptions(chainURL("a.test", 0), chainURL("b.test", 0))
		opts.Delay = time.Second
		opts.RecrawlAfter = 24 * time.Hour
		r.run(opts, nil)
		time.Sleep(25 * time.Hour) // robots.txt expired too
		r.set("http://a.test/robots.txt", page{status: 200, body: "User-agent: *\nDisallow: /p/2\n"})
		mark := r.mark()
		sum := r.run(opts, nil)

		reqs := r.since(mark)
		for _, host := range []string{"a.test", "b.test"} {
			var mine []fetched
			for _, a := range reqs {
				if strings.HasPrefix(a.URL, "http://"+host+"/") {
					mine = append(mine, fetched{URL: a.URL, Start: a.At})
				}
			}
			if len(mine) < 6 {
				t.Errorf("%s: %d requests in the second run, want robots.txt and its pages", host, len(mine))
			}
			checkGaps(t, mine, opts.Delay)
		}
		if got := pagesAsked(reqs); slices.Contains(got, chainURL("a.test", 2)) || len(got) != 11 {
			t.Errorf("second run asked %v; want every page but the one robots.txt now disallows", got)
		}
		if res := r.results()[chainURL("a.test", 2)]; res.ErrorClass != "robots" {
			t.Errorf("disallowed page = %+v, want recorded robots", res)
		}
		if !sum.Exhausted || sum.Counts.Fetched != 11 || sum.Counts.Failed != 1 {
			t.Errorf("second run %+v, want 11 pages and the disallowed one", sum)
		}
	})
}

// A 304 is a success to the breaker: a probe answered 304 closes the circuit.
func TestRecrawlNotModifiedClosesTheBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{}
		for i := range 4 {
			s[chainURL("a.test", i)] = validated(fmt.Sprintf(`"%d"`, i), "", fmt.Sprint(i), chainURL("a.test", (i+1)%4))
		}
		r := newRefreshRig(t, s)
		opts := refreshOptions(chainURL("a.test", 0))
		r.run(opts, nil)
		time.Sleep(2 * time.Hour)
		mark, start := r.mark(), time.Now()
		sum := r.run(opts, func(e *Engine) {
			now := time.Now()
			for range opts.Breaker.Threshold {
				d := e.breakers.Admit("a.test", now)
				e.breakers.Report(d.Ticket, breaker.Transient, "status 500", now)
			}
		})
		var states []string
		err := r.db.ForEachTransition(func(tr store.Transition) error {
			states = append(states, tr.To)
			return nil
		})
		if err != nil || !slices.Equal(states, []string{"open", "half-open", "closed"}) {
			t.Fatalf("transitions %v, %v; want open, half-open (the probe answered 304), closed", states, err)
		}
		got := r.since(mark)
		if len(got) != 4 || got[0].At.Before(start.Add(opts.Breaker.Rest)) {
			t.Errorf("second run asked %+v, want the 4 pages once each, the first as the probe after the rest", got)
		}
		if !sum.Exhausted || sum.Counts.Failed != 0 || sum.Counts.Fetched != 4 {
			t.Errorf("second run %+v, want 4 pages, none failed", sum)
		}
		for u, res := range r.results() {
			if res.Status != 304 {
				t.Errorf("%s = %+v, want not modified", u, res)
			}
		}
	})
}

func TestRecrawlAfterValidation(t *testing.T) {
	for _, d := range []time.Duration{-time.Second, time.Nanosecond, 999 * time.Millisecond} {
		o := DefaultOptions()
		o.RecrawlAfter = d
		if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--recrawl-after") {
			t.Errorf("Validate(RecrawlAfter %s) = %v, want an error naming --recrawl-after", d, err)
		}
	}
	for _, d := range []time.Duration{0, time.Second, 24 * time.Hour} {
		o := DefaultOptions()
		o.RecrawlAfter = d
		if err := o.Validate(); err != nil {
			t.Errorf("Validate(RecrawlAfter %s) = %v, want nil", d, err)
		}
	}
}
