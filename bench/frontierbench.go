package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
)

// FrontierResult is the frontier section: the bbolt frontier on its own,
// with durable commits, no network and no politeness. Each rate is the
// median of Passes passes, each over a fresh file; Min and Max give the
// spread.
type FrontierResult struct {
	URLs             int           `json:"urls"`
	Hosts            int           `json:"hosts"`
	AddBatch         int           `json:"add_batch"` // URLs per Add call, as a page's links arrive
	Workers          int           `json:"workers"`
	HostConcurrency  int           `json:"host_concurrency"`
	Passes           int           `json:"passes"`
	PrepareWall      time.Duration `json:"prepare_ns"` // frontier.NewItem for every URL (not in the rates), first pass
	EnqueueWall      time.Duration `json:"enqueue_ns"`
	EnqueuePerSec    float64       `json:"enqueue_per_sec"`
	EnqueueMinPerSec float64       `json:"enqueue_min_per_sec"`
	EnqueueMaxPerSec float64       `json:"enqueue_max_per_sec"`
	LeaseWall        time.Duration `json:"lease_ns"`
	LeasePerSec      float64       `json:"lease_per_sec"`
	LeaseMinPerSec   float64       `json:"lease_min_per_sec"`
	LeaseMaxPerSec   float64       `json:"lease_max_per_sec"`
	// EnqueueRuns and LeaseRuns are each pass's rates, in run order.
	EnqueueRuns []float64 `json:"enqueue_runs"`
	LeaseRuns   []float64 `json:"lease_runs"`
	FileBytes   int64     `json:"file_bytes"` // after every URL is completed
	QueuedBytes int64     `json:"queued_bytes"`
}

const frontierAddBatch = 100

// frontierSection runs FrontierPasses passes, each enqueueing FrontierURLs
// new URLs over FrontierHosts hosts into a fresh file (Open, Add in
// batches, Close: every URL durable), then reopening it and leasing and
// completing every URL with the crawl's worker count. One pass of a few
// seconds on a shared machine is too noisy to hold against a target alone.
func (r *runner) frontierSection(ctx context.Context) error {
	cfg := r.cfg
	res := &FrontierResult{URLs: cfg.FrontierURLs, Hosts: cfg.FrontierHosts, AddBatch: frontierAddBatch,
		Workers: cfg.Workers, HostConcurrency: cfg.HostConcurrency, Passes: cfg.FrontierPasses}
	var enqueue, lease []time.Duration
	for pass := range cfg.FrontierPasses {
		cfg.logf("frontier: pass %d of %d: preparing %d URLs over %d hosts", pass+1, cfg.FrontierPasses, res.URLs, res.Hosts)
		start := cfg.now()
		items, err := frontierItems(res.URLs, res.Hosts)
		if err != nil {
			return err
		}
		if pass == 0 {
			res.PrepareWall = cfg.since(start)
		}
		path := filepath.Join(r.dir, "frontier.db")
		cfg.logf("frontier: pass %d: enqueue", pass+1)
		wall, err := r.enqueueAll(path, items)
		if err != nil {
			return err
		}
		enqueue = append(enqueue, wall)
		res.QueuedBytes = fileSize(path)
		items = nil // the lease phase should not keep the input alive
		cfg.logf("frontier: pass %d: lease and complete", pass+1)
		if wall, err = r.leaseAll(ctx, path, res.URLs); err != nil {
			return err
		}
		lease = append(lease, wall)
		cfg.logf("frontier: pass %d: enqueue %s, lease+complete %s", pass+1,
			format(URLsPerSec, float64(res.URLs)/enqueue[pass].Seconds()), format(URLsPerSec, float64(res.URLs)/wall.Seconds()))
		res.FileBytes = fileSize(path)
		if err := os.Remove(path); err != nil {
			return err
		}
	}
	res.EnqueueRuns, res.LeaseRuns = rates(enqueue, res.URLs), rates(lease, res.URLs)
	res.EnqueueWall, res.EnqueuePerSec, res.EnqueueMinPerSec, res.EnqueueMaxPerSec = medianRate(enqueue, res.URLs)
	res.LeaseWall, res.LeasePerSec, res.LeaseMinPerSec, res.LeaseMaxPerSec = medianRate(lease, res.URLs)
	r.report.Frontier = res
	return nil
}

// medianRate returns the median of walls and the rates of n items in the
// median, slowest and fastest of them.
func medianRate(walls []time.Duration, n int) (median time.Duration, rate, lowest, highest float64) {
	sorted := slices.Sorted(slices.Values(walls))
	perSec := func(d time.Duration) float64 { return float64(n) / d.Seconds() }
	median = sorted[len(sorted)/2]
	return median, perSec(median), perSec(sorted[len(sorted)-1]), perSec(sorted[0])
}

// rates are the rates of n items in each of walls.
func rates(walls []time.Duration, n int) []float64 {
	out := make([]float64, len(walls))
	for i, w := range walls {
		out[i] = float64(n) / w.Seconds()
	}
	return out
}

// frontierItems spreads n URLs over hosts hosts, page-major so that
// consecutive Adds touch many hosts as a crawl's discoveries do.
func frontierItems(n, hosts int) ([]store.Item, error) {
	items := make([]store.Item, n)
	for i := range items {
		u := fmt.Sprintf("http://h%04d.bench.test/articles/%d/index.html", i%hosts, i/hosts)
		it, err := frontier.NewItem(u, 1, 0)
		if err != nil {
			return nil, err
		}
		items[i] = it
	}
	return items, nil
}

func (r *runner) enqueueAll(path string, items []store.Item) (time.Duration, error) {
	db, err := storage.Open(path, nil)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	start := r.cfg.now()
	f, err := frontier.Open(db, frontier.Options{HostConcurrency: r.cfg.HostConcurrency, Logger: r.cfg.logger()})
	if err != nil {
		return 0, err
	}
	for i := 0; i < len(items); i += frontierAddBatch {
		if err := f.Add(items[i:min(i+frontierAddBatch, len(items))]...); err != nil {
			f.Close()
			return 0, fmt.Errorf("frontier add: %w", err)
		}
	}
	if err := f.Close(); err != nil { // commits everything submitted
		return 0, err
	}
	wall := r.cfg.since(start)
	return wall, checkCounts(db, store.Counts{Queued: int64(len(items))})
}

func (r *runner) leaseAll(ctx context.Context, path string, n int) (time.Duration, error) {
	db, err := storage.Open(path, nil)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	start := r.cfg.now()
	f, err := frontier.Open(db, frontier.Options{HostConcurrency: r.cfg.HostConcurrency, Logger: r.cfg.logger()})
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make([]error, r.cfg.Workers)
	for w := range r.cfg.Workers {
		wg.Go(func() { errs[w] = leaseWorker(ctx, f, r.cfg.now) })
	}
	wg.Wait()
	err = errors.Join(errors.Join(errs...), f.Close())
	wall := r.cfg.since(start)
	if err != nil {
		return 0, fmt.Errorf("frontier lease: %w", err)
	}
	return wall, checkCounts(db, store.Counts{Fetched: int64(n)})
}

// leaseWorker leases until the frontier is exhausted, completing each URL
// with a result the size of a real page's, and no politeness gap.
func leaseWorker(ctx context.Context, f *frontier.Frontier, now func() time.Time) error {
	for {
		l, err := f.Next(ctx)
		if errors.Is(err, frontier.ErrExhausted) {
			return nil
		}
		if err != nil {
			return err
		}
		f.Started(l, time.Time{})
		if err := f.Complete(l, pageResult(l.Item, now()), nil); err != nil {
			return err
		}
	}
}

var fakeSHA = strings.Repeat("5e", 32)

func pageResult(it store.Item, at time.Time) *store.Result {
	return &store.Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, Status: 200,
		ContentType: "text/html; charset=utf-8", Length: 3100, FetchedAt: at.UTC(), DurationMS: 3,
		Depth: it.Depth, Title: "bench page", Outlinks: 8, SHA256: fakeSHA, Attempts: 1}
}

// checkCounts verifies the file's counters where want is non-zero.
func checkCounts(db *storage.DB, want store.Counts) error {
	got, err := db.Counts()
	if err != nil {
		return err
	}
	if (want.Queued != 0 && got.Queued != want.Queued) || (want.Fetched != 0 && got.Fetched != want.Fetched) {
		return fmt.Errorf("frontier counts %+v, want %+v", got, want)
	}
	return nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
