package verify_test

// Each invariant is checked against both stores: a small crawl written to
// a bbolt file (through storage's own commits) and to a real redis-server
// (in the fleet's key layout), checked clean, then damaged the way the
// invariant forbids, which the check must name. A check a store keeps no
// record for must be named as not checked on it.

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"breakwater/breaker"
	"breakwater/redisstore"
	"breakwater/redisstore/redistest"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/verify"
)

var (
	t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	t1 = t0.Add(time.Second)
	t2 = t0.Add(2 * time.Second)
	t3 = t0.Add(3 * time.Second)
)

func item(host, path string) store.Item {
	u := "http://" + host + path
	return store.Item{Host: host, URL: u, Hash: store.HashOf(u)}
}

func page(it store.Item, status int) *store.Result {
	return &store.Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, Status: status, FetchedAt: t0}
}

func failure(it store.Item, class string) *store.Result {
	return &store.Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, ErrorClass: class, Error: class + " error", FetchedAt: t0}
}

// The crawl both stores hold: a.com with a page done, one deferred and one
// queued; b.com failed and its breaker open after three transitions; c.com
// with a page done and one queued; d.com refused by name, its breaker held
// by its open case.
var (
	a1, a2, a3 = item("a.com", "/1"), item("a.com", "/2"), item("a.com", "/3")
	b1         = item("b.com", "/1")
	c1, c2     = item("c.com", "/1"), item("c.com", "/2")
	d1         = item("d.com", "/1")

	queued   = []store.Item{a3, c2}
	deferred = []store.Item{a2}
	done     = map[store.Item]*store.Result{a1: page(a1, 200), b1: failure(b1, "timeout"), c1: page(c1, 200), d1: page(d1, 403)}
	breakers = map[string]breaker.Breaker{
		"b.com": {State: breaker.Open, OpenedAt: t3, Rest: time.Minute, DownSince: t1, Generation: 3},
		"d.com": {State: breaker.Open, Hold: breaker.Case, HoldReason: "403: no bots", OpenedAt: t1, Rest: time.Minute, DownSince: t1, Generation: 1},
	}
	transitions = []store.Transition{
		{At: t1, Host: "b.com", From: "closed", To: "open", Generation: 1},
		{At: t1, Host: "d.com", From: "closed", To: "open", Hold: "case", Generation: 1},
		{At: t2, Host: "b.com", From: "open", To: "half-open", Generation: 2},
		{At: t3, Host: "b.com", From: "half-open", To: "open", Generation: 3},
	}
	openCase = store.Case{Host: "d.com", At: t1, URL: d1.URL, Status: 403, Excerpt: "no bots"}
)

// kit is one kind of store holding the crawl: damage changes it behind the
// store's back, check verifies it.
type kit struct {
	name  string
	fresh func(t *testing.T) // writes the crawl anew
	check func(t *testing.T) *verify.Report
}

// boltKit keeps the crawl in a file in a temporary directory.
type boltKit struct{ path string }

func (k *boltKit) fresh(t *testing.T) {
	t.Helper()
	k.path = filepath.Join(t.TempDir(), "crawl.db")
	db, err := storage.Open(k.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	commit := func(fill func(b *store.Batch)) []store.Item {
		var b store.Batch
		fill(&b)
		c, err := db.Commit(&b)
		if err != nil {
			t.Fatal(err)
		}
		return c.Added
	}
	added := commit(func(b *store.Batch) {
		for _, it := range []store.Item{a1, a2, a3, b1, c1, c2, d1} {
			b.Add(it)
		}
	})
	commit(func(b *store.Batch) {
		for _, it := range added {
			switch {
			case done[plain(it)] != nil:
				b.Complete(it, done[plain(it)])
			case it == withSeq(a2, it.Seq):
				b.Defer(it, t3)
			}
		}
		for h, br := range breakers {
			b.PutBreaker(h, br)
		}
		for _, tr := range transitions {
			b.AppendTransition(tr)
		}
		b.AppendCase(openCase)
	})
}

// plain is it as the fixture names it, without the Seq a commit gave it.
func plain(it store.Item) store.Item { it.Seq = 0; return it }

func withSeq(it store.Item, seq uint64) store.Item { it.Seq = seq; return it }

func (k *boltKit) check(t *testing.T) *verify.Report {
	t.Helper()
	db, err := storage.Open(k.path, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(verify.Options{MaxProblems: 100})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// update changes the file behind the store's back.
func (k *boltKit) update(t *testing.T, fn func(tx *bolt.Tx) error) {
	t.Helper()
	b, err := bolt.Open(k.path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Update(fn); err != nil {
		t.Fatal(err)
	}
}

func (k *boltKit) put(t *testing.T, bucket, key string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	k.update(t, func(tx *bolt.Tx) error { return tx.Bucket([]byte(bucket)).Put([]byte(key), data) })
}

// seqKey is a sequence-numbered bucket's key.
func seqKey(seq uint64) string { return string([]byte{0, 0, 0, 0, 0, 0, byte(seq >> 8), byte(seq)}) }

// redisKit keeps the crawl in a redis-server's database 0, written key by
// key in the fleet's layout (redisstore/keys.go).
type redisKit struct {
	srv *redistest.Server
	rdb *redis.Client
}

func hostKey(host, suffix string) string { return "bw:{" + host + "}:" + suffix }

func shardKey(host, suffix string) string {
	return fmt.Sprintf("bw:{s%d}:%s", crc32.ChecksumIEEE([]byte(host))%redisstore.Shards, suffix)
}

func hashKey(h store.Hash) string { return fmt.Sprintf("%x", h[:]) }

func (k *redisKit) fresh(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(k.rdb.FlushDB(ctx).Err())
	must(k.rdb.Set(ctx, "bw:{meta}:schema", "breakwater-fleet/2", 0).Err())
	counts := map[string]map[string]int64{}
	count := func(host, field string) {
		if counts[host] == nil {
			counts[host] = map[string]int64{}
		}
		counts[host][field]++
	}
	seen := func(it store.Item) {
		must(k.rdb.SAdd(ctx, hostKey(it.Host, "seen"), hashKey(it.Hash)).Err())
		must(k.rdb.SAdd(ctx, shardKey(it.Host, "hosts"), it.Host).Err())
		count(it.Host, "seen")
	}
	for i, it := range queued {
		seen(it)
		must(k.rdb.ZAdd(ctx, hostKey(it.Host, "q"), redis.Z{Score: float64(i + 1), Member: hashKey(it.Hash)}).Err())
		must(k.rdb.HSet(ctx, hostKey(it.Host, "u"), hashKey(it.Hash), store.EncodeQueued(it)).Err())
		must(k.rdb.ZAdd(ctx, shardKey(it.Host, "ready"), redis.Z{Score: 0, Member: it.Host}).Err())
		count(it.Host, "queued")
	}
	for _, it := range deferred {
		seen(it)
		must(k.rdb.ZAdd(ctx, hostKey(it.Host, "d"), redis.Z{Score: float64(t3.UnixMilli()), Member: hashKey(it.Hash)}).Err())
		must(k.rdb.HSet(ctx, hostKey(it.Host, "u"), hashKey(it.Hash), store.EncodeQueued(it)).Err())
		must(k.rdb.ZAdd(ctx, shardKey(it.Host, "ready"), redis.Z{Score: 0, Member: it.Host}).Err())
		count(it.Host, "deferred")
	}
	for it, r := range done {
		seen(it)
		must(k.rdb.HSet(ctx, hostKey(it.Host, "r"), hashKey(it.Hash), []byte(store.EncodeResult(it, r))).Err())
		count(it.Host, fmt.Sprintf("s:%d", r.Status))
		if r.Failed() {
			count(it.Host, "failed")
			count(it.Host, "f:"+r.ErrorClass)
		} else {
			count(it.Host, "fetched")
		}
	}
	for h, c := range counts {
		for f, n := range c {
			must(k.rdb.HSet(ctx, hostKey(h, "c"), f, n).Err())
		}
	}
	for h, b := range breakers {
		k.putBreaker(t, h, b)
	}
	for _, tr := range transitions {
		k.pushTransition(t, tr)
	}
	data, err := store.EncodeCase(openCase)
	must(err)
	must(k.rdb.RPush(ctx, hostKey(openCase.Host, "cases"), data).Err())
}

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// putBreaker writes b as breaker.lua keeps it (redisstore/breaker.go).
func (k *redisKit) putBreaker(t *testing.T, host string, b breaker.Breaker) {
	t.Helper()
	err := k.rdb.HSet(t.Context(), hostKey(host, "b"), "state", int(b.State), "failures", b.Failures, "probes", b.ProbeSuccesses,
		"opened", ms(b.OpenedAt), "rest", b.Rest.Milliseconds(), "level", b.Level, "down", ms(b.DownSince),
		"gen", b.Generation, "hold", int(b.Hold), "hold_reason", b.HoldReason, "pause_reason", b.PauseReason).Err()
	if err != nil {
		t.Fatal(err)
	}
}

func (k *redisKit) pushTransition(t *testing.T, tr store.Transition) {
	t.Helper()
	data, _ := json.Marshal(map[string]any{"at_ms": tr.At.UnixMilli(), "host": tr.Host, "from": tr.From, "to": tr.To,
		"hold": tr.Hold, "generation": tr.Generation})
	if err := k.rdb.RPush(t.Context(), hostKey(tr.Host, "t"), data).Err(); err != nil {
		t.Fatal(err)
	}
}

func (k *redisKit) check(t *testing.T) *verify.Report {
	t.Helper()
	st, err := redisstore.Open(context.Background(), k.srv.URL(), redisstore.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rep, err := st.Verify(t.Context(), verify.Options{MaxProblems: 100})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func (k *redisKit) do(t *testing.T, args ...any) {
	t.Helper()
	if err := k.rdb.Do(t.Context(), args...).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestInvariantsOnBothStores(t *testing.T) {
	bk := &boltKit{}
	srv := redistest.Start(t) // one server for every case: each writes the crawl anew
	rk := &redisKit{srv: srv, rdb: srv.Client()}

	// A case breaks one invariant on each store it applies to; a store
	// without the records it checks (nil damage) must name the check
	// (notChecked) among those it could not be put to.
	tests := []struct {
		name       string
		want       string
		bolt       func(t *testing.T)
		redis      func(t *testing.T)
		notChecked string
	}{
		{name: "a URL waiting is not in the seen set", want: "queued URL http://a.com/never (hash",
			bolt: func(t *testing.T) {
				never := item("a.com", "/never")
				bk.update(t, func(tx *bolt.Tx) error {
					return tx.Bucket([]byte("queue")).Bucket([]byte("a.com")).Put([]byte(seqKey(99)), store.EncodeQueued(never))
				})
			},
			redis: func(t *testing.T) {
				never := item("a.com", "/never")
				rk.do(t, "ZADD", hostKey("a.com", "q"), 9, hashKey(never.Hash))
				rk.do(t, "HSET", hostKey("a.com", "u"), hashKey(never.Hash), store.EncodeQueued(never))
			}},
		{name: "a URL seen is lost", want: "is in the seen set but neither queued, deferred, staged nor done: it is lost",
			bolt: func(t *testing.T) {
				bk.update(t, func(tx *bolt.Tx) error {
					bk := tx.Bucket([]byte("deferred"))
					k, _ := bk.Cursor().First()
					return bk.Delete(k)
				})
			},
			redis: func(t *testing.T) {
				rk.do(t, "ZREM", hostKey("a.com", "d"), hashKey(a2.Hash))
				rk.do(t, "HDEL", hostKey("a.com", "u"), hashKey(a2.Hash))
			}},
		{name: "a URL in two places", want: "URL http://a.com/2 (hash",
			bolt: func(t *testing.T) {
				it := a2
				it.Seq = 2
				bk.update(t, func(tx *bolt.Tx) error {
					return tx.Bucket([]byte("queue")).Bucket([]byte("a.com")).Put([]byte(seqKey(2)), store.EncodeQueued(it))
				})
			},
			redis: func(t *testing.T) { rk.do(t, "ZADD", hostKey("a.com", "q"), 5, hashKey(a2.Hash)) }},
		{name: "a host's counters", want: "the stored counts of host c.com are {Queued:1 Deferred:0 Fetched:9 Failed:0}",
			bolt:  func(t *testing.T) { bk.put(t, "hosts", "c.com", store.HostCounts{Queued: 1, Fetched: 9}) },
			redis: func(t *testing.T) { rk.do(t, "HSET", hostKey("c.com", "c"), "fetched", 9) }},
		{name: "a host without counters", want: "host c.com has no stored counts",
			bolt: func(t *testing.T) {
				bk.update(t, func(tx *bolt.Tx) error { return tx.Bucket([]byte("hosts")).Delete([]byte("c.com")) })
			},
			redis: func(t *testing.T) { rk.do(t, "DEL", hostKey("c.com", "c")) }},
		{name: "a breaker held but closed", want: "breaker of d.com: held (case) but closed",
			bolt: func(t *testing.T) {
				bk.put(t, "breakers", "d.com", breaker.Breaker{Hold: breaker.Case, HoldReason: "x", Generation: 1})
			},
			redis: func(t *testing.T) {
				rk.putBreaker(t, "d.com", breaker.Breaker{Hold: breaker.Case, HoldReason: "x", Generation: 1})
			}},
		{name: "transitions out of generation", want: "of b.com has generation 2, after generation 3",
			bolt: func(t *testing.T) {
				bk.put(t, "transitions", seqKey(5), store.Transition{At: t3, Host: "b.com", From: "open", To: "half-open", Generation: 2})
			},
			redis: func(t *testing.T) {
				rk.pushTransition(t, store.Transition{At: t3, Host: "b.com", From: "open", To: "half-open", Generation: 2})
			}},
		{name: "transitions back in time", want: "the host's log goes back in time",
			bolt: func(t *testing.T) {
				bk.put(t, "transitions", seqKey(5), store.Transition{At: t0, Host: "b.com", From: "open", To: "half-open", Generation: 4})
			},
			redis: func(t *testing.T) {
				rk.pushTransition(t, store.Transition{At: t0, Host: "b.com", From: "open", To: "half-open", Generation: 4})
			}},
		{name: "a breaker behind its transitions", want: "breaker of b.com has generation 2, behind its last transition's 3",
			bolt: func(t *testing.T) {
				b := breakers["b.com"]
				b.Generation = 2
				bk.put(t, "breakers", "b.com", b)
			},
			redis: func(t *testing.T) { rk.do(t, "HSET", hostKey("b.com", "b"), "gen", 2) }},
		{name: "a case hold without an open case", want: "breaker of d.com is held by a case, and the host has no open case to resolve",
			bolt: func(t *testing.T) {
				c := openCase
				c.Resolved = t2
				bk.put(t, "cases", seqKey(1), c)
			},
			redis: func(t *testing.T) {
				c := openCase
				c.Resolved = t2
				data, _ := store.EncodeCase(c)
				rk.do(t, "LSET", hostKey("d.com", "cases"), 0, data)
			}},
		{name: "an open case without its hold", want: "host d.com has an open case (http://d.com/1), and its breaker is not held by it",
			bolt: func(t *testing.T) {
				b := breakers["d.com"]
				b.Hold, b.HoldReason = breaker.NoHold, ""
				bk.put(t, "breakers", "d.com", b)
			},
			redis: func(t *testing.T) { rk.do(t, "HSET", hostKey("d.com", "b"), "hold", 0, "hold_reason", "") }},
		{name: "a case resolved before it was raised", want: "case 1 of d.com was resolved at",
			bolt: func(t *testing.T) {
				c := openCase
				c.Resolved = t0
				bk.put(t, "cases", seqKey(1), c)
			},
			redis: func(t *testing.T) {
				c := openCase
				c.Resolved = t0
				data, _ := store.EncodeCase(c)
				rk.do(t, "LSET", hostKey("d.com", "cases"), 0, data)
			}},
		{name: "a host's tallies", want: "the stored tallies of host c.com by status map[200:1 404:1] differ from its results' map[200:1]",
			redis:      func(t *testing.T) { rk.do(t, "HSET", hostKey("c.com", "c"), "s:404", 1) },
			notChecked: "each host's tallies"},
		{name: "the crawl's counters", want: "the stored count fetched is 9, the results hold pages: 3",
			bolt: func(t *testing.T) {
				bk.update(t, func(tx *bolt.Tx) error {
					meta := tx.Bucket([]byte("meta"))
					var c store.Counts
					if err := json.Unmarshal(meta.Get([]byte("counts")), &c); err != nil {
						return err
					}
					c.Fetched = 9
					data, _ := json.Marshal(c)
					return meta.Put([]byte("counts"), data)
				})
			},
			notChecked: "the crawl's counters"},
		{name: "the crawl's tallies", want: "the stored tallies by status map[200:9] differ",
			bolt: func(t *testing.T) {
				bk.put(t, "meta", "tallies", store.Tallies{Status: map[int]int64{200: 9}, Failed: map[string]int64{"timeout": 1}})
			},
			notChecked: "the crawl's tallies"},
		{name: "a URL queued again replaces nothing", want: "queued URL http://a.com/3 replaces result 77, which does not exist",
			bolt: func(t *testing.T) {
				it := a3
				it.Replaces = 77
				bk.update(t, func(tx *bolt.Tx) error {
					q := tx.Bucket([]byte("queue")).Bucket([]byte("a.com"))
					k, _ := q.Cursor().Last()
					return q.Put(k, store.EncodeQueued(it))
				})
			},
			notChecked: "each URL queued again names an existing result"},
		// The stores' own layouts.
		{name: "bbolt: an unknown bucket", want: `unknown bucket "extra"`,
			bolt: func(t *testing.T) {
				bk.update(t, func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("extra")); return err })
			}},
		{name: "redis: a host with URLs left is scheduled", want: "host c.com: 1 URLs left but the host is in no shard's ready set",
			redis: func(t *testing.T) { rk.do(t, "ZREM", shardKey("c.com", "ready"), "c.com") }},
	}
	kits := []struct {
		name   string
		fresh  func(*testing.T)
		check  func(*testing.T) *verify.Report
		damage func(i int) func(*testing.T)
	}{
		{"bbolt", bk.fresh, bk.check, func(i int) func(*testing.T) { return tests[i].bolt }},
		{"redis", rk.fresh, rk.check, func(i int) func(*testing.T) { return tests[i].redis }},
	}
	for _, k := range kits {
		t.Run(k.name+"/clean", func(t *testing.T) {
			k.fresh(t)
			rep := k.check(t)
			if !rep.OK() {
				t.Fatalf("problems in a clean store: %q", rep.Problems)
			}
			got := fmt.Sprintf("seen %d queued %d deferred %d pages %d failed %d hosts %d breakers %d transitions %d cases %d",
				rep.Seen, rep.Queued, rep.Deferred, rep.Pages, rep.Failed, rep.Hosts, rep.Breakers, rep.Transitions, rep.Cases)
			if want := "seen 7 queued 2 deferred 1 pages 3 failed 1 hosts 4 breakers 2 transitions 4 cases 1"; got != want {
				t.Errorf("report counts %s, want %s", got, want)
			}
		})
		for i, tt := range tests {
			damage := k.damage(i)
			if damage == nil && tt.notChecked == "" {
				continue // a layout the other store has
			}
			t.Run(k.name+"/"+tt.name, func(t *testing.T) {
				k.fresh(t)
				if damage == nil {
					rep := k.check(t)
					if !strings.Contains(strings.Join(rep.NotChecked, "\n"), tt.notChecked) {
						t.Errorf("this store keeps no record for %q, and it is not named among the checks not made: %q", tt.notChecked, rep.NotChecked)
					}
					return
				}
				damage(t)
				rep := k.check(t)
				if all := strings.Join(rep.Problems, "\n"); rep.OK() || !strings.Contains(all, tt.want) {
					t.Errorf("no problem says %q; problems:\n%s", tt.want, all)
				}
			})
		}
	}
}

// The cap on the problems kept is one, whichever the store.
func TestProblemCap(t *testing.T) {
	rep := verify.NewReport(2)
	for i := range 5 {
		rep.Addf("problem %d", i)
	}
	if len(rep.Problems) != 2 || rep.Omitted != 3 || rep.OK() {
		t.Errorf("kept %q, omitted %d; want 2 kept and 3 omitted", rep.Problems, rep.Omitted)
	}
	if rep := verify.NewReport(0); rep.OK() != true {
		t.Error("an empty report is not ok")
	}
}
