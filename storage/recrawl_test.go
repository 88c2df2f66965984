package storage

import (
	"breakwater/store"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// storeFetched queues items and stores a page for each, one commit each, in
// order: the i-th fetched at at(i).
func storeFetched(t *testing.T, db *DB, at func(i int) time.Time, items ...store.Item) []store.Item {
	t.Helper()
	q := enqueue(t, db, items...)
	for i, it := range q {
		r := ok200(it)
		r.FetchedAt = at(i)
		commit(t, db, func(b *store.Batch) { b.Complete(it, r) })
	}
	return q
}

func secondsAfterT0(i int) time.Time { return t0.Add(time.Duration(i) * time.Second) }

func stageAll(t *testing.T, db *DB, staleBefore time.Time) store.RefreshScan {
	t.Helper()
	scan, err := db.StageRefreshes(0, staleBefore, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return scan
}

func laneURLs(t *testing.T, db *DB) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, it := range takeSnapshot(t, db).Lane {
		out[it.Host] = append(out[it.Host], it.URL)
	}
	return out
}

func TestStageRefreshesOldestFirstInChunks(t *testing.T) {
	db := openTestDB(t)
	a1, b1, c1, a2, b2, a3, a4 := item("a", "/1"), item("b", "/1"), item("c", "/1"), item("a", "/2"),
		item("b", "/2"), item("a", "/3"), item("a", "/4")
	storeFetched(t, db, secondsAfterT0, a1, b1)
	cq := enqueue(t, db, c1)
	commit(t, db, func(b *store.Batch) { b.Complete(cq[0], failed(cq[0], "timeout")) }) // never refreshed
	storeFetched(t, db, func(i int) time.Time { return secondsAfterT0(i + 2) }, a2, b2, a3)
	storeFetched(t, db, func(int) time.Time { return t0.Add(time.Minute) }, a4) // fresh
	keys := resultKeys(t, db)
	cutoff := t0.Add(10 * time.Second)

	steps := []struct {
		staged int
		hosts  []string
		after  uint64
		done   bool
	}{
		{2, []string{"a", "b"}, keys[b1.Hash], false},
		{1, []string{"a"}, keys[a2.Hash], false}, // the failure is looked at and passed over
		{2, []string{"b", "a"}, keys[a3.Hash], false},
		{0, nil, keys[a4.Hash] - 1, true}, // stops at the first fresh page
		{0, nil, keys[a4.Hash] - 1, true}, // and stays there
	}
	var after uint64
	for i, st := range steps {
		scan, err := db.StageRefreshes(after, cutoff, 2)
		if err != nil {
			t.Fatal(err)
		}
		if scan.Staged != st.staged || !reflect.DeepEqual(scan.Hosts, st.hosts) || scan.After != st.after || scan.Done != st.done {
			t.Fatalf("step %d: scan = %+v, want staged %d of %v, after %d, done %v", i, scan, st.staged, st.hosts, st.after, st.done)
		}
		after = scan.After
	}
	want := map[string][]string{"a": {a1.URL, a2.URL, a3.URL}, "b": {b1.URL, b2.URL}}
	if got := laneURLs(t, db); !reflect.DeepEqual(got, want) {
		t.Fatalf("lanes = %v, want %v", got, want)
	}
	for _, it := range takeSnapshot(t, db).Lane {
		if it.Replaces != keys[it.Hash] || it.Depth != 0 || it.Attempts != 0 {
			t.Fatalf("lane item %+v, want it to replace result %d", it, keys[it.Hash])
		}
	}
	if c := mustCounts(t, db); c.Queued != 0 || c.Fetched != 6 || c.Failed != 1 {
		t.Fatalf("Counts = %+v: staging must queue nothing and keep every result", c)
	}
	// A minute on, the last page is stale too: the walk resumes where it stopped.
	scan, err := db.StageRefreshes(after, t0.Add(2*time.Minute), 2)
	if err != nil || scan.Staged != 1 || scan.Hosts[0] != "a" || !scan.Done {
		t.Fatalf("later pass = %+v, %v; want a4 staged and done", scan, err)
	}
}

// Pages staged already, in a lane, queued or deferred, are not staged again
// by a walk from the start (a new run's first pass).
func TestStageRefreshesSkipsPending(t *testing.T) {
	db := openTestDB(t)
	var items []store.Item
	for _, p := range []string{"/1", "/2", "/3"} {
		items = append(items, item("a", p))
	}
	storeFetched(t, db, secondsAfterT0, items...)
	if scan := stageAll(t, db, t1); scan.Staged != 1 { // only /1 is older than t1
		t.Fatalf("first walk staged %d, want 1", scan.Staged)
	}
	c := commit(t, db, func(b *store.Batch) { b.QueueRefreshes(nil) })
	if len(c.Added) != 1 || c.Added[0].URL != items[0].URL {
		t.Fatalf("queued %v, want /1", urls(c.Added))
	}
	commit(t, db, func(b *store.Batch) { b.Defer(c.Added[0], t4) })
	if scan := stageAll(t, db, t2); scan.Staged != 1 || laneURLs(t, db)["a"][0] != items[1].URL {
		t.Fatalf("second walk staged %d (%v), want /2 alone: /1 is deferred", scan.Staged, laneURLs(t, db))
	}
	if scan := stageAll(t, db, t3); scan.Staged != 1 || len(laneURLs(t, db)["a"]) != 2 {
		t.Fatalf("third walk staged %d, lane %v; want /3 alone", scan.Staged, laneURLs(t, db))
	}
	if scan := stageAll(t, db, t4); scan.Staged != 0 || !scan.Done {
		t.Fatalf("walk with everything staged = %+v, want nothing staged", scan)
	}
}

// A host's queue takes refreshes only when it holds no new URL and fewer
// than RefreshDepth/2 URLs, up to RefreshDepth, oldest first.
func TestRefreshesComeAfterNewURLs(t *testing.T) {
	db := openTestDB(t)
	var pages []store.Item
	for i := range store.RefreshDepth + 4 {
		pages = append(pages, item("a", "/p/"+string(rune('a'+i))))
	}
	storeFetched(t, db, secondsAfterT0, pages...)
	newURL := enqueue(t, db, item("a", "/new"))[0]
	stageAll(t, db, t0.Add(time.Hour))

	if c := commit(t, db, func(b *store.Batch) { b.QueueRefreshes(nil) }); len(c.Added) != 0 {
		t.Fatalf("queued %v while a new URL waits", urls(c.Added))
	}
	// Completing the new URL makes room, and a new link it found goes first.
	found := item("a", "/found")
	c := commit(t, db, func(b *store.Batch) {
		b.Complete(newURL, ok200(newURL))
		b.Add(found)
	})
	if got := urls(c.Added); !reflect.DeepEqual(got, []string{found.URL}) {
		t.Fatalf("after the new URL: queued %v, want only the link it found", got)
	}
	c = commit(t, db, func(b *store.Batch) { b.Complete(c.Added[0], ok200(c.Added[0])) })
	if got, want := urls(c.Added), urls(pages[:store.RefreshDepth]); !reflect.DeepEqual(got, want) {
		t.Fatalf("after the last new URL: queued %v, want the %d oldest pages %v", got, store.RefreshDepth, want)
	}
	queued := c.Added
	// Down to half the depth, nothing; below it, topped up to the depth.
	for i, it := range queued[:store.RefreshDepth/2+1] {
		c = commit(t, db, func(b *store.Batch) { b.Complete(it, ok200(it)) })
		wantAdded := 0
		if i == store.RefreshDepth/2 {
			wantAdded = 4 // all the lane holds
		}
		if len(c.Added) != wantAdded {
			t.Fatalf("completing refresh %d queued %v, want %d", i, urls(c.Added), wantAdded)
		}
	}
	if got := urls(c.Added); !reflect.DeepEqual(got, urls(pages[store.RefreshDepth:])) {
		t.Fatalf("last top-up %v, want %v", got, urls(pages[store.RefreshDepth:]))
	}
	if lanes := laneURLs(t, db); len(lanes) != 0 {
		t.Fatalf("lanes left %v, want none", lanes)
	}
}

// A URL refreshed twice keeps exactly one result, and the counters follow
// each outcome: a 304 stays a page, a page gone is a failure.
func TestRefreshReplacesTheResult(t *testing.T) {
	db := openTestDB(t)
	q := storeFetched(t, db, secondsAfterT0, item("a", "/1"), item("a", "/2"), item("b", "/1"))
	refresh := func(staleBefore time.Time) map[string]store.Item {
		t.Helper()
		stageAll(t, db, staleBefore)
		c := commit(t, db, func(b *store.Batch) { b.QueueRefreshes(nil) })
		byURL := map[string]store.Item{}
		for _, it := range c.Added {
			byURL[it.URL] = it
		}
		return byURL
	}
	checkCounts := func(want store.Counts, hosts map[string]store.HostCounts, tallies store.Tallies) {
		t.Helper()
		if got := mustCounts(t, db); got != want {
			t.Fatalf("Counts = %+v, want %+v", got, want)
		}
		if got := hostCounts(t, db); !reflect.DeepEqual(got, hosts) {
			t.Fatalf("host counts = %+v, want %+v", got, hosts)
		}
		checkTallies(t, db, tallies)
		checkInvariants(t, db)
	}

	first := refresh(t0.Add(time.Hour))
	if len(first) != 3 {
		t.Fatalf("queued %v, want all three", first)
	}
	notModified := *ok200(q[0])
	notModified.Status, notModified.FetchedAt, notModified.ETag = 304, t0.Add(2*time.Hour), `"v1"`
	gone := *fetched(q[1], 404)
	gone.ErrorClass, gone.FetchedAt = "gone", t0.Add(2*time.Hour)
	commit(t, db, func(b *store.Batch) {
		b.Complete(first[q[0].URL], &notModified)
		b.Complete(first[q[1].URL], &gone)
	})
	checkCounts(store.Counts{Seen: 3, Queued: 1, Fetched: 2, Failed: 1},
		map[string]store.HostCounts{"a": {Fetched: 1, Failed: 1}, "b": {Queued: 1, Fetched: 1}},
		store.Tallies{Status: map[int]int64{200: 1, 304: 1, 404: 1}, Failed: map[string]int64{"gone": 1}})

	// Refreshed again: the 304 page is stale once more, the failure is not
	// a page and waits for --retry-failed, b's refresh is still queued.
	second := refresh(t0.Add(3 * time.Hour))
	if len(second) != 1 || second[q[0].URL].Replaces == first[q[0].URL].Replaces {
		t.Fatalf("second refresh queued %v, want a/1 alone, replacing its new result", second)
	}
	changed := *ok200(q[0])
	changed.FetchedAt, changed.SHA256 = t0.Add(4*time.Hour), strings.Repeat("ab", 32)
	commit(t, db, func(b *store.Batch) { b.Complete(second[q[0].URL], &changed) })
	if n := len(resultKeys(t, db)); n != 3 {
		t.Fatalf("%d results for 3 URLs", n)
	}
	got, err := db.Replaced(store.Item{Hash: q[0].Hash, Replaces: resultKeys(t, db)[q[0].Hash]})
	if err != nil || got.SHA256 != changed.SHA256 || !got.FetchedAt.Equal(changed.FetchedAt) {
		t.Fatalf("a/1 = %+v, %v; want its last result", got, err)
	}
	checkCounts(store.Counts{Seen: 3, Queued: 1, Fetched: 2, Failed: 1},
		map[string]store.HostCounts{"a": {Fetched: 1, Failed: 1}, "b": {Queued: 1, Fetched: 1}},
		store.Tallies{Status: map[int]int64{200: 2, 404: 1}, Failed: map[string]int64{"gone": 1}})
}

func TestReplaced(t *testing.T) {
	db := openTestDB(t)
	q := storeFetched(t, db, secondsAfterT0, item("a", "/1"))
	key := resultKeys(t, db)[q[0].Hash]
	if r, err := db.Replaced(store.Item{Hash: q[0].Hash, Replaces: key}); err != nil || r.URL != q[0].URL {
		t.Fatalf("Replaced = %+v, %v; want the result of %s", r, err, q[0].URL)
	}
	for _, it := range []store.Item{{Hash: q[0].Hash}, {Hash: store.HashOf("other"), Replaces: key}, {Hash: q[0].Hash, Replaces: key + 1}} {
		if r, err := db.Replaced(it); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Replaced(%+v) = %+v, %v; want ErrNotFound", it, r, err)
		}
	}
}

// A host given up on has its staged pages recorded like its queued ones.
func TestFailHostFailsItsLane(t *testing.T) {
	db := openTestDB(t)
	var pages []store.Item
	for i := range store.RefreshDepth + 3 {
		pages = append(pages, item("a", "/"+string(rune('a'+i))))
	}
	storeFetched(t, db, secondsAfterT0, append(pages, item("b", "/1"))...)
	stageAll(t, db, t0.Add(time.Hour))
	c := commit(t, db, func(b *store.Batch) { b.QueueRefreshes([]string{"a"}) })
	if len(c.Added) != store.RefreshDepth {
		t.Fatalf("queued %d, want %d", len(c.Added), store.RefreshDepth)
	}
	template := store.Result{ErrorClass: "host-down", Error: "down", FetchedAt: t0.Add(time.Hour)}
	c = commit(t, db, func(b *store.Batch) { b.FailHost("a", template, nil) })
	if len(c.FailedHosts["a"]) != store.RefreshDepth || len(c.Added) != 0 {
		t.Fatalf("FailHost reported %v and queued %v; want the %d queued failed and nothing queued", c.FailedHosts, urls(c.Added), store.RefreshDepth)
	}
	s := takeSnapshot(t, db)
	for _, it := range pages {
		if r := s.Results[it.Hash]; r.ErrorClass != "host-down" {
			t.Fatalf("result of %s = %+v, want host-down", it.URL, r)
		}
	}
	if got := laneURLs(t, db); !reflect.DeepEqual(got, map[string][]string{"b": {"http://b/1"}}) {
		t.Fatalf("lanes = %v, want only b's", got)
	}
	if want := (store.Counts{Seen: int64(len(pages) + 1), Fetched: 1, Failed: int64(len(pages))}); s.Counts != want {
		t.Fatalf("Counts = %+v, want %+v", s.Counts, want)
	}
}
