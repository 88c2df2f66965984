package redisstore

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// A crawl of three hosts with failures (transient and permanent), pages,
// and a failure already queued again. RequeueFailedWhere run by two
// processes at once queues each chosen failure once, leaves the rest, and
// lists the hosts for claiming; a failure fetched again since is not
// queued a second time.
func TestRequeueFailedWhere(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	rdb := s.Client()
	ctx := context.Background()
	wantQueued := map[string]int{}
	var firstTransient store.Item
	for hi, host := range []string{"a.test", "b.test", "c.test"} {
		var ops []any
		for i := range 6 {
			it := ftItem(host, "/p/"+strconv.Itoa(i))
			ops = append(ops, ftAdd(it)...)
			switch i % 3 {
			case 0:
				ops = append(ops, ftComplete(t, it, store.Result{URL: it.URL, Host: host, Status: 200})...)
			case 1:
				ops = append(ops, ftComplete(t, it, store.Result{URL: it.URL, Host: host, Status: 503, ErrorClass: "transient"})...)
				wantQueued[host]++
				if firstTransient.URL == "" {
					firstTransient = it
				}
			case 2:
				ops = append(ops, ftComplete(t, it, store.Result{URL: it.URL, Host: host, Status: 404, ErrorClass: "permanent"})...)
			}
		}
		if hi == 2 { // a failure of c.test queued again already
			it := ftItem(host, "/p/1")
			ops = append(ops, ftRequeue(it)...)
			wantQueued[host]--
		}
		ftApply(t, rdb, host, ops...)
		ftShard(t, rdb, shardOf(host), "touch", 1000, host)
		// Listed, then taken off as a host with nothing left is.
		if err := rdb.ZRem(ctx, keysOfShard(shardOf(host)).ready, host).Err(); err != nil {
			t.Fatal(err)
		}
	}
	transient := func(r *store.Result) bool { return r.ErrorClass == "transient" }
	var wg sync.WaitGroup
	counts := make([]int, 2)
	for i := range counts {
		wg.Go(func() {
			n, err := s.RequeueFailedWhere(transient)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	if got := counts[0] + counts[1]; got != 5 {
		t.Errorf("the two requeues queued %d and %d, want 5 in all", counts[0], counts[1])
	}
	for _, host := range []string{"a.test", "b.test", "c.test"} {
		q, err := rdb.ZCard(ctx, keysOf(host).queue).Result()
		if err != nil {
			t.Fatal(err)
		}
		want := int64(wantQueued[host])
		if host == "c.test" {
			want++ // the one queued before
		}
		if q != want {
			t.Errorf("%s: %d queued, want %d", host, q, want)
		}
		ftWantCounts(t, rdb, host, map[string]int64{"queued": want, "failed": 4, "fetched": 2})
		if _, listed := ftZScore(t, rdb, keysOfShard(shardOf(host)).ready, host); listed != (want > 0) {
			t.Errorf("%s listed for claiming: %v, want %v", host, listed, want > 0)
		}
	}

	// a.test's first transient failure is fetched again and stored as a
	// page; a requeue now finds nothing of it to queue.
	ftApply(t, rdb, "a.test", ftComplete(t, firstTransient, store.Result{URL: firstTransient.URL, Host: "a.test", Status: 200})...)
	if n, err := s.RequeueFailedWhere(transient); err != nil || n != 0 {
		t.Errorf("requeue with every chosen failure queued or done: %d, %v; want 0", n, err)
	}
	// Everything else: the permanent failures.
	if n, err := s.RequeueFailed(); err != nil || n != 6 {
		t.Errorf("requeue all: %d, %v; want the 6 permanent failures", n, err)
	}
}

// A host's page count is the largest any process stored; before one is
// stored, its results stand in for it.
func TestHostPagesNeverGoDown(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	rdb := s.Client()
	const host = "a.test"
	var ops []any
	for i := range 3 {
		it := ftItem(host, "/p/"+strconv.Itoa(i))
		ops = append(ops, ftAdd(it)...)
		ops = append(ops, ftComplete(t, it, store.Result{URL: it.URL, Host: host, Status: 200 + 300*(i%2), ErrorClass: map[int]string{1: "transient"}[i%2]})...)
	}
	ftApply(t, rdb, host, ops...)
	if n, stored, err := s.HostPages(host); err != nil || n != 3 || stored {
		t.Fatalf("HostPages before a count is stored: %d, %v, %v; want its 3 results, not stored", n, stored, err)
	}
	if n, stored, err := s.HostPages("none.test"); err != nil || n != 0 || stored {
		t.Fatalf("HostPages of an unknown host: %d, %v, %v", n, stored, err)
	}
	ftApply(t, rdb, host, "H", 7)
	ftApply(t, rdb, host, "H", 5) // a late write of an older count
	if n, stored, err := s.HostPages(host); err != nil || n != 7 || !stored {
		t.Fatalf("HostPages after 7 then 5: %d, %v, %v; want 7, stored", n, stored, err)
	}
}
