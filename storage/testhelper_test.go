package storage

import (
	"breakwater/store"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tb is the part of testing.TB that *rapid.T also has, so the helpers serve
// both plain and property tests.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Cleanup(func())
}

// A ladder of fixed times for deferral tests.
var (
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(1 * time.Second)
	t2 = t0.Add(2 * time.Second)
	t3 = t0.Add(3 * time.Second)
	t4 = t0.Add(4 * time.Second)
)

// openTestDB opens a fresh database in a temporary directory. Cleanup checks
// the file's consistency and invariants (if the test left it open) and closes it.
func openTestDB(t testing.TB) *DB {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), "crawl.db"), nil)
}

// openAt opens the database at path and arranges for it to be checked and closed.
func openAt(t tb, path string, opts *Options) *DB {
	t.Helper()
	db, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	// Tests reopen files but never crash the machine: fsyncs would only make
	// them slow on a busy disk. Benchmarks turn them back on.
	db.bolt.NoSync = true
	t.Cleanup(func() {
		if isOpen(db) {
			checkInvariants(t, db)
		}
		if err := db.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	})
	return db
}

func isOpen(db *DB) bool {
	err := db.bolt.View(func(*bolt.Tx) error { return nil })
	return !errors.Is(err, bolterrors.ErrDatabaseNotOpen)
}

// item returns an Item of host whose URL (and so hash) is derived from path.
func item(host, path string) store.Item {
	u := "http://" + host + path
	return store.Item{Host: host, URL: u, Hash: store.HashOf(u)}
}

func fetched(it store.Item, status int) *store.Result {
	return &store.Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, Status: status, Depth: it.Depth, FetchedAt: t0}
}

func failed(it store.Item, class string) *store.Result {
	return &store.Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, ErrorClass: class, Error: class + " error", FetchedAt: t0}
}

// commit applies the ops fill adds to one batch and fails the test on error.
func commit(t tb, db *DB, fill func(b *store.Batch)) *store.Committed {
	t.Helper()
	var b store.Batch
	fill(&b)
	c, err := db.Commit(&b)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return c
}

// enqueue adds items in one batch and returns them with their Seq set.
func enqueue(t tb, db *DB, items ...store.Item) []store.Item {
	t.Helper()
	c := commit(t, db, func(b *store.Batch) {
		for _, it := range items {
			b.Add(it)
		}
	})
	return c.Added
}

func mustCounts(t tb, db *DB) store.Counts {
	t.Helper()
	c, err := db.Counts()
	if err != nil {
		t.Fatalf("Counts: %v", err)
	}
	return c
}

func hostCounts(t tb, db *DB) map[string]store.HostCounts {
	t.Helper()
	out := make(map[string]store.HostCounts)
	err := db.ForEachHost(func(host string, c store.HostCounts) error {
		out[host] = c
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachHost: %v", err)
	}
	return out
}

func loadAll(t tb, db *DB, host string) []store.Item {
	t.Helper()
	items, err := db.LoadQueued(host, 0, 1<<30)
	if err != nil {
		t.Fatalf("LoadQueued(%s): %v", host, err)
	}
	return items
}

// deferredEntry is one record of the deferred bucket, decoded.
type deferredEntry struct {
	Due  int64
	Item store.Item
}

// snapshot is everything a batch can change, read raw from the buckets.
type snapshot struct {
	Counts   store.Counts
	Hosts    map[string]store.HostCounts
	Seen     map[uint64]bool // fingerprints, from the seen log
	Queue    []store.Item    // in key order: host, then FIFO
	Deferred []deferredEntry // in due order
	Results  map[store.Hash]store.Result
	Lane     []store.Item    // refresh lanes, host by host, oldest first
	Staged   map[uint64]bool // keys of the results flagged for a refresh
	Robots   map[string]string
	Breakers map[string]string
	Trans    []string
}

func takeSnapshot(t tb, db *DB) snapshot {
	t.Helper()
	s := snapshot{Hosts: hostCounts(t, db), Seen: map[uint64]bool{}, Results: map[store.Hash]store.Result{},
		Staged: map[uint64]bool{}, Robots: map[string]string{}, Breakers: map[string]string{}}
	s.Counts = mustCounts(t, db)
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if err := readSnapshot(tx, &s); err != nil {
			return err
		}
		return tx.Bucket(bucketTransitions).ForEach(func(_, v []byte) error {
			s.Trans = append(s.Trans, string(v))
			return nil
		})
	})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	return s
}

func readSnapshot(tx *bolt.Tx, s *snapshot) error {
	err := tx.Bucket(bucketSeen).ForEach(func(k, v []byte) error {
		for i := 0; i+8 <= len(v); i += 8 {
			fp := binary.LittleEndian.Uint64(v[i:])
			if s.Seen[fp] {
				return fmt.Errorf("fingerprint %x logged twice", fp)
			}
			s.Seen[fp] = true
		}
		return nil
	})
	if err != nil {
		return err
	}
	_ = tx.Bucket(bucketRobots).ForEach(func(k, v []byte) error {
		s.Robots[string(k)] = string(v)
		return nil
	})
	_ = tx.Bucket(bucketBreakers).ForEach(func(k, v []byte) error {
		s.Breakers[string(k)] = string(v)
		return nil
	})
	queue := tx.Bucket(bucketQueue)
	err = queue.ForEach(func(host, v []byte) error {
		if v != nil {
			return fmt.Errorf("queue holds a value under %q, want only host buckets", host)
		}
		return queue.Bucket(host).ForEach(func(k, v []byte) error {
			it, err := decodeQueued(string(host), k, v)
			if string(seqKey(it.Seq)) != string(k) {
				return fmt.Errorf("queue key %s/%x does not match item %s seq %d", host, k, it.Host, it.Seq)
			}
			s.Queue = append(s.Queue, it)
			return err
		})
	})
	if err != nil {
		return err
	}
	err = tx.Bucket(bucketDeferred).ForEach(func(k, v []byte) error {
		it, err := decodeDeferred(k, v)
		s.Deferred = append(s.Deferred, deferredEntry{Due: int64(beUint64(k[:8])), Item: it})
		return err
	})
	if err != nil {
		return err
	}
	if err := readLanes(tx, s); err != nil {
		return err
	}
	return tx.Bucket(bucketResults).ForEach(func(k, v []byte) error {
		h, r, err := store.DecodeResult(v)
		if err != nil {
			return err
		}
		if v[0] == store.RecordRefreshing {
			s.Staged[beUint64(k)] = true
		}
		if (v[0] == store.RecordFailed) != r.Failed() {
			return fmt.Errorf("result %x: flag %q disagrees with error class %q", k, v[0], r.ErrorClass)
		}
		if _, dup := s.Results[h]; dup {
			return fmt.Errorf("URL hash %x has two results", h)
		}
		s.Results[h] = r
		return nil
	})
}

func readLanes(tx *bolt.Tx, s *snapshot) error {
	lanes := tx.Bucket(bucketRefresh)
	if lanes == nil { // a read-only file from before lanes
		return nil
	}
	return lanes.ForEach(func(host, v []byte) error {
		if v != nil {
			return fmt.Errorf("refresh holds a value under %q, want only host buckets", host)
		}
		lane := lanes.Bucket(host)
		if k, _ := lane.Cursor().First(); k == nil {
			return fmt.Errorf("refresh lane of %q is empty, want it dropped", host)
		}
		return lane.ForEach(func(k, v []byte) error {
			it, err := decodeStaged(string(host), k, v)
			s.Lane = append(s.Lane, it)
			return err
		})
	})
}

// checkStaged verifies recrawl.go's invariant: each result flagged for a
// refresh is replaced by exactly one pending Item, and each Item in a lane
// replaces such a result.
func checkStaged(t tb, s snapshot) {
	t.Helper()
	replacing := map[uint64]int{}
	for _, it := range s.Lane {
		if !s.Staged[it.Replaces] {
			t.Fatalf("lane item %s replaces result %d, which is not flagged for a refresh", it.URL, it.Replaces)
		}
		replacing[it.Replaces]++
	}
	for _, it := range s.Queue {
		replacing[it.Replaces]++
	}
	for _, d := range s.Deferred {
		replacing[d.Item.Replaces]++
	}
	for key := range s.Staged {
		if n := replacing[key]; n != 1 {
			t.Fatalf("result %d is flagged for a refresh and replaced by %d pending items, want 1", key, n)
		}
	}
}

// checkInvariants verifies what doc.go promises: the stored counters equal
// what the buckets hold, per host and in total, every queued or deferred
// hash is in seen, and no hash is both queued and deferred (or twice in either).
func checkInvariants(t tb, db *DB) {
	t.Helper()
	checkBolt(t, db)
	checkVerify(t, db)
	s := takeSnapshot(t, db)
	var want store.Counts
	hosts := map[string]store.HostCounts{}
	where := map[store.Hash]string{}
	place := func(h store.Hash, bucket string) {
		if prev, dup := where[h]; dup {
			t.Fatalf("hash %x is in %s and in %s", h, prev, bucket)
		}
		where[h] = bucket
		if !s.Seen[fingerprint(h)] {
			t.Fatalf("hash %x is in %s but not in seen", h, bucket)
		}
	}
	for _, it := range s.Queue {
		place(it.Hash, "queue")
		hc := hosts[it.Host]
		hc.Queued++
		hosts[it.Host] = hc
		want.Queued++
	}
	for _, it := range s.Lane {
		place(it.Hash, "refresh lane")
	}
	checkStaged(t, s)
	for _, d := range s.Deferred {
		place(d.Item.Hash, "deferred")
		hc := hosts[d.Item.Host]
		hc.Deferred++
		hosts[d.Item.Host] = hc
		want.Deferred++
	}
	var tallies store.Tallies
	for _, r := range s.Results {
		tallies.AddStatus(r.Status, 1)
		if r.Failed() {
			tallies.AddFailed(r.ErrorClass, 1)
		}
		hc := hosts[r.Host]
		if r.Failed() {
			hc.Failed++
			want.Failed++
		} else {
			hc.Fetched++
			want.Fetched++
		}
		hosts[r.Host] = hc
	}
	want.Seen = int64(len(s.Seen))
	if n := db.seen.len(); n != len(s.Seen) && !db.readOnly {
		t.Fatalf("seen set in memory holds %d fingerprints, the log %d", n, len(s.Seen))
	}
	for fp := range s.Seen {
		if !db.seen.has(fp) && !db.readOnly {
			t.Fatalf("logged fingerprint %x missing from the seen set in memory", fp)
		}
	}
	if stored, err := db.Tallies(); err != nil || !maps.Equal(stored.Status, tallies.Status) ||
		!maps.Equal(stored.Failed, tallies.Failed) {
		t.Fatalf("stored tallies = %+v (%v), results hold %+v", stored, err, tallies)
	}
	if s.Counts != want {
		t.Fatalf("stored Counts = %+v, buckets hold %+v", s.Counts, want)
	}
	for host, got := range s.Hosts {
		if got != hosts[host] {
			t.Fatalf("stored counts of host %q = %+v, buckets hold %+v", host, got, hosts[host])
		}
	}
	for host, w := range hosts {
		if _, ok := s.Hosts[host]; !ok && w != (store.HostCounts{}) {
			t.Fatalf("host %q has no stored counts, buckets hold %+v", host, w)
		}
	}
}

// checkVerify asserts that Verify finds nothing wrong with the frontier
// the test left: its queue, deferred URLs, lanes, results, seen set and
// counters. The small records (breakers, transitions, cases, robots.txt)
// are passed over: tests write them by hand, as no crawl would.
func checkVerify(t tb, db *DB) {
	t.Helper()
	rep, err := db.Verify(VerifyOptions{MaxProblems: 1000})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	var problems []string
	for _, p := range rep.Problems {
		handMade := false
		for _, prefix := range []string{"breaker of ", "decode breaker", "transition ", "decode transition", "case ", "decode case", "decode robots"} {
			handMade = handMade || strings.HasPrefix(p, prefix)
		}
		if !handMade {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 || rep.Omitted > 0 {
		t.Fatalf("Verify: %q (and %d more)", problems, rep.Omitted)
	}
}

// checkBolt runs bbolt's own page-level consistency check.
func checkBolt(t tb, db *DB) {
	t.Helper()
	var errs []error
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		return nil
	})
	if err != nil || len(errs) > 0 {
		t.Fatalf("bbolt check: %v %v", err, errs)
	}
}

// resultKeys maps each stored result's URL hash to its key.
func resultKeys(t tb, db *DB) map[store.Hash]uint64 {
	t.Helper()
	keys := map[store.Hash]uint64{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketResults).ForEach(func(k, v []byte) error {
			h, _, err := store.DecodeResult(v)
			keys[h] = beUint64(k)
			return err
		})
	})
	if err != nil {
		t.Fatalf("result keys: %v", err)
	}
	return keys
}
