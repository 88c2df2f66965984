package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// The fleet frontier against a real redis-server: the per-host scripts
// (apply.lua, load.lua), the shard scripts (shard.lua) driven step by
// step, and two Frontier instances sharing one store.

// ftItem is a queued URL of host.
func ftItem(host, path string) store.Item {
	u := "http://" + host + path
	return store.Item{Host: host, URL: u, Hash: store.HashOf(u)}
}

// ftApply runs apply.lua on host with ops and returns {added, completed,
// deferred, promoted}.
func ftApply(t *testing.T, rdb redis.UniversalClient, host string, ops ...any) []int64 {
	t.Helper()
	return ftApplyAll(t, rdb, host, ops...)[:4]
}

// ftApplyAll is ftApply with the fence's figures: {added, completed,
// deferred, promoted, refused, the host's lease token}.
func ftApplyAll(t *testing.T, rdb redis.UniversalClient, host string, ops ...any) []int64 {
	t.Helper()
	k := keysOf(host)
	res, err := applyScript.Run(context.Background(), rdb,
		[]string{k.queue, k.deferred, k.items, k.seen, k.results, k.counts, k.warc, k.lease, k.fetched, k.robots, k.cases}, ops...).Int64Slice()
	if err != nil {
		t.Fatalf("apply.lua %v: %v", ops, err)
	}
	return res
}

func ftAdd(it store.Item) []any { return []any{"A", hashKey(it.Hash), store.EncodeQueued(it)} }

func ftRequeue(it store.Item) []any { return []any{"R", hashKey(it.Hash), store.EncodeQueued(it)} }

// ftComplete is apply.lua's C of it with r, its status and class read
// from the record as the writer does.
func ftComplete(t *testing.T, it store.Item, r store.Result) []any {
	t.Helper()
	rec := store.EncodeResult(it, &r)
	status, class, err := store.ResultHead(rec)
	if err != nil {
		t.Fatal(err)
	}
	return []any{"C", hashKey(it.Hash), []byte(rec), status, class}
}

func ftDefer(it store.Item, due int64) []any {
	return []any{"D", hashKey(it.Hash), store.EncodeQueued(it), due}
}

// ftCounts reads the host's counter hash; absent fields read as 0.
func ftCounts(t *testing.T, rdb redis.UniversalClient, host string) map[string]int64 {
	t.Helper()
	raw, err := rdb.HGetAll(context.Background(), keysOf(host).counts).Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for k, v := range raw {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("counter %s = %q", k, v)
		}
		out[k] = n
	}
	return out
}

// ftWantCounts checks the named counters (others are not looked at).
func ftWantCounts(t *testing.T, rdb redis.UniversalClient, host string, want map[string]int64) {
	t.Helper()
	got := ftCounts(t, rdb, host)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s counter %s = %d, want %d (all: %v)", host, k, got[k], v, got)
		}
	}
}

func ftZScore(t *testing.T, rdb redis.UniversalClient, key, member string) (float64, bool) {
	t.Helper()
	v, err := rdb.ZScore(context.Background(), key, member).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return v, true
}

func TestApplyScript(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const host = "a.test"
	k := keysOf(host)
	a, b, c := ftItem(host, "/a"), ftItem(host, "/b"), ftItem(host, "/c")

	// Adds dedupe by hash: the same URL twice, in one call and in another.
	if got := ftApply(t, rdb, host, append(ftAdd(a), ftAdd(a)...)...); !slices.Equal(got, []int64{1, 0, 0, 0}) {
		t.Fatalf("add a twice: %v, want one added", got)
	}
	if got := ftApply(t, rdb, host, append(ftAdd(a), append(ftAdd(b), ftAdd(c)...)...)...); !slices.Equal(got, []int64{2, 0, 0, 0}) {
		t.Fatalf("add a again, b, c: %v, want two added", got)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"seen": 3, "queued": 3, "seq": 3})
	q, _ := rdb.ZRangeWithScores(ctx, k.queue, 0, -1).Result()
	if len(q) != 3 || q[0].Member != hashKey(a.Hash) || q[0].Score != 1 || q[1].Member != hashKey(b.Hash) || q[2].Score != 3 {
		t.Fatalf("queue = %v, want a, b, c at seqs 1, 2, 3", q)
	}
	if n, _ := rdb.HLen(ctx, k.items).Result(); n != 3 {
		t.Fatalf("items hash holds %d entries, want 3", n)
	}

	// Complete a as a page: out of the queue and the items, its result stored.
	page := store.Result{URL: a.URL, Host: host, Status: 200, Title: "A"}
	if got := ftApply(t, rdb, host, ftComplete(t, a, page)...); !slices.Equal(got, []int64{0, 1, 0, 0}) {
		t.Fatalf("complete a: %v", got)
	}
	if _, ok := ftZScore(t, rdb, k.queue, hashKey(a.Hash)); ok {
		t.Error("a is still queued after its completion")
	}
	if ok, _ := rdb.HExists(ctx, k.items, hashKey(a.Hash)).Result(); ok {
		t.Error("a's queue entry is still stored after its completion")
	}
	rec, err := rdb.HGet(ctx, k.results, hashKey(a.Hash)).Bytes()
	if err != nil {
		t.Fatalf("a's result: %v", err)
	}
	if h, r, err := store.DecodeResult(rec); err != nil || h != a.Hash || r.Status != 200 || r.Title != "A" {
		t.Fatalf("a's stored result: %v %+v %v", h, r, err)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 2, "fetched": 1, "failed": 0, "s:200": 1})

	// Completing it again (a second process's late write) changes nothing.
	again := store.Result{URL: a.URL, Host: host, Status: 500, ErrorClass: "transient", Error: "late"}
	if got := ftApply(t, rdb, host, ftComplete(t, a, again)...); !slices.Equal(got, []int64{0, 0, 0, 0}) {
		t.Fatalf("complete a again: %v, want a no-op", got)
	}
	if rec2, _ := rdb.HGet(ctx, k.results, hashKey(a.Hash)).Bytes(); string(rec2) != string(rec) {
		t.Error("a second completion of a replaced its stored result")
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 2, "fetched": 1, "failed": 0, "s:200": 1, "s:500": 0, "f:transient": 0})

	// Complete b as a failure.
	fail := store.Result{URL: b.URL, Host: host, Status: 503, ErrorClass: "transient", Error: "503"}
	ftApply(t, rdb, host, ftComplete(t, b, fail)...)
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 1, "fetched": 1, "failed": 1, "s:200": 1, "s:503": 1, "f:transient": 1})

	// R queues a failed URL again; R of a URL still queued (c) does nothing.
	if got := ftApply(t, rdb, host, append(ftRequeue(b), ftRequeue(c)...)...); !slices.Equal(got, []int64{1, 0, 0, 0}) {
		t.Fatalf("requeue b and c: %v, want b alone queued again", got)
	}
	if s, ok := ftZScore(t, rdb, k.queue, hashKey(b.Hash)); !ok || s != 4 {
		t.Fatalf("requeued b: queued %v at %v, want seq 4", ok, s)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"seen": 3, "queued": 2, "seq": 4})

	// b's new result, a page, replaces the failure: the tallies move over.
	ftApply(t, rdb, host, ftComplete(t, b, store.Result{URL: b.URL, Host: host, Status: 200})...)
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 1, "fetched": 2, "failed": 0, "s:200": 2, "s:503": 0, "f:transient": 0})
	// And a failure replacing a page: a requeued, then failed permanently.
	ftApply(t, rdb, host, ftRequeue(a)...)
	ftApply(t, rdb, host, ftComplete(t, a, store.Result{URL: a.URL, Host: host, Status: 404, ErrorClass: "permanent"})...)
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 1, "fetched": 1, "failed": 1, "s:200": 1, "s:404": 1, "f:permanent": 1, "f:transient": 0})

	// Defer c: from the queue to the deferred set, its entry kept. Deferring
	// a URL not queued (a) does nothing.
	if got := ftApply(t, rdb, host, append(ftDefer(c, 5000), ftDefer(a, 5000)...)...); !slices.Equal(got, []int64{0, 0, 1, 0}) {
		t.Fatalf("defer c and a: %v, want c alone deferred", got)
	}
	if s, ok := ftZScore(t, rdb, k.deferred, hashKey(c.Hash)); !ok || s != 5000 {
		t.Fatalf("deferred c: %v at %v, want due 5000", ok, s)
	}
	if _, ok := ftZScore(t, rdb, k.queue, hashKey(c.Hash)); ok {
		t.Fatal("deferred c is still queued")
	}
	if ok, _ := rdb.HExists(ctx, k.items, hashKey(c.Hash)).Result(); !ok {
		t.Fatal("deferred c lost its entry")
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 0, "deferred": 1})

	// Promote: nothing is due before 5000; at 5000 c is queued again with a new seq.
	d := ftItem(host, "/d")
	ftApply(t, rdb, host, ftAdd(d)...) // seq 6 (a and b took 4 and 5 when requeued)
	ftApply(t, rdb, host, ftDefer(d, 9000)...)
	if got := ftApply(t, rdb, host, "P", 4999, 10); !slices.Equal(got, []int64{0, 0, 0, 0}) {
		t.Fatalf("promote at 4999: %v, want none", got)
	}
	if got := ftApply(t, rdb, host, "P", 5000, 10); !slices.Equal(got, []int64{0, 0, 0, 1}) {
		t.Fatalf("promote at 5000: %v, want c", got)
	}
	if s, ok := ftZScore(t, rdb, k.queue, hashKey(c.Hash)); !ok || s != 7 {
		t.Fatalf("promoted c: queued %v at %v, want seq 7", ok, s)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 1, "deferred": 1, "seq": 7})

	// In one batch: e queued and deferred keeps the deferral's entry; f
	// queued, completed and queued again keeps its entry; g queued and
	// completed keeps none.
	e, fi, g := ftItem(host, "/e"), ftItem(host, "/f"), ftItem(host, "/g")
	deferredE := e
	deferredE.Attempts = 3
	ops := append(ftAdd(e), ftDefer(deferredE, 9000)...)
	ops = append(ops, ftAdd(fi)...)
	ops = append(ops, ftComplete(t, fi, store.Result{URL: fi.URL, Host: host, Status: 500, ErrorClass: "transient"})...)
	ops = append(ops, ftRequeue(fi)...)
	ops = append(ops, ftAdd(g)...)
	ops = append(ops, ftComplete(t, g, store.Result{URL: g.URL, Host: host, Status: 200})...)
	ftApply(t, rdb, host, ops...)
	if entry, _ := rdb.HGet(ctx, k.items, hashKey(e.Hash)).Bytes(); string(entry) != string(store.EncodeQueued(deferredE)) {
		t.Errorf("e queued and deferred in one batch: entry %q, want the deferral's", entry)
	}
	if ok, _ := rdb.HExists(ctx, k.items, hashKey(fi.Hash)).Result(); !ok {
		t.Error("f queued, completed and queued again in one batch has no entry")
	}
	if ok, _ := rdb.HExists(ctx, k.items, hashKey(g.Hash)).Result(); ok {
		t.Error("g queued and completed in one batch left its entry")
	}

	// An unknown operation is refused.
	kk := keysOf(host)
	err = applyScript.Run(ctx, rdb, []string{kk.queue, kk.deferred, kk.items, kk.seen, kk.results, kk.counts}, "Z").Err()
	if err == nil || !strings.Contains(err.Error(), "unknown operation") {
		t.Fatalf("unknown operation: %v", err)
	}
}

// TestApplyScriptLargeBatch: a batch of thousands of new URLs of one
// host (a seeds file's chunk) is written whole, entries included, and a
// URL queued and completed in one batch leaves no entry behind.
func TestApplyScriptLargeBatch(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const host, n = "big.test", 5000
	k := keysOf(host)
	var ops []any
	items := make([]store.Item, n)
	for i := range items {
		items[i] = ftItem(host, fmt.Sprintf("/p%d", i))
		ops = append(ops, ftAdd(items[i])...)
	}
	ops = append(ops, ftComplete(t, items[7], store.Result{Status: 200})...)
	if got := ftApply(t, rdb, host, ops...); !slices.Equal(got, []int64{n, 1, 0, 0}) {
		t.Fatalf("apply %d adds and a complete: %v", n, got)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"seen": n, "queued": n - 1, "fetched": 1, "seq": n, "s:200": 1})
	if got := rdb.HLen(ctx, k.items).Val(); got != n-1 {
		t.Fatalf("%d entries, want %d (the completed URL's none)", got, n-1)
	}
	if rdb.HExists(ctx, k.items, hashKey(items[7].Hash)).Val() {
		t.Fatal("the URL completed in its own batch kept an entry")
	}
	items2, queued, _, err := (&Store{rdb: rdb}).load(ctx, host, time.Now().UnixMilli(), 3, 0)
	if err != nil || queued != n-1 || len(items2) != 3 || items2[0].URL != items[0].URL || items2[0].Seq != 1 {
		t.Fatalf("load: %v queued %d, err %v", items2, queued, err)
	}
}

func TestLoadScript(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	s, err := Open(ctx, srv.URL(), Create)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const host = "load.test"
	var items []store.Item
	for i := range 5 {
		it := ftItem(host, fmt.Sprintf("/p/%d", i))
		it.Depth = i
		it.Referrer = "http://" + host + "/"
		items = append(items, it)
		ftApply(t, rdb, host, ftAdd(it)...) // seqs 1..5
	}
	// p/0 due at 1000, p/1 at 3000: deferred.
	ftApply(t, rdb, host, append(ftDefer(items[0], 1000), ftDefer(items[1], 3000)...)...)

	// Before anything is due: the three queued, oldest first; next due 1000.
	got, queued, next, err := s.load(ctx, host, 500, 2, 256)
	if err != nil {
		t.Fatal(err)
	}
	if queued != 3 || next != 1000 || len(got) != 2 || got[0].URL != items[2].URL || got[0].Seq != 3 || got[1].URL != items[3].URL {
		t.Fatalf("load at 500: queued %d, next %d, items %v", queued, next, got)
	}
	if got[0].Depth != 2 || got[0].Referrer != items[2].Referrer || got[0].Hash != items[2].Hash {
		t.Fatalf("loaded item does not round-trip: %+v, want %+v", got[0], items[2])
	}

	// At 2000: p/0 is due and goes to the queue's end with a new seq (6);
	// p/1 is next due.
	got, queued, next, err = s.load(ctx, host, 2000, 10, 256)
	if err != nil {
		t.Fatal(err)
	}
	urls := func(its []store.Item) []string {
		var out []string
		for _, it := range its {
			out = append(out, fmt.Sprintf("%s@%d", it.URL[len("http://"+host):], it.Seq))
		}
		return out
	}
	if want := []string{"/p/2@3", "/p/3@4", "/p/4@5", "/p/0@6"}; queued != 4 || next != 3000 || !slices.Equal(urls(got), want) {
		t.Fatalf("load at 2000: queued %d, next %d, items %v; want 4, 3000, %v", queued, next, urls(got), want)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 4, "deferred": 1, "seq": 6})

	// The promote limit bounds how many move at once.
	ftApply(t, rdb, host, append(ftDefer(items[2], 2500), ftDefer(items[3], 2600)...)...)
	if _, queued, next, err = s.load(ctx, host, 4000, 10, 1); err != nil {
		t.Fatal(err)
	}
	if queued != 3 || next != 2600 {
		t.Fatalf("load at 4000 promoting one: queued %d, next %d; want 3, 2600", queued, next)
	}
	// Everything due: nothing deferred left, next due -1.
	if _, queued, next, err = s.load(ctx, host, 4000, 10, 256); err != nil {
		t.Fatal(err)
	}
	if queued != 5 || next != -1 {
		t.Fatalf("load at 4000: queued %d, next %d; want 5, -1", queued, next)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 5, "deferred": 0, "seq": 9})
	if n, _ := rdb.ZCard(ctx, keysOf(host).deferred).Result(); n != 0 {
		t.Fatalf("deferred set holds %d after everything was due", n)
	}
}

// ftShard runs one shard.lua operation on shard n.
func ftShard(t *testing.T, rdb redis.UniversalClient, n int, args ...any) *redis.Cmd {
	t.Helper()
	k := keysOfShard(n)
	c := shardScript.Run(context.Background(), rdb, []string{k.ready, k.owner, k.touch, k.hosts}, args...)
	if err := c.Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("shard.lua %v: %v", args, err)
	}
	return c
}

func ftStrings(t *testing.T, c *redis.Cmd) []string {
	t.Helper()
	s, err := c.StringSlice()
	if err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	slices.Sort(s)
	return s
}

// ftHostsOfShard returns n hosts that all fall in one shard.
func ftHostsOfShard(n int) []string {
	var hosts []string
	for i := 0; len(hosts) < n; i++ {
		h := fmt.Sprintf("h%d.test", i)
		if shardOf(h) == shardOf("h0.test") {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

func TestShardClaimRenewRelease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	hosts := ftHostsOfShard(3)
	a, b, c := hosts[0], hosts[1], hosts[2]
	n := shardOf(a)
	k := keysOfShard(n)

	// touch lists hosts ready at now, and does not move a listed one.
	ftShard(t, rdb, n, "touch", 1000, a)
	ftShard(t, rdb, n, "touch", 5000, b, a)
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 1000 {
		t.Fatalf("a touched twice is ready at %v, want 1000 (the first touch)", s)
	}
	if s, _ := ftZScore(t, rdb, k.ready, b); s != 5000 {
		t.Fatalf("b ready at %v, want 5000", s)
	}
	if tc, _ := rdb.HGet(ctx, k.touch, a).Result(); tc != "2" {
		t.Fatalf("a's touch count %q, want 2", tc)
	}
	if m, _ := rdb.SMembers(ctx, k.hosts).Result(); len(m) != 2 {
		t.Fatalf("hosts set %v, want a and b", m)
	}

	// claim takes the hosts due by now only, and sets the lease's expiry as score.
	if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p1", 2000, 10000, 10)); !slices.Equal(got, []string{a}) {
		t.Fatalf("p1 claims at 2000: %v, want [%s]", got, a)
	}
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 12000 {
		t.Fatalf("claimed a scores %v, want its expiry 12000", s)
	}
	if o, _ := rdb.HGet(ctx, k.owner, a).Result(); o != "p1" {
		t.Fatalf("a's owner %q, want p1", o)
	}
	// The limit bounds a claim.
	ftShard(t, rdb, n, "touch", 100, c)
	if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p2", 6000, 10000, 1)); len(got) != 1 {
		t.Fatalf("p2 claims one at 6000: %v", got)
	}
	got2 := ftStrings(t, ftShard(t, rdb, n, "claim", "p2", 6000, 10000, 10))
	if len(got2) != 1 {
		t.Fatalf("p2 claims the rest at 6000: %v, want the one of b, c left", got2)
	}
	// a is p1's until 12000: nobody else gets it before.
	if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p2", 11999, 10000, 10)); len(got) != 0 {
		t.Fatalf("p2 claims at 11999: %v, want nothing (a's lease runs to 12000)", got)
	}
	// p1 renews a: its lease now runs to 15000, so it is still p1's at 12000.
	// Renewing b, which p2 holds, and x, which nobody holds, reports both lost.
	if lost := ftStrings(t, ftShard(t, rdb, n, "renew", "p1", 5000, 10000, a, b, "x.test")); !slices.Equal(lost, sortedCopy(b, "x.test")) {
		t.Fatalf("p1 renews a, b, x: lost %v, want b and x", lost)
	}
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 15000 {
		t.Fatalf("renewed a scores %v, want 15000", s)
	}
	if s, _ := ftZScore(t, rdb, k.ready, b); s != 16000 {
		t.Fatalf("b (p2's) scores %v after p1's renew, want 16000 untouched", s)
	}
	if _, ok := ftZScore(t, rdb, k.ready, "x.test"); ok {
		t.Fatal("a renew listed a host nobody holds")
	}
	if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p2", 12000, 10000, 10)); len(got) != 0 {
		t.Fatalf("p2 claims at 12000: %v, want nothing (renewed to 15000)", got)
	}
	// p1 stops renewing: at 15000 a is p2's, and p1's next renew loses it.
	if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p2", 15000, 10000, 10)); !slices.Equal(got, []string{a}) {
		t.Fatalf("p2 claims at 15000: %v, want [%s]", got, a)
	}
	if lost := ftStrings(t, ftShard(t, rdb, n, "renew", "p1", 16000, 10000, a)); !slices.Equal(lost, []string{a}) {
		t.Fatalf("p1's late renew: lost %v, want [%s]", lost, a)
	}
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 25000 {
		t.Fatalf("a scores %v after p1's late renew, want p2's 25000", s)
	}

	// release: only the owner's counts; it sets the score and frees the host.
	if r, _ := ftShard(t, rdb, n, "release", "p1", a, 7777, 0).Int64(); r != 0 {
		t.Fatalf("p1 releases p2's a: %d, want 0", r)
	}
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 25000 {
		t.Fatalf("a scores %v after a stranger's release", s)
	}
	if r, _ := ftShard(t, rdb, n, "release", "p2", a, 7000, 777).Int64(); r != 1 {
		t.Fatalf("p2 releases a: %d, want 1", r)
	}
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 7777 {
		t.Fatalf("released a scores %v, want 7777", s)
	}
	if ok, _ := rdb.HExists(ctx, k.owner, a).Result(); ok {
		t.Fatal("released a still has an owner")
	}
	// A host released for later is not claimed before then, and is after.
	if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p1", 7776, 12224, 10)); slices.Contains(got, a) {
		t.Fatalf("claim at 7776 took a, released for 7777: %v", got)
	}

	// wake: an unheld waiting host is made ready now; a held one is not
	// moved; an unlisted one is not listed.
	if r := ftShard(t, rdb, n, "wake", 3000, a); r.Err() != nil {
		t.Fatal(r.Err())
	}
	if s, _ := ftZScore(t, rdb, k.ready, a); s != 3000 {
		t.Fatalf("woken a scores %v, want 3000", s)
	}
	held := b
	if o, _ := rdb.HGet(ctx, k.owner, b).Result(); o == "" {
		held = c
	}
	before, _ := ftZScore(t, rdb, k.ready, held)
	ftShard(t, rdb, n, "wake", 3000, held)
	if s, _ := ftZScore(t, rdb, k.ready, held); s != before {
		t.Fatalf("wake moved held %s from %v to %v", held, before, s)
	}
	ftShard(t, rdb, n, "wake", 3000, "nobody.test")
	if _, ok := ftZScore(t, rdb, k.ready, "nobody.test"); ok {
		t.Fatal("wake listed an unlisted host")
	}
	if err := shardScript.Run(ctx, rdb, []string{k.ready, k.owner, k.touch, k.hosts}, "bogus").Err(); err == nil ||
		!strings.Contains(err.Error(), "unknown operation") {
		t.Fatalf("unknown shard operation: %v", err)
	}
}

func sortedCopy(s ...string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestShardDropRace drives every interleaving of a process giving back a
// host it found drained (giveBack: read the touch count, find the queue
// empty, drop) with another process's writer adding a URL to the host
// (apply.lua's A, then touch): the host must never be lost, that is after
// both it must be listed, free, ready, and claimable with its URL queued.
func TestShardDropRace(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	dropper := []string{"read", "check", "drop"}
	adder := []string{"apply", "touch"}
	var orders [][]string
	var interleave func(prefix []string, i, j int)
	interleave = func(prefix []string, i, j int) {
		if i == len(dropper) && j == len(adder) {
			orders = append(orders, slices.Clone(prefix))
			return
		}
		if i < len(dropper) {
			interleave(append(prefix, dropper[i]), i+1, j)
		}
		if j < len(adder) {
			interleave(append(prefix, adder[j]), i, j+1)
		}
	}
	interleave(nil, 0, 0)
	if len(orders) != 10 {
		t.Fatalf("%d interleavings, want 10", len(orders))
	}
	const now, expiry = 1000, 9000
	outcomes := map[string]int{}
	for i, order := range orders {
		host := fmt.Sprintf("race%d.test", i)
		n := shardOf(host)
		k := keysOfShard(n)
		// The host had one URL, p1 took it and fetched it: drained.
		first := ftItem(host, "/")
		ftApply(t, rdb, host, ftAdd(first)...)
		ftShard(t, rdb, n, "touch", now, host)
		if got := ftStrings(t, ftShard(t, rdb, n, "claim", "p1", now, expiry-now, 100)); !slices.Contains(got, host) {
			t.Fatalf("%v: p1 could not claim %s: %v", order, host, got)
		}
		ftApply(t, rdb, host, ftComplete(t, first, store.Result{URL: first.URL, Host: host, Status: 200})...)

		var touched string
		empty, dropped := false, int64(-1)
		for _, step := range order {
			switch step {
			case "read":
				touched, _ = rdb.HGet(ctx, k.touch, host).Result()
			case "check":
				q, _ := rdb.ZCard(ctx, keysOf(host).queue).Result()
				d, _ := rdb.ZCard(ctx, keysOf(host).deferred).Result()
				empty = q+d == 0
			case "drop":
				if empty {
					dropped, _ = ftShard(t, rdb, n, "drop", "p1", host, touched, now+1).Int64()
				} else { // not drained after all: giveBack releases it, ready now
					dropped = 2
					ftShard(t, rdb, n, "release", "p1", host, now, 0)
				}
			case "apply":
				if got := ftApply(t, rdb, host, ftAdd(ftItem(host, "/new"))...); got[0] != 1 {
					t.Fatalf("%v: the new URL was not added: %v", order, got)
				}
			case "touch":
				ftShard(t, rdb, n, "touch", now+1, host)
			}
		}
		outcomes[map[int64]string{0: "kept by drop", 1: "dropped, then touched", 2: "released"}[dropped]]++
		s, listed := ftZScore(t, rdb, k.ready, host)
		if !listed {
			t.Errorf("%s: the host is lost: not in the ready set, with a URL queued", strings.Join(order, ", "))
			continue
		}
		if s > now+1 {
			t.Errorf("%s: the host is listed at %v, not ready (now %d)", strings.Join(order, ", "), s, now)
		}
		if o, _ := rdb.HGet(ctx, k.owner, host).Result(); o != "" {
			t.Errorf("%s: the host is still owned by %q", strings.Join(order, ", "), o)
		}
		got := ftStrings(t, ftShard(t, rdb, n, "claim", "p2", now+1, expiry-now-1, 100))
		if !slices.Contains(got, host) {
			t.Errorf("%s: p2 cannot claim the host: %v", strings.Join(order, ", "), got)
		}
		if q, _ := rdb.ZCard(ctx, keysOf(host).queue).Result(); q != 1 {
			t.Errorf("%s: %d URLs queued, want the new one", strings.Join(order, ", "), q)
		}
	}
	t.Logf("10 interleavings: %v", outcomes)
	if outcomes["kept by drop"] == 0 || outcomes["released"] == 0 || outcomes["dropped, then touched"] == 0 {
		t.Errorf("the interleavings did not reach every path of drop: %v", outcomes)
	}
	// And the plain drop: nothing added, the host goes.
	host := "plain.test"
	n := shardOf(host)
	k := keysOfShard(n)
	ftShard(t, rdb, n, "touch", now, host)
	ftShard(t, rdb, n, "claim", "p1", now, expiry-now, 100)
	tc, _ := rdb.HGet(ctx, k.touch, host).Result()
	if r, _ := ftShard(t, rdb, n, "drop", "p2", host, tc, now).Int64(); r != 0 {
		t.Fatalf("a stranger dropped the host: %d", r)
	}
	if r, _ := ftShard(t, rdb, n, "drop", "p1", host, tc, now).Int64(); r != 1 {
		t.Fatalf("the owner's drop of an untouched host: %d, want 1", r)
	}
	if _, ok := ftZScore(t, rdb, k.ready, host); ok {
		t.Fatal("a dropped host is still listed")
	}
}

// ftStore opens the store of srv for a crawl.
func ftStore(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(context.Background(), url, Create)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// ftSite is a set of URLs over several hosts.
func ftSite(hosts, perHost int) []store.Item {
	var items []store.Item
	for h := range hosts {
		for p := range perHost {
			items = append(items, ftItem(fmt.Sprintf("site%d.test", h), fmt.Sprintf("/p/%d", p)))
		}
	}
	return items
}

// ftLedger records the leases of several Frontier instances.
type ftLedger struct {
	mu       sync.Mutex
	leases   map[string][]string    // URL -> instances that leased it, in order
	inflight map[string]map[int]int // host -> instance -> leases in flight
	first    map[string]map[int]time.Time
	errs     []string
}

func newLedger() *ftLedger {
	return &ftLedger{leases: map[string][]string{}, inflight: map[string]map[int]int{}, first: map[string]map[int]time.Time{}}
}

func (l *ftLedger) start(inst int, it store.Item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.leases[it.URL] = append(l.leases[it.URL], strconv.Itoa(inst))
	m := l.inflight[it.Host]
	if m == nil {
		m = map[int]int{}
		l.inflight[it.Host] = m
	}
	for other, n := range m {
		if other != inst && n > 0 {
			l.errs = append(l.errs, fmt.Sprintf("%s leased by instance %d while instance %d has %d of its leases in flight", it.URL, inst, other, n))
		}
	}
	m[inst]++
	if l.first[it.Host] == nil {
		l.first[it.Host] = map[int]time.Time{}
	}
	if _, ok := l.first[it.Host][inst]; !ok {
		l.first[it.Host][inst] = time.Now()
	}
}

func (l *ftLedger) end(inst int, it store.Item) {
	l.mu.Lock()
	l.inflight[it.Host][inst]--
	l.mu.Unlock()
}

// ftResults reads every stored result's URL, with its count.
func ftResults(t *testing.T, s *Store) map[string]int {
	t.Helper()
	out := map[string]int{}
	if err := s.ForEachResult(func(r *store.Result) error { out[r.URL]++; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// ftWaitListed waits until every host of items is listed in a shard.
func ftWaitListed(t *testing.T, s *Store, hosts int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		active, _, err := s.readyCounts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if active >= int64(hosts) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d hosts listed after 5s", active, hosts)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func ftOptions(s *Store, id string, lease time.Duration, hosts int) FrontierOptions {
	return FrontierOptions{ID: id, Lease: lease, Hosts: hosts, Buffer: 4,
		Breakers: NewBreakers(s.Client(), breaker.Config{})}
}

// TestTwoFrontiers: two processes' frontiers over one store share the
// crawl by host: every URL is leased once, never a host by both at once,
// and both see the crawl end. There are many more hosts than either
// instance holds (Hosts: 3), so that both get some whichever claims first.
func TestTwoFrontiers(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	const hosts, perHost = 48, 5
	items := ftSite(hosts, perHost)
	f1 := OpenFrontier(s, ftOptions(s, "p1", 0, 3))
	defer f1.Close()
	if err := f1.Add(items...); err != nil {
		t.Fatal(err)
	}
	if err := f1.Add(items[:10]...); err != nil { // seen already: dropped
		t.Fatal(err)
	}
	ftWaitListed(t, s, hosts)
	f2 := OpenFrontier(s, ftOptions(s, "p2", 0, 3))
	defer f2.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	led := newLedger()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, f := range []*Frontier{f1, f2} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ftRun(ctx, f, i+1, 4, led, 2*time.Millisecond)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, err := range errs {
		if !errors.Is(err, frontier.ErrExhausted) {
			t.Errorf("instance %d ended with %v, want frontier.ErrExhausted", i+1, err)
		}
	}
	for _, e := range led.errs {
		t.Error(e)
	}
	per := map[string]int{}
	for _, it := range items {
		got := led.leases[it.URL]
		if len(got) != 1 {
			t.Errorf("%s leased %d times (by %v), want once", it.URL, len(got), got)
		}
		for _, inst := range got {
			per[inst]++
		}
	}
	if len(led.leases) != len(items) {
		t.Errorf("%d URLs leased, want %d", len(led.leases), len(items))
	}
	if per["1"] == 0 || per["2"] == 0 {
		t.Errorf("the crawl was not shared: leases per instance %v", per)
	}
	res := ftResults(t, s)
	if len(res) != len(items) {
		t.Errorf("%d results stored, want %d", len(res), len(items))
	}
	c, err := s.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if c.Seen != int64(len(items)) || c.Fetched != int64(len(items)) || c.Queued != 0 {
		t.Errorf("counts %+v, want %d seen and fetched, none queued", c, len(items))
	}
	t.Logf("%d URLs over %d hosts in %s: leases per instance %v", len(items), hosts, elapsed.Round(time.Millisecond), per)
}

// ftRun leases from f with workers goroutines until the frontier ends,
// completing every lease as a page after hold. It returns the first error
// that is not ErrExhausted, or ErrExhausted when every worker saw it.
func ftRun(ctx context.Context, f *Frontier, inst, workers int, led *ftLedger, hold time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := f.Next(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				led.start(inst, l.Item)
				time.Sleep(hold)
				led.end(inst, l.Item)
				r := store.Result{URL: l.Item.URL, Host: l.Item.Host, Status: 200, FetchedAt: time.Now()}
				if err := f.Complete(l, &r, nil); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if !errors.Is(err, frontier.ErrExhausted) {
			return err
		}
	}
	return frontier.ErrExhausted
}

// TestDeadFrontierHostsTakenOver: a process that dies with leases in
// flight (its goroutines stop: no renewal, no write, no release) keeps its
// hosts until their leases expire, not a moment more than a claim's poll
// after; then the other process takes them and fetches the URLs the dead
// one had in flight, which were still queued.
func TestDeadFrontierHostsTakenOver(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := ftStore(t, srv.URL())
	const lease = 500 * time.Millisecond
	const hosts, perHost = 4, 6
	items := ftSite(hosts, perHost)
	dead := OpenFrontier(s, ftOptions(s, "dead", lease, 16))
	if err := dead.Add(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The dead one takes one URL of every host (one in flight per host) and
	// completes one of them: that result is stored before it dies.
	inflight := map[string]*frontier.Lease{}
	for len(inflight) < hosts {
		l, err := dead.Next(ctx)
		if err != nil {
			t.Fatalf("dead's lease %d: %v", len(inflight), err)
		}
		inflight[l.Item.Host] = l
	}
	var done store.Item
	for _, l := range inflight {
		done = l.Item
		r := store.Result{URL: l.Item.URL, Host: l.Item.Host, Status: 200}
		if err := dead.Complete(l, &r, nil); err != nil {
			t.Fatal(err)
		}
		delete(inflight, l.Item.Host)
		break
	}
	waitUntil(t, 5*time.Second, "the dead one's completion is stored", func() bool {
		ok, _ := rdb.HExists(ctx, keysOf(done.Host).results, hashKey(done.Hash)).Result()
		return ok
	})
	time.Sleep(2 * lease) // a few renewals: the leases are the dead one's, renewed
	// It dies: its goroutines stop as the process would.
	close(dead.stop)
	dead.done.Wait()
	diedAt := time.Now()
	expiry := map[string]int64{}
	for h := range hosts {
		host := fmt.Sprintf("site%d.test", h)
		sc, ok := ftZScore(t, rdb, keysOfShard(shardOf(host)).ready, host)
		o, _ := rdb.HGet(ctx, keysOfShard(shardOf(host)).owner, host).Result()
		if !ok || o != "dead" {
			t.Fatalf("%s before the takeover: listed %v at %v, owner %q; want the dead one's lease", host, ok, sc, o)
		}
		expiry[host] = int64(sc)
		if until := time.UnixMilli(int64(sc)).Sub(diedAt); until > lease || until < 0 {
			t.Fatalf("%s's lease expires %s after the death, want within the lease (%s)", host, until, lease)
		}
	}

	alive := OpenFrontier(s, ftOptions(s, "alive", lease, 16))
	defer alive.Close()
	led := newLedger()
	if err := ftRun(ctx, alive, 2, 4, led, time.Millisecond); !errors.Is(err, frontier.ErrExhausted) {
		t.Fatalf("the live instance ended with %v, want frontier.ErrExhausted", err)
	}
	for _, e := range led.errs {
		t.Error(e)
	}
	var lags []time.Duration
	for host, exp := range expiry {
		first, ok := led.first[host][2]
		if !ok {
			t.Errorf("the live instance never leased a URL of %s", host)
			continue
		}
		if first.UnixMilli() < exp {
			t.Errorf("%s leased by the live instance at %d ms, before the dead one's lease expired at %d ms", host, first.UnixMilli(), exp)
		}
		lag := first.Sub(time.UnixMilli(exp))
		lags = append(lags, lag)
		if lag > 2*time.Second {
			t.Errorf("%s taken over %s after its lease expired, want within a claim's longest poll (1s) and some", host, lag)
		}
	}
	for _, l := range inflight {
		if got := led.leases[l.Item.URL]; len(got) != 1 {
			t.Errorf("%s, in flight when its process died, leased %d times by the live one, want once", l.Item.URL, len(got))
		}
	}
	if got := led.leases[done.URL]; len(got) != 0 {
		t.Errorf("%s, completed by the dead one, leased again %d times", done.URL, len(got))
	}
	res := ftResults(t, s)
	for _, it := range items {
		if res[it.URL] != 1 {
			t.Errorf("%s has %d results, want 1", it.URL, res[it.URL])
		}
	}
	slices.Sort(lags)
	t.Logf("died %s; takeover after the leases' expiry: %v", diedAt.Format("15:04:05.000"), lags)
}

// waitUntil polls cond every 10ms until it holds or d passes.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting until %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
