package warc

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"breakwater/store"
)

// cdxjLine is a CDXJ line taken apart.
type cdxjLine struct {
	key, timestamp string
	fields         map[string]string
	raw            string
}

func parseCDXJ(t *testing.T, data []byte) []cdxjLine {
	t.Helper()
	var out []cdxjLine
	for i, line := range strings.SplitAfter(string(data), "\n") {
		if line == "" {
			continue
		}
		if !strings.HasSuffix(line, "\n") {
			t.Fatalf("line %d has no line end: %q", i+1, line)
		}
		key, rest, ok1 := strings.Cut(line, " ")
		ts, js, ok2 := strings.Cut(rest, " ")
		var fields map[string]string // every value a string, as pywb writes them
		if !ok1 || !ok2 || json.Unmarshal([]byte(js), &fields) != nil {
			t.Fatalf("line %d is not SURT TIMESTAMP {JSON of strings}: %q", i+1, line)
		}
		out = append(out, cdxjLine{key: key, timestamp: ts, fields: fields, raw: line})
	}
	return out
}

// mixedArchive writes an archive of every kind of record a crawl indexes
// (pages with and without a Content-Type, chunked, large and compressed,
// duplicates written as revisits, a duplicate written in full because its
// original came in the same commit after it, a 304 revisit, URLs with
// queries, ports and "www."), rotating through files of maxSize bytes and
// sorting the index in runs of sortRun bytes. It returns the URIs of the
// response and revisit records written, one per record.
func mixedArchive(t *testing.T, dir string, maxSize int64, sortRun int) []string {
	t.Helper()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	w := openWriter(t, db, Options{Dir: filepath.Join(dir, "warc"), Dedupe: true, MaxFileSize: maxSize})
	w.sortRun = sortRun
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	var uris []string
	add := func(entries ...*Entry) {
		commit(t, w, db, entries...)
	}
	raw := func(uri, msg string, at time.Time) Exchange {
		ex := exchange(uri, "", at)
		ex.Response = bytes.NewReader([]byte(msg))
		return ex
	}
	big := strings.Repeat("<p>a paragraph of a long page, compressed in its member</p>\n", 400)
	exs := []Exchange{
		exchange("http://127.0.0.1:1/", "home", at),
		exchange("http://127.0.0.1:1/b?z=1&a=2", "query", at.Add(time.Second)),
		exchange("http://www.127.0.0.1.example:1/www", "www", at),
		exchange("http://127.0.0.1:1/big", big, at.Add(2*time.Second)),
		raw("http://127.0.0.1:1/untyped", "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone", at),
		raw("http://127.0.0.1:1/chunked", "HTTP/1.1 200 OK\r\nContent-Type: text/css\r\nTransfer-Encoding: chunked\r\n\r\n"+
			chunked("chunked body", ";x=1", 4, 3), at),
		raw("http://127.0.0.1:1/typed", "HTTP/1.1 301 Moved\r\ncontent-type:  text/plain ; charset=\"utf-8\"\r\nLocation: /\r\n\r\nmoved", at),
		exchange("http://127.0.0.1:1/dup-of-home", "home", at.Add(3*time.Second)),
	}
	for _, ex := range exs {
		add(encodeAll(t, w, ex)...)
		uris = append(uris, ex.URI)
	}
	// A duplicate encoded while its original is on its way, committed
	// ahead of it: written in full (its fallback), and then the original.
	first := encodeAll(t, w, exchange("http://127.0.0.1:1/first", "pending body", at))[0]
	dup := encodeAll(t, w, exchange("http://127.0.0.1:1/early-dup", "pending body", at))[0]
	add(dup)
	add(first)
	uris = append(uris, "http://127.0.0.1:1/early-dup", "http://127.0.0.1:1/first")
	notMod := exchange("http://127.0.0.1:1/", "", at.Add(time.Hour))
	notMod.Response = bytes.NewReader([]byte("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"))
	notMod.NotModified, notMod.Original = true, store.Capture{URI: "http://127.0.0.1:1/", Date: at}
	add(encodeAll(t, w, notMod)...)
	uris = append(uris, notMod.URI)
	for i := range 30 {
		ex := exchange(fmt.Sprintf("http://127.0.0.1:1/p/%02d?b=%d&a", i, i), strings.Repeat("x", 300+i), at.Add(time.Duration(i)*time.Minute))
		add(encodeAll(t, w, ex)...)
		uris = append(uris, ex.URI)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return uris
}

// warcNames lists the finished WARC files in dir.
func warcNames(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// memberAt reads the bytes at offset and length of the file and requires
// them to be exactly one whole gzip member; it returns the record inside.
func memberAt(t *testing.T, path string, offset, length int64) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	slice := make([]byte, length)
	if _, err := f.ReadAt(slice, offset); err != nil {
		t.Fatalf("%s: read %d bytes at %d: %v", path, length, offset, err)
	}
	br := bytes.NewReader(slice)
	zr, err := gzip.NewReader(br)
	if err != nil {
		t.Fatalf("%s at %d: not the start of a gzip member: %v", path, offset, err)
	}
	zr.Multistream(false)
	rec, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s at %d, %d bytes: not a whole gzip member: %v", path, offset, length, err)
	}
	if br.Len() != 0 {
		t.Fatalf("%s at %d, %d bytes: %d bytes follow the member", path, offset, length, br.Len())
	}
	return rec
}

// checkIndex checks an archive's index against the files it names: lines
// sorted bytewise, each one the start and length of a gzip member holding
// the response or revisit of its URL at its timestamp, and as many lines
// as those records. It returns the lines.
func checkIndex(t *testing.T, warcs string, wantURIs []string) []cdxjLine {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(warcs, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	raw := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if !slices.IsSorted(raw) {
		t.Errorf("index lines are not sorted bytewise")
	}
	lines := parseCDXJ(t, data)
	var got []string
	for _, l := range lines {
		got = append(got, l.fields["url"])
		var offset, length int64
		fmt.Sscan(l.fields["offset"], &offset)
		fmt.Sscan(l.fields["length"], &length)
		rec := string(memberAt(t, filepath.Join(warcs, l.fields["filename"]), offset, length))
		typ := "response"
		if l.fields["mime"] == "warc/revisit" {
			typ = "revisit"
		}
		for _, want := range []string{"WARC-Type: " + typ + "\r\n", "WARC-Target-URI: " + l.fields["url"] + "\r\n"} {
			if !strings.Contains(rec, want) {
				t.Errorf("the member at %s %d holds no %q:\n%.300s", l.fields["filename"], offset, want, rec)
			}
		}
		if l.key != SURT(l.fields["url"]) || len(l.timestamp) != 14 {
			t.Errorf("line %q: want the key %q and a 14-digit timestamp", l.raw, SURT(l.fields["url"]))
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(wantURIs))
	if !slices.Equal(got, want) {
		t.Errorf("index holds the URLs\n%q\nwant one line per response or revisit record:\n%q", got, want)
	}
	rep, err := Check(warcs)
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Records["response"] + rep.Records["revisit"]; n != len(lines) {
		t.Errorf("%d lines for %d response and revisit records", len(lines), n)
	}
	return lines
}

// The writer's own index of each file is the one an indexer reading the
// file back makes, byte for byte; and the archive's index, merged from
// them, names every response and revisit by its gzip member.
func TestWriterIndexIsTheIndexOfTheFile(t *testing.T) {
	for _, sortRun := range []int{0, 600} { // 600 bytes: a run every few lines, merged at the end
		t.Run(fmt.Sprintf("sort run %d", sortRun), func(t *testing.T) {
			dir := t.TempDir()
			uris := mixedArchive(t, dir, 3000, sortRun)
			warcs := filepath.Join(dir, "warc")
			names := warcNames(t, warcs)
			if len(names) < 3 {
				t.Fatalf("%d files: the archive should have rotated", len(names))
			}
			for _, path := range names {
				side, err := os.ReadFile(path + indexSuffix)
				if err != nil {
					t.Fatalf("finished file without its index: %v", err)
				}
				var read bytes.Buffer
				if err := indexFile(path, &read); err != nil {
					t.Fatal(err)
				}
				if side := string(side); side != read.String() {
					t.Errorf("%s: the writer's index\n%s\nis not the file's, read back:\n%s", filepath.Base(path), side, read.String())
				}
			}
			st, err := WriteIndex(warcs)
			if err != nil {
				t.Fatal(err)
			}
			if st.Files != len(names) || st.Read != 0 || st.Unfinished != 0 || st.Records != int64(len(uris)) {
				t.Errorf("stats %+v; want %d files, none read, %d records", st, len(names), len(uris))
			}
			lines := checkIndex(t, warcs, uris)
			byURL := map[string][]cdxjLine{}
			for _, l := range lines {
				byURL[l.fields["url"]] = append(byURL[l.fields["url"]], l)
			}
			for _, c := range []struct {
				url    string
				fields map[string]string
			}{
				{"http://127.0.0.1:1/untyped", map[string]string{"status": "404"}},
				{"http://127.0.0.1:1/typed", map[string]string{"status": "301", "mime": "text/plain"}},
				{"http://127.0.0.1:1/dup-of-home", map[string]string{"status": "200", "mime": "warc/revisit"}},
				{"http://127.0.0.1:1/early-dup", map[string]string{"status": "200", "mime": "text/html"}},
				{"http://127.0.0.1:1/big", map[string]string{"status": "200", "mime": "text/html"}},
			} {
				got := byURL[c.url]
				if len(got) != 1 {
					t.Errorf("%s: %d lines", c.url, len(got))
					continue
				}
				for k, v := range c.fields {
					if got[0].fields[k] != v {
						t.Errorf("%s: %s = %q, want %q (line %q)", c.url, k, got[0].fields[k], v, got[0].raw)
					}
				}
				if _, ok := got[0].fields["mime"]; !ok && c.fields["mime"] == "" {
					continue
				}
			}
			home := byURL["http://127.0.0.1:1/"]
			if len(home) != 2 || home[0].timestamp != "20261201100000" || home[1].fields["mime"] != "warc/revisit" ||
				home[1].fields["status"] != "304" || home[1].fields["digest"] != "" || !strings.HasPrefix(home[0].fields["digest"], "sha1:") {
				t.Errorf("the page and its 304 revisit: %+v", home)
			}
			if _, ok := byURL["http://127.0.0.1:1/untyped"][0].fields["mime"]; ok {
				t.Errorf("a response without a Content-Type has a mime: %q", byURL["http://127.0.0.1:1/untyped"][0].raw)
			}
		})
	}
}

// A run killed after writing records no commit accounted for leaves an
// .open file and no index of it; the next run cuts the file back and
// finishes it, and the archive's index, made by reading that file, holds
// no line of the records cut off. A commit that failed leaves none either.
func TestIndexLeavesOutWhatNoCommitAccountedFor(t *testing.T) {
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
	if err := w.BeforeCommit(&b); err != nil { // written; the "crash" comes before the commit
		t.Fatal(err)
	}
	w.file.Close()
	db.Close()

	db = openDB(t, dbPath)
	defer db.Close()
	w = openWriter(t, db, Options{Dir: warcs})
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/after", "resumed", at))...)
	var failed store.Batch
	for _, e := range encodeAll(t, w, exchange("http://127.0.0.1:1/failed", "its commit failed", at)) {
		failed.Attach(e)
	}
	if err := w.BeforeCommit(&failed); err != nil {
		t.Fatal(err)
	}
	// The commit of failed fails: AfterCommit never comes.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := WriteIndex(warcs)
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 2 || st.Read != 1 || st.Records != 2 {
		t.Errorf("stats %+v; want 2 files, the recovered one read, 2 records", st)
	}
	checkIndex(t, warcs, []string{"http://127.0.0.1:1/done", "http://127.0.0.1:1/after"})
}

// An archive written before indexes were (no file has its own) is indexed
// by reading each file once; the index is the one the writer's would have
// been. A file whose index is older than itself is read again.
func TestIndexOfAnArchiveWithoutFileIndexes(t *testing.T) {
	dir := t.TempDir()
	uris := mixedArchive(t, dir, 3000, 0)
	warcs := filepath.Join(dir, "warc")
	if _, err := WriteIndex(warcs); err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(warcs, IndexName))
	names := warcNames(t, warcs)
	for _, path := range names {
		if err := os.Remove(path + indexSuffix); err != nil {
			t.Fatal(err)
		}
	}
	st, err := WriteIndex(warcs)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(warcs, IndexName))
	if st.Read != len(names) || st.Files != len(names) || string(got) != string(want) {
		t.Errorf("stats %+v; index the same as the writer's: %v", st, string(got) == string(want))
	}
	for _, path := range names {
		if _, err := os.Stat(path + indexSuffix); err != nil {
			t.Errorf("a file read to index it has no index of its own kept: %v", err)
		}
	}
	checkIndex(t, warcs, uris)

	// A stale index: its file was written after it.
	stale := names[0] + indexSuffix
	if err := os.WriteFile(stale, []byte("a,b)/ 20200101000000 {\"url\":\"http://b.a/\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	os.Chtimes(stale, old, old)
	if st, err = WriteIndex(warcs); err != nil || st.Read != 1 {
		t.Fatalf("stats %+v, %v; want the file with a stale index read", st, err)
	}
	checkIndex(t, warcs, uris)
}

// Writing the index again reads no WARC file that has its own index:
// here every file is garbage by then (its time kept), and the index is
// made all the same, from the files' indexes.
func TestWriteIndexDoesNotReadIndexedFilesAgain(t *testing.T) {
	dir := t.TempDir()
	mixedArchive(t, dir, 3000, 0)
	warcs := filepath.Join(dir, "warc")
	first, err := WriteIndex(warcs)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(warcs, IndexName))
	for _, path := range warcNames(t, warcs) {
		info, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, bytes.Repeat([]byte("garbage "), 100), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chtimes(path, info.ModTime(), info.ModTime())
	}
	second, err := WriteIndex(warcs)
	if err != nil {
		t.Fatalf("the second index read a WARC file: %v", err)
	}
	got, _ := os.ReadFile(filepath.Join(warcs, IndexName))
	if second != first || second.Read != 0 || string(got) != string(want) {
		t.Errorf("second index: stats %+v (first %+v), same bytes %v", second, first, string(got) == string(want))
	}
	// Without its index, a garbage file is an error that names it, and the
	// index written before stays.
	victim := warcNames(t, warcs)[0]
	os.Remove(victim + indexSuffix)
	if _, err := WriteIndex(warcs); err == nil || !strings.Contains(err.Error(), filepath.Base(victim)) {
		t.Errorf("index of an unreadable file: %v, want an error naming it", err)
	}
	if got, _ := os.ReadFile(filepath.Join(warcs, IndexName)); string(got) != string(want) {
		t.Errorf("a failed index replaced the one before")
	}
}

// Unfinished files are left out and counted (an archive of one open file
// gets an empty index); a directory without WARC files, or none, is an
// error.
func TestIndexLeavesOutUnfinishedFiles(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	warcs := filepath.Join(dir, "warc")
	w := openWriter(t, db, Options{Dir: warcs})
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/open", "still being written", time.Now()))...)
	st, err := WriteIndex(warcs)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(warcs, IndexName))
	if st != (IndexStats{Unfinished: 1}) || len(data) != 0 {
		t.Errorf("stats %+v, index %q; want the open file left out", st, data)
	}
	w.Close()
	if st, err = WriteIndex(warcs); err != nil || st.Files != 1 || st.Records != 1 || st.Unfinished != 0 {
		t.Errorf("once finished: %+v, %v", st, err)
	}
	if _, err := WriteIndex(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("index of a missing directory: %v", err)
	}
	if _, err := WriteIndex(dir); !errors.Is(err, ErrNoWARCFiles) {
		t.Errorf("index of a directory without WARC files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexName)); err == nil {
		t.Errorf("an index was written where there is nothing to index")
	}
}

// A full file that could not be finished at once, finished by Close, gets
// its index then.
func TestFileFinishedLateGetsItsIndex(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	warcs := filepath.Join(dir, "warc")
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w := openWriter(t, db, Options{Dir: warcs, MaxFileSize: 500, Hostname: "host", Now: func() time.Time { return now },
		Logger: slog.New(slog.DiscardHandler)})
	first := filepath.Join(warcs, "breakwater-20261201100000-00001-host.warc.gz")
	if err := os.MkdirAll(filepath.Join(first, "in-the-way"), 0o755); err != nil {
		t.Fatal(err)
	}
	commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/full", strings.Repeat("x", 600), now))...)
	if _, err := os.Stat(first + openSuffix); err != nil {
		t.Fatalf("the full file should still be open: %v", err)
	}
	os.RemoveAll(first)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	side, err := os.ReadFile(first + indexSuffix)
	if err != nil || !strings.Contains(string(side), `"url":"http://127.0.0.1:1/full"`) {
		t.Fatalf("index of the file finished late: %q, %v", side, err)
	}
	if st, err := WriteIndex(warcs); err != nil || st.Read != 0 || st.Records != 1 {
		t.Errorf("stats %+v, %v", st, err)
	}
	checkIndex(t, warcs, []string{"http://127.0.0.1:1/full"})
}
