package warc

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkIndexLine is what the index costs per response record: the
// line's head, made on the worker with the record (SURT, status, type),
// and its place appended and sorted on the one writer goroutine.
func BenchmarkIndexLine(b *testing.B) {
	head := []byte("HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 2026 10:00:00 GMT\r\nServer: demo\r\n" +
		"Content-Type: text/html; charset=utf-8\r\nContent-Length: 3080\r\nCache-Control: max-age=60\r\n\r\n")
	uri := "https://www.example.com/docs/section/page-42.html?utm=x&id=42"
	date := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC).Format(time.RFC3339Nano)
	digest := "sha1:5AZETPJ3U6MTFYLPWH5VCAG27LPJSVGC"
	b.Run("worker", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cdxjHead(uri, date, false, head, digest)
		}
	})
	b.Run("writer", func(b *testing.B) {
		line := cdxjHead(uri, date, false, head, digest)
		name := string(appendJSONString(nil, "breakwater-20261201095958-00001-host.warc.gz"))
		s := newLineSorter(b.TempDir(), 0)
		defer s.close()
		var pending []byte
		var offset int64
		b.ReportAllocs()
		for b.Loop() {
			pending = appendCDXJ(pending[:0], line, offset, 1234, name)
			offset += 1700
			if err := s.add(pending); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if err := s.writeTo(nopWriter{}); err != nil { // the sort at the file's end, not timed per line
			b.Fatal(err)
		}
	})
}

// BenchmarkFinishFileIndex is the sort and write of a full file's index
// when the file is finished, per line: 100,000 lines (about a 200 MB
// file of 2 KB pages), in runs of sortRunBytes.
func BenchmarkFinishFileIndex(b *testing.B) {
	const n = 100000
	lines := make([][]byte, n)
	name := string(appendJSONString(nil, "breakwater-20261201095958-00001-host.warc.gz"))
	date := time.Now().Format(time.RFC3339Nano)
	for i := range lines {
		// Hosts and paths in crawl order, not key order.
		uri := fmt.Sprintf("https://host%d.example/p/%d", (i*7919)%97, i)
		lines[i] = appendCDXJ(nil, cdxjHead(uri, date, false, []byte("HTTP/1.1 200 OK\r\n\r\n"), "sha1:X"), int64(i)*1700, 1700, name)
	}
	dir := b.TempDir()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s := newLineSorter(dir, 0)
		for _, l := range lines {
			s.add(l)
		}
		if err := writeFileIndex(filepath.Join(dir, "f.cdxj"), s.writeTo); err != nil {
			b.Fatal(err)
		}
		s.close()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/line")
}

// BenchmarkWriteIndex is the archive's index merged from 20 files'
// indexes of 5,000 lines each, and the same files read to index them (an
// archive without indexes), per record.
func BenchmarkWriteIndex(b *testing.B) {
	dir := b.TempDir()
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	db := openDB(b, filepath.Join(dir, "c.db"))
	defer db.Close()
	warcs := filepath.Join(dir, "warc")
	w, err := Open(db, Options{Dir: warcs, MaxFileSize: 5000 * 1100})
	if err != nil {
		b.Fatal(err)
	}
	body := strings.Repeat("<p>some text of a page, with <a href=\"/p/1\">links</a></p>\n", 55)
	const records = 100000
	for i := 0; i < records; i += 100 {
		var batch []*Entry
		for j := range 100 {
			e, err := w.Encode(exchange(fmt.Sprintf("http://127.0.0.1:1/p/%d", (i+j)*7919%records), body, at))
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, e)
		}
		commit(b, w, db, batch...)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	files := warcNames(b, warcs)
	b.Run("from file indexes", func(b *testing.B) {
		for b.Loop() {
			if _, err := WriteIndex(warcs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
		b.ReportMetric(float64(len(files)), "files")
	})
	b.Run("reading the files", func(b *testing.B) {
		for b.Loop() {
			for _, f := range files {
				os.Remove(f + indexSuffix)
			}
			if _, err := WriteIndex(warcs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
	})
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }
