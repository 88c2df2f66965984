package storage

import (
	"breakwater/store"
	"testing"
)

// A stored count is read back as stored; a host without one falls back to
// its results, fetched and failed, so a cap set on a crawl that ran
// without it still knows what the host was asked; an unknown host has none.
func TestHostPages(t *testing.T) {
	db := openTestDB(t)
	items := enqueue(t, db, item("a.test", "/1"), item("a.test", "/2"), item("a.test", "/3"), item("b.test", "/1"))
	commit(t, db, func(b *store.Batch) {
		b.Complete(items[0], fetched(items[0], 200))
		b.Complete(items[1], failed(items[1], "permanent"))
		b.Complete(items[3], fetched(items[3], 200))
		b.PutHostPages("b.test", 7)
	})
	for _, tc := range []struct {
		host       string
		want       int64
		wantStored bool
	}{
		{"a.test", 2, false},
		{"b.test", 7, true},
		{"c.test", 0, false},
	} {
		n, stored, err := db.HostPages(tc.host)
		if err != nil || n != tc.want || stored != tc.wantStored {
			t.Errorf("HostPages(%s) = %d, %v, %v; want %d, %v", tc.host, n, stored, err, tc.want, tc.wantStored)
		}
	}
	commit(t, db, func(b *store.Batch) { b.PutHostPages("a.test", 0) })
	if n, stored, err := db.HostPages("a.test"); err != nil || n != 0 || !stored {
		t.Errorf("after storing 0: HostPages(a.test) = %d, %v, %v; want 0, stored", n, stored, err)
	}
}
