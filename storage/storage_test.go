package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"
	"pgregory.net/rapid"

	"breakwater/breaker"
	"breakwater/store"
)

func TestOpenCreatesBucketsAndSchema(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openAt(t, path, nil)
	if db.Path() != path {
		t.Fatalf("Path() = %q, want %q", db.Path(), path)
	}
	checkLayout(t, db)
	if got := mustCounts(t, db); got != (store.Counts{}) {
		t.Fatalf("Counts of a new file = %+v, want zero", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := openAt(t, path, nil)
	checkLayout(t, again)
}

func checkLayout(t *testing.T, db *DB) {
	t.Helper()
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if tx.Bucket(name) == nil {
				t.Errorf("bucket %s missing", name)
			}
		}
		if v := tx.Bucket(bucketMeta).Get(keySchema); !bytes.Equal(v, []byte{0, 0, 0, SchemaVersion}) {
			t.Errorf("schema record = %x, want 4-byte big-endian %d", v, SchemaVersion)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// updateBolt runs fn in one raw bbolt transaction on the file at path,
// bypassing Open's checks: how tests write what Breakwater never would.
func updateBolt(t *testing.T, path string, fn func(*bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
}

// writeBolt creates a bbolt file at path holding the given bucket -> key -> value.
func writeBolt(t *testing.T, path string, content map[string]map[string][]byte) {
	t.Helper()
	updateBolt(t, path, func(tx *bolt.Tx) error {
		for name, kv := range content {
			bk, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range kv {
				if err := bk.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

func schemaBytes(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }

func TestOpenRejects(t *testing.T) {
	tests := []struct {
		name       string
		make       func(t *testing.T, path string)
		wantSchema bool     // errors.Is(err, ErrSchema)
		wantMsg    []string // besides the path
	}{
		{"newer schema", func(t *testing.T, p string) {
			writeBolt(t, p, map[string]map[string][]byte{"meta": {"schema": schemaBytes(99)}})
		}, true, []string{"99", "understands 3"}},
		{"older schema (version 1: hash-keyed seen and results)", func(t *testing.T, p string) {
			writeBolt(t, p, map[string]map[string][]byte{"meta": {"schema": schemaBytes(1)}, "seen": {"0123456789abcdef": {1}}})
		}, true, []string{"version 1", "understands 3"}},
		{"older schema (version 2: one queue bucket keyed by host and seq)", func(t *testing.T, p string) {
			writeBolt(t, p, map[string]map[string][]byte{"meta": {"schema": schemaBytes(2)}, "queue": {"a.test\x00\x00\x00\x00\x00\x00\x00\x00\x01": {1}}})
		}, true, []string{"version 2", "understands 3"}},
		{"foreign bbolt file", func(t *testing.T, p string) {
			writeBolt(t, p, map[string]map[string][]byte{"other": {"k": []byte("v")}})
		}, true, []string{"metadata"}},
		{"malformed schema record", func(t *testing.T, p string) {
			writeBolt(t, p, map[string]map[string][]byte{"meta": {"schema": {0, 1}}})
		}, true, []string{"malformed"}},
		{"meta without schema", func(t *testing.T, p string) {
			writeBolt(t, p, map[string]map[string][]byte{"meta": {"settings": []byte("{}")}})
		}, true, []string{"missing"}},
		{"garbage", func(t *testing.T, p string) {
			garbage := make([]byte, 64<<10)
			rng := rand.New(rand.NewPCG(1, 2))
			for i := range garbage {
				garbage[i] = byte(rng.Uint32())
			}
			if err := os.WriteFile(p, garbage, 0o644); err != nil {
				t.Fatal(err)
			}
		}, false, []string{"no valid bbolt header"}},
	}
	for _, tt := range tests {
		for _, ro := range []bool{false, true} {
			name := tt.name
			if ro {
				name += "/read-only"
			}
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "crawl.db")
				tt.make(t, path)
				before, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				db, err := Open(path, &Options{ReadOnly: ro})
				if err == nil {
					db.Close()
					t.Fatal("Open succeeded")
				}
				if errors.Is(err, ErrSchema) != tt.wantSchema {
					t.Errorf("errors.Is(%v, ErrSchema) = %v, want %v", err, !tt.wantSchema, tt.wantSchema)
				}
				for _, s := range append([]string{path}, tt.wantMsg...) {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
					t.Errorf("rejected file was modified")
				}
			})
		}
	}
}

func TestOpenReadOnlyMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing.db")
	db, err := Open(path, &Options{ReadOnly: true})
	if err == nil {
		db.Close()
		t.Fatal("read-only Open of a missing file succeeded")
	}
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want a not-exist error naming %s", err, path)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read-only Open created the file (stat: %v)", err)
	}
}

// bbolt takes a flock, which belongs to the open file description: a second
// Open of the same file, even in this process, waits for it like another
// process would. The wait runs in a synctest bubble so it takes no real time.
func TestOpenLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	holder := openAt(t, path, nil)
	for _, ro := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			start := time.Now()
			db, err := Open(path, &Options{LockTimeout: 200 * time.Millisecond, ReadOnly: ro})
			waited := time.Since(start)
			if err == nil {
				db.Close()
				t.Fatalf("Open(ReadOnly=%v) of a locked file succeeded", ro)
			}
			if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
				t.Fatalf("Open(ReadOnly=%v) err = %v, want ErrLocked naming the file", ro, err)
			}
			if waited < 100*time.Millisecond || waited > 1500*time.Millisecond {
				t.Fatalf("Open(ReadOnly=%v) gave up after %v, want about the 200ms LockTimeout", ro, waited)
			}
		})
	}
	if err := holder.Close(); err != nil {
		t.Fatal(err)
	}
	openAt(t, path, &Options{LockTimeout: 200 * time.Millisecond}) // the lock is released on Close
}

// fillState writes a bit of everything, over several commits.
func fillState(t *testing.T, db *DB) {
	t.Helper()
	q := enqueue(t, db, item("a.com", "/1"), item("a.com", "/2"), item("a.com", "/3"),
		item("b.com", "/1"), item("b.com:81", "/1"))
	commit(t, db, func(b *store.Batch) {
		b.Complete(q[0], ok200(q[0]))
		b.Complete(q[3], timeout(q[3]))
		b.Defer(q[1], t2)
		b.PutRobots("a.com", rules(t, 200, "User-agent: *\nDisallow: /private/\n"))
		b.PutBreaker("b.com", breaker.Breaker{State: breaker.Open, OpenedAt: t1, Rest: time.Minute})
		b.AppendTransition(store.Transition{At: t1, Host: "b.com", From: "closed", To: "open"})
		b.Add(item("c.com", "/"))
	})
	if err := db.PutSettings([]byte(`{"seeds":["http://a.com/"]}`)); err != nil {
		t.Fatal(err)
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openAt(t, path, nil)
	db.bolt.NoSync = false // this one pays for real commits
	fillState(t, db)
	before := takeSnapshot(t, db)
	if want := (store.Counts{Seen: 6, Queued: 3, Deferred: 1, Fetched: 1, Failed: 1}); before.Counts != want {
		t.Fatalf("Counts = %+v, want %+v", before.Counts, want)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		db := openAt(t, path, &Options{ReadOnly: ro})
		if after := takeSnapshot(t, db); !reflect.DeepEqual(before, after) {
			t.Fatalf("after reopen (ReadOnly=%v):\n got %+v\nwant %+v", ro, after, before)
		}
		if s, err := db.Settings(); err != nil || len(s) == 0 {
			t.Fatalf("Settings after reopen = %q, %v", s, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFailedCommitAppliesNothing(t *testing.T) {
	tests := []struct {
		name string
		bad  func(b *store.Batch)
	}{
		{"empty robots key", func(b *store.Batch) { b.PutRobots("", rules(t, 404, "")) }},
		{"breaker key too large", func(b *store.Batch) { b.PutBreaker(strings.Repeat("h", bolt.MaxKeySize+1), breaker.Breaker{}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTestDB(t)
			fillState(t, db)
			q := loadAll(t, db, "a.com")
			before := takeSnapshot(t, db)
			var b store.Batch
			b.Add(item("new.com", "/"))
			b.Complete(q[0], ok200(q[0]))
			b.Promote(t4, 10)
			b.FailHost("b.com:81", store.Result{ErrorClass: "refused"}, nil)
			b.AppendTransition(store.Transition{Host: "lost"})
			tt.bad(&b)
			c, err := db.Commit(&b)
			if err == nil {
				t.Fatalf("Commit succeeded: %+v", c)
			}
			if c != nil {
				t.Errorf("Commit returned %+v along with error %v", c, err)
			}
			if after := takeSnapshot(t, db); !reflect.DeepEqual(before, after) {
				t.Fatalf("failed commit changed the file:\n got %+v\nwant %+v", after, before)
			}
			if added := enqueue(t, db, item("new.com", "/")); len(added) != 1 {
				t.Fatalf("after a failed commit, adding its URL queued %d items, want 1", len(added))
			}
		})
	}
}

func TestCommitReadOnlyFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openAt(t, path, nil)
	fillState(t, db)
	db.Close()
	ro := openAt(t, path, &Options{ReadOnly: true})
	if _, err := ro.Commit(&store.Batch{}); err == nil {
		t.Fatal("Commit on a read-only DB succeeded")
	}
	if err := ro.PutSettings([]byte("x")); err == nil {
		t.Fatal("PutSettings on a read-only DB succeeded")
	}
}

// The property test drives the store with random batches and compares it,
// after every commit, with a plain in-memory model of the frontier.

type recState int

const (
	stNone recState = iota
	stQueued
	stDeferred
	stFetched
	stFailed
)

// rec is the model of one URL. A requeued URL keeps its old result until it
// is completed again, so it has both a place and a result.
type rec struct {
	it     store.Item // Seq is 0 until the commit that queued it reports it
	key    uint64     // of its stored result, once a commit has stored one
	place  recState   // stQueued, stDeferred or stNone
	result recState   // stFetched, stFailed or stNone
	due    time.Time
}

// places lists where the store must hold r, in snapshot order.
func (r *rec) places() []recState {
	var out []recState
	for _, st := range []recState{r.place, r.result} {
		if st != stNone {
			out = append(out, st)
		}
	}
	return out
}

type model struct {
	recs   map[store.Hash]*rec
	order  []*rec            // recs in the order they were added
	queues map[string][]*rec // FIFO per host
	parked []*rec            // in due, seq order
	added  []*rec            // queued by the batch being built, in order
}

var propHosts = []string{"a.com", "a.com:8080", "b.com"}

func (m *model) enqueue(r *rec) {
	r.place = stQueued
	r.it.Seq = 0
	m.queues[r.it.Host] = append(m.queues[r.it.Host], r)
	m.added = append(m.added, r)
}

// leave takes r out of its host's queue model.
func (m *model) leave(r *rec) {
	q := m.queues[r.it.Host]
	for i := range q {
		if q[i] == r {
			m.queues[r.it.Host] = append(q[:i:i], q[i+1:]...)
			return
		}
	}
}

// known lists the queued records whose Seq is known (queued by an earlier commit).
func (m *model) known() []*rec {
	var out []*rec
	for _, h := range propHosts {
		for _, r := range m.queues[h] {
			if r.it.Seq != 0 {
				out = append(out, r)
			}
		}
	}
	return out
}

func (m *model) promote(now time.Time, limit int) {
	n := 0
	for n < len(m.parked) && n < limit && !m.parked[n].due.After(now) {
		m.enqueue(m.parked[n])
		n++
	}
	m.parked = m.parked[n:]
}

func (m *model) park(r *rec, due time.Time) {
	r.place, r.due = stDeferred, due
	i := 0
	for i < len(m.parked) && (m.parked[i].due.Before(due) || m.parked[i].due.Equal(due) && m.parked[i].it.Seq < r.it.Seq) {
		i++
	}
	m.parked = append(m.parked[:i], append([]*rec{r}, m.parked[i:]...)...)
}

// propOp is one random batch operation. All of it is drawn before the model
// is touched: a draw rapid rejects part-way must not leave the model ahead
// of the store.
type propOp struct {
	Kind, Host, Path, Pick, Secs, Limit int
	Failed                              bool
}

var propOpGen = rapid.Custom(func(t *rapid.T) propOp {
	return propOp{
		Kind:   rapid.IntRange(0, 9).Draw(t, "kind"),
		Host:   rapid.IntRange(0, len(propHosts)-1).Draw(t, "host"),
		Path:   rapid.IntRange(0, 5).Draw(t, "path"),
		Pick:   rapid.IntRange(0, 1<<16).Draw(t, "pick"),
		Secs:   rapid.IntRange(0, 5).Draw(t, "secs"),
		Limit:  rapid.IntRange(0, 3).Draw(t, "limit"),
		Failed: rapid.Bool().Draw(t, "failed"),
	}
})

// apply adds op to b and applies it to the model.
func (m *model) apply(op propOp, b *store.Batch) {
	at := t0.Add(time.Duration(op.Secs) * time.Second)
	switch op.Kind {
	case 0, 1, 2, 3:
		it := item(propHosts[op.Host], fmt.Sprintf("/%d", op.Path))
		b.Add(it)
		if m.recs[it.Hash] == nil {
			r := &rec{it: it}
			m.recs[it.Hash] = r
			m.order = append(m.order, r)
			m.enqueue(r)
		}
	case 4, 5:
		if c := m.known(); len(c) > 0 {
			r := c[op.Pick%len(c)]
			res := ok200(r.it)
			m.leave(r)
			r.place, r.result = stNone, stFetched
			if op.Failed {
				res, r.result = timeout(r.it), stFailed
			}
			b.Complete(r.it, res)
			r.key = 0 // known after the commit
		}
	case 6, 7:
		if c := m.known(); len(c) > 0 {
			r := c[op.Pick%len(c)]
			b.Defer(r.it, at)
			m.leave(r)
			m.park(r, at)
		}
	case 8:
		var done []*rec
		for _, r := range m.order {
			if r.place == stNone && r.key != 0 {
				done = append(done, r)
			}
		}
		if len(done) > 0 {
			r := done[op.Pick%len(done)]
			r.it.Replaces = r.key
			b.Requeue(r.it)
			m.enqueue(r)
		}
	default:
		b.Promote(at, op.Limit)
		m.promote(at, op.Limit)
	}
}

func (m *model) counts() (store.Counts, map[string]store.HostCounts) {
	c := store.Counts{Seen: int64(len(m.recs))}
	hosts := map[string]store.HostCounts{}
	for _, r := range m.recs {
		hc := hosts[r.it.Host]
		switch r.place {
		case stQueued:
			c.Queued++
			hc.Queued++
		case stDeferred:
			c.Deferred++
			hc.Deferred++
		}
		switch r.result {
		case stFetched:
			c.Fetched++
			hc.Fetched++
		case stFailed:
			c.Failed++
			hc.Failed++
		}
		hosts[r.it.Host] = hc
	}
	return c, hosts
}

func TestStoreMatchesModel(t *testing.T) {
	dir := t.TempDir()
	runs := 0
	rapid.Check(t, func(t *rapid.T) {
		runs++
		path := filepath.Join(dir, fmt.Sprintf("run%d.db", runs))
		db := openAt(t, path, nil)
		m := &model{recs: map[store.Hash]*rec{}, queues: map[string][]*rec{}}
		t.Repeat(map[string]func(*rapid.T){
			"batch": func(t *rapid.T) {
				var b store.Batch
				for _, op := range rapid.SliceOfN(propOpGen, 1, 6).Draw(t, "ops") {
					m.apply(op, &b)
				}
				c, err := db.Commit(&b)
				if err != nil {
					t.Fatalf("Commit: %v", err)
				}
				m.checkCommitted(t, c)
				keys := resultKeys(t, db)
				for h, r := range m.recs {
					r.key = keys[h]
				}
				if rapid.IntRange(0, 9).Draw(t, "reopen") == 0 {
					if err := db.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					db = openAt(t, path, nil)
				}
			},
			"": func(t *rapid.T) { m.checkStore(t, db) },
		})
	})
}

// checkCommitted matches Committed against the model and records the Seqs.
func (m *model) checkCommitted(t *rapid.T, c *store.Committed) {
	t.Helper()
	if len(c.Added) != len(m.added) {
		t.Fatalf("Committed.Added has %d items, model queued %d", len(c.Added), len(m.added))
	}
	for i, it := range c.Added {
		want := m.added[i].it
		want.Seq = it.Seq
		if it != want || it.Seq == 0 {
			t.Fatalf("Added[%d] = %+v, want %+v", i, it, want)
		}
		m.added[i].it.Seq = it.Seq
	}
	m.added = m.added[:0]
	var wantNext time.Time
	if len(m.parked) > 0 {
		wantNext = m.parked[0].due
	}
	if !c.NextDue.Equal(wantNext) {
		t.Fatalf("NextDue = %v, want %v", c.NextDue, wantNext)
	}
}

func (m *model) checkStore(t *rapid.T, db *DB) {
	t.Helper()
	want, wantHosts := m.counts()
	if got := mustCounts(t, db); got != want {
		t.Fatalf("Counts = %+v, model %+v", got, want)
	}
	var sum store.HostCounts
	for host, got := range hostCounts(t, db) {
		sum.Add(got)
		if got != wantHosts[host] {
			t.Fatalf("counts of %s = %+v, model %+v", host, got, wantHosts[host])
		}
	}
	if total := (store.HostCounts{Queued: want.Queued, Deferred: want.Deferred, Fetched: want.Fetched, Failed: want.Failed}); sum != total {
		t.Fatalf("per-host counts sum to %+v, Counts say %+v", sum, total)
	}
	for _, h := range propHosts {
		var wantQ []store.Item
		for _, r := range m.queues[h] {
			wantQ = append(wantQ, r.it)
		}
		if got := loadAll(t, db, h); len(got)+len(wantQ) > 0 && !reflect.DeepEqual(got, wantQ) {
			t.Fatalf("queue of %s = %v, model %v", h, urls(got), urls(wantQ))
		}
	}
	checkNoURLLost(t, db, m)
}

// checkNoURLLost asserts every added hash is in exactly one of queue,
// deferred or results (a requeued one in results too), as the model expects.
func checkNoURLLost(t *rapid.T, db *DB, m *model) {
	t.Helper()
	s := takeSnapshot(t, db)
	where := map[store.Hash][]recState{}
	for _, it := range s.Queue {
		where[it.Hash] = append(where[it.Hash], stQueued)
	}
	for _, d := range s.Deferred {
		where[d.Item.Hash] = append(where[d.Item.Hash], stDeferred)
	}
	for h, r := range s.Results {
		st := stFetched
		if r.Failed() {
			st = stFailed
		}
		where[h] = append(where[h], st)
	}
	for h, r := range m.recs {
		if got, want := where[h], r.places(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s is in %v, want exactly %v (1 queue, 2 deferred, 3 fetched, 4 failed)", r.it.URL, got, want)
		}
	}
	if len(where) != len(m.recs) || len(s.Seen) != len(m.recs) {
		t.Fatalf("store holds %d hashes (%d seen), model %d", len(where), len(s.Seen), len(m.recs))
	}
}
