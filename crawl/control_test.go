package crawl_test

import (
	"testing"
	"time"

	"breakwater/backend"
	"breakwater/breaker"
	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/store"
)

// heldByCase stores host as held open by a refusal case, with its case.
func heldByCase(t *testing.T, db *storage.DB, host string) {
	t.Helper()
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var b store.Batch
	b.PutBreaker(host, breaker.Breaker{State: breaker.Open, OpenedAt: at, Rest: time.Minute, Generation: 3,
		Hold: breaker.Case, HoldReason: "403 names breakwater"})
	b.AppendCase(store.Case{Host: host, At: at, URL: "http://" + host + "/", Status: 403})
	if _, err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
}

// TestResolveCaseWhileRunning resolves a case through a running crawl: once
// the crawl has ended, the file holds the released breaker and the
// resolved case.
func TestResolveCaseWhileRunning(t *testing.T) {
	site := startSite(t, healthySpecs(1, 20), demosite.SiteOptions{})
	db := openDB(t, "")
	const host = "held.example"
	heldByCase(t, db, host)
	e, err := crawl.New(testOptions(t, site.Roots()...), backend.File(db))
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() {
		_, err := e.Run(testContext(t, 20*time.Second))
		ran <- err
	}()
	if err := e.Control().ResolveCase(host); err != nil {
		t.Errorf("ResolveCase: %v", err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	var cases []store.Case
	if err := db.ForEachCase(func(c store.Case) error { cases = append(cases, c); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(cases) != 1 || cases[0].Resolved.IsZero() {
		t.Errorf("cases = %+v, want the one case resolved", cases)
	}
	if br, err := db.Breaker(host); err != nil || br.Hold != breaker.NoHold {
		t.Errorf("stored breaker = %+v, %v; want it released", br, err)
	}
}

// TestResolveCaseAfterStopLeavesCaseOpen resolves a case on a crawl that
// has stopped, whose writes can no longer reach the file: the release of
// the breaker is not written, so neither may the case's resolution be.
func TestResolveCaseAfterStopLeavesCaseOpen(t *testing.T) {
	db := openDB(t, "")
	const host = "held.example"
	heldByCase(t, db, host)
	e, err := crawl.New(testOptions(t), backend.File(db))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Run(testContext(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	if err := e.Control().ResolveCase(host); err == nil {
		t.Errorf("ResolveCase on a stopped crawl = nil, want the write's error")
	}
	err = db.ForEachCase(func(c store.Case) error {
		if !c.Resolved.IsZero() {
			t.Errorf("case of %s marked resolved at %v though its breaker was not released in the file", c.Host, c.Resolved)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if br, err := db.Breaker(host); err != nil || br.Hold == breaker.NoHold {
		t.Errorf("stored breaker = %+v, %v; want it still held", br, err)
	}
}
