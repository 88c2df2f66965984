package warc

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPrecompressed(t *testing.T) {
	for _, tc := range []struct {
		head string
		want bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\ncontent-encoding:  GZIP \r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: identity\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Encoding: identity, br\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Type: IMAGE/JPEG; q=1\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Type: image/svg+xml\r\n\r\n", false},
		{"HTTP/1.1 200 OK\r\nContent-Type: font/woff2\r\n\r\n", true},
		{"HTTP/1.1 200 OK\r\nContent-Type: text/css\r\n\r\nContent-Encoding: gzip\r\n", false}, // in the body
		{"HTTP/1.1 200 OK\r\nX-Content-Encoding: gzip\r\n\r\n", false},
		{"", false},
	} {
		if got := precompressed([]byte(tc.head)); got != tc.want {
			t.Errorf("precompressed(%q) = %v, want %v", tc.head, got, tc.want)
		}
	}
}

// gzipCoded is an exchange whose body the server gzipped: what most sites
// send, since every fetch asks for it.
func gzipCoded(t testing.TB, uri string, n int) (Exchange, []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"page", "link", "text", "crawl", "archive", "<p>", "</p>", "<a href=\"/x\">"}
	var plain strings.Builder
	for plain.Len() < n {
		plain.WriteString(words[rng.IntN(len(words))] + " ")
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(plain.String()))
	zw.Close()
	ex := exchange(uri, "", time.Now())
	ex.Response = bytes.NewReader(append([]byte(fmt.Sprintf(
		"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", gz.Len())), gz.Bytes()...))
	return ex, gz.Bytes()
}

// A gzip-coded body is stored in its record's member as it came (its
// bytes appear in the file verbatim) and reads back whole.
func TestPrecompressedBodyIsStored(t *testing.T) {
	ex, body := gzipCoded(t, "http://127.0.0.1:1/coded", 20_000)
	e, err := encode(ex, nil, encoding{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	raw, err := e.data.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, body) {
		t.Fatal("the gzip-coded body was compressed again: its bytes are not in the record")
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	all, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(all, body) || !bytes.HasPrefix(all, []byte("WARC/1.1\r\n")) {
		t.Fatalf("records read back: %d bytes, body in them: %v", len(all), bytes.Contains(all, body))
	}
	// Text is still compressed.
	plain, err := encode(exchange("http://127.0.0.1:1/plain", strings.Repeat("some page text ", 2000), time.Now()), nil, encoding{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if plain.Size() > 5000 {
		t.Errorf("a 30 KB text page takes %d bytes: it was not compressed", plain.Size())
	}
}

// BenchmarkEncodePrecompressed: a 20 KB gzip-coded page, stored.
func BenchmarkEncodePrecompressed(b *testing.B) {
	ex, body := gzipCoded(b, "http://127.0.0.1:1/coded", 60_000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		ex.Response.(*bytes.Reader).Seek(0, io.SeekStart)
		e, err := encode(ex, nil, encoding{})
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}

// With Uncompressed every record is stored in its own gzip member as it
// is: the page's bytes are in the file verbatim, which still checks (gzip
// members, digests), indexes the same as the compressed archive of the
// same pages, and each index line reads back alone, in warcio.js too.
func TestUncompressedArchive(t *testing.T) {
	page := strings.Repeat("<p>a paragraph of a long page, the same again and again</p>\n", 300)
	write := func(uncompressed bool) (dir string, file []byte, index []byte) {
		t.Helper()
		root := t.TempDir()
		db := openDB(t, filepath.Join(root, "c.db"))
		defer db.Close()
		dir = filepath.Join(root, "warc")
		w := openWriter(t, db, Options{Dir: dir, Dedupe: true, Uncompressed: uncompressed})
		at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
		coded, _ := gzipCoded(t, "http://127.0.0.1:1/coded", 5000)
		commit(t, w, db, encodeAll(t, w, exchange("http://127.0.0.1:1/long", page, at), exchange("http://127.0.0.1:1/short", "short", at),
			exchange("http://127.0.0.1:1/again", page, at.Add(time.Second)), coded)...)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rep, err := Check(dir)
		if err != nil {
			t.Fatal(err)
		}
		if !rep.OK() || rep.Records["response"] != 3 || rep.Records["revisit"] != 1 {
			t.Fatalf("uncompressed %v: check found %v, unfinished %v, records %v", uncompressed, rep.Problems, rep.Unfinished, rep.Records)
		}
		names := warcNames(t, dir)
		if len(names) != 1 {
			t.Fatalf("files %v, want one", names)
		}
		var err2 error
		if file, err2 = os.ReadFile(names[0]); err2 != nil {
			t.Fatal(err2)
		}
		if _, err2 = WriteIndex(dir); err2 != nil {
			t.Fatal(err2)
		}
		if index, err2 = os.ReadFile(filepath.Join(dir, IndexName)); err2 != nil {
			t.Fatal(err2)
		}
		return dir, file, index
	}
	_, packed, packedIndex := write(false)
	dir, stored, storedIndex := write(true)
	if bytes.Contains(packed, []byte(page)) {
		t.Error("the compressed archive holds the page verbatim")
	}
	if !bytes.Contains(stored, []byte(page)) {
		t.Error("the uncompressed archive does not hold the page verbatim")
	}
	if len(stored) < len(packed)+len(page)/2 {
		t.Errorf("uncompressed file %d bytes, compressed %d: the page (%d bytes) was compressed", len(stored), len(packed), len(page))
	}
	// The same records, at other offsets: every line but its place alike.
	strip := func(index []byte) []string {
		var out []string
		for _, l := range parseCDXJ(t, index) {
			delete(l.fields, "offset")
			delete(l.fields, "length")
			delete(l.fields, "filename")
			out = append(out, fmt.Sprint(l.key, l.timestamp, l.fields))
		}
		return out
	}
	if a, b := strip(packedIndex), strip(storedIndex); !slices.Equal(a, b) {
		t.Errorf("indexes differ beyond the records' places:\ncompressed   %q\nuncompressed %q", a, b)
	}
	for _, l := range parseCDXJ(t, storedIndex) {
		off, _ := strconv.ParseInt(l.fields["offset"], 10, 64)
		n, _ := strconv.ParseInt(l.fields["length"], 10, 64)
		zr, err := gzip.NewReader(bytes.NewReader(stored[off : off+n]))
		if err != nil {
			t.Fatalf("line %q: %v", l.raw, err)
		}
		zr.Multistream(false)
		rec, err := io.ReadAll(zr)
		if err != nil || !bytes.Contains(rec, []byte("WARC-Target-URI: "+l.fields["url"]+"\r\n")) {
			t.Errorf("line %q: its member reads %d bytes, %v, not a record of its URL", l.raw, len(rec), err)
		}
	}
	if _, err := exec.LookPath("node"); err == nil || os.Getenv("CI") != "" {
		run := warcio(t)
		found := strings.Split(strings.TrimSuffix(run(string(storedIndex), "slices", dir), "\n"), "\n")
		for _, f := range found {
			if !strings.Contains(f, `"type":"response"`) && !strings.Contains(f, `"type":"revisit"`) || strings.Contains(f, `"error"`) {
				t.Errorf("warcio read at an index line of the uncompressed archive: %s", f)
			}
		}
	}
}
