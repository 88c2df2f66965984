package crawl_test

// The local-fault guard over loopback: every host of the site hangs for
// 10s in the middle of a crawl, as if our network died. Its logic and
// timing are tested in fake time in localfault_test.go.

import (
	"context"
	"sort"
	"testing"
	"time"

	"breakwater/backend"
	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/store"
)

// outageRun is what a crawl through the outage showed.
type outageRun struct {
	sum          crawl.Summary
	from, to     time.Time // the outage
	duringOutage int       // requests the site got during it
	backAfter    time.Duration
	results      map[string]store.Result
	// before and after are pages answered per second in the 2s before the
	// outage and in the 2s after the crawl was back.
	before, after float64
}

// crawlThroughOutage crawls 8 hosts of 200 pages, hanging every host for
// 10s once the crawl is under way; stopAfter, if positive, ends the crawl
// that long after the outage.
func crawlThroughOutage(t *testing.T, guardHosts int, stopAfter time.Duration) outageRun {
	site := startSite(t, healthySpecs(8, 200), demosite.SiteOptions{Seed: 15})
	db := openDB(t, "")
	opts := testOptions(t, site.Roots()...)
	opts.Workers = 16
	opts.HostConcurrency = 2
	opts.Delay = 50 * time.Millisecond
	opts.Timeout = time.Second
	opts.Breaker.Threshold = 3
	opts.Breaker.Rest = 5 * time.Minute
	opts.GiveUpAfter = 5 * time.Second // shorter than the outage
	opts.Retries = 5
	opts.RetryBase = 100 * time.Millisecond
	opts.RetryMax = time.Second
	opts.RetryBudget = 1
	opts.LocalFault.Hosts = guardHosts

	ctx, cancel := context.WithCancel(testContext(t, 90*time.Second))
	defer cancel()
	e, err := crawl.New(opts, backend.File(db))
	if err != nil {
		t.Fatal(err)
	}
	type ran struct {
		sum crawl.Summary
		err error
	}
	done := make(chan ran, 1)
	go func() {
		sum, err := e.Run(ctx)
		done <- ran{sum, err}
	}()
	for requestsServed(site) < 200 {
		time.Sleep(10 * time.Millisecond)
	}
	run := outageRun{from: time.Now()}
	site.SetOutage(true)
	time.Sleep(10 * time.Second)
	site.SetOutage(false)
	run.to = time.Now()
	if stopAfter > 0 {
		time.AfterFunc(stopAfter, cancel)
	}
	r := <-done
	if r.err != nil {
		t.Fatalf("run: %v", r.err)
	}
	run.sum = r.sum

	var answered []time.Time
	for _, h := range site.Hosts() {
		for _, q := range h.Requests() {
			if !q.Time.Before(run.from) && q.Time.Before(run.to) {
				run.duringOutage++
			}
			if q.Status == 200 {
				answered = append(answered, q.Time)
			}
		}
	}
	sort.Slice(answered, func(i, j int) bool { return answered[i].Before(answered[j]) })
	run.backAfter = -1
	var backAt time.Time
	for _, at := range answered {
		if !at.Before(run.to) {
			backAt, run.backAfter = at, at.Sub(run.to)
			break
		}
	}
	in := func(from, to time.Time) float64 {
		n := 0
		for _, at := range answered {
			if !at.Before(from) && at.Before(to) {
				n++
			}
		}
		return float64(n) / to.Sub(from).Seconds()
	}
	run.before = in(run.from.Add(-2*time.Second), run.from)
	if !backAt.IsZero() {
		run.after = in(backAt, backAt.Add(2*time.Second))
	}
	run.results = results(t, db)
	back := "none after it"
	if run.backAfter >= 0 {
		back = run.backAfter.Round(time.Millisecond).String() + " after it"
	}
	t.Logf("guard hosts %d: %d requests during the 10s outage; first page %s; %.0f pages/s before, %.0f pages/s in the 2s after; crawl %v, %d fetched, %d failed",
		guardHosts, run.duringOutage, back, run.before, run.after,
		run.sum.Duration.Round(time.Millisecond), run.sum.Counts.Fetched, run.sum.Counts.Failed)
	return run
}

// requestsServed counts the requests every host of site has had.
func requestsServed(site *demosite.Site) int {
	n := 0
	for _, h := range site.Hosts() {
		n += h.RequestCount()
	}
	return n
}

func TestLocalFaultGuardOverLoopback(t *testing.T) {
	t.Parallel()
	t.Run("guard on", func(t *testing.T) {
		t.Parallel()
		run := crawlThroughOutage(t, 5, 0)
		if !run.sum.Exhausted {
			t.Errorf("summary %+v: want the crawl to finish", run.sum)
		}
		if want := 8 * 200; len(run.results) != want {
			t.Errorf("%d results, want %d", len(run.results), want)
		}
		for k, res := range run.results {
			if res.Status != 200 {
				t.Errorf("%s ended %d %q (%s), want fetched: no host is given up on for our own outage",
					k, res.Status, res.ErrorClass, res.Error)
			}
		}
		// A circuit that opened in the outage would rest 5m: the crawl
		// finishing at all says none did, this says it was back at once.
		if run.backAfter < 0 || run.backAfter > 5*time.Second {
			t.Errorf("first page %v after the outage, want within 5s", run.backAfter)
		}
	})
	t.Run("guard off", func(t *testing.T) {
		t.Parallel()
		run := crawlThroughOutage(t, 0, 3*time.Second)
		downs := 0
		for _, res := range run.results {
			if res.ErrorClass == "host-down" {
				downs++
			}
		}
		// The contrast that makes the test above mean something: per host,
		// the outage opens circuits and gives hosts up.
		if downs == 0 {
			t.Errorf("without the guard no URL was given up on: the outage tests nothing")
		}
	})
}
