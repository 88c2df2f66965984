package warc

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeFile writes entries (and a warcinfo) to dir as one finished file.
func writeFile(t *testing.T, dir string, entries ...[]byte) {
	t.Helper()
	w := &Writer{opts: Options{Software: "test", Hostname: "h"}}
	info, err := w.warcinfo("x.warc.gz", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	data := append([]byte(nil), info...)
	for _, e := range entries {
		data = append(data, e...)
	}
	if err := os.WriteFile(filepath.Join(dir, "x.warc.gz"), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write([]byte(s))
	zw.Close()
	return b.Bytes()
}

func TestCheckFindsWhatIsWrong(t *testing.T) {
	entry, err := encode(exchange("http://127.0.0.1:1/a", "body", time.Now()), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	good := struct{ data []byte }{}
	if good.data, err = entry.data.Bytes(); err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		data []byte
		want string
	}{
		"a payload that does not match its digest": {
			data: gz(t, "WARC/1.1\r\nWARC-Type: resource\r\nWARC-Record-ID: <urn:uuid:11111111-1111-1111-1111-111111111111>\r\n"+
				"WARC-Date: 2026-12-01T10:00:00Z\r\nWARC-Target-URI: http://127.0.0.1:1/r\r\nContent-Type: text/plain\r\n"+
				"WARC-Block-Digest: sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\r\nContent-Length: 5\r\n\r\nhello\r\n\r\n"),
			want: "digest",
		},
		"a response without its request": {
			data: gz(t, string(mustRest(t, good.data))), // the entry without its first member, the request
			want: "no request paired",
		},
		"a file cut in the middle of a record": {
			data: good.data[:len(good.data)-20],
			want: "unreadable",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, c.data)
			rep, err := Check(dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() || !strings.Contains(strings.Join(rep.Problems, "\n"), c.want) {
				t.Fatalf("problems %q, want one mentioning %q", rep.Problems, c.want)
			}
		})
	}
	t.Run("a good entry and an unfinished file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, good.data)
		if rep, _ := Check(dir); !rep.OK() {
			t.Fatalf("a good file has problems: %v", rep.Problems)
		}
		os.WriteFile(filepath.Join(dir, "y.warc.gz.open"), nil, 0o644)
		if rep, _ := Check(dir); rep.OK() || len(rep.Unfinished) != 1 {
			t.Fatalf("an .open file was not reported: %+v", rep)
		}
	})
}

// mustRest returns the uncompressed text of every gzip member of data but
// the first.
func mustRest(t *testing.T, data []byte) []byte {
	t.Helper()
	r := bytes.NewReader(data)
	zr, err := gzip.NewReader(r)
	if err != nil {
		t.Fatal(err)
	}
	zr.Multistream(false)
	var skip bytes.Buffer
	skip.ReadFrom(zr)
	if err := zr.Reset(r); err != nil {
		t.Fatal(err)
	}
	var rest bytes.Buffer
	rest.ReadFrom(zr)
	return rest.Bytes()
}

// checkOne writes data (records, gzip members) after a warcinfo and
// returns what Check says of them.
func checkOne(t *testing.T, data ...[]byte) *Report {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, dir, data...)
	rep, err := Check(dir)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// handResponse is a response record (and its request) written by hand,
// with the payload digest given.
func handResponse(t *testing.T, uri, resp, payloadDigest string) []byte {
	t.Helper()
	req := "GET / HTTP/1.1\r\nHost: 127.0.0.1:1\r\n\r\n"
	var out []byte
	out = append(out, gz(t, "WARC/1.1\r\nWARC-Type: request\r\nWARC-Record-ID: <urn:uuid:11111111-1111-4111-8111-111111111111>\r\n"+
		"WARC-Date: 2026-12-01T10:00:00Z\r\nWARC-Target-URI: "+uri+"\r\n"+
		"WARC-Concurrent-To: <urn:uuid:22222222-2222-4222-8222-222222222222>\r\nContent-Type: application/http;msgtype=request\r\n"+
		"WARC-Block-Digest: "+sha1Base32([]byte(req))+"\r\nContent-Length: "+strconv.Itoa(len(req))+"\r\n\r\n"+req+"\r\n\r\n")...)
	out = append(out, gz(t, "WARC/1.1\r\nWARC-Type: response\r\nWARC-Record-ID: <urn:uuid:22222222-2222-4222-8222-222222222222>\r\n"+
		"WARC-Date: 2026-12-01T10:00:00Z\r\nWARC-Target-URI: "+uri+"\r\n"+
		"WARC-Concurrent-To: <urn:uuid:11111111-1111-4111-8111-111111111111>\r\nContent-Type: application/http;msgtype=response\r\n"+
		"WARC-Payload-Digest: "+payloadDigest+"\r\n"+
		"WARC-Block-Digest: "+sha1Base32([]byte(resp))+"\r\nContent-Length: "+strconv.Itoa(len(resp))+"\r\n\r\n"+resp+"\r\n\r\n")...)
	return out
}

// Check recomputes a response's payload digest over its de-chunked body:
// the writer's records pass, a digest over the chunk framing (as the
// writer once wrote it) or over anything else is a problem naming the
// file, the record's offset and its URI.
func TestCheckPayloadDigestOfChunkedBodies(t *testing.T) {
	body := "hello, chunked world"
	framed := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, ";x=y", 5, 6)
	uri := "http://127.0.0.1:1/framed"

	entry, err := encode(Exchange{URI: uri, Date: time.Now(), Request: []byte("GET /framed HTTP/1.1\r\n\r\n"),
		Response: bytes.NewReader([]byte(framed))}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	written, err := entry.data.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if rep := checkOne(t, written); !rep.OK() {
		t.Errorf("the writer's record of a chunked body has problems: %v", rep.Problems)
	}
	if rep := checkOne(t, handResponse(t, uri, framed, sha1Base32([]byte(body)))); !rep.OK() {
		t.Errorf("a hand-written record with the de-chunked digest has problems: %v", rep.Problems)
	}

	for name, c := range map[string]struct{ digest, want string }{
		"over the framing": {sha1Base32([]byte(chunked(body, ";x=y", 5, 6))), "covers the chunk framing"},
		"wrong":            {sha1Base32([]byte("something else")), "does not match"},
		"in base16":        {"sha1:" + strings.ToUpper(fmt.Sprintf("%x", sha1.Sum([]byte("something else")))), "does not match"},
	} {
		t.Run(name, func(t *testing.T) {
			rep := checkOne(t, handResponse(t, uri, framed, c.digest))
			if len(rep.Problems) != 1 {
				t.Fatalf("problems %q, want one", rep.Problems)
			}
			p := rep.Problems[0]
			if !strings.Contains(p, c.want) || !strings.Contains(p, "x.warc.gz at offset ") || !strings.Contains(p, uri) ||
				!strings.Contains(p, sha1Base32([]byte(body))) {
				t.Errorf("problem %q, want one saying %q that names the file, offset, URI and the right digest", p, c.want)
			}
		})
	}
	t.Run("a base16 digest that matches", func(t *testing.T) {
		sum := sha1.Sum([]byte(body))
		if rep := checkOne(t, handResponse(t, uri, framed, fmt.Sprintf("sha1:%x", sum))); !rep.OK() {
			t.Errorf("problems %q", rep.Problems)
		}
	})
}
