package crawl

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"breakwater/backend"
	"breakwater/fetch/fetchtest"
	"breakwater/warc"
)

// chunkedBody frames body as chunks of the given sizes (the rest in a last
// one), each size line followed by ext, and trailer after the last chunk.
func chunkedBody(body, ext, trailer string, sizes ...int) string {
	var b strings.Builder
	for _, n := range append(sizes, len(body)) {
		if n = min(n, len(body)); n > 0 {
			fmt.Fprintf(&b, "%x%s\r\n%s\r\n", n, ext, body[:n])
			body = body[n:]
		}
	}
	b.WriteString("0\r\n" + trailer + "\r\n")
	return b.String()
}

// exactSite serves each path's bytes exactly as given, on keep-alive
// loopback connections, and 404 for the rest.
func exactSite(t *testing.T, answers map[string]string) string {
	t.Helper()
	return fetchtest.RawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			answer, ok := answers[req.URL.Path]
			if !ok {
				answer = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	})
}

func warcSHA1(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// Through the real fetcher, recording: a page's payload digest is the
// sha1 of its body de-chunked and still gzip-encoded, however the server
// framed it, so with --warc-dedupe the same body sent with a length and
// chunked two ways is one response and two revisits of it, and the same
// gzip bytes sent with a length and chunked one response and a revisit.
// The records' blocks are the bytes as served.
func TestArchivePayloadDigestsOverTheWire(t *testing.T) {
	page := "<html><head><title>same</title></head><body>" + strings.Repeat("<p>the same words</p>\n", 30) + "</body></html>"
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	io.WriteString(zw, strings.Replace(page, "same", "zipped", 1))
	zw.Close()
	gz := zipped.String()

	head := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
	links := `<a href="/length">1</a><a href="/chunks">2</a><a href="/more-chunks">3</a><a href="/gzip">4</a><a href="/gzip-chunks">5</a>`
	answers := map[string]string{
		"/":            head + "Content-Length: " + strconv.Itoa(len(links)) + "\r\n\r\n" + links,
		"/length":      head + "Content-Length: " + strconv.Itoa(len(page)) + "\r\n\r\n" + page,
		"/chunks":      head + "Transfer-Encoding: chunked\r\n\r\n" + chunkedBody(page, ";ext=1", "", 7, 100),
		"/more-chunks": head + "Transfer-Encoding: chunked\r\n\r\n" + chunkedBody(page, "", "X-Trailer: t\r\n", 1, 2, 3, 500),
		"/gzip":        head + "Content-Encoding: gzip\r\nContent-Length: " + strconv.Itoa(len(gz)) + "\r\n\r\n" + gz,
		"/gzip-chunks": head + "Content-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunkedBody(gz, ";z", "", 10, 13),
	}
	addr := exactSite(t, answers)
	base := "http://" + addr

	opts := rigOptions(base + "/")
	opts.AllowPrivate, opts.Now, opts.Logger = true, time.Now, rigLogger(t)
	dir := filepath.Join(t.TempDir(), "warc")
	opts.WARC = WARCOptions{Dir: dir, Dedupe: true}
	r := newRefreshRig(t, site{}) // for its file only: the fetcher is the real one
	e, err := New(opts, backend.File(r.db))
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := e.Run(t.Context()); err != nil || sum.Counts.Fetched != 6 {
		t.Fatalf("crawl: %+v, %v; want the 6 pages", sum, err)
	}

	recs := archiveRecords(t, dir)
	responses, refersTo := revisitsReferToResponses(t, recs)
	byURL := map[string]warcRecord{}
	for _, rec := range recs {
		if typ := rec.get("WARC-Type"); typ == "response" || typ == "revisit" {
			byURL[rec.get("WARC-Target-URI")] = rec
		}
	}
	for _, group := range []struct {
		paths  []string
		digest string
	}{
		{[]string{"/length", "/chunks", "/more-chunks"}, warcSHA1([]byte(page))},
		{[]string{"/gzip", "/gzip-chunks"}, warcSHA1([]byte(gz))},
	} {
		full, revisits := 0, 0
		for _, p := range group.paths {
			u := base + p
			rec := byURL[u]
			if got := rec.get("WARC-Payload-Digest"); got != group.digest {
				t.Errorf("%s: WARC-Payload-Digest %s, want %s, the sha1 of the body de-chunked", u, got, group.digest)
			}
			switch rec.get("WARC-Type") {
			case "response":
				full++
				if string(rec.block) != answers[p] {
					t.Errorf("%s: the response block is not the bytes served:\n%q\nwant\n%q", u, rec.block, answers[p])
				}
			case "revisit":
				revisits++
				orig := rec.get("WARC-Refers-To-Target-URI")
				if !slices.Contains(group.paths, strings.TrimPrefix(orig, base)) || len(responses[orig]) != 1 ||
					refersTo[u][0] != orig+" "+responses[orig][0] {
					t.Errorf("%s: a revisit of %v, want of the response of its payload", u, refersTo[u])
				}
			}
		}
		if full != 1 || revisits != len(group.paths)-1 {
			t.Errorf("%v: %d responses and %d revisits, want one response and the rest revisits of it",
				group.paths, full, revisits)
		}
	}
	if rep, err := warc.Check(dir); err != nil || !rep.OK() {
		t.Fatalf("check: %v %+v", err, rep)
	}
}
