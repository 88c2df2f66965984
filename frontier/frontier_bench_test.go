package frontier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"breakwater/storage"
	"breakwater/store"
)

const (
	benchURLs  = 100_000
	benchHosts = 1000
)

// benchItems spreads benchURLs over benchHosts, canonicalized up front:
// the benchmarks measure the frontier and its file, not URL parsing.
func benchItems(b *testing.B) []store.Item {
	b.Helper()
	items := make([]store.Item, benchURLs)
	for i := range items {
		it, err := NewItem(fmt.Sprintf("http://h%04d.test/page/%d", i%benchHosts, i/benchHosts), 1, 0)
		if err != nil {
			b.Fatal(err)
		}
		items[i] = it
	}
	return items
}

func benchOpen(b *testing.B, opts Options) (*storage.DB, *Frontier) {
	b.Helper()
	db, err := storage.Open(filepath.Join(b.TempDir(), "crawl.db"), nil)
	if err != nil {
		b.Fatal(err)
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	f, err := Open(db, opts)
	if err != nil {
		b.Fatal(err)
	}
	return db, f
}

func benchClose(b *testing.B, db *storage.DB, f *Frontier) {
	b.Helper()
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkEnqueue adds 100k new URLs over 1000 hosts, 100 a call as a
// page's links would come, and closes: every URL is durable at the end.
func BenchmarkEnqueue(b *testing.B) {
	items := benchItems(b)
	for b.Loop() {
		b.StopTimer()
		db, f := benchOpen(b, Options{})
		b.StartTimer()
		for i := 0; i < len(items); i += 100 {
			if err := f.Add(items[i : i+100]...); err != nil {
				b.Fatal(err)
			}
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if c, err := db.Counts(); err != nil || c.Queued != benchURLs {
			b.Fatalf("counts = %+v, %v; want %d queued", c, err, benchURLs)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchURLs*b.N)/b.Elapsed().Seconds(), "URLs/s")
}

// BenchmarkLeaseComplete leases and completes 100k preloaded URLs with 8
// workers, no politeness and a high per-host cap, until exhausted.
func BenchmarkLeaseComplete(b *testing.B) {
	items := benchItems(b)
	const workers = 8
	for b.Loop() {
		b.StopTimer()
		db, f := benchPreloaded(b, items)
		b.StartTimer()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for range workers {
			wg.Go(func() {
				if err := benchWorker(f); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 {
			b.Fatal(errors.Join(errs...))
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if c, err := db.Counts(); err != nil || c.Fetched != benchURLs || c.Queued != 0 {
			b.Fatalf("counts = %+v, %v; want %d fetched", c, err, benchURLs)
		}
		db.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(benchURLs*b.N)/b.Elapsed().Seconds(), "URLs/s")
}

// benchPreloaded writes items straight to a new file and opens a frontier on it.
func benchPreloaded(b *testing.B, items []store.Item) (*storage.DB, *Frontier) {
	b.Helper()
	db, f := benchOpen(b, Options{})
	benchClose(b, db, f)
	db, err := storage.Open(db.Path(), nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < len(items); i += 10_000 {
		var batch store.Batch
		for _, it := range items[i:min(i+10_000, len(items))] {
			batch.Add(it)
		}
		if _, err := db.Commit(&batch); err != nil {
			b.Fatal(err)
		}
	}
	f, err = Open(db, Options{HostConcurrency: 64, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return db, f
}

func benchWorker(f *Frontier) error {
	ctx := context.Background()
	for {
		l, err := f.Next(ctx)
		if errors.Is(err, ErrExhausted) {
			return nil
		}
		if err != nil {
			return err
		}
		f.Started(l, time.Time{}) // no politeness: the host is ready again at once
		if err := f.Complete(l, okResult(l.Item), nil); err != nil {
			return err
		}
	}
}
