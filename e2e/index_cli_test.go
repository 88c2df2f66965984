package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
)

// writeArchive writes pages as a crawl would, a commit each, into dir.
func writeTestArchive(t *testing.T, dir string, pages int) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "c.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	w, err := warc.Open(db, warc.Options{Dir: dir, MaxFileSize: 2000})
	if err != nil {
		t.Fatal(err)
	}
	for i := range pages {
		body := fmt.Sprintf("page %d %s", i, strings.Repeat("x", 500))
		e, err := w.Encode(warc.Exchange{URI: fmt.Sprintf("http://127.0.0.1:1/p/%d", i), Date: time.Now(),
			Request:  []byte("GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"),
			Response: bytes.NewReader([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)))})
		if err != nil {
			t.Fatal(err)
		}
		var b store.Batch
		b.Attach(e)
		if err := w.BeforeCommit(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Commit(&b); err != nil {
			t.Fatal(err)
		}
		w.AfterCommit()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestIndexCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "warc")
	writeTestArchive(t, dir, 6)
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	os.Remove(files[0] + ".cdxj") // a file archived before indexes were: read to index it
	r := mustRun(t, cli.ExitOK, "index", dir)
	want := fmt.Sprintf("%s: 6 records from %d WARC files (1 read to index them)\n", filepath.Join(dir, warc.IndexName), len(files))
	if r.stdout != want {
		t.Errorf("index said %q, want %q", r.stdout, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, warc.IndexName))
	if err != nil || strings.Count(string(data), "\n") != 6 {
		t.Errorf("index.cdxj: %q, %v", data, err)
	}

	notDir := filepath.Join(dir, warc.IndexName)
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"index"}, cli.ExitUsage, "index takes one directory"},
		{[]string{"index", dir, dir}, cli.ExitUsage, "index takes one directory"},
		{[]string{"index", filepath.Join(dir, "missing")}, cli.ExitUsage, "missing: no such file or directory"},
		{[]string{"index", notDir}, cli.ExitUsage, notDir + ": not a directory"},
		{[]string{"index", t.TempDir()}, cli.ExitUsage, "no WARC files"},
	} {
		r := mustRun(t, c.code, c.args...)
		if !strings.Contains(r.stderr, c.says) {
			t.Errorf("%v: stderr %q, want it to say %q", c.args, r.stderr, c.says)
		}
	}

	// A damaged file that has no index yet: exit 1, naming it.
	os.Remove(files[1] + ".cdxj")
	os.WriteFile(files[1], []byte("not a WARC file"), 0o600)
	if r := mustRun(t, cli.ExitError, "index", dir); !strings.Contains(r.stderr, filepath.Base(files[1])) {
		t.Errorf("index of a damaged file: stderr %q, want it named", r.stderr)
	}
}
