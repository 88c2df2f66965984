package warc

import (
	"breakwater/store"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A commit that fails after its records were written (the database's
// disk is full) leaves them in the file with nothing accounting for
// them: the writer appends nothing more after them, and Close cuts them
// off, so the archive holds exactly the pages the database has done.
func TestFailedCommitLeavesNoRecordsBehind(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	warcs := filepath.Join(dir, "warc")
	w := openWriter(t, db, Options{Dir: warcs})
	at := time.Now()
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/done", "kept", at))...)
	var failed store.Batch
	for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/failed", "its commit failed", at)) {
		failed.Attach(e)
	}
	if err := w.BeforeCommit(&failed); err != nil {
		t.Fatal(err)
	}
	// The commit of failed fails here: it is never made, and AfterCommit
	// never comes.
	var next store.Batch
	for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/next", "would fit", at)) {
		next.Attach(e)
	}
	if err := w.BeforeCommit(&next); err == nil || !strings.Contains(err.Error(), ".warc.gz.open") {
		t.Fatalf("BeforeCommit after a failed commit: %v, want an error naming the file", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(warcs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"http://127.0.0.1:1/done": 1}
	if !rep.OK() || fmt.Sprint(rep.Responses) != fmt.Sprint(want) {
		t.Errorf("archive: responses %v, problems %v, unfinished %v; want only the committed page", rep.Responses, rep.Problems, rep.Unfinished)
	}
}

// A full file that cannot be finished (its final name cannot be taken:
// a read-only or full directory; here a directory is in the way) must
// stay the file the database names: the writer begins no other, stops
// with an error naming it, and the next Open finishes it.
func TestUnfinishedFullFileStopsTheWriter(t *testing.T) {
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "c.db")
	db := openDB(t, dbPath)
	warcs := filepath.Join(dir, "warc")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := Options{Dir: warcs, MaxFileSize: 1500, Hostname: "host", Now: func() time.Time { return now },
		Logger: slog.New(slog.DiscardHandler)}
	w, err := Open(db, o)
	if err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(warcs, "breakwater-20261201100000-00001-host.warc.gz")
	if err := os.MkdirAll(filepath.Join(first, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	at := now
	rng := rand.New(rand.NewPCG(1, 2))
	var big strings.Builder
	for range 3000 {
		big.WriteByte(byte('a' + rng.IntN(26))) // does not compress: fills the 1500-byte file
	}
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/big", big.String(), at))...)
	var b store.Batch
	for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/next", "next", at)) {
		b.Attach(e)
	}
	if err := w.BeforeCommit(&b); err == nil || !strings.Contains(err.Error(), first) {
		t.Fatalf("BeforeCommit after a file could not be finished: %v, want an error naming %s", err, first)
	}
	if err := w.Close(); err == nil {
		t.Error("Close: no error, with the full file still unfinished")
	}
	if names, _ := filepath.Glob(filepath.Join(warcs, "*.open")); len(names) != 1 || names[0] != first+openSuffix {
		t.Fatalf("open files %v, want only %s", names, first+openSuffix)
	}
	db.Close()

	// The way clear, the next run finishes the file the database names.
	if err := os.RemoveAll(first); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, dbPath)
	defer db.Close()
	w, err = Open(db, o)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(warcs)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Files != 1 || rep.Responses["http://127.0.0.1:1/big"] != 1 {
		t.Errorf("archive after the resume: %d files, responses %v, problems %v, unfinished %v",
			rep.Files, rep.Responses, rep.Problems, rep.Unfinished)
	}
}
