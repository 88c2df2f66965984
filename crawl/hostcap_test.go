package crawl

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"breakwater/store"
)

// A page counts against --max-pages-per-host once, however often it is
// asked: answers that send it back to the queue unattempted (429) or
// schedule a retry (503) do not count it again. The count is stored.
func TestHostPageCapCountsEachPageOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{}.chain("a.test", 10)
		p1, p2 := chainURL("a.test", 1), chainURL("a.test", 2)
		f := &fakeFetcher{serve: func(_ context.Context, n int, url string) page {
			switch {
			case url == p1 && n < 2:
				return page{status: 429, header: http.Header{"Retry-After": {"1"}}}
			case url == p2 && n < 1:
				return page{status: 503}
			}
			if p, ok := s[url]; ok {
				return p
			}
			return page{status: 404}
		}}
		opts := rigOptions(chainURL("a.test", 0))
		opts.MaxPagesPerHost = 5
		r := newRig(t, opts, f)
		sum := r.run()
		if !sum.Exhausted {
			t.Fatalf("crawl did not end: %s", sum.Why)
		}
		asked := map[string]int{}
		for _, req := range f.requests("a.test") {
			if !strings.HasSuffix(req.URL, "/robots.txt") {
				asked[req.URL]++
			}
		}
		if len(asked) != 5 || asked[p1] != 3 || asked[p2] != 2 {
			t.Errorf("pages asked %v: want 5 pages, %s 3 times (two 429s), %s twice (a 503)", asked, p1, p2)
		}
		if n, stored, err := r.db.HostPages("a.test"); n != 5 || !stored || err != nil {
			t.Errorf("stored count %d (stored %v, err %v), want 5", n, stored, err)
		}
		capped := 0
		for _, res := range r.results() {
			if res.ErrorClass == classHostPageCap {
				capped++
			}
		}
		if capped == 0 {
			t.Error("no URL recorded host-page-cap")
		}
	})
}

func TestMaxPagesPerHostMustNotBeNegative(t *testing.T) {
	o := DefaultOptions()
	o.MaxPagesPerHost = -1
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--max-pages-per-host") {
		t.Errorf("Validate = %v, want an error naming --max-pages-per-host", err)
	}
}

// A host claimed from a fleet's store has its count read again before its
// next page: another process may have asked for its pages meanwhile. The
// count is read only then, and never goes down.
func TestHostPageCountReadAgainWhenClaimedFromTheFleet(t *testing.T) {
	opts := rigOptions(chainURL("a.test", 0))
	opts.MaxPagesPerHost = 10
	r := newRig(t, opts, siteFetcher(site{}))
	storeCount := func(n int64) {
		t.Helper()
		var b store.Batch
		b.PutHostPages("a.test", n)
		if _, err := r.db.Commit(&b); err != nil {
			t.Fatal(err)
		}
	}
	read := func() int64 {
		t.Helper()
		c, err := r.e.hostPageCount("a.test")
		if err != nil {
			t.Fatal(err)
		}
		return c.requested
	}
	if n := read(); n != 0 {
		t.Fatalf("first read %d, want 0", n)
	}
	storeCount(4) // another process asked for 4
	if n := read(); n != 0 {
		t.Errorf("read %d while the host stayed this process's: the count is read once", n)
	}
	r.e.hostPages.claimedFromFleet("a.test")
	if n := read(); n != 4 {
		t.Errorf("read %d after the host came back from the fleet, want the store's 4", n)
	}
	storeCount(2) // a stalled process's late, lower count
	r.e.hostPages.claimedFromFleet("a.test")
	if n := read(); n != 4 {
		t.Errorf("read %d after a lower count was stored, want 4: a count never goes down", n)
	}
}
