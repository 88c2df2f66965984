package storage

import (
	"breakwater/store"
	"fmt"
	"testing"
)

// TestScanResultsWhileWritten scans results while they are replaced and
// added between its transactions: each URL stored at the start comes once,
// a replaced one in the form the scan reached first, and URLs stored after
// the start are left out.
func TestScanResultsWhileWritten(t *testing.T) {
	for _, failedOnly := range []bool{false, true} {
		t.Run(fmt.Sprintf("failedOnly=%v", failedOnly), func(t *testing.T) {
			db := openTestDB(t)
			const n = 3*scanChunk + 7
			var items []store.Item
			for i := range n {
				items = append(items, item("a.com", fmt.Sprintf("/%d", i)))
			}
			items = enqueue(t, db, items...)
			commit(t, db, func(b *store.Batch) {
				for i, it := range items {
					if i%3 == 0 {
						b.Complete(it, failed(it, "permanent"))
					} else {
						b.Complete(it, fetched(it, 200))
					}
				}
			})
			first, last := items[0], items[n-1]
			// replace stores a new result for it (a retry, a refresh): at the end.
			replace := func(it store.Item, r *store.Result) {
				it.Replaces = resultKeys(t, db)[it.Hash]
				it = commit(t, db, func(b *store.Batch) { b.Requeue(it) }).Added[0]
				commit(t, db, func(b *store.Batch) { b.Complete(it, r) })
			}
			got := map[string][]store.Result{}
			calls := 0
			err := db.ScanResults(failedOnly, func(r *store.Result) error {
				if calls++; calls == 1 {
					if r.URL != first.URL {
						t.Fatalf("first result %s, want %s", r.URL, first.URL)
					}
					// Meanwhile the crawl writes: the URL given is retried,
					// one not given yet too, and a new URL is stored.
					replace(first, fetched(first, 200))
					again := failed(last, "transient")
					again.Error = "second try"
					replace(last, again)
					late := enqueue(t, db, item("a.com", "/late"))[0]
					commit(t, db, func(b *store.Batch) { b.Complete(late, failed(late, "permanent")) })
				}
				got[r.URL] = append(got[r.URL], *r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := 0
			for i, it := range items {
				wanted := !failedOnly || i%3 == 0 || it.URL == last.URL
				if wanted {
					want++
				}
				if rs := got[it.URL]; wanted && len(rs) != 1 || !wanted && len(rs) != 0 {
					t.Errorf("%s given %d times, want it %v", it.URL, len(rs), wanted)
				}
			}
			if len(got) != want {
				t.Errorf("%d URLs given, want %d (none stored after the start)", len(got), want)
			}
			if rs := got[last.URL]; len(rs) == 1 && rs[0].Error != "second try" {
				t.Errorf("%s given as %+v, want its replacement", last.URL, rs[0])
			}
		})
	}
}
