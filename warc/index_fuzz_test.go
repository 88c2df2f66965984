package warc

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzSURT: a key is one field of a line (no space, no control
// character), and the parser-free way, when it takes a URL, gives the
// parser's key.
func FuzzSURT(f *testing.F) {
	for _, c := range surtCases {
		f.Add(c.url)
	}
	for _, u := range surtOnlyAgainstWarcio {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		key := SURT(uri)
		if strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			t.Fatalf("SURT(%q) = %q: a space or control character in a key", uri, key)
		}
		u := dropWWW(uri)
		fast, ok := plainSURT(u)
		if !ok {
			return
		}
		parsed, err := surtParser.Parse(strings.ToLower(u))
		if err != nil {
			t.Fatalf("plainSURT took %q, which the parser refuses: %v", u, err)
		}
		labels := strings.Split(parsed.Hostname(), ".")
		slices.Reverse(labels)
		slow := strings.Join(labels, ",")
		if parsed.Port() != "" {
			slow += ":" + parsed.Port()
		}
		slow += ")" + parsed.Pathname()
		if q := parsed.Query(); q != "" {
			args := strings.Split(q, "&")
			slices.Sort(args)
			slow += "?" + strings.Join(args, "&")
		}
		if fast != slow {
			t.Fatalf("%q: plainSURT %q, the parser's way %q", u, fast, slow)
		}
	})
}

// FuzzIndexFile reads bytes as a WARC file, uncompressed and as gzip
// members: it fails with an error or gives sorted lines, each one JSON
// whose offset and length lie within the file.
func FuzzIndexFile(f *testing.F) {
	rec := func(typ, body string) string {
		return "WARC/1.1\r\nWARC-Type: " + typ + "\r\nWARC-Target-URI: http://a.example/x\r\nWARC-Date: 2026-12-01T10:00:00Z\r\n" +
			"Content-Type: application/http;msgtype=response\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body + "\r\n\r\n"
	}
	f.Add(rec("response", "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\nhi"), true)
	f.Add(rec("revisit", "HTTP/1.1 304 Not Modified\r\n\r\n")+rec("request", "GET / HTTP/1.1\r\n\r\n"), false)
	f.Add(rec("response", "HTTP/1.1 200 OK\r\n\r\n")[:60], true)
	f.Add("WARC/1.1\r\nContent-Length: -1\r\n\r\n", false)
	f.Add("not a WARC file", true)
	f.Fuzz(func(t *testing.T, data string, members bool) {
		dir := t.TempDir()
		name := "f.warc"
		content := []byte(data)
		if members {
			name += ".gz"
			var b bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&b, gzip.NoCompression) // one a member would make the fuzzing crawl
			for part := range strings.SplitAfterSeq(data, "\r\n\r\n\r\n\r\n") {
				zw.Reset(&b)
				zw.Write([]byte(part))
				zw.Close()
			}
			content = b.Bytes()
		}
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := indexFile(path, &out); err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		if out.Len() == 0 {
			return
		}
		if !slices.IsSorted(lines) {
			t.Fatalf("lines not sorted:\n%s", out.String())
		}
		for _, l := range parseCDXJ(t, out.Bytes()) {
			offset, err1 := strconv.ParseInt(l.fields["offset"], 10, 64)
			length, err2 := strconv.ParseInt(l.fields["length"], 10, 64)
			if err1 != nil || err2 != nil || offset < 0 || length <= 0 || offset+length > int64(len(content)) ||
				l.fields["filename"] != name {
				t.Fatalf("line %q: outside the %d-byte file %s", l.raw, len(content), name)
			}
		}
	})
}
