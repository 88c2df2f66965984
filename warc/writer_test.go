package warc

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"breakwater/storage"
	"breakwater/store"
)

func openDB(t testing.TB, path string) *storage.DB {
	t.Helper()
	db, err := storage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// openWriter opens the archive of db with o, failing the test if it cannot.
func openWriter(t *testing.T, db Store, o Options) *Writer {
	t.Helper()
	w, err := Open(db, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func exchange(uri, body string, at time.Time) Exchange {
	u := strings.TrimPrefix(uri, "http://127.0.0.1:1")
	return Exchange{
		URI:      uri,
		Date:     at,
		Request:  []byte("GET " + u + " HTTP/1.1\r\nHost: 127.0.0.1:1\r\nUser-Agent: test\r\n\r\n"),
		Response: bytes.NewReader([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(body), body))),
		IP:       "127.0.0.1",
	}
}

// commit stands in for the frontier's writer: entries ride a batch, the
// archive writes them before the commit.
func commit(t testing.TB, w *Writer, db *storage.DB, entries ...*Entry) {
	t.Helper()
	var b store.Batch
	for _, e := range entries {
		b.Attach(e)
	}
	if err := w.BeforeCommit(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	w.AfterCommit()
}

func encodeAll(t *testing.T, w *Writer, exs ...Exchange) []*Entry {
	t.Helper()
	var out []*Entry
	for _, ex := range exs {
		e, err := w.Encode(ex)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func TestWriterRoundTripDedupeAndRotation(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	warcs := filepath.Join(dir, "warc")
	w, err := Open(db, Options{Dir: warcs, Dedupe: true, MaxFileSize: 1500, Software: "breakwater/test",
		Info: [][2]string{{"robots", "obey"}}})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/a", "same body", at), exchange("http://127.0.0.1:1/b", "other", at))...)
	dup := encodeAll(t, w, exchange("http://127.0.0.1:1/c", "same body", at.Add(time.Second)))
	if !dup[0].Revisit {
		t.Fatal("a payload archived in an earlier commit was written in full, not as a revisit")
	}
	commit(t, w, db, dup...)
	for i := range 6 {
		commit(t, w, db, encodeAll(t, w, exchange(fmt.Sprintf("http://127.0.0.1:1/p%d", i), strings.Repeat("x", 400+i), at))...)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(warcs)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("check found problems: %v unfinished %v", rep.Problems, rep.Unfinished)
	}
	if rep.Files < 2 {
		t.Errorf("files = %d: 1500-byte files should have rotated", rep.Files)
	}
	if rep.Records["revisit"] != 1 || rep.Records["response"] != 8 || rep.Records["request"] != 9 || rep.Records["warcinfo"] != rep.Files {
		t.Errorf("records by type = %v over %d files", rep.Records, rep.Files)
	}
	for uri, n := range rep.Responses {
		if n != 1 {
			t.Errorf("%s is in %d response records", uri, n)
		}
	}
	names, _ := filepath.Glob(filepath.Join(warcs, "breakwater-*-0000[0-9]-*.warc.gz"))
	if len(names) != rep.Files {
		t.Errorf("file names %v do not follow PREFIX-TIMESTAMP-SERIAL-HOSTNAME.warc.gz", names)
	}
}

// A run killed after writing records but before the commit that accounts
// for them leaves an .open file; the next Open cuts it back to what the
// database says is done, and finishes it.
func TestOpenCutsBackWhatNoCommitAccountedFor(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "c.db")
	warcs := filepath.Join(dir, "warc")
	db := openDB(t, dbPath)
	w := openWriter(t, db, Options{Dir: warcs})
	at := time.Now()
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/done", "kept", at))...)
	var b store.Batch
	for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/lost", "not committed", at)) {
		b.Attach(e)
	}
	if err := w.BeforeCommit(&b); err != nil { // written and flushed; the "crash" comes before the commit
		t.Fatal(err)
	}
	w.file.Close()
	db.Close()

	db = openDB(t, dbPath)
	defer db.Close()
	w = openWriter(t, db, Options{Dir: warcs})
	if open, _ := filepath.Glob(filepath.Join(warcs, "*.open")); len(open) != 0 {
		t.Fatalf(".open files left after recovery: %v", open)
	}
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/after", "resumed", at))...)
	w.Close()
	rep, err := Check(warcs)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("problems %v", rep.Problems)
	}
	if rep.Files != 2 {
		t.Errorf("files = %d, want 2: the resumed crawl continues in a new file", rep.Files)
	}
	want := map[string]int{"http://127.0.0.1:1/done": 1, "http://127.0.0.1:1/after": 1}
	if fmt.Sprint(rep.Responses) != fmt.Sprint(want) {
		t.Errorf("responses %v, want %v", rep.Responses, want)
	}
}

// A file created but never accounted for by a commit is removed; one the
// database does not name is left alone.
func TestOpenRemovesANewFileNoCommitReachedAndLeavesOthers(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "c.db")
	warcs := filepath.Join(dir, "warc")
	db := openDB(t, dbPath)
	w := openWriter(t, db, Options{Dir: warcs})
	var b store.Batch
	for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/lost", "x", time.Now())) {
		b.Attach(e)
	}
	if err := w.BeforeCommit(&b); err != nil {
		t.Fatal(err)
	}
	w.file.Close()
	foreign := filepath.Join(warcs, "other-crawl.warc.gz.open")
	os.WriteFile(foreign, []byte("not ours"), 0o644)
	db.Close()

	db = openDB(t, dbPath)
	defer db.Close()
	if _, err := Open(db, Options{Dir: warcs}); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(warcs, "*"))
	if len(left) != 1 || left[0] != foreign {
		t.Fatalf("files after recovery: %v, want only the foreign %s", left, foreign)
	}
}

// A duplicate encoded while the first capture of its payload is still on
// its way is a revisit only if that capture reaches the file first or in
// the same commit; committed ahead of it, it is written in full, so that
// a crash between the two commits cannot leave a revisit of nothing.
func TestRevisitNeverCommittedAheadOfItsCapture(t *testing.T) {
	for _, sameCommit := range []bool{false, true} {
		t.Run(fmt.Sprintf("same commit %v", sameCommit), func(t *testing.T) {
			dir := t.TempDir()
			db := openDB(t, filepath.Join(dir, "c.db"))
			defer db.Close()
			w := openWriter(t, db, Options{Dir: filepath.Join(dir, "warc"), Dedupe: true})
			at := time.Now()
			first := encodeAll(t, w, exchange("http://127.0.0.1:1/first", "same", at))[0]
			dup := encodeAll(t, w, exchange("http://127.0.0.1:1/dup", "same", at))[0]
			if !dup.Revisit || dup.fallback == nil {
				t.Fatalf("the duplicate of a capture on its way should be a revisit with a full fallback")
			}
			if sameCommit {
				commit(t, w, db, dup, first)
			} else {
				commit(t, w, db, dup)
				commit(t, w, db, first)
			}
			w.Close()
			rep, err := Check(filepath.Join(dir, "warc"))
			if err != nil {
				t.Fatal(err)
			}
			wantRevisits := 0
			if sameCommit {
				wantRevisits = 1
			}
			if !rep.OK() || rep.Records["revisit"] != wantRevisits || rep.Records["response"] != 2-wantRevisits {
				t.Fatalf("records %v problems %v; want %d revisits", rep.Records, rep.Problems, wantRevisits)
			}
			// Once the first capture is committed, a later duplicate refers to
			// the database's record of it and carries no fallback.
			later := encodeAll(t, w, exchange("http://127.0.0.1:1/later", "same", at))[0]
			if !later.Revisit || later.fallback != nil {
				t.Errorf("a duplicate of a committed capture: revisit %v, fallback %d bytes", later.Revisit, later.fallback.Size())
			}
		})
	}
}

// A crawl whose WARC disk filled up, or that crashed, is resumed with
// another --warc. Its database names the file it left unfinished, and
// Open finishes that file, cut back to what the database accounts for,
// wherever it is: moved into the new directory with the rest (the usual
// way), or left where it was begun (finished there, with a warning: the
// archive is now in two places). A copy left behind in the old directory
// stays alone; a file that is in neither is named in a warning, as the
// records of pages done that it held are not in this archive. New files
// go to the new directory in every case.
func TestOpenFindsTheUnfinishedFileWhereverItWasLeft(t *testing.T) {
	for _, tc := range []struct {
		name string
		move func(t *testing.T, oldDir, newDir string)
		// warn is in the log; inOld and inNew are the pages each
		// directory holds once the resumed crawl wrote its page.
		warn         string
		inOld, inNew []string
	}{
		{name: "moved", move: func(t *testing.T, oldDir, newDir string) {
			if err := os.Rename(oldDir, newDir); err != nil {
				t.Fatal(err)
			}
		}, inNew: []string{"/done", "/after"}},
		{name: "left behind", move: func(t *testing.T, _, newDir string) {},
			warn: "finished the crawl's unfinished WARC file in the directory it was begun in", inOld: []string{"/done"},
			inNew: []string{"/after"}},
		{name: "copied", move: func(t *testing.T, oldDir, newDir string) {
			copyDir(t, oldDir, newDir)
		}, warn: "its copy in the old directory is left alone", inNew: []string{"/done", "/after"}},
		{name: "gone", move: func(t *testing.T, oldDir, newDir string) {
			if err := os.RemoveAll(oldDir); err != nil {
				t.Fatal(err)
			}
		}, warn: "the database names a WARC file that is not in the --warc directory", inNew: []string{"/after"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			dbPath := filepath.Join(dir, "c.db")
			oldDir, newDir := filepath.Join(dir, "full"), filepath.Join(dir, "big")
			db := openDB(t, dbPath)
			w := openWriter(t, db, Options{Dir: oldDir})
			at := time.Now()
			commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/done", "kept", at))...)
			var b store.Batch
			for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/lost", "not committed", at)) {
				b.Attach(e)
			}
			if err := w.BeforeCommit(&b); err != nil { // written; the crash comes before the commit
				t.Fatal(err)
			}
			w.file.Close()
			db.Close()
			tc.move(t, oldDir, newDir)

			db = openDB(t, dbPath)
			defer db.Close()
			var log bytes.Buffer
			w = openWriter(t, db, Options{Dir: newDir, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/after", "resumed", at))...)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if tc.warn != "" && !strings.Contains(log.String(), tc.warn) {
				t.Errorf("log %q, want it to say %q", log.String(), tc.warn)
			}
			if tc.warn == "" && (!strings.Contains(log.String(), "cut an unfinished WARC file back") ||
				strings.Count(log.String(), "level=WARN") != 1) {
				t.Errorf("log %q, want only the cut: the file was where it belongs", log.String())
			}
			for _, d := range []struct {
				dir   string
				pages []string
			}{{oldDir, tc.inOld}, {newDir, tc.inNew}} {
				if d.pages == nil {
					continue
				}
				rep, err := Check(d.dir)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]int{}
				for _, p := range d.pages {
					want["http://127.0.0.1:1"+p] = 1
				}
				if !rep.OK() || fmt.Sprint(rep.Responses) != fmt.Sprint(want) {
					t.Errorf("%s: problems %v, unfinished %v, responses %v; want %v", d.dir, rep.Problems, rep.Unfinished,
						rep.Responses, want)
				}
			}
			if tc.name == "copied" {
				if open, _ := filepath.Glob(filepath.Join(oldDir, "*.open")); len(open) != 1 {
					t.Errorf("the old directory's copy: %v, want it left as it was", open)
				}
			}
		})
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}
