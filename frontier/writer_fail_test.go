package frontier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolterrors "go.etcd.io/bbolt/errors"

	"breakwater/storage"
	"breakwater/store"
)

// failingArchive fails the first BeforeCommit that carries records, as a
// WARC write on a full disk does, after the test has lined up more work
// behind it.
type failingArchive struct {
	entered chan struct{} // closed when the failing BeforeCommit starts
	release chan struct{} // it fails when this is closed
	calls   int
	after   int // AfterCommit calls since the failure
}

func (a *failingArchive) BeforeCommit(b *store.Batch) error {
	a.calls++
	if a.calls == 1 {
		close(a.entered)
		<-a.release
		return fmt.Errorf("archive: write /warc/x.warc.gz.open: %w", syscall.ENOSPC)
	}
	return nil
}

func (a *failingArchive) AfterCommit() {
	if a.calls > 0 {
		a.after++
	}
}

// After a failed write the frontier commits nothing more, not even a
// batch that would fit: its operations were submitted before the failure
// was known, and committing them after the failed batch would store a
// later state with an earlier one missing (here: the archive would go on
// after records no commit accounted for). Next, writes and Close report
// the failure, naming what could not be written.
func TestNothingCommittedAfterAFailedWrite(t *testing.T) {
	arch := &failingArchive{entered: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, t.TempDir(), Options{Archive: arch})
	h.add(pageURL("a.test", 0))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	l, err := h.f.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v, want a lease", err)
	}
	completed := make(chan error, 1)
	go func() { completed <- h.f.CompleteWith(l, okResult(l.Item), nil, "records") }()
	<-arch.entered
	h.add(pageURL("b.test", 0)) // into the next batch, while the failing one is under way
	close(arch.release)
	select {
	case <-h.f.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("Failed not closed after the archive failed")
	}
	if err := <-completed; err != nil {
		t.Fatalf("CompleteWith submitted before the failure: %v", err)
	}
	if _, err := h.f.Next(t.Context()); !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "x.warc.gz.open") {
		t.Errorf("Next after the failure: %v, want the failed write", err)
	}
	if err := h.f.Add(item(t, pageURL("c.test", 0))); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Add after the failure: %v, want the failed write", err)
	}
	f, db := h.f, h.db
	h.f, h.db = nil, nil
	if err := f.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("Close: %v, want the failed write", err)
	}
	if arch.calls != 1 || arch.after != 0 {
		t.Errorf("archive called %d times before a commit and %d after one since the failure; want the failed call only",
			arch.calls, arch.after)
	}
	c, err := db.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if c.Seen != 1 || c.Queued != 1 || c.Fetched != 0 {
		t.Errorf("counts %+v after the failure; want the first URL still queued and nothing else", c)
	}
	queued, err := db.LoadQueued("a.test", 0, 10)
	if err != nil || len(queued) != 1 {
		t.Errorf("a.test's queue: %v, %v; want its URL back for the next run", queued, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// A database that cannot grow (bbolt's MaxSize, a full disk anywhere)
// fails a commit: the frontier stops with an error naming the file, the
// batches committed before it are whole, and the file opens again.
func TestFullDatabaseStopsTheFrontier(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	db, err := storage.Open(path, &storage.Options{MaxSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(db, Options{Logger: slog.New(slog.DiscardHandler), CommitEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 500
	var submitted int
	var addErr error
fill:
	for i := 0; i < 1000; i++ {
		items := make([]store.Item, chunk)
		for j := range items {
			items[j] = item(t, fmt.Sprintf("http://h%d.test/%d", j%8, i*chunk+j))
		}
		if addErr = f.Add(items...); addErr != nil {
			break
		}
		submitted += chunk
		select {
		case <-f.Failed():
			break fill
		default:
		}
	}
	select {
	case <-f.Failed():
	case <-time.After(30 * time.Second):
		t.Fatalf("%d URLs added and the 1 MiB file has not failed", submitted)
	}
	if addErr != nil && !errors.Is(addErr, bolterrors.ErrMaxSizeReached) {
		t.Errorf("Add: %v, want the size limit", addErr)
	}
	_, err = f.Next(t.Context())
	if !errors.Is(err, bolterrors.ErrMaxSizeReached) || !strings.Contains(err.Error(), path) {
		t.Errorf("Next: %v, want the size limit and the file's path", err)
	}
	if err := f.Close(); !errors.Is(err, bolterrors.ErrMaxSizeReached) {
		t.Errorf("Close: %v, want the size limit", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = storage.Open(path, nil)
	if err != nil {
		t.Fatalf("reopen after the failure: %v", err)
	}
	defer db.Close()
	c, err := db.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if c.Queued == 0 || c.Queued%chunk != 0 || c.Seen != c.Queued || c.Queued >= int64(submitted) {
		t.Errorf("counts %+v after %d URLs submitted in chunks of %d: want whole chunks, fewer than submitted", c, submitted, chunk)
	}
	var queued int64
	if err := db.ForEachHost(func(host string, hc store.HostCounts) error {
		items, err := db.LoadQueued(host, 0, 1<<30)
		queued += int64(len(items))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if queued != c.Queued {
		t.Errorf("the queues hold %d URLs, the counts say %d", queued, c.Queued)
	}
}
