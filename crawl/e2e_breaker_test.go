package crawl_test

// Circuit breakers end to end: a dead host costs a bounded number of
// connections and is given up on, a refusal by name holds a host for a
// human, an open breaker survives a restart, and a recovering host is
// probed back to closed.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/frontier"
	"breakwater/storage"
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

// connectionsWithin counts the dead host's connections in the first d of a
// crawl started at start.
func connectionsWithin(h *demosite.Host, start time.Time, d time.Duration) int {
	n := 0
	for _, r := range h.Requests() {
		if r.Time.Sub(start) < d {
			n++
		}
	}
	return n
}

func TestDeadHostBreakerBoundsConnections(t *testing.T) {
	t.Parallel()
	const window = 4 * time.Second
	var withBreaker, without int
	t.Run("group", func(t *testing.T) {
		t.Run("breaker enabled", func(t *testing.T) {
			t.Parallel()
			site, dead := deadSite(t)
			db := openDB(t, "")
			opts := deadHostOptions(t, site)
			start := time.Now()
			sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

			if !sum.Exhausted {
				t.Errorf("Exhausted = false, want true: a dead host must not keep the crawl alive (%+v)", sum)
			}
			checkAllPagesOnce(t, site.Host("healthy-0"), site.Host("healthy-1"))
			checkDeadURLs(t, db, dead)
			withBreaker = connectionsWithin(dead, start, window)
			// Threshold failures open it, a probe per rest, and whatever was
			// in flight when it opened.
			rests := int(sum.Duration/opts.Breaker.Rest) + 1
			limit := opts.Breaker.Threshold + opts.HostConcurrency + rests*opts.Breaker.Probes
			conns := dead.RequestCount()
			t.Logf("dead host: %d connections in %v (limit %d); %d in the first %v",
				conns, sum.Duration.Round(time.Millisecond), limit, withBreaker, window)
			if conns > limit {
				t.Errorf("dead host got %d connections in %v, want at most %d", conns, sum.Duration, limit)
			}
			checkNoURLLost(t, db)
		})
		t.Run("breaker disabled", func(t *testing.T) {
			t.Parallel()
			site, dead := deadSite(t)
			db := openDB(t, "")
			opts := deadHostOptions(t, site)
			opts.BreakerEnabled = false
			opts.MaxDuration = window // without a breaker the dead host's URLs would take minutes
			start := time.Now()
			runCrawl(t, testContext(t, 20*time.Second), db, opts)
			without = connectionsWithin(dead, start, window)
			t.Logf("dead host without a breaker: %d connections in %v", without, window)
			checkNoURLLost(t, db)
		})
	})
	if without <= withBreaker {
		t.Errorf("in the first %v the dead host got %d connections with the breaker and %d without: the breaker saved nothing",
			window, withBreaker, without)
	}
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
	if sum.Exhausted || sum.HeldWork == 0 {
		t.Errorf("summary %+v: want Exhausted false with held work", sum)
	}
	if reqs := gate.Requests(); len(reqs) != 1 {
		t.Errorf("refusing host got %d requests %v, want exactly 1 (never probed)", len(reqs), requestURIs(reqs))
	}
	checkAllPagesOnce(t, site.Host("healthy-0"))

	cases := 0
	err := db.ForEachCase(func(c storage.Case) error {
		cases++
		if c.Host != key || c.Status != 403 || !strings.Contains(strings.ToLower(c.Excerpt), "breakwater") {
			t.Errorf("case %+v: want host %s, status 403 and an excerpt naming breakwater", c, key)
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
	_ = db.ForEachTransition(func(tr storage.Transition) error {
		if tr.Host == host && tr.To == "open" {
			found = true
		}
		return nil
	})
	return found
}

func TestRecoveringHostIsProbedBackToClosed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		hostConcurrency int
		delay           time.Duration
	}{
		{name: "one request at a time", hostConcurrency: 1, delay: 20 * time.Millisecond},
		// Requests overlap: a lease that meets the outstanding probe must
		// not park the host until the probe's deadline (Timeout + 15 s).
		{name: "concurrent requests", hostConcurrency: 3, delay: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			specs := append(healthySpecs(1, 10), demosite.HostSpec{Name: "phoenix", Pages: 10,
				Behavior: demosite.Recovering, RecoverAfter: 2 * time.Second})
			site := startSite(t, specs, demosite.SiteOptions{Seed: 32})
			db := openDB(t, "")
			opts := testOptions(t, site.Roots()...)
			opts.HostConcurrency = tt.hostConcurrency
			opts.Delay = tt.delay
			opts.Timeout = 500 * time.Millisecond
			opts.Breaker.Threshold = 2
			opts.Breaker.Rest = 500 * time.Millisecond
			opts.Breaker.Probes = 2
			opts.GiveUpAfter = 15 * time.Second
			opts.Retries = 10
			opts.RetryBase = 100 * time.Millisecond
			opts.RetryMax = 300 * time.Millisecond
			opts.RetryBudget = 1
			// Recovery is at 2 s and every later request takes milliseconds.
			opts.MaxDuration = 6 * time.Second

			sum := runCrawl(t, testContext(t, 20*time.Second), db, opts)

			if !sum.Exhausted {
				t.Errorf("Exhausted = false after %v, want the crawl finished soon after the host recovered",
					sum.Duration.Round(time.Millisecond))
			}
			phoenix := site.Host("phoenix")
			res := results(t, db)
			for i, p := range pagePaths(phoenix.Spec().Pages) {
				r, ok := res[hostKey(t, phoenix)+" "+p]
				switch {
				case !ok:
					t.Errorf("recovering host page %d: no result", i)
				case r.Status != 200 || r.ErrorClass != "":
					t.Errorf("recovering host page %d: status %d class %q, want fetched", i, r.Status, r.ErrorClass)
				}
			}
			var path []string
			for _, tr := range transitions(t, db) {
				if tr.Host == hostKey(t, phoenix) {
					path = append(path, tr.From+"->"+tr.To)
				}
			}
			t.Logf("transitions: %v (%v)", path, sum.Duration.Round(time.Millisecond))
			if !inOrder(path, "closed->open", "open->half-open", "half-open->closed") {
				t.Errorf("transitions %v, want closed->open, then open->half-open, then half-open->closed", path)
			}
		})
	}
}

// inOrder reports whether want occurs in got as a subsequence.
func inOrder(got []string, want ...string) bool {
	for _, g := range got {
		if len(want) > 0 && g == want[0] {
			want = want[1:]
		}
	}
	return len(want) == 0
}

// A host's first robots.txt attempt is made alone (its other URLs wait for
// the rules), but once it has failed each URL makes its own attempt, up to
// --host-concurrency at once: a dead host's URLs must not fail one timeout
// at a time, which would also keep its breaker from opening for
// threshold x timeout.
func TestDeadHostRobotsAttemptsRunInParallelAfterAFailure(t *testing.T) {
	t.Parallel()
	site, dead := deadSite(t)
	db := openDB(t, "")
	opts := deadHostOptions(t, site)
	opts.BreakerEnabled = false
	opts.HostConcurrency = 3
	opts.Retries = 0
	opts.MaxDuration = 2500 * time.Millisecond
	runCrawl(t, testContext(t, 20*time.Second), db, opts)

	reqs := dead.Requests()
	if len(reqs) < 4 {
		t.Fatalf("dead host got %d connections, want several", len(reqs))
	}
	// A dead host's connection lasts until the client's timeout: starts
	// closer than that overlap.
	if gap := reqs[1].Time.Sub(reqs[0].Time); gap < opts.Timeout-50*time.Millisecond {
		t.Errorf("second connection %v after the first: the first robots.txt attempt must be made alone", gap)
	}
	window := opts.Timeout / 2
	most := 0
	for i := range reqs {
		n := 0
		for j := i; j < len(reqs) && reqs[j].Time.Sub(reqs[i].Time) < window; j++ {
			n++
		}
		most = max(most, n)
	}
	t.Logf("%d connections; at most %d started within %v", len(reqs), most, window)
	if most < 2 {
		t.Errorf("connections never overlapped after the first failure: attempts are serialized")
	}
	if most > opts.HostConcurrency {
		t.Errorf("%d connections started within %v, more than --host-concurrency %d", most, window, opts.HostConcurrency)
	}
}

// Opening a host's circuit cuts its requests in flight short: they are not
// attempts (their URLs stay queued, here to be given up on), so exactly
// threshold attempts end as failures and no worker keeps waiting on a host
// known to be down.
func TestOpeningCircuitAbortsRequestsInFlight(t *testing.T) {
	t.Parallel()
	site, dead := deadSite(t)
	db := openDB(t, "")
	opts := deadHostOptions(t, site)
	opts.Timeout = time.Second
	opts.HostConcurrency = 3
	opts.Delay = 300 * time.Millisecond // staggers the attempts: some are in flight when it opens
	opts.Retries = 0
	opts.Breaker.Threshold = 3
	opts.Breaker.Rest = time.Minute
	opts.GiveUpAfter = time.Second
	sum := runCrawl(t, testContext(t, 30*time.Second), db, opts)
	if !sum.Exhausted {
		t.Fatalf("Exhausted = false: %+v", sum)
	}
	classes := map[string]int{}
	deadKey := deadHostKeyOf(t, dead)
	for _, r := range results(t, db) {
		if r.Host == deadKey {
			classes[r.ErrorClass]++
		}
	}
	conns := dead.RequestCount()
	t.Logf("dead host: %d connections, results %v, held %v", conns, classes, dead.HeldTime())
	if classes["transient"] != opts.Breaker.Threshold {
		t.Errorf("%d attempts recorded as failed, want exactly the threshold %d: requests in flight when the circuit opened must be cut short, not recorded",
			classes["transient"], opts.Breaker.Threshold)
	}
	if conns <= opts.Breaker.Threshold {
		t.Errorf("%d connections: none was in flight when the circuit opened, so the test proves nothing", conns)
	}
	if held, most := dead.HeldTime(), time.Duration(conns)*opts.Timeout-200*time.Millisecond; held > most {
		t.Errorf("connections held %v in all, want under %v: the ones in flight should end when the circuit opens", held, most)
	}
}

// A host is given up on when it falls due, by the request path itself: its
// URLs wake at the give-up time, not at the end of a rest that may be far
// longer. Here the rest is an hour and the sweep never runs, so only the
// wake-up at the due time can end the crawl.
func TestDeadHostGivenUpWhenDueWithoutSweep(t *testing.T) {
	t.Parallel()
	site, dead := deadSite(t)
	db := openDB(t, "")
	opts := deadHostOptions(t, site)
	opts.Breaker.Rest = time.Hour
	opts.GiveUpAfter = time.Second
	opts = crawl.WithHousekeeping(opts, time.Hour)
	sum := runCrawl(t, testContext(t, 30*time.Second), db, opts)
	if !sum.Exhausted {
		t.Fatalf("Exhausted = false: the dead host was not given up on without the sweep (%+v)", sum)
	}
	checkDeadURLs(t, db, dead)
	deadKey := deadHostKeyOf(t, dead)
	var opened time.Time
	err := db.ForEachTransition(func(tr storage.Transition) error {
		if tr.Host == deadKey && tr.To == "open" && opened.IsZero() {
			opened = tr.At
		}
		return nil
	})
	if err != nil || opened.IsZero() {
		t.Fatalf("no open transition for %s (err %v)", deadKey, err)
	}
	for _, r := range results(t, db) {
		if r.Host == deadKey && r.ErrorClass == "host-down" && r.FetchedAt.Sub(opened) < opts.GiveUpAfter {
			t.Errorf("%s given up %v after its circuit opened, before --give-up-after %v", r.URL,
				r.FetchedAt.Sub(opened), opts.GiveUpAfter)
		}
	}
}

func deadHostKeyOf(t *testing.T, h *demosite.Host) string {
	t.Helper()
	key, err := frontier.HostKey(h.BaseURL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	return key
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
