package crawl

// A fake fetcher serving a small site from memory, and a rig that builds an
// Engine on it over a real frontier in a temp file, for tests that run
// inside a synctest bubble: no socket is ever opened, time is fake, and the
// times the fake saw requests at are exact.

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
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
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/storage"
	"breakwater/store"
)

// page is a canned answer. The fake waits latency (or until the request's
// context ends) before answering.
type page struct {
	status  int
	header  http.Header
	body    string
	err     error
	latency time.Duration
}

// htmlPage is a 200 HTML page titled title linking to links.
func htmlPage(title string, links ...string) page {
	var b strings.Builder
	fmt.Fprintf(&b, "<html><head><title>%s</title></head><body>", title)
	for _, l := range links {
		fmt.Fprintf(&b, `<a href="%s">%s</a> `, l, l)
	}
	b.WriteString("</body></html>")
	return page{status: 200, header: http.Header{"Content-Type": {"text/html"}}, body: b.String()}
}

// redirectPage answers status with a Location.
func redirectPage(status int, location string) page {
	return page{status: status, header: http.Header{"Location": {location}}}
}

// timeout is how a request to a host that never answers ends: after the
// client's timeout, or at once when the request is cut short.
func timeout(after time.Duration) page {
	return page{err: errTimeout, latency: after}
}

var errTimeout = fmt.Errorf("%w (Client.Timeout exceeded while awaiting headers)", context.DeadlineExceeded)

// site maps URLs to their answers; a URL it does not list answers 404.
type site map[string]page

// chain adds a host of n HTML pages ("/", "/p/1" ... "/p/n-1"): each links
// to the next two and home, so a crawl from "/" finds every page.
func (s site) chain(host string, n int) site {
	for i := range n {
		s[chainURL(host, i)] = htmlPage(fmt.Sprintf("%s page %d", host, i),
			chainURL(host, (i+1)%n), chainURL(host, (i+2)%n), chainURL(host, 0))
	}
	return s
}

func chainURL(host string, i int) string {
	if i == 0 {
		return "http://" + host + "/"
	}
	return fmt.Sprintf("http://%s/p/%d", host, i)
}

// fetched is one request the fake got: when it started and ended,
// whether it was cut short (its context ended first) or refused, and
// whether it was to leave out the user's credentials.
type fetched struct {
	URL, Host      string
	Start, End     time.Time
	Status         int
	Err            error
	CutShort       bool
	WithoutSecrets bool
}

// fakeFetcher answers requests with serve and records each. refuse, like
// fetch.Options.Refuse, fails the request of a host it names with
// fetch.ErrHostRefused after the request was counted (the real fetcher
// refuses a connection once it is made).
type fakeFetcher struct {
	serve  func(ctx context.Context, n int, url string) page // n: requests before this one to its URL
	refuse func(host string) bool

	mu   sync.Mutex
	got  []fetched
	seen map[string]int
}

var _ Fetcher = (*fakeFetcher)(nil)

// siteFetcher serves s.
func siteFetcher(s site) *fakeFetcher {
	return &fakeFetcher{serve: func(_ context.Context, _ int, url string) page {
		if p, ok := s[url]; ok {
			return p
		}
		return page{status: 404}
	}}
}

func (f *fakeFetcher) Fetch(ctx context.Context, req fetch.Request) *fetch.Response {
	start := time.Now()
	host, _ := frontier.HostKey(req.URL)
	f.mu.Lock()
	if f.seen == nil {
		f.seen = map[string]int{}
	}
	n := f.seen[req.URL]
	f.seen[req.URL]++
	i := len(f.got)
	f.got = append(f.got, fetched{URL: req.URL, Host: host, Start: start, WithoutSecrets: req.WithoutSecrets})
	f.mu.Unlock()

	p := page{err: fmt.Errorf("dial %s: %w", host, fetch.ErrHostRefused)}
	if f.refuse == nil || !f.refuse(host) {
		p = f.serve(ctx, n, req.URL)
	}
	cut := false
	if p.latency > 0 {
		t := time.NewTimer(p.latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			p, cut = page{err: fmt.Errorf("get %s: %w", req.URL, ctx.Err())}, true
		}
	}
	resp := &fetch.Response{URL: req.URL, Status: p.status, Header: p.header, Body: []byte(p.body),
		Err: p.err, Started: start, Duration: time.Since(start)}
	if resp.Err != nil {
		resp.Status = 0
	}
	if resp.Header != nil {
		resp.ContentType = resp.Header.Get("Content-Type")
		if loc := resp.Header.Get("Location"); loc != "" {
			resp.Location, _ = frontier.Resolve(req.URL, loc)
		}
	}
	f.mu.Lock()
	f.got[i].End, f.got[i].Status, f.got[i].Err, f.got[i].CutShort = time.Now(), resp.Status, resp.Err, cut
	f.mu.Unlock()
	return resp
}

// requests returns the requests made so far, to host only unless host is "".
func (f *fakeFetcher) requests(host string) []fetched {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []fetched
	for _, r := range f.got {
		if host == "" || r.Host == host {
			out = append(out, r)
		}
	}
	return out
}

func urlsOf(reqs []fetched) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = r.URL
	}
	return out
}

// rig is an Engine on a fake fetcher and a real frontier in a temp file.
// It must be built inside a synctest bubble; closing the frontier and the
// file is left to t.Cleanup.
type rig struct {
	t  *testing.T
	e  *Engine
	db *storage.DB
	f  *fakeFetcher
}

// rigOptions are the defaults of these tests: no politeness delay, a
// breaker that opens after 3 failures and rests a minute, deterministic
// jitter (Rand 0.5: a backoff is half its ceiling).
func rigOptions(seeds ...string) Options {
	o := DefaultOptions()
	o.Seeds = seeds
	o.Workers = 4
	o.Delay = 0
	o.Timeout = 10 * time.Second
	o.StopGrace = time.Second
	o.Breaker = breaker.Config{Threshold: 3, Rest: time.Minute, Probes: 1}
	o.GiveUpAfter = 10 * time.Minute
	o.Retries = 2
	o.RetryBase = 4 * time.Second
	o.RetryMax = 5 * time.Minute
	o.Rand = func() float64 { return 0.5 }
	o.Sitemaps = false // the fake sites have none; these tests count every request
	return o
}

func newRig(t *testing.T, opts Options, f *fakeFetcher) *rig {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "crawl.db"), nil)
	if err != nil {
		t.Fatalf("open db: %v", err)
	}
	opts.Fetcher = f
	opts.Now = time.Now
	opts.Logger = rigLogger(t)
	e, err := New(opts, backend.File(db))
	if err != nil {
		db.Close()
		t.Fatalf("new engine: %v", err)
	}
	// Run sets it; tests that call process directly have no stop.
	e.fetchCtx = context.Background()
	f.refuse = e.circuitOpen
	r := &rig{t: t, e: e, db: db, f: f}
	t.Cleanup(func() {
		if err := e.front.Close(); err != nil {
			t.Errorf("close frontier: %v", err)
		}
		if err := db.Close(); err != nil {
			t.Errorf("close db: %v", err)
		}
	})
	return r
}

// rigLogger discards engine logs unless BREAKWATER_TEST_LOG is set.
func rigLogger(t *testing.T) *slog.Logger {
	if os.Getenv("BREAKWATER_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// add queues urls as seeds (depth 0) or, with attempts > 0, as URLs that
// already failed that often.
func (r *rig) add(attempts int, urls ...string) {
	r.t.Helper()
	var items []store.Item
	for _, u := range urls {
		it, err := frontier.NewItem(u, 0, 0)
		if err != nil {
			r.t.Fatalf("item %q: %v", u, err)
		}
		it.Attempts = attempts
		items = append(items, it)
	}
	if err := r.e.front.Add(items...); err != nil {
		r.t.Fatalf("add: %v", err)
	}
}

// knowRobots gives host the rules of a robots.txt body, as if fetched now.
func (r *rig) knowRobots(host, body string) {
	r.t.Helper()
	now := time.Now()
	rules, err := robots.FromResponse(200, []byte(body), now)
	if err != nil {
		r.t.Fatalf("robots: %v", err)
	}
	hs := r.e.hosts.get(host, now)
	hs.mu.Lock()
	hs.robotsChecked = true
	r.e.setRulesLocked(hs, rules, now)
	hs.mu.Unlock()
}

// lease waits for the frontier's next lease (fake time passes meanwhile).
func (r *rig) lease() *frontier.Lease {
	r.t.Helper()
	l, err := r.e.front.Next(r.t.Context())
	if err != nil {
		r.t.Fatalf("Next: %v", err)
	}
	return l
}

// process takes l down the request path, as handle does, without ending it.
func (r *rig) process(l *frontier.Lease) (*exchange, disposition) {
	x := &exchange{lease: l, host: r.e.hosts.get(l.Item.Host, time.Now())}
	return x, r.e.process(x)
}

// step leases the next URL, processes it and settles it.
func (r *rig) step() disposition {
	r.t.Helper()
	x, d := r.process(r.lease())
	r.e.settle(x, d)
	return d
}

// flush lets the frontier's writer commit everything submitted so far. It
// passes at most one commit interval of fake time.
func (r *rig) flush() {
	r.t.Helper()
	synctest.Wait()
	time.Sleep(100 * time.Millisecond)
	synctest.Wait()
}

func (r *rig) counts() store.Counts {
	r.t.Helper()
	r.flush()
	c, err := r.db.Counts()
	if err != nil {
		r.t.Fatalf("counts: %v", err)
	}
	return c
}

// results returns the stored results by URL.
func (r *rig) results() map[string]store.Result {
	r.t.Helper()
	r.flush()
	out := map[string]store.Result{}
	err := r.db.ForEachResult(func(res *store.Result) error {
		out[res.URL] = *res
		return nil
	})
	if err != nil {
		r.t.Fatalf("results: %v", err)
	}
	return out
}

// transitions returns the breaker transitions the file logged for host.
func (r *rig) transitions(host string) []store.Transition {
	r.t.Helper()
	r.flush()
	var out []store.Transition
	err := r.db.ForEachTransition(func(tr store.Transition) error {
		if tr.Host == host {
			out = append(out, tr)
		}
		return nil
	})
	if err != nil {
		r.t.Fatalf("transitions: %v", err)
	}
	return out
}

// openBreaker opens host's circuit now with threshold transient failures.
func (r *rig) openBreaker(host string) {
	r.t.Helper()
	now := time.Now()
	for range r.e.opts.Breaker.Threshold {
		d := r.e.breakers.Admit(host, now)
		if !d.Allowed {
			r.t.Fatalf("%s refused before its threshold: %+v", host, d)
		}
		r.e.breakers.Report(d.Ticket, breaker.Transient, "status 500", now)
	}
	if b, _ := r.e.breakers.Get(host); b.State != breaker.Open {
		r.t.Fatalf("%s: breaker %v after %d failures, want open", host, b.State, r.e.opts.Breaker.Threshold)
	}
}

// run crawls to the end inside the bubble.
func (r *rig) run() Summary {
	r.t.Helper()
	sum, err := r.e.Run(r.t.Context())
	if err != nil {
		r.t.Fatalf("run: %v", err)
	}
	return sum
}

// wantEnding fails unless d ends as want.
func wantEnding(t *testing.T, d disposition, want ending) {
	t.Helper()
	if d.ending != want {
		t.Fatalf("process = %v, want %s", d, endingNames[want])
	}
}

var endingNames = map[ending]string{giveBack: "give back", parkHost: "park host", holdHost: "hold host",
	deferURL: "defer URL", complete: "complete", giveUpHost: "give up host"}

// gaps returns the gaps between consecutive request starts.
func gaps(reqs []fetched) []time.Duration {
	var out []time.Duration
	for i := 1; i < len(reqs); i++ {
		out = append(out, reqs[i].Start.Sub(reqs[i-1].Start))
	}
	return out
}

// checkGaps fails for every two consecutive requests that started less
// than want apart: in fake time there is no tolerance.
func checkGaps(t *testing.T, reqs []fetched, want time.Duration) {
	t.Helper()
	if len(reqs) < 2 {
		t.Errorf("only %d requests %v: cannot judge gaps", len(reqs), urlsOf(reqs))
		return
	}
	for i, g := range gaps(reqs) {
		if g < want {
			t.Errorf("%s then %s only %v apart, want at least %v", reqs[i].URL, reqs[i+1].URL, g, want)
		}
	}
}

// sortedKeys is for messages.
func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
