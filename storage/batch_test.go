package storage

import (
	"errors"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/robots"
	"breakwater/store"
)

func TestAddDedupesByHash(t *testing.T) {
	a, b, c := item("a.com", "/1"), item("a.com", "/2"), item("b.com", "/1")
	sameHash := item("b.com", "/other")
	sameHash.Hash = a.Hash // the hash, not the URL, is the dedupe key

	tests := []struct {
		name      string
		batches   [][]store.Item
		wantAdded [][]store.Item // per batch, compared by URL
	}{
		{"distinct", [][]store.Item{{a, b, c}}, [][]store.Item{{a, b, c}}},
		{"twice in one batch", [][]store.Item{{a, b, a}}, [][]store.Item{{a, b}}},
		{"across batches", [][]store.Item{{a}, {a, c}}, [][]store.Item{{a}, {c}}},
		{"same hash other url", [][]store.Item{{a}, {sameHash, b}}, [][]store.Item{{a}, {b}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTestDB(t)
			var lastSeq uint64
			var total int64
			for i, items := range tt.batches {
				added := enqueue(t, db, items...)
				if got, want := urls(added), urls(tt.wantAdded[i]); !reflect.DeepEqual(got, want) {
					t.Fatalf("batch %d: Added = %v, want %v", i, got, want)
				}
				for _, it := range added {
					if it.Seq <= lastSeq {
						t.Fatalf("batch %d: Seq %d of %s not above previous %d", i, it.Seq, it.URL, lastSeq)
					}
					lastSeq = it.Seq
				}
				total += int64(len(added))
			}
			want := store.Counts{Seen: total, Queued: total}
			if got := mustCounts(t, db); got != want {
				t.Fatalf("Counts = %+v, want %+v", got, want)
			}
		})
	}
}

func urls(items []store.Item) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.URL)
	}
	return out
}

func TestAddAfterCompleteIsIgnored(t *testing.T) {
	db := openTestDB(t)
	a := enqueue(t, db, item("a.com", "/"))[0]
	commit(t, db, func(b *store.Batch) { b.Complete(a, fetched(a, 200)) })
	if added := enqueue(t, db, item("a.com", "/")); len(added) != 0 {
		t.Fatalf("re-adding a fetched URL queued %v", urls(added))
	}
	if got := loadAll(t, db, "a.com"); len(got) != 0 {
		t.Fatalf("queue of a.com = %v, want empty", urls(got))
	}
}

func TestRequeueIgnoresSeen(t *testing.T) {
	db := openTestDB(t)
	a := enqueue(t, db, item("a.com", "/"))[0]
	commit(t, db, func(b *store.Batch) { b.Complete(a, failed(a, "timeout")) })
	a.Replaces = resultKeys(t, db)[a.Hash] // the result its next one replaces, as RequeueFailed has it
	c := commit(t, db, func(b *store.Batch) { b.Requeue(a) })
	if len(c.Added) != 1 || c.Added[0].Seq <= a.Seq {
		t.Fatalf("Requeue Added = %+v, want a with a new Seq above %d", c.Added, a.Seq)
	}
	// The old result stays until the URL is fetched again.
	want := store.Counts{Seen: 1, Queued: 1, Failed: 1}
	if got := mustCounts(t, db); got != want {
		t.Fatalf("Counts = %+v, want %+v", got, want)
	}
}

func TestComplete(t *testing.T) {
	tests := []struct {
		name       string
		results    []func(store.Item) *store.Result // completed in turn, requeueing in between
		wantCounts store.Counts
	}{
		{"fetched", []func(store.Item) *store.Result{ok200}, store.Counts{Seen: 1, Fetched: 1}},
		{"failed", []func(store.Item) *store.Result{timeout}, store.Counts{Seen: 1, Failed: 1}},
		{"failed then fetched", []func(store.Item) *store.Result{timeout, ok200}, store.Counts{Seen: 1, Fetched: 1}},
		{"fetched then failed", []func(store.Item) *store.Result{ok200, timeout}, store.Counts{Seen: 1, Failed: 1}},
		{"failed twice", []func(store.Item) *store.Result{timeout, timeout}, store.Counts{Seen: 1, Failed: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTestDB(t)
			it := enqueue(t, db, item("a.com", "/x"), item("b.com", "/y"))[0]
			var last *store.Result
			for i, mk := range tt.results {
				if i > 0 {
					it.Replaces = resultKeys(t, db)[it.Hash]
					it = commit(t, db, func(b *store.Batch) { b.Requeue(it) }).Added[0]
				}
				last = mk(it)
				commit(t, db, func(b *store.Batch) { b.Complete(it, last) })
			}
			if got := loadAll(t, db, "a.com"); len(got) != 0 {
				t.Fatalf("a.com still queued: %v", urls(got))
			}
			tt.wantCounts.Seen++ // b.com's URL
			tt.wantCounts.Queued++
			if got := mustCounts(t, db); got != tt.wantCounts {
				t.Fatalf("Counts = %+v, want %+v", got, tt.wantCounts)
			}
			wantHost := store.HostCounts{Fetched: tt.wantCounts.Fetched, Failed: tt.wantCounts.Failed}
			if got := hostCounts(t, db)["a.com"]; got != wantHost {
				t.Fatalf("counts of a.com = %+v, want %+v", got, wantHost)
			}
			if got := takeSnapshot(t, db).Results[it.Hash]; !reflect.DeepEqual(got, *last) {
				t.Fatalf("stored result = %+v, want %+v", got, *last)
			}
		})
	}
}

func ok200(it store.Item) *store.Result   { return fetched(it, 200) }
func timeout(it store.Item) *store.Result { return failed(it, "timeout") }

// A second Complete of the same item (a stale lease, say) finds it no longer
// queued and is ignored: the URL is not counted twice, Queued does not go
// negative, and the first outcome stays the URL's only result.
func TestCompleteTwiceInOneBatch(t *testing.T) {
	db := openTestDB(t)
	it := enqueue(t, db, item("a.com", "/"))[0]
	commit(t, db, func(b *store.Batch) {
		b.Complete(it, timeout(it))
		b.Complete(it, ok200(it))
	})
	if got, want := mustCounts(t, db), (store.Counts{Seen: 1, Failed: 1}); got != want {
		t.Fatalf("Counts = %+v, want %+v", got, want)
	}
	if s := takeSnapshot(t, db); len(s.Results) != 1 || s.Results[it.Hash].ErrorClass != "timeout" {
		t.Fatalf("results = %+v, want only the first (timeout)", s.Results)
	}
	checkInvariants(t, db)
}

func TestDeferAndPromote(t *testing.T) {
	db := openTestDB(t)
	a, b, c, d := item("a.com", "/a"), item("b.com", "/b"), item("a.com", "/c"), item("b.com", "/d")
	a.Depth, a.Attempts, a.Redirects = 2, 1, 3
	q := enqueue(t, db, a, b, c, d)
	maxSeq := q[3].Seq
	got := commit(t, db, func(bt *store.Batch) {
		bt.Defer(q[0], t3)
		bt.Defer(q[1], t1)
		bt.Defer(q[2], t2)
	})
	if !got.NextDue.Equal(t1) {
		t.Fatalf("NextDue after Defer = %v, want %v", got.NextDue, t1)
	}
	if want := (store.Counts{Seen: 4, Queued: 1, Deferred: 3}); mustCounts(t, db) != want {
		t.Fatalf("Counts after Defer = %+v, want %+v", mustCounts(t, db), want)
	}
	if got := urls(loadAll(t, db, "a.com")); len(got) != 0 {
		t.Fatalf("deferred items still loadable from the queue: %v", got)
	}

	steps := []struct {
		now       time.Time
		limit     int
		wantAdded []store.Item
		wantNext  time.Time // zero: nothing left
	}{
		{t0, 10, nil, t1},
		{t2, 1, []store.Item{b}, t2},  // the limit takes the earliest first
		{t2, 10, []store.Item{c}, t3}, // due == now is due
		{t4, 10, []store.Item{a}, time.Time{}},
		{t4, 10, nil, time.Time{}},
	}
	for i, s := range steps {
		got := commit(t, db, func(bt *store.Batch) { bt.Promote(s.now, s.limit) })
		if g, w := urls(got.Added), urls(s.wantAdded); !reflect.DeepEqual(g, w) {
			t.Fatalf("step %d Promote(%v, %d) Added = %v, want %v", i, s.now.Sub(t0), s.limit, g, w)
		}
		if !got.NextDue.Equal(s.wantNext) {
			t.Fatalf("step %d NextDue = %v, want %v", i, got.NextDue, s.wantNext)
		}
		for j, it := range got.Added {
			if it.Seq <= maxSeq {
				t.Fatalf("step %d: promoted %s kept an old Seq %d (max so far %d)", i, it.URL, it.Seq, maxSeq)
			}
			maxSeq = it.Seq
			want := s.wantAdded[j]
			want.Seq = it.Seq
			if it != want {
				t.Fatalf("step %d: promoted item = %+v, want %+v", i, it, want)
			}
		}
	}
	if want := (store.Counts{Seen: 4, Queued: 4}); mustCounts(t, db) != want {
		t.Fatalf("Counts after Promote = %+v, want %+v", mustCounts(t, db), want)
	}
	if got, want := urls(loadAll(t, db, "a.com")), []string{c.URL, a.URL}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a.com queue = %v, want %v (promotion order)", got, want)
	}
}

func TestDeferNotQueuedIsIgnored(t *testing.T) {
	db := openTestDB(t)
	it := enqueue(t, db, item("a.com", "/"))[0]
	got := commit(t, db, func(b *store.Batch) {
		b.Defer(it, t2)
		b.Defer(it, t1) // already moved: must not park a second copy
	})
	if !got.NextDue.Equal(t2) {
		t.Fatalf("NextDue = %v, want %v", got.NextDue, t2)
	}
	if want := (store.Counts{Seen: 1, Deferred: 1}); mustCounts(t, db) != want {
		t.Fatalf("Counts = %+v, want %+v", mustCounts(t, db), want)
	}
	due, ok, err := db.NextDue()
	if err != nil || !ok || due != t2.UnixNano() {
		t.Fatalf("NextDue() = %d, %v, %v; want %d", due, ok, err, t2.UnixNano())
	}
}

func TestLoadQueued(t *testing.T) {
	db := openTestDB(t)
	// Hosts that are byte prefixes of one another must not leak into each other.
	hosts := []string{"a.com", "a.com:8080", "a.co", "a.com.evil", "b.com"}
	var in []store.Item
	for i := range 4 {
		for _, h := range hosts {
			in = append(in, item(h, "/"+string(rune('a'+i))))
		}
	}
	added := enqueue(t, db, in...)
	byHost := map[string][]store.Item{}
	for _, it := range added {
		byHost[it.Host] = append(byHost[it.Host], it)
	}
	for _, h := range hosts {
		all := byHost[h]
		tests := []struct {
			name     string
			afterSeq uint64
			limit    int
			want     []store.Item
		}{
			{"all", 0, 100, all},
			{"limit", 0, 2, all[:2]},
			{"after", all[1].Seq, 100, all[2:]},
			{"after and limit", all[0].Seq, 2, all[1:3]},
			{"after last", all[3].Seq, 100, nil},
		}
		for _, tt := range tests {
			t.Run(h+"/"+tt.name, func(t *testing.T) {
				got, err := db.LoadQueued(h, tt.afterSeq, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(tt.want) || (len(got) > 0 && !reflect.DeepEqual(got, tt.want)) {
					t.Fatalf("LoadQueued(%q, %d, %d) = %v, want %v", h, tt.afterSeq, tt.limit, urls(got), urls(tt.want))
				}
			})
		}
	}
	if got := loadAll(t, db, "unknown.com"); len(got) != 0 {
		t.Fatalf("unknown host loaded %v", urls(got))
	}
}

func TestFailHost(t *testing.T) {
	db := openTestDB(t)
	a1, a2, a3 := item("a.com", "/1"), item("a.com", "/2"), item("a.com", "/3")
	a2.Depth, a2.Attempts = 4, 2
	p1, b1 := item("a.com:8080", "/1"), item("b.com", "/1")
	q := enqueue(t, db, a1, a2, a3, p1, b1)
	commit(t, db, func(b *store.Batch) { b.Defer(q[2], t1) }) // parked URLs are not "queued"
	template := store.Result{ErrorClass: "breaker_open", Error: "host failing", FetchedAt: t0, URL: "ignored"}
	got := commit(t, db, func(b *store.Batch) {
		b.FailHost("a.com", template, nil)
		b.FailHost("idle.com", template, nil)
	})
	if want := map[string][]uint64{"a.com": {q[0].Seq, q[1].Seq}, "idle.com": {}}; !reflect.DeepEqual(got.FailedHosts, want) {
		t.Fatalf("FailedHosts = %v, want %v", got.FailedHosts, want)
	}
	s := takeSnapshot(t, db)
	for _, it := range q[:2] {
		want := template
		want.URL, want.FinalURL, want.Host, want.Depth, want.Attempts = it.URL, it.URL, it.Host, it.Depth, it.Attempts
		if r := s.Results[it.Hash]; !reflect.DeepEqual(r, want) {
			t.Fatalf("result of %s = %+v, want %+v", it.URL, r, want)
		}
	}
	if len(s.Results) != 2 {
		t.Fatalf("%d results stored, want 2", len(s.Results))
	}
	if got := urls(loadAll(t, db, "a.com")); len(got) != 0 {
		t.Fatalf("a.com still queued: %v", got)
	}
	for _, it := range []store.Item{p1, b1} {
		if got := urls(loadAll(t, db, it.Host)); !reflect.DeepEqual(got, []string{it.URL}) {
			t.Fatalf("queue of %s = %v, want only %s", it.Host, got, it.URL)
		}
	}
	if want := (store.Counts{Seen: 5, Queued: 2, Deferred: 1, Failed: 2}); s.Counts != want {
		t.Fatalf("Counts = %+v, want %+v", s.Counts, want)
	}
	if want := (store.HostCounts{Deferred: 1, Failed: 2}); s.Hosts["a.com"] != want {
		t.Fatalf("counts of a.com = %+v, want %+v", s.Hosts["a.com"], want)
	}
}

func TestRequeueFailed(t *testing.T) {
	db := openTestDB(t)
	q := enqueue(t, db, item("a.com", "/1"), item("a.com", "/2"), item("b.com", "/3"), item("b.com", "/4"))
	q[2].Depth = 3 // as the result records it
	commit(t, db, func(b *store.Batch) {
		b.Complete(q[0], timeout(q[0]))
		b.Complete(q[1], ok200(q[1]))
		r := failed(q[2], "http_5xx")
		r.Depth, r.Referrer, r.Lastmod = 3, "http://b.com/", "2026-11-30"
		b.Complete(q[2], r)
	})
	n, err := db.RequeueFailed()
	if err != nil || n != 2 {
		t.Fatalf("RequeueFailed() = %d, %v; want 2", n, err)
	}
	if got, want := urls(loadAll(t, db, "a.com")), []string{q[0].URL}; !reflect.DeepEqual(got, want) {
		t.Fatalf("a.com queue = %v, want %v", got, want)
	}
	b := loadAll(t, db, "b.com")
	if got, want := urls(b), []string{q[3].URL, q[2].URL}; !reflect.DeepEqual(got, want) {
		t.Fatalf("b.com queue = %v, want %v", got, want)
	}
	if b[1].Hash != q[2].Hash || b[1].Depth != 3 || b[1].Referrer != "http://b.com/" || b[1].Lastmod != "2026-11-30" {
		t.Fatalf("requeued item = %+v, want hash, depth, referrer and lastmod of %+v", b[1], q[2])
	}
	if want := (store.Counts{Seen: 4, Queued: 3, Fetched: 1, Failed: 2}); mustCounts(t, db) != want {
		t.Fatalf("Counts = %+v, want %+v", mustCounts(t, db), want)
	}
	commit(t, db, func(bt *store.Batch) { bt.Complete(b[1], ok200(b[1])) })
	if want := (store.Counts{Seen: 4, Queued: 2, Fetched: 2, Failed: 1}); mustCounts(t, db) != want {
		t.Fatalf("Counts after refetch = %+v, want %+v", mustCounts(t, db), want)
	}
}

// A resumed run that asks for failed URLs again (say, after an interrupted
// --retry-failed run) must not queue a URL that is already waiting.
func TestRequeueFailedTwiceQueuesOnce(t *testing.T) {
	db := openTestDB(t)
	it := enqueue(t, db, item("a.com", "/1"))[0]
	commit(t, db, func(b *store.Batch) { b.Complete(it, timeout(it)) })
	for range 2 {
		if _, err := db.RequeueFailed(); err != nil {
			t.Fatal(err)
		}
	}
	if got := urls(loadAll(t, db, "a.com")); len(got) != 1 {
		t.Fatalf("a.com queue = %v, want the failed URL once", got)
	}
}

// rules parses a robots.txt body fetched at t0.
func rules(t testing.TB, status int, body string) *robots.Rules {
	t.Helper()
	r, err := robots.FromResponse(status, []byte(body), t0)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRobotsRoundTrip(t *testing.T) {
	db := openTestDB(t)
	if _, err := db.Robots("a.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Robots of unknown host: err = %v, want ErrNotFound", err)
	}
	commit(t, db, func(b *store.Batch) {
		b.PutRobots("a.com", rules(t, 200, "User-agent: *\nDisallow: /old\n"))
		b.PutRobots("a.com:8080", rules(t, 404, ""))
	})
	commit(t, db, func(b *store.Batch) { b.PutRobots("a.com", rules(t, 200, "User-agent: *\nDisallow: /x\n")) })
	tests := []struct {
		host, path string
		allowed    bool
	}{
		{"a.com", "/x", false},
		{"a.com", "/old", true},
		{"a.com:8080", "/x", true},
	}
	for _, tt := range tests {
		r, err := db.Robots(tt.host)
		if err != nil {
			t.Fatalf("Robots(%q): %v", tt.host, err)
		}
		if got := r.Allowed(tt.path, "breakwater"); got != tt.allowed || !r.FetchedAt.Equal(t0) {
			t.Errorf("Robots(%q): Allowed(%s) = %v at %v, want %v at %v", tt.host, tt.path, got, r.FetchedAt, tt.allowed, t0)
		}
	}
}

// TestRobotsWrittenBefore reads a robots record as the code before storage
// owned its encoding wrote it (robots.Rules.MarshalBinary, called by crawl).
func TestRobotsWrittenBefore(t *testing.T) {
	db := openTestDB(t)
	old := "\x01\x0f\x01\x00\x00\x00\x0e\xdfT\xed\xc0\x00\x00\x00\x00\xff\xff\xc8\x01\x1bUser-agent: *\nDisallow: /x\n"
	putRaw(t, db, bucketRobots, "a.com", old, "bad.com", "\x09garbage")
	r, err := db.Robots("a.com")
	if err != nil || r.Status != 200 || !r.FetchedAt.Equal(t0) || r.Allowed("/x", "breakwater") {
		t.Fatalf("Robots(a.com) = %+v, %v; want status 200 at %v disallowing /x", r, err, t0)
	}
	if _, err := db.Robots("bad.com"); err == nil || !strings.Contains(err.Error(), "decode robots.txt of bad.com") {
		t.Errorf("Robots of a damaged record: err = %v, want one naming the host", err)
	}
	commit(t, db, func(b *store.Batch) { b.PutRobots("a.com", r) })
	if got := takeSnapshot(t, db).Robots["a.com"]; got != old {
		t.Errorf("robots written again as %q, want %q", got, old)
	}
}

func TestBreakers(t *testing.T) {
	db := openTestDB(t)
	open := func(fails int) breaker.Breaker {
		return breaker.Breaker{State: breaker.Open, Failures: fails, OpenedAt: t0, Rest: time.Minute, Generation: 2}
	}
	commit(t, db, func(b *store.Batch) {
		b.PutBreaker("c.com", open(1))
		b.PutBreaker("a.com", open(2))
		b.PutBreaker("b.com", open(3))
	})
	commit(t, db, func(b *store.Batch) {
		b.PutBreaker("a.com", open(4))
		b.DeleteBreaker("b.com")
		b.DeleteBreaker("never.com")
	})
	got := map[string]breaker.Breaker{}
	var order []string
	err := db.ForEachBreaker(func(host string, b breaker.Breaker) error {
		got[host] = b
		order = append(order, host)
		return nil
	})
	want := map[string]breaker.Breaker{"a.com": open(4), "c.com": open(1)}
	if err != nil || !reflect.DeepEqual(got, want) || !slices.IsSorted(order) {
		t.Fatalf("ForEachBreaker = %v in order %v, %v; want %v in host order", got, order, err, want)
	}
	if b, err := db.Breaker("a.com"); err != nil || b != open(4) {
		t.Fatalf("Breaker(a.com) = %+v, %v; want %+v", b, err, open(4))
	}
	if _, err := db.Breaker("b.com"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Breaker of a deleted host: err = %v, want ErrNotFound", err)
	}
	stop := errors.New("stop")
	if err := db.ForEachBreaker(func(string, breaker.Breaker) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ForEachBreaker did not pass fn's error through: %v", err)
	}
}

func TestTransitionsAndCasesKeepOrder(t *testing.T) {
	db := openTestDB(t)
	// More than 255 entries so a byte-wise key order that is not numeric would show.
	var want []string
	for i := range 300 {
		want = append(want, string(rune('a'+i%26))+string(rune('0'+i%10)))
	}
	fill := func(b *store.Batch, hosts []string) {
		for _, s := range hosts {
			b.AppendTransition(store.Transition{At: t0, Host: s, From: "closed", To: "open"})
			b.AppendCase(store.Case{Host: s, At: t0, Status: 403})
		}
	}
	commit(t, db, func(b *store.Batch) { fill(b, want[:200]) })
	commit(t, db, func(b *store.Batch) { fill(b, want[200:]) })
	var trans, cases []string
	if err := db.ForEachTransition(func(tr store.Transition) error { trans = append(trans, tr.Host); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := db.ForEachCase(func(c store.Case) error { cases = append(cases, c.Host); return nil }); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(trans, want) || !reflect.DeepEqual(cases, want) {
		t.Fatalf("log order lost:\ntransitions %v\ncases       %v\nwant        %v", trans, cases, want)
	}
}

func TestResolveCases(t *testing.T) {
	db := openTestDB(t)
	commit(t, db, func(b *store.Batch) {
		b.AppendCase(store.Case{Host: "a.com", At: t0, Status: 403})
		b.AppendCase(store.Case{Host: "b.com", At: t1, Status: 403})
		b.AppendCase(store.Case{Host: "a.com", At: t2, Status: 401, Resolved: t3})
		b.AppendCase(store.Case{Host: "a.com", At: t3, Status: 403})
	})
	putRaw(t, db, bucketCases, seqKeyString(5), undecodableRecord)
	commit(t, db, func(b *store.Batch) { b.ResolveCases("a.com", t4.In(time.FixedZone("east", 3600))) })
	var got []time.Time
	_ = db.forEach(bucketCases, func(k, v []byte) error {
		c, err := store.DecodeCase(beUint64(k), v)
		if err != nil && string(v) != undecodableRecord {
			t.Errorf("case %d: %v", beUint64(k), err)
		}
		got = append(got, c.Resolved)
		return nil
	})
	if want := []time.Time{t4, {}, t3, t4, {}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("resolved times after ResolveCases = %v, want %v (the undecodable one untouched)", got, want)
	}
}

func TestSettings(t *testing.T) {
	db := openTestDB(t)
	if _, err := db.Settings(); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Settings of a new file: err = %v, want ErrNotFound", err)
	}
	for _, want := range []string{`{"seeds":["http://a.com/"]}`, `{"seeds":[]}`} {
		if err := db.PutSettings([]byte(want)); err != nil {
			t.Fatal(err)
		}
		got, err := db.Settings()
		if err != nil || string(got) != want {
			t.Fatalf("Settings() = %q, %v; want %q", got, err, want)
		}
	}
}

// A due time before 1970 (the zero time.Time, say) must mean "due now", not
// a key that sorts after every real time and is never promoted.
func TestDeferBeforeEpochIsDue(t *testing.T) {
	db := openTestDB(t)
	q := enqueue(t, db, item("a.com", "/zero"), item("a.com", "/old"))
	commit(t, db, func(b *store.Batch) {
		b.Defer(q[0], time.Time{})
		b.Defer(q[1], time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))
	})
	got := commit(t, db, func(b *store.Batch) { b.Promote(t0, 10) })
	if len(got.Added) != 2 || !got.NextDue.IsZero() {
		t.Fatalf("Promote(t0) Added %v, NextDue %v; want both promoted and nothing left", urls(got.Added), got.NextDue)
	}
}

// Tallies follow every stored result, replaced ones included, and survive
// a reopen.
func TestTallies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openAt(t, path, nil)
	q := enqueue(t, db, item("a.com", "/1"), item("a.com", "/2"), item("b.com", "/1"), item("b.com", "/2"))
	commit(t, db, func(b *store.Batch) {
		b.Complete(q[0], ok200(q[0]))
		b.Complete(q[1], fetched(q[1], 404))
		b.Complete(q[2], timeout(q[2]))
		b.Complete(q[3], failed(q[3], "refused"))
	})
	want := store.Tallies{Status: map[int]int64{200: 1, 404: 1, 0: 2}, Failed: map[string]int64{"timeout": 1, "refused": 1}}
	checkTallies(t, db, want)

	// The timed-out URL is fetched on a second try: its old result goes.
	n, err := db.RequeueFailed()
	if err != nil || n != 2 {
		t.Fatalf("RequeueFailed = %d, %v; want 2", n, err)
	}
	again := loadAll(t, db, "b.com")
	commit(t, db, func(b *store.Batch) { b.Complete(again[0], ok200(again[0])) })
	want = store.Tallies{Status: map[int]int64{200: 2, 404: 1, 0: 1}, Failed: map[string]int64{"refused": 1}}
	checkTallies(t, db, want)
	db.Close()
	checkTallies(t, openAt(t, path, nil), want)
}

func checkTallies(t *testing.T, db *DB, want store.Tallies) {
	t.Helper()
	got, err := db.Tallies()
	if err != nil || !maps.Equal(got.Status, want.Status) || !maps.Equal(got.Failed, want.Failed) {
		t.Fatalf("Tallies = %+v, %v; want %+v", got, err, want)
	}
}
