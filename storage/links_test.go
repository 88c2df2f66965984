package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
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
	if size.Pages != 1 || size.Edges != 1 || size.URLs != 2 || size.Bytes <= 0 {
		t.Fatalf("GraphSize = %+v, want 1 page, 1 edge, 2 URLs (the page and its one target)", size)
	}
}

// hashedRecord is a page's links as a file written before records named
// their URLs holds them (format 2): targets by hash, their URLs and the
// page's in the URL table.
func hashedRecord(depth int, links []store.Outlink) []byte {
	out := []byte{2}
	out = binary.AppendUvarint(out, uint64(depth))
	out = append(out, 0, 0) // hops, directives
	for _, l := range links {
		out = append(out, l.To[:]...)
		out = append(out, byte(l.Edge.Kind), 1) // a href
		out = binary.AppendUvarint(out, uint64(len(l.Edge.Text)))
		out = append(out, l.Edge.Text...)
	}
	return out
}

// A file written before records named their URLs is read through its URL
// table, beside the records written since; a refresh replaces a page's old
// record with one that names its URLs, and leaves the table as it was.
func TestLinksOfAnEarlierFileNamedByTheURLTable(t *testing.T) {
	old, fresh, target := item("a.com", "/old"), item("a.com", "/new"), item("b.com", "/t")
	db := earlierFile(t, func(tx *bolt.Tx) error {
		rec := hashedRecord(2, []store.Outlink{outlink(target, store.LinkNavigation, "t")})
		if err := tx.Bucket(bucketLinks).Put(old.Hash[:], rec); err != nil {
			return err
		}
		urls := tx.Bucket(bucketLinkURLs)
		return errors.Join(urls.Put(old.Hash[:], []byte(old.URL)), urls.Put(target.Hash[:], []byte(target.URL)))
	})
	commit(t, db, func(b *store.Batch) {
		b.PutLinks(fresh, []store.Outlink{outlink(target, store.LinkNavigation, "new")}, nil)
	})
	in := edgesOf(t, func(fn func(store.Edge) error) error { return db.Inlinks(target.Hash, fn) })
	want := []store.Edge{
		{From: fresh.URL, To: target.URL, Kind: store.LinkNavigation, Text: "new", Element: "a", Attr: "href"},
		{From: old.URL, To: target.URL, Kind: store.LinkNavigation, Text: "t", Element: "a", Attr: "href"},
	}
	if !slices.Equal(in, want) {
		t.Fatalf("inlinks:\n got %+v\nwant %+v", in, want)
	}
	if all := edgesOf(t, db.ForEachEdge); !slices.Equal(all, want) {
		t.Fatalf("edges:\n got %+v\nwant %+v", all, want)
	}
	pages := map[string]store.PageLinks{}
	err := db.ForEachPageLinks(func(p *store.PageLinks) error { pages[p.URL] = *p; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if p := pages[old.URL]; p.Page.Depth != 2 || p.Page.Named || len(p.Links) != 1 || p.Links[0].Edge.To != target.URL {
		t.Fatalf("the earlier file's page: %+v", p)
	}
	if p := pages[fresh.URL]; !p.Page.Named || len(p.Links) != 1 || p.Links[0].Edge.To != target.URL || p.Links[0].Edge.From != "" {
		t.Fatalf("the page written since: %+v", p)
	}

	commit(t, db, func(b *store.Batch) {
		b.PutLinks(old, []store.Outlink{outlink(fresh, store.LinkNavigation, "refreshed")}, nil)
	})
	all := edgesOf(t, db.ForEachEdge)
	if len(all) != 2 || all[1].From != old.URL || all[1].To != fresh.URL || all[1].Text != "refreshed" {
		t.Fatalf("after the refresh: %+v", all)
	}
	if n := urlTableNames(t, db); n != 2 {
		t.Fatalf("URL table holds %d names after the refresh, want the earlier file's 2", n)
	}
}

func urlTableNames(t *testing.T, db *DB) int { return bucketKeys(t, db, bucketLinkURLs) }

// earlierFile is a file as a build before links were keyed in order left
// it, with what write puts in its graph, opened again by this build.
func earlierFile(t *testing.T, write func(tx *bolt.Tx) error) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "earlier.db")
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Delete(keyLinksInOrder); err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketLinkKeys); err != nil {
			return err
		}
		return write(tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return openAt(t, path, nil)
}

// Records are appended in the order pages are stored, each page's key kept
// beside: a refresh deletes the record it replaces, and a page left
// without links keeps neither.
func TestLinksKeyedInOrder(t *testing.T) {
	db := openTestDB(t)
	var pages []store.Item
	for i := range 40 {
		pages = append(pages, item("a.com", fmt.Sprintf("/p%d", i)))
	}
	target := item("b.com", "/t")
	for i := 0; i < len(pages); i += 10 {
		commit(t, db, func(b *store.Batch) {
			for _, p := range pages[i : i+10] {
				b.PutLinks(p, []store.Outlink{outlink(target, store.LinkNavigation, p.URL)}, nil)
			}
		})
	}
	keysInOrder := func() (order []string) {
		t.Helper()
		err := db.bolt.View(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketLinks).ForEach(func(k, v []byte) error {
				if len(k) != 8 {
					return fmt.Errorf("key %x is not a sequence number", k)
				}
				page, err := store.DecodeLinksPage(v)
				order = append(order, page.URL)
				return err
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return order
	}
	var want []string
	for _, p := range pages {
		want = append(want, p.URL)
	}
	if got := keysInOrder(); !slices.Equal(got, want) {
		t.Fatalf("records in key order:\n got %v\nwant %v (the order they were stored)", got, want)
	}
	// Refreshed: the first page's record moves to the end; the second's
	// goes with its links.
	commit(t, db, func(b *store.Batch) {
		b.PutLinks(pages[0], []store.Outlink{outlink(target, store.LinkNavigation, "again")}, nil)
		b.PutLinks(pages[1], nil, nil)
	})
	want = append(want[2:], pages[0].URL)
	if got := keysInOrder(); !slices.Equal(got, want) {
		t.Fatalf("after a refresh:\n got %v\nwant %v", got, want)
	}
	if n := bucketKeys(t, db, bucketLinkKeys); n != len(pages)-1 {
		t.Fatalf("%d page keys, want %d", n, len(pages)-1)
	}
	in := edgesOf(t, func(fn func(store.Edge) error) error { return db.Inlinks(target.Hash, fn) })
	if len(in) != len(pages)-1 {
		t.Fatalf("%d links to the target, want %d", len(in), len(pages)-1)
	}
	for _, e := range in {
		if e.From == pages[0].URL && e.Text != "again" || e.From == pages[1].URL {
			t.Fatalf("a replaced record still read: %+v", e)
		}
	}
}

// A file written before is opened without the mark that all its records
// are keyed in order, so that a refresh still deletes a page's record
// keyed by hash; a new file gets the mark, and Verify holds it to it.
func TestLinksInOrderMark(t *testing.T) {
	db := openTestDB(t)
	if db.hashKeyedLinks {
		t.Fatal("a new file is taken to hold records keyed by hash")
	}
	page := item("a.com", "/")
	earlier := earlierFile(t, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLinks).Put(page.Hash[:], store.EncodeLinks(store.LinksPageOf(page, 0), nil))
	})
	if !earlier.hashKeyedLinks {
		t.Fatal("a file with records from before is taken to hold none keyed by hash")
	}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLinks).Put(page.Hash[:], store.EncodeLinks(store.LinksPageOf(page, 0), nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Verify(VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, "keyed by the hash") }) {
		t.Fatalf("Verify of a file keyed in order holding a record keyed by hash: %v", rep.Problems)
	}
	if err := db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketLinks).Delete(page.Hash[:]) }); err != nil {
		t.Fatal(err)
	}
}

// Verify finds a page key and the record it names at odds, whichever side
// is damaged.
func TestVerifyLinkKeys(t *testing.T) {
	a, b, target := item("a.com", "/a"), item("a.com", "/b"), item("b.com", "/t")
	tests := []struct {
		name   string
		damage func(links, keys *bolt.Bucket) error
		want   string
	}{
		{"a key naming no record", func(links, keys *bolt.Bucket) error { return links.Delete(keys.Get(a.Hash[:])) },
			"where there is no record"},
		{"a record no key names", func(links, keys *bolt.Bucket) error { return keys.Delete(a.Hash[:]) },
			"is no page's"},
		{"two pages on one record", func(links, keys *bolt.Bucket) error {
			return keys.Put(b.Hash[:], append([]byte(nil), keys.Get(a.Hash[:])...))
		}, "share the links record"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTestDB(t)
			commit(t, db, func(bt *store.Batch) {
				bt.PutLinks(a, []store.Outlink{outlink(target, store.LinkNavigation, "")}, nil)
				bt.PutLinks(b, []store.Outlink{outlink(target, store.LinkNavigation, "")}, nil)
			})
			before := snapshotLinks(t, db)
			err := db.bolt.Update(func(tx *bolt.Tx) error {
				return tt.damage(tx.Bucket(bucketLinks), tx.Bucket(bucketLinkKeys))
			})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := db.Verify(VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(rep.Problems, func(p string) bool { return strings.Contains(p, tt.want) }) {
				t.Fatalf("Verify: %v, want a problem saying %q", rep.Problems, tt.want)
			}
			restoreLinks(t, db, before) // the cleanup's own check expects a sound file
		})
	}
}

type linkBuckets struct{ links, keys map[string][]byte }

func snapshotLinks(t *testing.T, db *DB) linkBuckets {
	t.Helper()
	s := linkBuckets{links: map[string][]byte{}, keys: map[string][]byte{}}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for bk, m := range map[string]map[string][]byte{string(bucketLinks): s.links, string(bucketLinkKeys): s.keys} {
			if err := tx.Bucket([]byte(bk)).ForEach(func(k, v []byte) error {
				m[string(k)] = append([]byte(nil), v...)
				return nil
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func restoreLinks(t *testing.T, db *DB, s linkBuckets) {
	t.Helper()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for bk, m := range map[string]map[string][]byte{string(bucketLinks): s.links, string(bucketLinkKeys): s.keys} {
			b := tx.Bucket([]byte(bk))
			var keys [][]byte
			_ = b.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
			for _, k := range keys {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			for k, v := range m {
				if err := b.Put([]byte(k), v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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

// A page's record names its URLs, so a commit writes nothing else: a
// failed commit leaves no name behind for a later one to trust, and the
// URL table of earlier files gets no new names.
func TestLinksNamedByTheirRecordsAfterAFailedCommit(t *testing.T) {
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
	var got []string
	for _, e := range edgesOf(t, db.ForEachEdge) {
		got = append(got, e.From+" "+e.To)
	}
	want := []string{a.URL + " " + kept.URL, c.URL + " " + kept.URL, c.URL + " " + lost.URL}
	if !slices.Equal(got, want) {
		t.Fatalf("edges %q, want %q", got, want)
	}
	if n := urlTableNames(t, db); n != 0 {
		t.Fatalf("URL table holds %d names, want none", n)
	}
}
