package crawl_test

// Circuit breakers end to end, over loopback: a dead host costs a bounded
// number of connections and is given up on, a refusal by name holds a host
// for a human, an open breaker survives a restart, and an open circuit
// leaves no connection open. Their timing is tested in fake time, in
// path_synctest_test.go and process_test.go.

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/store"
)

// deadSite is two healthy hosts of 25 pages whose 50 pages link, one each,
// to the 50 distinct URLs of a dead host.
func deadSite(t testing.TB) (site *demosite.Site, dead *demosite.Host) {
	t.Helper()
	specs := append(healthySpecs(2, 25), demosite.HostSpec{Name: "deadend", Pages: 50, Behavior: demosite.Dead})
	site = startSite(t, specs, demosite.SiteOptions{Seed: 30, DeadLinksPerPage: 1})
	return site, site.Host("deadend")
}

func deadHostOptions(t testing.TB, site *demosite.Site) crawl.Options {
	t.Helper()
	opts := testOptions(t, site.Roots()...)
	opts.Timeout = 300 * time.Millisecond
	opts.HostConcurrency = 2
	opts.Breaker.Threshold = 3
	opts.Breaker.Rest = 2 * time.Second
	opts.Breaker.Probes = 1
	opts.GiveUpAfter = 3 * time.Second
	opts.Retries = 2
	opts.RetryBase = 100 * time.Millisecond
	opts.RetryMax = 500 * time.Millisecond
	return opts
}

// The wiring of the breaker over loopback: a dead host costs a bounded
// number of connections and is given up on. The breaker's timing (rests,
// probes, give-up, requests cut short) is tested in fake time in
// path_synctest_test.go.
func TestDeadHostBreakerBoundsConnections(t *testing.T) {
	t.Parallel()
	site, dead := deadSite(t)
	db := openDB(t, "")
	opts := deadHostOptions(t, site)
	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if !sum.Exhausted {
		t.Errorf("Exhausted = false, want true: a dead host must not keep the crawl alive (%+v)", sum)
	}
	checkAllPagesOnce(t, site.Host("healthy-0"), site.Host("healthy-1"))
	checkDeadURLs(t, db, dead)
	// Threshold failures open it, a probe per rest, and whatever was in
	// flight when it opened.
	rests := int(sum.Duration/opts.Breaker.Rest) + 1
	limit := opts.Breaker.Threshold + opts.HostConcurrency + rests*opts.Breaker.Probes
	conns := dead.RequestCount()
	t.Logf("dead host: %d connections in %v (limit %d)", conns, sum.Duration.Round(time.Millisecond), limit)
	if conns > limit {
		t.Errorf("dead host got %d connections in %v, want at most %d", conns, sum.Duration, limit)
	}
	checkNoURLLost(t, db)
}

// checkDeadURLs asserts every URL of the dead host ended as host-down.
func checkDeadURLs(t testing.TB, db *storage.DB, dead *demosite.Host) {
	t.Helper()
	res := results(t, db)
	classes := map[string]int{}
	for i := range dead.Spec().Pages {
		r, ok := res[pageKey(t, dead.PageURL(i))]
		if !ok {
			classes["(no result)"]++
			continue
		}
		classes[r.ErrorClass]++
	}
	if classes["host-down"] != dead.Spec().Pages {
		t.Errorf("dead host's %d URLs ended as %v, want all host-down", dead.Spec().Pages, classes)
	}
}

func TestRefusingHostIsHeldForAHuman(t *testing.T) {
	t.Parallel()
	specs := append(healthySpecs(1, 10), demosite.HostSpec{Name: "gatekeeper", Pages: 5, Behavior: demosite.Refusing})
	site := startSite(t, specs, demosite.SiteOptions{Seed: 31})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)

	sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	gate := site.Host("gatekeeper")
	key := hostKey(t, gate)
	if sum.Exhausted || sum.HeldWork != 1 || !strings.Contains(sum.Why, "only URLs of held hosts are left") {
		t.Errorf("summary %+v: want Exhausted false with one host held", sum)
	}
	if reqs := gate.Requests(); len(reqs) != 1 {
		t.Errorf("refusing host got %d requests %v, want exactly 1 (never probed)", len(reqs), requestURIs(reqs))
	}
	checkAllPagesOnce(t, site.Host("healthy-0"))

	cases := 0
	err := db.ForEachCase(func(c store.Case) error {
		cases++
		// The body's words, not only its header's: the page was read as
		// it streamed, and its head kept for this.
		if c.Host != key || c.Status != 403 || !strings.Contains(strings.ToLower(c.Excerpt), "breakwater is not welcome") {
			t.Errorf("case %+v: want host %s, status 403 and an excerpt of the body naming breakwater", c, key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if cases != 1 {
		t.Errorf("%d cases recorded, want 1", cases)
	}
	held := false
	for _, tr := range transitions(t, db) {
		if tr.Host == key && tr.To == "open" && tr.Hold == "case" {
			held = true
		}
		if tr.Host == key && tr.To != "open" {
			t.Errorf("held host moved on: %+v", tr)
		}
	}
	if !held {
		t.Errorf("no transition to open with hold=case for %s", key)
	}
}

func requestURIs(reqs []demosite.Request) []string {
	out := make([]string, len(reqs))
	for i, r := range reqs {
		out[i] = fmt.Sprintf("%s %d", r.RequestURI, r.Status)
	}
	return out
}

func TestOpenBreakerSurvivesRestart(t *testing.T) {
	t.Parallel()
	site, dead := deadSite(t)
	key := hostKey(t, dead)
	path := t.TempDir() + "/crawl.db"
	db := openDB(t, path)
	opts := deadHostOptions(t, site)
	opts.Breaker.Rest = time.Minute
	opts.GiveUpAfter = time.Hour

	ctx, cancel := context.WithCancel(testContext(t, 20*time.Second))
	defer cancel()
	go func() {
		defer cancel()
		for ctx.Err() == nil && !opened(db, key) {
			time.Sleep(20 * time.Millisecond)
		}
	}()
	first := runCrawl(t, ctx, db, opts)
	if !opened(db, key) {
		t.Fatalf("first run ended (%+v) before the dead host's breaker opened", first)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	before := dead.RequestCount()

	db = openDB(t, path)
	opts = deadHostOptions(t, site)
	opts.Seeds = nil
	opts.Breaker.Rest = time.Minute
	opts.GiveUpAfter = time.Hour
	opts.MaxDuration = time.Second
	second := runCrawl(t, testContext(t, 20*time.Second), db, opts)

	if n := dead.RequestCount() - before; n != 0 {
		t.Errorf("dead host got %d connections in the second run's first second: its open breaker was forgotten", n)
	}
	if second.Exhausted {
		t.Errorf("second run exhausted, want the dead host's URLs still waiting")
	}
	checkNoURLLost(t, db)
}

// opened reports whether the file logs a transition of host to open.
func opened(db *storage.DB, host string) bool {
	found := false
	_ = db.ForEachTransition(func(tr store.Transition) error {
		if tr.Host == host && tr.To == "open" {
			found = true
		}
		return nil
	})
	return found
}

// Once a host's circuit is open, the crawler holds no connection to it:
// those of the requests cut short are closed, and so are any that were
// still being dialled for them and would otherwise wait in the idle pool
// until the crawl ends, each one a socket the dead server keeps too.
func TestOpenCircuitLeavesNoConnectionOpen(t *testing.T) {
	t.Parallel()
	site, dead := deadSite(t)
	db := openDB(t, "")
	opts := deadHostOptions(t, site)
	opts.Timeout = 500 * time.Millisecond
	opts.HostConcurrency = 4
	opts.Delay = 0
	opts.Retries = 0
	opts.Breaker.Threshold = 4
	opts.Breaker.Rest = time.Minute
	opts.GiveUpAfter = time.Minute // the crawl is still running when the host is checked
	opts.MaxDuration = 4 * time.Second
	done := make(chan struct{})
	go func() {
		defer close(done)
		runCrawl(t, testContext(t, 20*time.Second), db, opts)
	}()
	// robots.txt (one timeout), then four attempts at once (another): the
	// circuit is open after about a second. Check well after, well before
	// the crawl stops.
	time.Sleep(2500 * time.Millisecond)
	open, conns := dead.OpenConnections(), dead.RequestCount()
	<-done
	if conns < opts.Breaker.Threshold {
		t.Fatalf("dead host got %d connections, want the circuit to have opened (%d)", conns, opts.Breaker.Threshold)
	}
	if open != 0 {
		t.Errorf("%d of %d connections to the dead host still open with its circuit open", open, conns)
	}
}

// A page that refuses us in its body alone, its robots.txt open, is a
// refusal: the page is read as it streams, and the head of a 403 kept for
// its words.
func TestRefusalInAStreamedPagesBody(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
			return
		}
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprint(w, "<html><body>Access denied: breakwater is not welcome on this page.</body></html>")
	}))
	t.Cleanup(srv.Close)
	db := openDB(t, "")
	runCrawl(t, testContext(t, 20*time.Second), db, testOptions(t, srv.URL+"/"))
	var excerpts []string
	err := db.ForEachCase(func(c store.Case) error {
		excerpts = append(excerpts, c.Excerpt)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(excerpts) != 1 || !strings.Contains(excerpts[0], "breakwater is not welcome") {
		t.Errorf("cases %q: want one, its excerpt from the page's body", excerpts)
	}
}
