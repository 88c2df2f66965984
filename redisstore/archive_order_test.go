package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// archiveJobs are the jobs of one archived batch as the writer has them
// after the archive wrote its records: pages completed on a.test, each
// with its placement, and the archive's own job with its state (the
// file accounted for up to committed) and a first capture.
func archiveJobs(file string, committed int64, offsets []int64) []job {
	var jobs []job
	for i, off := range offsets {
		it := ftItem("a.test", "/p/"+strconv.Itoa(i))
		var b store.Batch
		b.Complete(it, &store.Result{URL: it.URL, Host: it.Host, Status: 200})
		jobs = append(jobs, job{batch: &b, host: it.Host, hash: it.Hash,
			placement: file + " " + strconv.FormatInt(off, 10)})
	}
	var ab store.Batch
	ab.PutCapture("sha1:ORDER", store.Capture{URI: "http://a.test/p/0"})
	ab.PutArchiveState(store.ArchiveState{File: file, Serial: 1, Committed: committed})
	return append(jobs, job{batch: &ab})
}

// storedArchive returns the committed offset of p1's stored archive state
// (-1: none) and the placements stored for a.test.
func storedArchive(t *testing.T, s *Store) (int64, map[string]string) {
	t.Helper()
	ctx := context.Background()
	committed := int64(-1)
	data, err := s.Client().Get(ctx, keyOfArchive("p1")).Bytes()
	if err == nil {
		var st store.ArchiveState
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatalf("decode the archive state %q: %v", data, err)
		}
		committed = st.Committed
	}
	placements, err := s.Client().HGetAll(ctx, keysOf("a.test").warc).Result()
	if err != nil {
		t.Fatal(err)
	}
	return committed, placements
}

// A batch's archive state (and first captures) is stored before the
// hosts' scripts mark its pages done and name their placements: whatever
// ends a write part way (a kill or an outage between the two steps, a
// host script that fails), the stored state accounts for every record a
// stored result names, so a restart's cut of the open file keeps them.
func TestArchiveStateStoredBeforeResults(t *testing.T) {
	const file, committed = "p1-00001.warc.gz", 3000
	offsets := []int64{0, 1000, 2000}
	cut := errors.New("cut between the archive state and the hosts' scripts")
	for _, tc := range []struct {
		name string
		// hook runs between the two steps; prepare before the write.
		hook    func(t *testing.T, s *Store) error
		prepare func(t *testing.T, s *Store)
		wantErr bool
		done    bool // the results are stored
	}{
		{name: "the write goes through", done: true,
			hook: func(t *testing.T, s *Store) error {
				// Between the steps: the state is stored, no result yet.
				if c, p := storedArchive(t, s); c != committed || len(p) != 0 {
					t.Errorf("between the steps: committed %d, placements %v; want %d and none", c, p, committed)
				}
				return nil
			}},
		{name: "cut between the steps", wantErr: true,
			hook: func(*testing.T, *Store) error { return cut }},
		{name: "the connection closes between the steps", wantErr: true,
			hook: func(t *testing.T, s *Store) error {
				return s.Client().Close()
			}},
		{name: "the host script fails", wantErr: true,
			prepare: func(t *testing.T, s *Store) {
				// A result key of the wrong type: apply.lua fails on its first completion.
				if err := s.Client().Set(context.Background(), keysOf("a.test").results, "x", 0).Err(); err != nil {
					t.Fatal(err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.Start(t)
			s := ftStore(t, srv.URL())
			f := OpenFrontier(s, ftOptions(s, "p1", 0, 3))
			defer f.Close()
			check := ftStore(t, srv.URL()) // reads after the writer's client may be closed
			var queue store.Batch
			for i := range offsets {
				queue.Add(ftItem("a.test", "/p/"+strconv.Itoa(i)))
			}
			if err := f.write([]job{{batch: &queue}}); err != nil {
				t.Fatalf("queue the pages: %v", err)
			}
			if tc.prepare != nil {
				tc.prepare(t, s)
			}
			if tc.hook != nil {
				f.afterArchiveState = func() error { return tc.hook(t, s) }
			}
			err := f.write(archiveJobs(file, committed, offsets))
			if tc.wantErr != (err != nil) {
				t.Fatalf("write: %v, want an error: %v", err, tc.wantErr)
			}
			c, placements := storedArchive(t, check)
			results, err := check.Client().HLen(context.Background(), keysOf("a.test").results).Result()
			if err != nil && strings.Contains(err.Error(), "WRONGTYPE") { // the test broke the key: none stored
				results, err = 0, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := int64(len(offsets)); tc.done != (results == want) || (!tc.done && results != 0) {
				t.Errorf("%d results stored, want all %d: %v", results, want, tc.done)
			}
			if c != committed {
				t.Errorf("stored archive state committed %d, want %d", c, committed)
			}
			if _, ok, err := check.ArchiveStore("p1").LookupCapture("sha1:ORDER"); err != nil || !ok {
				t.Errorf("first capture stored: %v (%v), want it with the state", ok, err)
			}
			if tc.done && len(placements) != len(offsets) {
				t.Errorf("%d placements stored, want %d", len(placements), len(offsets))
			}
			if !tc.done && len(placements) != 0 {
				t.Errorf("placements %v stored, want none", placements)
			}
			for h, p := range placements {
				name, off, _ := strings.Cut(p, " ")
				n, err := strconv.ParseInt(off, 10, 64)
				if err != nil || name != file || n >= c {
					t.Errorf("placement %q of %s is not accounted for by the stored state (%s up to %d)", p, h, file, c)
				}
			}
		})
	}
}

// A look at the fleet that found nothing to do while this process's
// writer queued URLs on a host does not tell the frontier the fleet is
// idle: with a slow link to Redis, a process whose seeds were still on
// their way ended its crawl at once with them queued.
// A write that queues URLs between the peek at the shards and the rest of
// the look (the peek saw no host with work) makes the look not idle: the
// count of such writes is taken before the peek.
func TestWriteAfterThePeekIsNotIdle(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	f := lookingFrontier(s, "p1")
	gen := f.queuedGen
	fleetGen, err := s.queuedCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, active, err := s.peek(context.Background())
	if err != nil || active != 0 {
		t.Fatalf("peek of an empty store: %d active, %v", active, err)
	}
	var b store.Batch
	b.Add(ftItem("a.test", "/seed"))
	if err := f.write([]job{{batch: &b}}); err != nil {
		t.Fatal(err)
	}
	if err := f.lookAtFleet(context.Background(), active, gen, fleetGen); err != nil {
		t.Fatal(err)
	}
	if f.fleetIdle {
		t.Error("the fleet looked idle though a seed was queued after the peek")
	}
}

func TestLookDuringQueueingIsNotIdle(t *testing.T) {
	for _, queueDuring := range []bool{false, true} {
		t.Run(map[bool]string{false: "nothing queued", true: "URLs queued during the look"}[queueDuring], func(t *testing.T) {
			srv := redistest.Start(t)
			s := ftStore(t, srv.URL())
			f := lookingFrontier(s, "p1")
			if queueDuring {
				f.duringLook = func() {
					var b store.Batch
					b.Add(ftItem("a.test", "/seed"))
					if err := f.write([]job{{batch: &b}}); err != nil {
						t.Errorf("queue a seed: %v", err)
					}
				}
			}
			if err := f.lookAtFleet(context.Background(), 0, f.queuedGen, 0); err != nil {
				t.Fatal(err)
			}
			f.mu.Lock()
			idle := f.fleetIdle
			f.mu.Unlock()
			if idle == queueDuring {
				t.Errorf("fleet idle after the look: %v, want %v", idle, !queueDuring)
			}
		})
	}
}

// Another process's look in the window between a write's host scripts and
// its listing of the hosts given new URLs finds no host listed, and no
// host for relist to check (the shard's host set is filled by the same
// listing): the write in progress must keep the fleet from looking idle.
func TestLookWhileAnotherProcessQueuesIsNotIdle(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	writer, looker := lookingFrontier(s, "p1"), lookingFrontier(s, "p2")
	looked := false
	writer.afterHostScripts = func() error {
		fleetGen, err := s.queuedCount(context.Background())
		if err != nil {
			return err
		}
		_, active, err := s.peek(context.Background())
		if err != nil {
			return err
		}
		if err := looker.lookAtFleet(context.Background(), active, looker.queuedGen, fleetGen); err != nil {
			return err
		}
		looked = true
		return nil
	}
	var b store.Batch
	b.Add(ftItem("a.test", "/seed"))
	if err := writer.write([]job{{batch: &b}}); err != nil {
		t.Fatal(err)
	}
	if !looked {
		t.Fatal("the look did not run inside the write")
	}
	looker.mu.Lock()
	idle := looker.fleetIdle
	looker.mu.Unlock()
	if idle {
		t.Error("another process looked idle while a write was queueing URLs it had not listed yet")
	}
	// Once the write is done, its host is listed and its mark gone.
	_, active, err := s.peek(context.Background())
	if err != nil || active == 0 {
		t.Fatalf("after the write: %d shards active, %v", active, err)
	}
	if n, err := s.rdb.ZCard(context.Background(), keyQueueing).Result(); err != nil || n != 0 {
		t.Fatalf("after the write: %d queueing marks, %v; want none", n, err)
	}
}

// A look that starts after a whole write of another process, its peek
// having missed the write's listing only by a hair, is not idle either:
// the count of writes moved since it was read.
func TestLookAfterAWholeWriteOfAnotherProcessIsNotIdle(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	writer, looker := lookingFrontier(s, "p1"), lookingFrontier(s, "p2")
	fleetGen, err := s.queuedCount(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The look's peek, taken before the write: nothing listed.
	var b store.Batch
	b.Add(ftItem("a.test", "/seed"))
	if err := writer.write([]job{{batch: &b}}); err != nil {
		t.Fatal(err)
	}
	if err := looker.lookAtFleet(context.Background(), 0, looker.queuedGen, fleetGen); err != nil {
		t.Fatal(err)
	}
	looker.mu.Lock()
	idle := looker.fleetIdle
	looker.mu.Unlock()
	if idle {
		t.Error("a look whose peek preceded another process's whole write found the fleet idle")
	}
}

// lookingFrontier is a process's frontier state without its goroutines:
// a test runs its writes and its looks at the fleet itself.
func lookingFrontier(s *Store, id string) *Frontier {
	return &Frontier{s: s, o: ftOptions(s, id, 0, 3).withDefaults(), hosts: map[string]*ownedHost{},
		wake: make(chan struct{}), kickMgr: make(chan struct{}, 1), news: map[int]time.Time{}}
}

// A write that fails between its host scripts and its listing (Redis
// gone) leaves its mark; the process's next write, its retry, clears it,
// or the fleet could never look finished until the mark expired.
func TestQueueingMarkClearedByTheRetry(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	f := lookingFrontier(s, "p1")
	f.afterHostScripts = func() error { return errors.New("killed") }
	var b store.Batch
	b.Add(ftItem("a.test", "/seed"))
	if err := f.write([]job{{batch: &b}}); err == nil {
		t.Fatal("the write did not fail")
	}
	if n, err := s.rdb.ZCard(context.Background(), keyQueueing).Result(); err != nil || n != 1 {
		t.Fatalf("after the failed write: %d marks, %v; want its one", n, err)
	}
	// The next write queues nothing: it clears the mark all the same.
	f.afterHostScripts = nil
	if err := f.write([]job{{batch: &store.Batch{}}}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.rdb.ZCard(context.Background(), keyQueueing).Result(); err != nil || n != 0 {
		t.Fatalf("after the retry: %d marks, %v; want none", n, err)
	}
}
