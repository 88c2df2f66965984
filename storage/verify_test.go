package storage

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/breaker"
	"breakwater/store"
)

// wellFormed writes, through the storage API as a crawl would, a file with
// something in every bucket: queued, deferred and done URLs, a failure
// queued again, pages staged for a refresh (one in its lane, two topped up
// into their queue), breakers open, held and counting, their transitions,
// a case, robots.txt rules, a capture and the archive's state. It returns
// the path, closed.
func wellFormed(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crawl.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	q := enqueue(t, db, item("a.com", "/1"), item("a.com", "/2"), item("a.com", "/3"), item("b.com", "/1"),
		item("c.com", "/1"), item("c.com", "/2"), item("d.com", "/1"))
	commit(t, db, func(b *store.Batch) {
		b.Complete(q[0], ok200(q[0]))
		b.Defer(q[1], t2)
		b.Complete(q[3], timeout(q[3]))
		b.Complete(q[4], ok200(q[4]))
		b.Complete(q[5], ok200(q[5]))
		b.Complete(q[6], ok200(q[6]))
		b.PutRobots("a.com", rules(t, 200, "User-agent: *\nDisallow: /private/\n"))
		b.PutBreaker("b.com", breaker.Breaker{State: breaker.Open, OpenedAt: t3, Rest: time.Minute, DownSince: t1, Generation: 3})
		b.PutBreaker("d.com", breaker.Breaker{State: breaker.Open, Hold: breaker.Case, HoldReason: "403: no bots",
			OpenedAt: t1, Rest: time.Minute, DownSince: t1, Generation: 1})
		b.PutBreaker("e.com", breaker.Breaker{Failures: 2})
		b.AppendTransition(store.Transition{At: t1, Host: "b.com", From: "closed", To: "open", Generation: 1})
		b.AppendTransition(store.Transition{At: t1, Host: "d.com", From: "closed", To: "open", Hold: "case", Generation: 1})
		b.AppendTransition(store.Transition{At: t2, Host: "b.com", From: "open", To: "half-open", Generation: 2})
		b.AppendTransition(store.Transition{At: t3, Host: "b.com", From: "half-open", To: "open", Generation: 3})
		b.AppendCase(store.Case{Host: "d.com", At: t1, URL: "http://d.com/1", Status: 403, Excerpt: "no bots"})
		b.PutCapture("sha1:AAAA", store.Capture{URI: "http://a.com/1", Date: t0})
		b.PutArchiveState(store.ArchiveState{File: "crawl-1.warc.gz", Committed: 1234, Serial: 1})
		b.PutRunningAt(t3)
	})
	if n, err := db.RequeueFailed(); err != nil || n != 1 {
		t.Fatalf("RequeueFailed = %d, %v", n, err)
	}
	if _, err := db.StageRefreshes(0, t4, 100); err != nil { // a.com/1, c.com/1, c.com/2, d.com/1
		t.Fatal(err)
	}
	commit(t, db, func(b *store.Batch) { b.QueueRefreshes(nil) }) // c.com's and d.com's: a.com still has new URLs
	if err := db.PutSettings([]byte(`{"seeds":["http://a.com/"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// verify opens path read-only and verifies it.
func verify(t *testing.T, path string, opts VerifyOptions) *VerifyReport {
	t.Helper()
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rep, err := db.Verify(opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// archiveOf is the archive a crawl of the well-formed file left: each
// page done once, robots.txt twice.
func archiveOf() map[string]int {
	return map[string]int{"http://a.com/1": 1, "http://c.com/1": 1, "http://c.com/2": 1, "http://d.com/1": 1,
		"http://a.com/robots.txt": 2}
}

func TestVerifyWellFormed(t *testing.T) {
	path := wellFormed(t)
	before := freeze(t, path)
	rep := verify(t, path, VerifyOptions{Archive: archiveOf()})
	if !rep.OK() {
		t.Fatalf("problems in a well-formed file: %q", rep.Problems)
	}
	want := VerifyReport{Seen: 7, Queued: 5, Deferred: 1, Staged: 1, Pages: 4, Failed: 1, Hosts: 4, Breakers: 3, Transitions: 4, Cases: 1}
	if got := *rep; got.Seen != want.Seen || got.Queued != want.Queued || got.Deferred != want.Deferred ||
		got.Staged != want.Staged || got.Pages != want.Pages || got.Failed != want.Failed || got.Hosts != want.Hosts ||
		got.Breakers != want.Breakers || got.Transitions != want.Transitions || got.Cases != want.Cases {
		t.Errorf("report %+v, want the counts of %+v", got, want)
	}
	checkUnchanged(t, path, before)
}

// putJSON stores v as JSON under key in bucket.
func putJSON(tx *bolt.Tx, bucket, key string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return tx.Bucket([]byte(bucket)).Put([]byte(key), data)
}

// resultKeyOf returns the results key of the URL u.
func resultKeyOf(tx *bolt.Tx, u string) []byte {
	var key []byte
	h := store.HashOf(u)
	_ = tx.Bucket(bucketResults).ForEach(func(k, v []byte) error {
		if head, err := store.ParseRecordHead(v); err == nil && head.Hash == h {
			key = append([]byte(nil), k...)
		}
		return nil
	})
	return key
}

func editCounts(tx *bolt.Tx, fn func(*store.Counts)) error {
	c, err := readCounts(tx.Bucket(bucketMeta))
	if err != nil {
		return err
	}
	fn(&c)
	return putJSON(tx, "meta", "counts", c)
}

func TestVerifyNamesEachProblem(t *testing.T) {
	unseen := item("a.com", "/never-seen")
	tests := []struct {
		name   string
		damage func(tx *bolt.Tx) error
		opts   VerifyOptions
		want   []string
	}{
		{"queued URL not in the seen set", func(tx *bolt.Tx) error {
			if err := tx.Bucket(bucketQueue).Bucket([]byte("a.com")).Put(seqKey(1), store.EncodeQueued(unseen)); err != nil {
				return err
			}
			return editCounts(tx, func(c *store.Counts) { c.Queued++; c.Seen++ })
		}, VerifyOptions{}, []string{"queued URL http://a.com/never-seen (hash " + hexHash(unseen.Hash) + ") is not in the seen set",
			"the stored count seen is 8, the seen set holds 7", "the stored counts of host a.com"}},
		{"URL both queued and done", func(tx *bolt.Tx) error {
			it := item("b.com", "/1") // queued again over its failure, and now done for good too
			bk, _ := tx.Bucket(bucketQueue).CreateBucketIfNotExists([]byte("b.com"))
			return bk.Put(seqKey(2), store.EncodeQueued(it))
		}, VerifyOptions{}, []string{"queued URL http://b.com/1 (hash " + hexHash(store.HashOf("http://b.com/1")) + ") is also queued",
			"the stored count queued is 5, the queue holds 6"}},
		{"URL queued and done without replacing its result", func(tx *bolt.Tx) error {
			it := item("e.com", "/1")
			it.Hash = store.HashOf("http://a.com/1")
			bk, _ := tx.Bucket(bucketQueue).CreateBucketIfNotExists([]byte("e.com"))
			return bk.Put(seqKey(3), store.EncodeQueued(it))
		}, VerifyOptions{}, []string{"URL http://e.com/1 (hash " + hexHash(store.HashOf("http://a.com/1")) + ") of host e.com is also another host's"}},
		{"a result lost", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketResults).Delete(resultKeyOf(tx, "http://a.com/1"))
		}, VerifyOptions{}, []string{"staged for a refresh URL http://a.com/1 replaces result 1, which does not exist",
			"the stored count fetched is 4, the results hold pages: 3", "tallies by status"}},
		{"a URL lost from everywhere", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketDeferred).ForEach(func(k, _ []byte) error { return tx.Bucket(bucketDeferred).Delete(k) })
		}, VerifyOptions{}, []string{"neither queued, deferred, staged nor done: it is lost",
			"the stored count deferred is 1, the deferred URLs are 0"}},
		{"conservation", func(tx *bolt.Tx) error {
			return editCounts(tx, func(c *store.Counts) { c.Fetched += 2 })
		}, VerifyOptions{}, []string{"the stored counts break conservation: seen 7 != fetched 6 + failed 1 + queued 5 + deferred 1 - 4 queued again over their result"}},
		{"tallies", func(tx *bolt.Tx) error {
			return putJSON(tx, "meta", "tallies", store.Tallies{Status: map[int]int64{200: 9}, Failed: map[string]int64{"timeout": 1}})
		}, VerifyOptions{}, []string{"the stored tallies by status map[200:9] differ from the results' map[0:1 200:4]"}},
		{"host counts", func(tx *bolt.Tx) error {
			return putJSON(tx, "hosts", "c.com", store.HostCounts{Fetched: 1})
		}, VerifyOptions{}, []string{"the stored counts of host c.com are {Queued:0 Deferred:0 Fetched:1 Failed:0}, its records {Queued:2 Deferred:0 Fetched:2 Failed:0}"}},
		{"host counts missing", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketHosts).Delete([]byte("d.com"))
		}, VerifyOptions{}, []string{"host d.com has no stored counts"}},
		{"seen twice", func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketSeen)
			seq, _ := bk.NextSequence()
			return bk.Put(u64(seq), u64le(fingerprint(store.HashOf("http://a.com/2"))))
		}, VerifyOptions{}, []string{"is logged twice in the seen set: a URL was queued twice"}},
		{"sequence", func(tx *bolt.Tx) error {
			it := item("c.com", "/far")
			return tx.Bucket(bucketResults).Put(u64(1<<40), store.EncodeResult(it, ok200(it)))
		}, VerifyOptions{}, []string{"result 1099511627776: beyond the bucket's sequence", "done URL http://c.com/far"}},
		{"malformed result", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketResults).Put(resultKeyOf(tx, "http://d.com/1"), []byte("garbage that is long enough"))
		}, VerifyOptions{}, []string{"result 5: malformed result record"}},
		{"staged result without its URL", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketRefresh).DeleteBucket([]byte("a.com"))
		}, VerifyOptions{}, []string{"result 1 of http://a.com/1 is flagged for a refresh and replaced by 0 waiting URLs, want 1"}},
		{"empty lane", func(tx *bolt.Tx) error {
			_, err := tx.Bucket(bucketRefresh).CreateBucket([]byte("z.com"))
			return err
		}, VerifyOptions{}, []string{`the refresh lane of "z.com" is empty`}},
		{"malformed host page count", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketHostPages).Put([]byte("a.com"), []byte{0x80})
		}, VerifyOptions{}, []string{`page count of host "a.com": malformed record 80`}},
		{"unknown meta key", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put([]byte("running_at\x00"), []byte("x"))
		}, VerifyOptions{}, []string{`meta: unknown key "running_at\x00"`}},
		{"unknown bucket", func(tx *bolt.Tx) error {
			_, err := tx.CreateBucket([]byte("extra"))
			return err
		}, VerifyOptions{}, []string{`unknown bucket "extra"`}},
		{"breaker held but closed", func(tx *bolt.Tx) error {
			return putJSON(tx, "breakers", "d.com", breaker.Breaker{Hold: breaker.Case, HoldReason: "x", Generation: 1})
		}, VerifyOptions{}, []string{"breaker of d.com: held (case) but closed"}},
		{"breaker closed and down", func(tx *bolt.Tx) error {
			return putJSON(tx, "breakers", "e.com", breaker.Breaker{Failures: 2, DownSince: t1})
		}, VerifyOptions{}, []string{"breaker of e.com: closed with a down time"}},
		{"breaker open without a down time", func(tx *bolt.Tx) error {
			return putJSON(tx, "breakers", "b.com", breaker.Breaker{State: breaker.Open, OpenedAt: t1, Rest: time.Minute, Failures: 3})
		}, VerifyOptions{}, []string{"breaker of b.com: open without a down-since time", "breaker of b.com: open with 3 failures counted"}},
		{"breaker state unknown", func(tx *bolt.Tx) error {
			return putJSON(tx, "breakers", "b.com", breaker.Breaker{State: 7, Hold: 8, DownSince: t1})
		}, VerifyOptions{}, []string{"breaker of b.com: state 7 is none of", "breaker of b.com: hold 8 has unknown flags"}},
		{"case hold without a case", func(tx *bolt.Tx) error {
			return putJSON(tx, "cases", string(u64(1)), store.Case{Host: "d.com", At: t1, URL: "http://d.com/1", Resolved: t2})
		}, VerifyOptions{}, []string{"breaker of d.com is held by a case, and the host has no open case to resolve"}},
		{"case resolved before it was raised", func(tx *bolt.Tx) error {
			return putJSON(tx, "cases", string(u64(1)), store.Case{Host: "d.com", At: t2, URL: "http://d.com/1", Resolved: t1})
		}, VerifyOptions{}, []string{"case 1 of d.com was resolved at", "before it was raised"}},
		{"transitions out of order", func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketTransitions)
			seq, _ := bk.NextSequence()
			data, _ := json.Marshal(store.Transition{At: t0, Host: "b.com", From: "open", To: "half-open", Generation: 2})
			return bk.Put(u64(seq), data)
		}, VerifyOptions{}, []string{"transition 5 of b.com at 2025-03-01T12:00:00Z is before transition 4 at 2025-03-01T12:00:03Z",
			"transition 5 of b.com has generation 2, after generation 3 in transition 4"}},
		{"transition malformed", func(tx *bolt.Tx) error {
			bk := tx.Bucket(bucketTransitions)
			seq, _ := bk.NextSequence()
			data, _ := json.Marshal(store.Transition{At: t4, Host: "b.com", From: "open", To: "ajar"})
			return bk.Put(u64(seq), data)
		}, VerifyOptions{}, []string{`transition 5 is malformed`}},
		{"page not archived, URL archived and not done, repeats", func(tx *bolt.Tx) error { return nil },
			VerifyOptions{Archive: map[string]int{"http://a.com/1": 2, "http://c.com/2": 1, "http://d.com/1": 1, "http://x.com/": 1}},
			[]string{"page http://c.com/1 (result 3, status 200) is done but not in the archive",
				"http://a.com/1 is in 2 response or revisit records, want 1",
				"http://x.com/ is in the archive (1 records) but has no result in the database"}},
		{"capture not archived", func(tx *bolt.Tx) error {
			return tx.Bucket(bucketCaptures).Put([]byte("sha1:BBBB"), append(u64le(1), "http://q.com/"...))
		}, VerifyOptions{Archive: archiveOf()}, []string{"payload sha1:BBBB was first captured from", "http://q.com/, which is not in the archive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := wellFormed(t)
			updateBolt(t, path, tt.damage)
			rep := verify(t, path, tt.opts)
			if rep.OK() {
				t.Fatal("Verify found nothing wrong")
			}
			all := strings.Join(rep.Problems, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("no problem says %q; problems:\n%s", w, all)
				}
			}
		})
	}
}

func hexHash(h store.Hash) string {
	var b bytes.Buffer
	for _, c := range h {
		b.WriteString(string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15]))
	}
	return b.String()
}

func u64le(v uint64) []byte {
	b := make([]byte, 8)
	for i := range b {
		b[i] = byte(v >> (8 * i))
	}
	return b
}

// A repeated URL is no problem in a crawl that refreshes pages.
func TestVerifyArchiveRepeats(t *testing.T) {
	path := wellFormed(t)
	arch := archiveOf()
	arch["http://c.com/1"] = 3
	if rep := verify(t, path, VerifyOptions{Archive: arch}); rep.OK() {
		t.Error("a page in 3 records is no problem without refreshes")
	}
	if rep := verify(t, path, VerifyOptions{Archive: arch, ArchiveRepeats: true}); !rep.OK() {
		t.Errorf("problems with refreshes allowed: %q", rep.Problems)
	}
}

func TestVerifyCapsProblems(t *testing.T) {
	path := wellFormed(t)
	updateBolt(t, path, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketSeen)
		for i := range 120 {
			seq, _ := bk.NextSequence()
			if err := bk.Put(u64(seq), u64le(uint64(i+1))); err != nil {
				return err
			}
		}
		return nil
	})
	rep := verify(t, path, VerifyOptions{MaxProblems: 10})
	if len(rep.Problems) != 10 || rep.Omitted < 110 {
		t.Errorf("%d problems kept and %d omitted, want 10 and at least 110 (120 lost URLs and the counts)", len(rep.Problems), rep.Omitted)
	}
}

// The hops of a robots.txt redirect are archived as they came: verify
// counts them as robots.txt fetches, found through the Locations of the
// archive's 3xx records, up to robots.MaxRedirects hops, and nothing more.
func TestVerifyArchiveRobotsRedirects(t *testing.T) {
	path := wellFormed(t)
	hops := []string{"http://a.com/moved/robots", "http://x.com/rules", "http://x.com/2", "http://x.com/3", "http://x.com/4"}
	arch := archiveOf()
	redirects := map[string][]string{"http://a.com/robots.txt": {hops[0], hops[0]}} // both runs' fetches
	for i, h := range hops {
		arch[h] = 2
		if i+1 < len(hops) {
			redirects[h] = []string{hops[i+1], hops[i+1]}
		}
	}
	redirects[hops[4]] = []string{"http://x.com/6"} // a sixth hop: no robots.txt fetch goes this far
	arch["http://x.com/6"] = 1
	// A page done that a robots.txt redirects to is archived as both.
	arch["http://d.com/robots.txt"] = 1
	redirects["http://d.com/robots.txt"] = []string{"http://d.com/1"}
	arch["http://d.com/1"] = 2
	sixth := "http://x.com/6 is in the archive (1 records) but has no result in the database"
	if rep := verify(t, path, VerifyOptions{Archive: arch, ArchiveRedirects: redirects}); len(rep.Problems) != 1 || rep.Problems[0] != sixth {
		t.Errorf("want only the sixth hop unaccounted for, got %q", rep.Problems)
	}
	if rep := verify(t, path, VerifyOptions{Archive: arch}); rep.OK() ||
		!strings.Contains(strings.Join(rep.Problems, "\n"), "http://a.com/moved/robots is in the archive (2 records) but has no result in the database") {
		t.Errorf("without the redirects the hops are unaccounted for: %q", rep.Problems)
	}
	// A hop archived once more than the redirects to it, and a page
	// archived twice, whose one redirect is a page's, not robots.txt's.
	arch[hops[2]] = 3
	arch["http://c.com/2"] = 2
	redirects["http://a.com/1"] = []string{"http://c.com/2"}
	rep := verify(t, path, VerifyOptions{Archive: arch, ArchiveRedirects: redirects})
	want := []string{"http://c.com/2 is in 2 response or revisit records, want 1",
		"http://x.com/2 is in the archive (3 records (2 of them hops of a robots.txt redirect)) but has no result in the database",
		sixth}
	if !slices.Equal(rep.Problems, want) {
		t.Errorf("problems %q\nwant %q", rep.Problems, want)
	}
}
