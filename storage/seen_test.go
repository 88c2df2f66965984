package storage

import (
	"breakwater/store"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"
)

// fpGen draws non-zero fingerprints that stress the table: a small range so
// that duplicates are common, values sharing their low 16 bits (one long
// probe chain), values whose low 12 bits are all ones (chains that wrap from
// the last slot of the smallest table to the first), and arbitrary ones.
var fpGen = rapid.OneOf(
	rapid.Uint64Range(1, 64),
	rapid.Map(rapid.Uint64Range(1, 255), func(v uint64) uint64 { return v << 16 }),
	rapid.Map(rapid.Uint64Range(0, 255), func(v uint64) uint64 { return v<<12 | 0xfff }),
	rapid.Uint64Range(1, math.MaxUint64),
)

func TestSeenSetMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := &seenSet{}
		model := map[uint64]bool{}
		// Sometimes a bulk of distinct values first, so that later batches
		// also run across a doubling.
		bulk := make([]uint64, rapid.IntRange(0, 3500).Draw(t, "bulk"))
		for i := range bulk {
			bulk[i] = uint64(i+1)*0x9e3779b97f4a7c15 | 1<<63
			model[bulk[i]] = true
		}
		s.addAll(bulk)
		for i, batch := range rapid.SliceOfN(rapid.SliceOfN(fpGen, 0, 400), 1, 12).Draw(t, "batches") {
			s.addAll(batch)
			for _, fp := range batch {
				model[fp] = true
			}
			checkSeenSet(t, s, model)
			for _, fp := range batch {
				if !s.has(fp) {
					t.Fatalf("batch %d: has(%#x) = false after adding it", i, fp)
				}
			}
			for _, fp := range rapid.SliceOfN(fpGen, 0, 50).Draw(t, "probes") {
				if got := s.has(fp); got != model[fp] {
					t.Fatalf("batch %d: has(%#x) = %v, model %v", i, fp, got, model[fp])
				}
			}
		}
	})
}

// checkSeenSet compares the whole table with the model: size, load, and
// every slot.
func checkSeenSet(t tb, s *seenSet, model map[uint64]bool) {
	t.Helper()
	if got := s.len(); got != len(model) {
		t.Fatalf("len() = %d, model holds %d", got, len(model))
	}
	size := len(s.slots)
	if size < minSeenSlots || size&(size-1) != 0 {
		t.Fatalf("table has %d slots, want a power of two of at least %d", size, minSeenSlots)
	}
	if 4*s.n > 3*size {
		t.Fatalf("table holds %d in %d slots: more than 3/4 full", s.n, size)
	}
	inTable := map[uint64]bool{}
	for i, fp := range s.slots {
		if fp == 0 {
			continue
		}
		if inTable[fp] || !model[fp] {
			t.Fatalf("slot %d holds %#x: duplicated or never added", i, fp)
		}
		inTable[fp] = true
	}
	if len(inTable) != len(model) {
		t.Fatalf("table slots hold %d fingerprints, model %d", len(inTable), len(model))
	}
	for fp := range model {
		if !s.has(fp) {
			t.Fatalf("has(%#x) = false, but it was added", fp)
		}
	}
}

func TestSeenSetGrowsKeepingEverything(t *testing.T) {
	const total = 40000 // past 3/4 of 2^12, 2^13, 2^14 and 2^15 slots
	tests := []struct {
		name  string
		chunk int
	}{
		{"one at a time", 1},
		{"chunks of 7", 7},
		{"chunks of 1000", 1000},
		{"all at once", total},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &seenSet{}
			model := map[uint64]bool{}
			sizes := []int{}
			for start := 0; start < total; start += tt.chunk {
				var fps []uint64
				for i := start; i < min(start+tt.chunk, total); i++ {
					fps = append(fps, uint64(i+1)*0x9e3779b97f4a7c15) // odd multiplier: distinct, never 0
					model[fps[len(fps)-1]] = true
				}
				s.addAll(fps)
				if n := len(s.slots); len(sizes) == 0 || sizes[len(sizes)-1] != n {
					sizes = append(sizes, n)
				}
			}
			checkSeenSet(t, s, model)
			if tt.chunk == 1 && len(sizes) < 5 {
				t.Errorf("table sizes went %v, want at least four doublings", sizes)
			}
			if want := 1 << 16; len(s.slots) != want {
				t.Errorf("%d fingerprints in %d slots, want %d (smallest power of two at most 3/4 full)",
					total, len(s.slots), want)
			}
		})
	}
}

func TestFingerprintNeverZero(t *testing.T) {
	var tail store.Hash
	for i := 8; i < len(tail); i++ {
		tail[i] = byte(i)
	}
	var one store.Hash
	one[0] = 1
	tests := []struct {
		name string
		h    store.Hash
		want uint64
	}{
		{"zero hash", store.Hash{}, 1},
		{"first 8 bytes zero", tail, 1},
		{"little-endian 1", one, 1},
		{"ordinary", store.HashOf("http://a.com/"), binary.LittleEndian.Uint64(hashPrefix("http://a.com/"))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fingerprint(tt.h); got != tt.want {
				t.Fatalf("fingerprint(%x) = %#x, want %#x", tt.h, got, tt.want)
			}
		})
	}
	rapid.Check(t, func(t *rapid.T) {
		var h store.Hash
		copy(h[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "hash"))
		if fingerprint(h) == 0 {
			t.Fatalf("fingerprint(%x) = 0", h)
		}
	})
}

func hashPrefix(u string) []byte {
	h := store.HashOf(u)
	return h[:8]
}

// seenLogEntries counts the seen log's records.
func seenLogEntries(t tb, db *DB) int { return bucketKeys(t, db, bucketSeen) }

// bucketKeys counts the keys of a top-level bucket.
func bucketKeys(t tb, db *DB, name []byte) int {
	t.Helper()
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(name).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatalf("bucket %s: %v", name, err)
	}
	return n
}

func TestSeenSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openAt(t, path, nil)
	page := func(i int) store.Item { return item(fmt.Sprintf("h%d.com", i%7), fmt.Sprintf("/%d", i)) }
	// Enough URLs that loading them back grows the table past its first size.
	batches := [][2]int{{0, 2000}, {1500, 3500}, {3000, 3000}, {0, 1000}, {3400, 5000}}
	added := map[store.Hash]bool{}
	logged := 0
	for _, r := range batches {
		var items []store.Item
		for i := r[0]; i < r[1]; i++ {
			items = append(items, page(i), page(i)) // twice within the batch
		}
		got := enqueue(t, db, items...)
		fresh := 0
		for i := r[0]; i < r[1]; i++ {
			if !added[page(i).Hash] {
				fresh++
			}
			added[page(i).Hash] = true
		}
		if len(got) != fresh {
			t.Fatalf("batch %v queued %d URLs, want %d new", r, len(got), fresh)
		}
		if fresh > 0 {
			logged++
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openAt(t, path, nil)
	if n := seenLogEntries(t, db); n != logged {
		t.Errorf("seen log holds %d entries, want one per commit that queued something: %d", n, logged)
	}
	s := takeSnapshot(t, db) // fails on a fingerprint logged twice
	if len(s.Seen) != len(added) || s.Counts.Seen != int64(len(added)) || db.seen.len() != len(added) {
		t.Fatalf("after reopen: log %d fingerprints, Counts.Seen %d, set %d; want %d",
			len(s.Seen), s.Counts.Seen, db.seen.len(), len(added))
	}
	for i := range 6000 {
		if got, want := db.Seen(page(i).Hash), added[page(i).Hash]; got != want {
			t.Fatalf("Seen(%s) = %v after reopen, want %v", page(i).URL, got, want)
		}
	}
	if again := enqueue(t, db, page(10), page(4999), page(5000)); len(again) != 1 || again[0].URL != page(5000).URL {
		t.Fatalf("after reopen Add queued %v, want only the new %s", urls(again), page(5000).URL)
	}
}

// A commit that fails must leave the in-memory set as it was: otherwise its
// URLs would be skipped as seen forever though nothing of them is stored.
func TestFailedCommitLeavesSeenSet(t *testing.T) {
	db := openTestDB(t)
	enqueue(t, db, item("a.com", "/old"))
	fresh := []store.Item{item("a.com", "/1"), item("a.com", "/2"), item("b.com", "/1")}
	var b store.Batch
	for _, it := range fresh {
		b.Add(it)
		b.Add(it)
	}
	b.PutRobots("", rules(t, 404, "")) // bbolt refuses an empty key: the transaction fails
	if c, err := db.Commit(&b); err == nil {
		t.Fatalf("Commit succeeded: %+v", c)
	}
	for _, it := range fresh {
		if db.Seen(it.Hash) {
			t.Errorf("Seen(%s) = true after its commit failed", it.URL)
		}
	}
	if n := db.seen.len(); n != 1 {
		t.Errorf("seen set holds %d fingerprints after a failed commit, want 1", n)
	}
	if got := enqueue(t, db, fresh...); len(got) != len(fresh) {
		t.Fatalf("later commit queued %v, want all of %v", urls(got), urls(fresh))
	}
	for _, it := range fresh {
		if !db.Seen(it.Hash) {
			t.Errorf("Seen(%s) = false after it was committed", it.URL)
		}
	}
}

// damageSeenLog writes one raw entry into the seen log of a closed file.
func damageSeenLog(t *testing.T, path string, v []byte) {
	t.Helper()
	updateBolt(t, path, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSeen)
		seq, err := bk.NextSequence()
		if err != nil {
			return err
		}
		return bk.Put(u64(seq), v)
	})
}

func TestOpenRejectsDamagedSeenLog(t *testing.T) {
	good := binary.LittleEndian.AppendUint64(nil, 42)
	tests := []struct {
		name  string
		entry []byte
		want  string
	}{
		{"7 bytes", []byte{1, 2, 3, 4, 5, 6, 7}, "not a multiple of 8"},
		{"12 bytes", append(append([]byte(nil), good...), 1, 2, 3, 4), "not a multiple of 8"},
		{"zero fingerprint", append(append([]byte(nil), good...), make([]byte, 8)...), "zero fingerprint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "crawl.db")
			db := openAt(t, path, nil)
			enqueue(t, db, item("a.com", "/1"), item("a.com", "/2"))
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			damageSeenLog(t, path, tt.entry)
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			db, err = Open(path, nil)
			if err == nil {
				db.Close()
				t.Fatal("Open of a file with a damaged seen log succeeded")
			}
			for _, s := range []string{path, "seen log", tt.want} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("Open rejected the file but modified it (%d bytes before, %d after)", len(before), len(after))
			}
		})
	}
}

// Readers call Seen while two writers commit; the table grows meanwhile.
// A hash committed before a reader looks must be seen; one never added
// must not be.
func TestSeenDuringCommits(t *testing.T) {
	db := openTestDB(t)
	const writers, batches, perBatch, readers = 2, 25, 80, 4 // 4000 URLs: one doubling
	page := func(w, i int) store.Item { return item(fmt.Sprintf("w%d.com", w), fmt.Sprintf("/%d", i)) }
	var done [writers]atomic.Int64 // URLs of each writer committed so far
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for k := range batches {
				var b store.Batch
				for i := k * perBatch; i < (k+1)*perBatch; i++ {
					b.Add(page(w, i))
				}
				if _, err := db.Commit(&b); err != nil {
					errs <- err
					return
				}
				done[w].Store(int64((k + 1) * perBatch))
			}
		})
	}
	var rg sync.WaitGroup
	for r := range readers {
		rg.Go(func() {
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				w := (r + round) % writers
				n := int(done[w].Load())
				for i := range n {
					if !db.Seen(page(w, i).Hash) {
						errs <- fmt.Errorf("reader %d: %s committed but not seen", r, page(w, i).URL)
						return
					}
				}
				if db.Seen(page(w, -1-round).Hash) {
					errs <- fmt.Errorf("reader %d: %s never added but seen", r, page(w, -1-round).URL)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := db.seen.len(); n != writers*batches*perBatch {
		t.Fatalf("seen set holds %d, want %d", n, writers*batches*perBatch)
	}
}
