package warc

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"breakwater/demosite"
)

// BenchmarkEncode is the per-page cost a worker pays for the archive: a
// request and a response record of a 3 KB page, compressed.
func BenchmarkEncode(b *testing.B) {
	body := strings.Repeat("<p>some text of a page, with <a href=\"/p/1\">links</a></p>\n", 55)
	ex := exchange("http://127.0.0.1:1/p/1", body, time.Now())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := encode(ex, nil, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// benchRequest is a page's request through an HTTP proxy, with a token and
// cookies: every part of it cleanRequest changes.
const benchRequest = "GET http://www.example.com/docs/page?id=42 HTTP/1.1\r\n" +
	"Host: www.example.com\r\n" +
	"User-Agent: breakwater/0.1.0\r\n" +
	"Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjcmF3bGVyIn0.c2lnbmF0dXJl\r\n" +
	"Cookie: login=l1; session=0123456789abcdef\r\n" +
	"Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n" +
	"Accept-Encoding: gzip\r\n\r\n"

// BenchmarkCleanRequest is what cleaning costs per page archived: a
// request with everything to clean, and one with nothing to.
func BenchmarkCleanRequest(b *testing.B) {
	for _, bc := range []struct{ name, req string }{
		{"proxied-with-secrets", benchRequest},
		{"clean", "GET /docs/page?id=42 HTTP/1.1\r\nHost: www.example.com\r\nUser-Agent: breakwater/0.1.0\r\nAccept-Encoding: gzip\r\n\r\n"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			raw := []byte(bc.req)
			b.ReportAllocs()
			for b.Loop() {
				cleanRequest(raw, true)
			}
		})
	}
}

// chunkedPage is body framed as chunks of at most size bytes, with an
// extension on the first, as a server streaming its page writes it.
func chunkedPage(body string, size int) string {
	var b strings.Builder
	b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n")
	for i := 0; i < len(body); i += size {
		part := body[i:min(i+size, len(body))]
		fmt.Fprintf(&b, "%x", len(part))
		if i == 0 {
			b.WriteString(";name=value")
		}
		b.WriteString("\r\n" + part + "\r\n")
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// BenchmarkDigests is the digests' part of that cost, per response: a 3 KB
// page with a Content-Length, the same page in 512-byte chunks, and a
// 1 MiB page in 16 KiB chunks.
func BenchmarkDigests(b *testing.B) {
	page := strings.Repeat("<p>some text of a page, with <a href=\"/p/1\">links</a></p>\n", 55)
	large := strings.Repeat(page, 1<<20/len(page))
	cases := []struct{ name, msg string }{
		{"length", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(page), page)},
		{"chunked", chunkedPage(page, 512)},
		{"length-1MiB", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", len(large), large)},
		{"chunked-1MiB", chunkedPage(large, 16<<10)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			msg := bytes.NewReader([]byte(c.msg))
			headEnd, err := httpHeaderEnd(msg)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(msg.Size())
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := digests(msg, headEnd); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeBenchSitePage encodes a page of the crawl bench's site as
// a crawl does (the entry closed once written, so its buffers go back to
// their pools), at the site's own few KB and at the 30 KB of the --warc
// ratio's second site: real pages, whose text compresses as the bench's
// does, unlike BenchmarkEncode's repeated line. record-bytes is the
// entry's size, request record included.
func BenchmarkEncodeBenchSitePage(b *testing.B) {
	for _, bc := range []struct {
		name      string
		pageBytes int
	}{{"bench-site", 0}, {"30KB", 30_000}} {
		b.Run(bc.name, func(b *testing.B) {
			site, err := demosite.Start(demosite.BenchSpecs(2, 20, false, 0), demosite.SiteOptions{Seed: 1, PageBytes: bc.pageBytes})
			if err != nil {
				b.Fatal(err)
			}
			defer site.Close()
			url := site.Host("bench-001").PageURL(7)
			resp, err := http.Get(url)
			if err != nil {
				b.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				b.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
			}
			ex := exchange(url, string(body), time.Now())
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var size int64
			for b.Loop() {
				e, err := encode(ex, nil, "")
				if err != nil {
					b.Fatal(err)
				}
				size = e.Size()
				e.Close()
			}
			b.ReportMetric(float64(size), "record-bytes")
		})
	}
}
