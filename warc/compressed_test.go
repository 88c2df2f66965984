package warc

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand/v2"
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
	e, err := encode(ex, nil, "")
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
	plain, err := encode(exchange("http://127.0.0.1:1/plain", strings.Repeat("some page text ", 2000), time.Now()), nil, "")
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
		e, err := encode(ex, nil, "")
		if err != nil {
			b.Fatal(err)
		}
		e.Close()
	}
}
