package storage

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"breakwater/store"
)

func outlink(to store.Item, kind store.LinkKind, text string) store.Outlink {
	return store.Outlink{To: to.Hash, Edge: store.Edge{To: to.URL, Kind: kind, Text: text, Element: "a", Attr: "href"}}
}

func edgesOf(t *testing.T, each func(func(store.Edge) error) error) []store.Edge {
	t.Helper()
	var out []store.Edge
	if err := each(func(e store.Edge) error { out = append(out, e); return nil }); err != nil {
		t.Fatalf("read edges: %v", err)
	}
	slices.SortFunc(out, func(a, b store.Edge) int {
		if c := compareStrings(a.From, b.From); c != 0 {
			return c
		}
		return compareStrings(a.To, b.To)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestLinksStoredReplacedAndRead(t *testing.T) {
	db := openTestDB(t)
	home, about, broken := item("a.com", "/"), item("a.com", "/about"), item("b.com", "/gone")
	img := item("a.com", "/logo.png")
	commit(t, db, func(b *store.Batch) {
		b.PutLinks(home, []store.Outlink{
			outlink(about, store.LinkNavigation, "About us"),
			outlink(broken, store.LinkNavigation, "gone"),
			{To: img.Hash, Edge: store.Edge{To: img.URL, Kind: store.LinkRequisite, Element: "img", Attr: "src",
				Rel: store.RelNofollow | store.RelUGC}},
		}, nil)
		b.PutLinks(about, []store.Outlink{outlink(broken, store.LinkNavigation, "old page"), outlink(home, store.LinkNavigation, "")}, nil)
	})
	all := edgesOf(t, db.ForEachEdge)
	want := []store.Edge{
		{From: home.URL, To: about.URL, Kind: store.LinkNavigation, Text: "About us", Element: "a", Attr: "href"},
		{From: home.URL, To: img.URL, Kind: store.LinkRequisite, Element: "img", Attr: "src", Rel: store.RelNofollow | store.RelUGC},
		{From: home.URL, To: broken.URL, Kind: store.LinkNavigation, Text: "gone", Element: "a", Attr: "href"},
		{From: about.URL, To: home.URL, Kind: store.LinkNavigation, Element: "a", Attr: "href"},
		{From: about.URL, To: broken.URL, Kind: store.LinkNavigation, Text: "old page", Element: "a", Attr: "href"},
	}
	slices.SortFunc(want, func(a, b store.Edge) int {
		if c := compareStrings(a.From, b.From); c != 0 {
			return c
		}
		return compareStrings(a.To, b.To)
	})
	if !slices.Equal(all, want) {
		t.Fatalf("edges:\n got %+v\nwant %+v", all, want)
	}
	in := edgesOf(t, func(fn func(store.Edge) error) error { return db.Inlinks(broken.Hash, fn) })
	if len(in) != 2 || in[0].From != home.URL || in[1].From != about.URL || in[1].Text != "old page" {
		t.Fatalf("inlinks of %s: %+v", broken.URL, in)
	}

	// A refresh that changed the page replaces its links; one left
	// without links keeps none.
	commit(t, db, func(b *store.Batch) {
		b.PutLinks(home, []store.Outlink{outlink(about, store.LinkNavigation, "About")}, nil)
		b.PutLinks(about, nil, nil)
	})
	all = edgesOf(t, db.ForEachEdge)
	if len(all) != 1 || all[0].From != home.URL || all[0].To != about.URL || all[0].Text != "About" {
		t.Fatalf("after the refresh: %+v", all)
	}
	if in := edgesOf(t, func(fn func(store.Edge) error) error { return db.Inlinks(broken.Hash, fn) }); len(in) != 0 {
		t.Fatalf("inlinks of %s after the refresh: %+v", broken.URL, in)
	}
	size, err := db.GraphSize()
	if err != nil {
		t.Fatal(err)
	}
	if size.Pages != 1 || size.Edges != 1 || size.URLs != 4 || size.Bytes <= 0 {
		t.Fatalf("GraphSize = %+v, want 1 page, 1 edge, 4 URLs", size)
	}
}

// The URL table keeps the first spelling written for a hash: a later page
// naming the same URL does not rewrite it.
func TestLinkURLsWrittenOnce(t *testing.T) {
	db := openTestDB(t)
	a, b := item("a.com", "/a"), item("a.com", "/b")
	target := item("a.com", "/t")
	other := store.Outlink{To: target.Hash, Edge: store.Edge{To: "http://A.COM/t"}}
	commit(t, db, func(bt *store.Batch) {
		bt.PutLinks(a, []store.Outlink{outlink(target, store.LinkNavigation, "")}, nil)
	})
	commit(t, db, func(bt *store.Batch) { bt.PutLinks(b, []store.Outlink{other}, nil) })
	for _, e := range edgesOf(t, db.ForEachEdge) {
		if e.To != target.URL {
			t.Errorf("edge from %s names its target %s, want the first spelling %s", e.From, e.To, target.URL)
		}
	}
}

// More pages than one read transaction takes are all given, each once,
// and a reader's error stops the scan.
func TestForEachEdgeInChunks(t *testing.T) {
	db := openTestDB(t)
	target := item("a.com", "/t")
	n := edgeChunk*2 + 7
	commit(t, db, func(b *store.Batch) {
		for i := range n {
			b.PutLinks(item("a.com", "/p"+string(rune('a'+i%26))+string(rune('a'+i/26))),
				[]store.Outlink{outlink(target, store.LinkNavigation, "t")}, nil)
		}
	})
	if got := len(edgesOf(t, db.ForEachEdge)); got != n {
		t.Fatalf("ForEachEdge gave %d edges, want %d", got, n)
	}
	if got := len(edgesOf(t, func(fn func(store.Edge) error) error { return db.Inlinks(target.Hash, fn) })); got != n {
		t.Fatalf("Inlinks gave %d edges, want %d", got, n)
	}
	stop := errors.New("stop")
	calls := 0
	err := db.ForEachEdge(func(store.Edge) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Fatalf("ForEachEdge after an error: err %v, %d calls", err, calls)
	}
}

// A file written before the graph was kept has neither bucket: read-only
// it has no edges; opened for writing it gains them and keeps its results.
func TestFileWithoutLinkBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	it := enqueueOne(t, db, item("a.com", "/"))
	commit(t, db, func(b *store.Batch) { b.Complete(it, fetched(it, 200)) })
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLinks, bucketLinkURLs} {
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro := openAt(t, path, &Options{ReadOnly: true})
	if got := edgesOf(t, ro.ForEachEdge); len(got) != 0 {
		t.Fatalf("edges of a file without the graph: %+v", got)
	}
	if rep, err := ro.Verify(VerifyOptions{}); err != nil || !rep.OK() {
		t.Fatalf("verify a file without the graph: %v %+v", err, rep)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}

	rw := openAt(t, path, nil)
	commit(t, rw, func(b *store.Batch) {
		b.PutLinks(it, []store.Outlink{outlink(item("a.com", "/x"), store.LinkNavigation, "x")}, nil)
	})
	if got := edgesOf(t, rw.ForEachEdge); len(got) != 1 {
		t.Fatalf("edges after reopening for writing: %+v", got)
	}
	if c := mustCounts(t, rw); c.Fetched != 1 {
		t.Fatalf("counts after reopening: %+v", c)
	}
}

func enqueueOne(t *testing.T, db *DB, it store.Item) store.Item {
	t.Helper()
	var b store.Batch
	b.Add(it)
	c, err := db.Commit(&b)
	if err != nil {
		t.Fatal(err)
	}
	return c.Added[0]
}

// The URL table's names are remembered across commits only once a commit
// is durable: a failed commit's targets are named by the next one that
// links to them, and a target named earlier is named once.
func TestLinkURLsAfterAFailedCommit(t *testing.T) {
	db := openTestDB(t)
	a, b, c := item("a.com", "/a"), item("a.com", "/b"), item("a.com", "/c")
	lost, kept := item("a.com", "/lost"), item("a.com", "/kept")
	commit(t, db, func(bt *store.Batch) {
		bt.PutLinks(a, []store.Outlink{outlink(kept, store.LinkNavigation, "")}, nil)
	})
	var failing store.Batch
	failing.PutLinks(b, []store.Outlink{outlink(lost, store.LinkNavigation, "")}, nil)
	failing.PutRobots("", rules(t, 404, "")) // bbolt refuses an empty key: the transaction fails
	if _, err := db.Commit(&failing); err == nil {
		t.Fatal("the failing commit succeeded")
	}
	commit(t, db, func(bt *store.Batch) {
		bt.PutLinks(c, []store.Outlink{outlink(lost, store.LinkNavigation, ""), outlink(kept, store.LinkNavigation, "")}, nil)
	})
	got := map[string]string{}
	for _, e := range edgesOf(t, db.ForEachEdge) {
		got[e.From+" "+e.To] = e.To
	}
	for _, want := range []string{a.URL + " " + kept.URL, c.URL + " " + lost.URL, c.URL + " " + kept.URL} {
		if _, ok := got[want]; !ok {
			t.Errorf("edge %s missing or misnamed; edges %v", want, got)
		}
	}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if n := tx.Bucket(bucketLinkURLs).Stats().KeyN; n != 4 {
			t.Errorf("URL table holds %d names, want 4 (a, c, kept, lost)", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
