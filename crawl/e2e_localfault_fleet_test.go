package crawl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"breakwater/backend"
	"breakwater/breaker"
	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/redisstore"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// The local-fault guard on a fleet: two processes crawl 12 hosts through
// a 6s outage of every host, longer than --give-up-after. Each process's
// guard sends the circuits it opened back to half-open in the store too,
// so that neither process, nor the next to claim the host, finds it open
// for a rest and gives it up: every page is fetched, and the shared
// transition logs show the reprieves.
func TestLocalFaultGuardOnAFleet(t *testing.T) {
	t.Parallel()
	site := startSite(t, healthySpecs(12, 100), demosite.SiteOptions{Seed: 16})
	rs := redistest.Start(t)
	ctx, cancel := context.WithCancel(testContext(t, 90*time.Second))
	defer cancel()

	type ran struct {
		sum crawl.Summary
		err error
	}
	done := make(chan ran, 2)
	var first backend.Backend
	for _, id := range []string{"a", "b"} {
		st, err := redisstore.Open(ctx, rs.URL(), redisstore.Create)
		if err != nil {
			t.Fatal(err)
		}
		db := backend.Fleet(st)
		t.Cleanup(func() { db.Close() })
		if first == nil {
			first = db
		}
		opts := testOptions(t, site.Roots()...)
		opts.Fleet = crawl.FleetOptions{ID: id, Lease: 2 * time.Second}
		opts.Workers = 8
		opts.HostConcurrency = 2
		opts.Delay = 50 * time.Millisecond
		opts.Timeout = time.Second
		opts.Breaker = breaker.Config{Threshold: 2, Rest: 5 * time.Minute, Probes: 1}
		opts.GiveUpAfter = 3 * time.Second // shorter than the outage
		opts.Retries = 5
		opts.RetryBase = 100 * time.Millisecond
		opts.RetryMax = time.Second
		opts.RetryBudget = 1
		opts.LocalFault.Hosts = 4
		e, err := crawl.New(opts, db)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			sum, err := e.Run(ctx)
			done <- ran{sum, err}
		}()
	}
	for requestsServed(site) < 200 {
		time.Sleep(10 * time.Millisecond)
	}
	site.SetOutage(true)
	time.Sleep(6 * time.Second)
	site.SetOutage(false)
	for range 2 {
		r := <-done
		if r.err != nil {
			t.Fatalf("run: %v", r.err)
		}
		if !r.sum.Exhausted {
			t.Errorf("summary %+v: want the crawl to finish", r.sum)
		}
	}

	n := 0
	err := first.ScanResults(false, func(r *store.Result) error {
		n++
		if r.Status != 200 {
			t.Errorf("%s ended %d %q (%s), want fetched: no host is given up on for our own outage", r.URL, r.Status, r.ErrorClass, r.Error)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := 12 * 100; n != want {
		t.Errorf("%d results, want %d", n, want)
	}
	reprieved := 0
	err = first.ForEachTransition(func(tr store.Transition) error {
		if strings.Contains(tr.Reason, breaker.ReprieveReason) {
			reprieved++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if reprieved == 0 {
		t.Error("no shared breaker was reprieved: the outage opened none, or the processes reprieved only their own copies")
	}
	t.Logf("%d results, %d shared breakers reprieved", n, reprieved)
}
