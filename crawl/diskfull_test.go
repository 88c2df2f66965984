package crawl

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"breakwater/backend"
	"breakwater/storage"
)

// A database that cannot grow (a full disk; here bbolt's MaxSize) ends the
// run at its first failed commit with that error, naming the file, at
// once: a fetch still under way, whose result could not be stored
// anyway, is cut short instead of being waited for. The file stays
// consistent, and opens again.
func TestFullDatabaseEndsTheRunAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "crawl.db")
		db, err := storage.Open(path, &storage.Options{MaxSize: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		s := site{}.chain("a.test", 5000)
		s[chainURL("slow.test", 0)] = page{status: 200, latency: time.Hour} // answers only when cut short
		f := siteFetcher(s)
		opts := rigOptions(chainURL("a.test", 0), chainURL("slow.test", 0))
		opts.Timeout = time.Hour
		opts.MaxDepth = -1 // the chain is 5,000 hops deep: it must fill the file
		opts.Fetcher, opts.Now, opts.Logger = f, time.Now, rigLogger(t)
		e, err := New(opts, backend.File(db))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		_, err = e.Run(t.Context())
		took := time.Since(start)
		if !errors.Is(err, bolterrors.ErrMaxSizeReached) || !strings.Contains(err.Error(), path) {
			t.Errorf("Run: %v, want the full database, named", err)
		}
		if took > time.Minute {
			t.Errorf("Run took %s after the database filled up", took)
		}
		if slow := f.requests("slow.test"); len(slow) == 0 || !slow[len(slow)-1].CutShort {
			t.Errorf("requests to slow.test %+v, want the one under way cut short", slow)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		db, err = storage.Open(path, nil)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer db.Close()
		c, err := db.Counts()
		if err != nil {
			t.Fatal(err)
		}
		if c.Fetched == 0 || c.Queued == 0 || c.Seen != c.Fetched+c.Failed+c.Queued+c.Deferred {
			t.Errorf("counts after the failure %+v: want some done, the rest still queued, none lost", c)
		}
	})
}
