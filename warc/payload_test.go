package warc

import (
	"breakwater/store"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sha1Base32 is a WARC digest of b computed here, apart from the writer's
// code.
func sha1Base32(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// testRecord is one record as readRecords parsed it.
type testRecord struct {
	fields map[string]string // the last value of each field, by its lowercase name
	block  []byte
}

func (r testRecord) get(name string) string { return r.fields[strings.ToLower(name)] }

// readRecords parses a WARC file's bytes (gzip members, one record each)
// with nothing of the writer's: the version line, fields to the empty
// line, Content-Length bytes of block, two CRLFs.
func readRecords(t *testing.T, data []byte) []testRecord {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	br := bufio.NewReader(zr)
	var out []testRecord
	for {
		version, err := br.ReadString('\n')
		if err == io.EOF && version == "" {
			return out
		}
		if version != "WARC/1.1\r\n" {
			t.Fatalf("record %d starts %q, %v", len(out), version, err)
		}
		rec := testRecord{fields: map[string]string{}}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("record %d: fields cut short: %v", len(out), err)
			}
			if line == "\r\n" {
				break
			}
			name, value, ok := strings.Cut(strings.TrimSuffix(line, "\r\n"), ":")
			if !ok {
				t.Fatalf("record %d: field line %q", len(out), line)
			}
			rec.fields[strings.ToLower(name)] = strings.TrimSpace(value)
		}
		n, err := strconv.Atoi(rec.get("Content-Length"))
		if err != nil {
			t.Fatalf("record %d: Content-Length: %v", len(out), err)
		}
		rec.block = make([]byte, n)
		if _, err := io.ReadFull(br, rec.block); err != nil {
			t.Fatalf("record %d: block: %v", len(out), err)
		}
		var end [4]byte
		if _, err := io.ReadFull(br, end[:]); err != nil || string(end[:]) != "\r\n\r\n" {
			t.Fatalf("record %d: end %q, %v", len(out), end, err)
		}
		out = append(out, rec)
	}
}

// entryRecords are the records an entry holds.
func entryRecords(t *testing.T, e *Entry) []testRecord {
	t.Helper()
	data, err := e.data.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return readRecords(t, data)
}

// chunked frames body in chunks of the given sizes (the rest in one last
// chunk), each size line with ext after it.
func chunked(body string, ext string, sizes ...int) string {
	var b strings.Builder
	for _, n := range sizes {
		n = min(n, len(body))
		fmt.Fprintf(&b, "%x%s\r\n%s\r\n", n, ext, body[:n])
		body = body[n:]
	}
	if body != "" {
		fmt.Fprintf(&b, "%X%s\r\n%s\r\n", len(body), ext, body)
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

func TestDechunk(t *testing.T) {
	long := strings.Repeat("x", scanBuffer+100)
	cases := []struct {
		name, body, want string
		whole            bool
	}{
		{"chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world", true},
		{"extensions", "5;a=b;c=\"d;e\"\r\nhello\r\n6 ; x\r\n world\r\n0;last\r\n\r\n", "hello world", true},
		{"an extension longer than the buffer", "5;" + long + "\r\nhello\r\n0\r\n\r\n", "hello", true},
		{"upper-case sizes and trailers", "A\r\n0123456789\r\n0\r\nExpires: never\r\nX: y\r\n\r\n", "0123456789", true},
		{"bare line feeds", "5\nhello\n0\n\n", "hello", true},
		{"a chunk larger than the buffer", fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(long), long), long, true},
		{"bytes after the last chunk", "2\r\nhi\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n", "hi", true},
		{"cut inside a chunk", "5\r\nhello\r\n10\r\nonly part", "helloonly part", false},
		{"cut before the last chunk", "5\r\nhello\r\n", "hello", false},
		{"cut in a size line", "5\r\nhello\r\n1", "hello", false},
		{"a size that is not hex", "5\r\nhello\r\nzz\r\nmore\r\n0\r\n\r\n", "hello", false},
		{"no line end after the data", "5\r\nhelloX\r\n0\r\n\r\n", "hello", false},
		{"a size too large", "1000000000000000\r\nabc", "", false},
		{"nothing", "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got bytes.Buffer
			whole := dechunk(&got, bufio.NewReaderSize(strings.NewReader(c.body), scanBuffer))
			if got.String() != c.want || whole != c.whole {
				t.Errorf("dechunk = %.60q whole %v, want %.60q whole %v", got.String(), whole, c.want, c.whole)
			}
		})
	}
}

func TestReadHeadFindsChunking(t *testing.T) {
	cases := map[string]bool{
		"Transfer-Encoding: chunked\r\n":                                                 true,
		"transfer-encoding:CHUNKED\r\n":                                                  true,
		"Transfer-Encoding: gzip, chunked\r\n":                                           true,
		"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n":                      true,
		"Transfer-Encoding: chunked \t\r\n":                                              true,
		"Transfer-Encoding: chunked\n":                                                   true,
		"Transfer-Encoding: " + strings.Repeat("x-long, ", scanBuffer/4) + "chunked\r\n": true,
		"Transfer-Encoding: chunked, gzip\r\n":                                           false, // chunked is not last: read to the close
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n":                      false,
		"Transfer-Encoding: chunkedx\r\n":                                                false,
		"Transfer-Encoding: identity\r\n":                                                false,
		"X-Transfer-Encoding: chunked\r\n":                                               false,
		"Transfer-Encoding : chunked\r\n":                                                false, // not a field name
		"Content-Length: 5\r\n":                                                          false,
		"":                                                                               false,
	}
	for fields, want := range cases {
		head := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + fields + "\r\n"
		br := bufio.NewReaderSize(strings.NewReader(head+"body"), scanBuffer)
		if got := readHead(br); got != want {
			t.Errorf("%.80q: chunked %v, want %v", fields, got, want)
		}
		if rest, _ := io.ReadAll(br); string(rest) != "body" {
			t.Errorf("%.80q: readHead left %q, want the body", fields, rest)
		}
	}
	// The status line is no field, whatever it says.
	if readHead(bufio.NewReader(strings.NewReader("Transfer-Encoding: chunked\r\n\r\n"))) {
		t.Error("a status line was read as a Transfer-Encoding field")
	}
}

// A response's payload digest covers its body de-chunked and still
// content-encoded; its block, and the block digest, the bytes as they
// came, framing included.
func TestPayloadDigestOfChunkedAndEncodedBodies(t *testing.T) {
	page := "<html><title>t</title><p>" + strings.Repeat("a page of words ", 40) + "</p></html>"
	gz := gz(t, page)
	// Cut 250 bytes in: after the first chunk ("64\r\n", 100 bytes, CRLF)
	// and the second's size line ("12c\r\n"), 139 bytes of the second.
	cut := chunked(page, "", 100, 300)[:250]
	cutPayload := page[:100] + page[100:100+139]
	cases := []struct {
		name, head, body string
		payload          []byte // as a reader de-chunking, not decoding, has it
	}{
		{"Content-Length", "Content-Length: " + strconv.Itoa(len(page)), page, []byte(page)},
		{"chunked with extensions", "Transfer-Encoding: chunked", chunked(page, ";ext=1", 100, 7, 300), []byte(page)},
		{"chunked in one", "transfer-encoding: Chunked", chunked(page, ""), []byte(page)},
		// As fetch rebuilds an exchange it could not take off the wire:
		// Transfer-Encoding gone, the body de-chunked, no length.
		{"rebuilt", "Date: Tue, 01 Dec 2026 10:00:00 GMT", page, []byte(page)},
		{"gzip", "Content-Encoding: gzip\r\nContent-Length: " + strconv.Itoa(len(gz)), string(gz), gz},
		{"gzip and chunked", "Content-Encoding: gzip\r\nTransfer-Encoding: chunked", chunked(string(gz), ";z", 10, 20), gz},
		{"truncated in a chunk", "Transfer-Encoding: chunked", cut, []byte(cutPayload)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n" + c.head + "\r\n\r\n" + c.body
			ex := Exchange{URI: "http://127.0.0.1:1/p", Date: time.Now(), Request: []byte("GET /p HTTP/1.1\r\n\r\n"),
				Response: bytes.NewReader([]byte(resp)), Truncated: strings.HasPrefix(c.name, "truncated")}
			entry, err := encode(ex, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			defer entry.Close()
			recs := entryRecords(t, entry)
			if len(recs) != 2 || recs[1].get("WARC-Type") != "response" {
				t.Fatalf("records %+v, want a request and a response", recs)
			}
			r := recs[1]
			if got, want := r.get("WARC-Payload-Digest"), sha1Base32(c.payload); got != want {
				t.Errorf("WARC-Payload-Digest %s, want %s, the sha1 of the %d de-chunked bytes", got, want, len(c.payload))
			}
			if string(r.block) != resp {
				t.Errorf("block %.80q, want the response as it came", r.block)
			}
			if got, want := r.get("WARC-Block-Digest"), sha1Base32([]byte(resp)); got != want {
				t.Errorf("WARC-Block-Digest %s, want %s", got, want)
			}
		})
	}
}

// The same body framed differently is one payload: with Dedupe the second
// and third are revisits of the first, and a revisit's
// WARC-Refers-To-Date is its original's WARC-Date, to the nanosecond,
// whether the original is in the same commit or an earlier one.
func TestDedupeAcrossFramings(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	w := openWriter(t, db, Options{Dir: filepath.Join(dir, "warc"), Dedupe: true})
	page := strings.Repeat("same words ", 50)
	at := time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)
	ex := func(path, head, body string, at time.Time) Exchange {
		return Exchange{URI: "http://127.0.0.1:1" + path, Date: at, Request: []byte("GET " + path + " HTTP/1.1\r\n\r\n"),
			Response: bytes.NewReader([]byte("HTTP/1.1 200 OK\r\n" + head + "\r\n\r\n" + body))}
	}
	first := encodeAll(t, w,
		ex("/length", "Content-Length: "+strconv.Itoa(len(page)), page, at),
		ex("/chunks", "Transfer-Encoding: chunked", chunked(page, ";a", 10, 20, 30), at.Add(1)))
	second := encodeAll(t, w, ex("/more-chunks", "Transfer-Encoding: chunked", chunked(page, "", 1, 2, 3, 4), at.Add(time.Second+7)))
	original := entryRecords(t, first[0])[1]
	var revisits []testRecord
	for _, e := range []*Entry{first[1], second[0]} {
		if !e.Revisit {
			t.Fatalf("%s was not a revisit", entryRecords(t, e)[1].get("WARC-Target-URI"))
		}
		revisits = append(revisits, entryRecords(t, e)[1])
		if e.Original != (store.Capture{URI: "http://127.0.0.1:1/length", Date: at}) {
			t.Errorf("a revisit's Original = %+v, want the first capture", e.Original)
		}
	}
	commit(t, w, db, first...)
	commit(t, w, db, second...)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if original.get("WARC-Date") != "2026-12-01T10:00:00.123456789Z" {
		t.Fatalf("WARC-Date %q, want to the nanosecond", original.get("WARC-Date"))
	}
	for _, r := range revisits {
		if r.get("WARC-Payload-Digest") != sha1Base32([]byte(page)) || r.get("WARC-Payload-Digest") != original.get("WARC-Payload-Digest") {
			t.Errorf("revisit of %s: payload digest %s, original's %s, want both %s", r.get("WARC-Target-URI"),
				r.get("WARC-Payload-Digest"), original.get("WARC-Payload-Digest"), sha1Base32([]byte(page)))
		}
		if r.get("WARC-Refers-To-Date") != original.get("WARC-Date") ||
			r.get("WARC-Refers-To-Target-URI") != original.get("WARC-Target-URI") {
			t.Errorf("revisit of %s refers to %s at %q, want %s at %q", r.get("WARC-Target-URI"),
				r.get("WARC-Refers-To-Target-URI"), r.get("WARC-Refers-To-Date"),
				original.get("WARC-Target-URI"), original.get("WARC-Date"))
		}
	}
	rep, err := Check(filepath.Join(dir, "warc"))
	if err != nil || !rep.OK() {
		t.Fatalf("check: %v %+v", err, rep)
	}
}

// A 304 is a revisit of the capture it is given, its date as that
// record's WARC-Date was written; without one it is a response.
func TestNotModifiedRefersToItsOriginal(t *testing.T) {
	orig := store.Capture{URI: "http://127.0.0.1:1/other", Date: time.Date(2026, 12, 1, 10, 0, 0, 5000, time.UTC)}
	resp := "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n"
	ex := Exchange{URI: "http://127.0.0.1:1/p", Date: time.Now(), Request: []byte("GET /p HTTP/1.1\r\n\r\n"),
		Response: bytes.NewReader([]byte(resp)), NotModified: true, Original: orig}
	entry, err := encode(ex, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	r := entryRecords(t, entry)[1]
	if r.get("WARC-Type") != "revisit" || r.get("WARC-Refers-To-Target-URI") != orig.URI ||
		r.get("WARC-Refers-To-Date") != "2026-12-01T10:00:00.000005Z" || !entry.Revisit || entry.Original != orig {
		t.Errorf("304 written as %v, entry original %+v; want a revisit of %+v", r.fields, entry.Original, orig)
	}
	ex.Original = store.Capture{}
	if entry, err = encode(ex, nil, ""); err != nil {
		t.Fatal(err)
	}
	if r := entryRecords(t, entry)[1]; r.get("WARC-Type") != "response" || entry.Revisit {
		t.Errorf("a 304 with nothing to refer to was written as a %s", r.get("WARC-Type"))
	}
}

// brokenBlock reads as msg up to failAt, and fails from there: a spool
// file that cannot be read back.
type brokenBlock struct {
	msg    []byte
	failAt int64
}

func (b brokenBlock) Size() int64 { return int64(len(b.msg)) }

func (b brokenBlock) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.failAt {
		return 0, errSpoolGone
	}
	n := copy(p, b.msg[off:min(int64(len(b.msg)), b.failAt)])
	if off+int64(n) >= b.failAt {
		return n, errSpoolGone
	}
	return n, nil
}

var errSpoolGone = errors.New("spool file gone")

// A block that cannot be read is an error, not a digest of part of it:
// broken framing is the body's, a failed read the archive's.
func TestDigestsOfAnUnreadableBlock(t *testing.T) {
	for _, resp := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n" + strings.Repeat("x", 40),
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(strings.Repeat("x", 40), "", 10),
	} {
		for _, failAt := range []int64{10, int64(len(resp)) - 5} {
			b := brokenBlock{msg: []byte(resp), failAt: failAt}
			headEnd := int64(strings.Index(resp, "\r\n\r\n") + 4)
			if _, _, err := digests(b, headEnd); err != errSpoolGone {
				t.Errorf("%.40q failing at %d: err %v, want the read's", resp, failAt, err)
			}
		}
	}
}
