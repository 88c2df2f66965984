package fetch

// Hostile servers, each a test (issue 16): what a server can do to a
// fetcher by sending too little, too slowly, too much or something else
// than it says. Each must end within the request timeout or at the caps,
// and leave memory bounded by a few times MaxBody: the figures are
// measured here with runtime.ReadMemStats around the fetch.

import (
	"bytes"
	"compress/flate"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"compress/zlib"
)

const (
	// hostileMaxBody is the --max-body of the memory tests: large enough
	// that the figures are about it, not about fixed buffers.
	hostileMaxBody = 1 << 20
	// bombSize is what each bomb decodes to.
	bombSize = 1 << 30
	// dripTimeout is the request timeout of the tests that must time out.
	dripTimeout = 300 * time.Millisecond
)

func hostileOptions(timeout time.Duration) Options {
	return Options{UserAgent: "Breakwater-test/1.0", Timeout: timeout, ConnectTimeout: time.Second,
		MaxBody: hostileMaxBody, AllowPrivate: true}
}

// waitOrClosed waits d, or less when the peer closes c (or the test's
// cleanup does): a dripping handler then stops at once instead of holding
// the cleanup for its next tick.
func waitOrClosed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// drip writes s one byte every interval, then keeps dripping spaces, until
// the connection fails: a server that never finishes.
func drip(c net.Conn, s string, interval time.Duration) {
	for i := 0; ; i++ {
		b := byte(' ')
		if i < len(s) {
			b = s[i]
		}
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
		if !waitOrClosed(c, interval) {
			return
		}
	}
}

// A server that drips its answer never finishes it: the request timeout
// bounds the whole request, status line, headers and body, not the gap
// between two bytes. The fast drips (a byte every 20 ms, well inside the
// timeout) are the ones an idle timeout alone would never end.
func TestHostileSlowDrip(t *testing.T) {
	t.Parallel()
	const head = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
	tests := []struct {
		name       string
		prefix     string // sent at once
		dripped    string // then one byte per interval, forever
		interval   time.Duration
		wantStatus int
	}{
		{"headers at 1 byte per second", "", head, time.Second, 0},
		{"body at 1 byte per second", head, "<html><a href=/next>", time.Second, 200},
		{"headers at 1 byte per 20 ms", "", head + strings.Repeat("X-Pad: y\r\n", 1000), 20 * time.Millisecond, 0},
		{"body at 1 byte per 20 ms", head, "<html>", 20 * time.Millisecond, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := rawServer(t, func(c net.Conn) {
				readRequestHead(c)
				if _, err := io.WriteString(c, tt.prefix); err != nil {
					return
				}
				drip(c, tt.dripped, tt.interval)
			})
			f := newTestFetcher(t, hostileOptions(dripTimeout))
			start := time.Now()
			r := fetchWithin(t, f, "http://"+addr+"/", hostileDeadline)
			took := time.Since(start)
			if r.Err == nil {
				t.Fatalf("fetch ended without an error after %v (status %d, %d bytes), want a timeout", took, r.Status, len(r.Body))
			}
			if !isTimeout(r.Err) {
				t.Errorf("err = %v, want a timeout", r.Err)
			}
			if r.Status != tt.wantStatus {
				t.Errorf("status = %d, want %d", r.Status, tt.wantStatus)
			}
			if took < dripTimeout-10*time.Millisecond {
				t.Errorf("fetch ended after %v, before the %v timeout", took, dripTimeout)
			}
			if got := strings.TrimRight(string(r.Body), " "); tt.wantStatus != 0 && !strings.HasPrefix(tt.dripped, got) {
				t.Errorf("body %q is not a prefix of what was dripped", r.Body)
			}
		})
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}

// Headers that never come, at each point a server can stop: before
// reading the request, after it, and halfway through the header block.
func TestHostileHeadersNeverCome(t *testing.T) {
	t.Parallel()
	silent := func(c net.Conn) {
		for waitOrClosed(c, time.Second) {
		}
	}
	tests := []struct {
		name   string
		handle func(c net.Conn)
	}{
		{"request never read", silent},
		{"request read, nothing sent", func(c net.Conn) { readRequestHead(c); silent(c) }},
		{"status line, no headers", func(c net.Conn) {
			readRequestHead(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			silent(c)
		}},
		{"headers without their blank line", func(c net.Conn) {
			readRequestHead(c)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 5\r\n")
			silent(c)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			addr := rawServer(t, tt.handle)
			f := newTestFetcher(t, hostileOptions(dripTimeout))
			start := time.Now()
			r := fetchWithin(t, f, "http://"+addr+"/", hostileDeadline)
			if r.Err == nil || !isTimeout(r.Err) || r.Status != 0 {
				t.Errorf("after %v: status %d err %v, want status 0 and a timeout", time.Since(start), r.Status, r.Err)
			}
		})
	}
}

// memUse is what a fetch cost the heap. Retained is the live heap after
// it less before, both after a collection, with the response still held:
// what a worker keeps. Allocated is everything allocated meanwhile, which
// bounds the peak from above.
type memUse struct {
	retained  int64
	allocated uint64
}

func (m memUse) String() string {
	return fmt.Sprintf("heap +%.2f MiB retained, %.2f MiB allocated", float64(m.retained)/(1<<20), float64(m.allocated)/(1<<20))
}

// measure runs fetch and reports its cost. The figures are the whole
// process's, the in-process server's included, so the tests that measure
// are not parallel (parallel tests wait until they are done).
func measure(fetch func() *Response) (*Response, memUse) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r := fetch()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(r)
	return r, memUse{retained: int64(after.HeapInuse) - int64(before.HeapInuse), allocated: after.TotalAlloc - before.TotalAlloc}
}

// checkBounded fails when a fetch retained more than retainedX times, or
// allocated more than allocatedX times, limit bytes. Reading a body of
// MaxBody allocates about 4x it as its buffer doubles, 8x under -race,
// and keeps 2x (the body is a slice of the last buffer): the bounds leave
// room for that, and are a thousandth of what decoding a bomb would take.
func checkBounded(t *testing.T, m memUse, limit int64, retainedX, allocatedX int64) {
	t.Helper()
	t.Logf("%s (cap %d KiB)", m, limit>>10)
	if m.retained > retainedX*limit {
		t.Errorf("the fetch retained %d KiB of heap, want under %dx the %d KiB cap", m.retained>>10, retainedX, limit>>10)
	}
	if m.allocated > uint64(allocatedX*limit) {
		t.Errorf("the fetch allocated %d KiB, want under %dx the %d KiB cap", m.allocated>>10, allocatedX, limit>>10)
	}
}

// An endless body, framed three ways, is cut at MaxBody at once and costs
// a small multiple of it; recorded for an archive, the wire bytes kept stop
// at RecordMax as well.
func TestHostileEndlessBody(t *testing.T) {
	chunk := bytes.Repeat([]byte("<p>endless</p>"), 4096)
	tests := []struct {
		name   string
		header string
		record bool
	}{
		{"chunked", "Transfer-Encoding: chunked", false},
		{"until close", "Connection: close", false},
		{"a 1 TiB Content-Length", "Content-Length: 1099511627776", false},
		{"chunked, recorded", "Transfer-Encoding: chunked", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := rawServer(t, func(c net.Conn) {
				readRequestHead(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"+tt.header+"\r\n\r\n")
				data := chunk
				if strings.Contains(tt.header, "chunked") {
					data = fmt.Appendf(nil, "%x\r\n%s\r\n", len(chunk), chunk)
				}
				for {
					if _, err := c.Write(data); err != nil {
						return
					}
				}
			})
			o := hostileOptions(hostileDeadline)
			limit := int64(hostileMaxBody)
			if tt.record {
				o.Record, o.RecordMax = true, 2*hostileMaxBody
				limit += o.RecordMax
			}
			f := newTestFetcher(t, o)
			r, m := measure(func() *Response { return fetchWithin(t, f, "http://"+addr+"/", hostileDeadline/2) })
			if r.Err != nil || r.Status != 200 || len(r.Body) != hostileMaxBody || !r.Truncated {
				t.Fatalf("status %d, %d bytes, truncated %v, err %v; want 200, %d bytes, truncated", r.Status, len(r.Body), r.Truncated, r.Err, hostileMaxBody)
			}
			if tt.record {
				if r.Wire == nil || !r.Wire.Truncated || r.Wire.Response.Size() != o.RecordMax {
					t.Fatalf("wire %+v: want %d bytes kept, truncated", wireSummary(r.Wire), o.RecordMax)
				}
			}
			checkBounded(t, m, limit, 3, 12)
		})
	}
}

func wireSummary(w *Wire) string {
	if w == nil {
		return "none"
	}
	return fmt.Sprintf("%d bytes, truncated %v", w.Response.Size(), w.Truncated)
}

// zlibBomb returns a zlib stream ("deflate" as HTTP means it) of size
// zeros as three parts: head, then mid repeated count times, then tail.
// Deflate's blocks reach back into the window, so the middle is taken
// once the window is all zeros, from a compressor flushed after each MiB:
// from then on every MiB compresses to the same bytes.
func zlibBomb(t *testing.T, size int64) (head, mid, tail []byte, count int64) {
	t.Helper()
	const step = 1 << 20
	if size%step != 0 || size < 3*step {
		t.Fatalf("zlib bomb of %d bytes: want a multiple of %d, at least 3", size, step)
	}
	var buf bytes.Buffer
	zw, err := flate.NewWriter(&buf, flate.DefaultCompression)
	if err != nil {
		t.Fatal(err)
	}
	zeros := make([]byte, step)
	part := func() []byte {
		buf.Reset()
		zw.Write(zeros)
		zw.Flush()
		return bytes.Clone(buf.Bytes())
	}
	first, second, third := part(), part(), part()
	if !bytes.Equal(second, third) {
		t.Fatal("the compressed MiBs of zeros differ: the bomb cannot be repeated")
	}
	buf.Reset()
	zw.Close()
	last := bytes.Clone(buf.Bytes()) // an empty final block
	// Adler-32 of zeros: the byte sum stays 1, the sum of sums is the length.
	sum := binary.BigEndian.AppendUint32(nil, uint32(size%65521)<<16|1)
	head = append([]byte{0x78, 0x9c}, first...) // zlib header: deflate, 32 KiB window, default level
	tail = append(last, sum...)
	return head, second, tail, size/step - 1
}

// brotliBomb returns a brotli stream (RFC 7932) of size zeros, built by
// hand for want of an encoder: 4 zero bytes stored as is, then compressed
// meta-blocks of 16 MiB, each one command copying at distance 4 (the last
// distance a stream starts with). A GiB takes under 1 KiB. Checked against
// libbrotli's decoder when written: every size from 4 bytes up decodes to
// exactly that many zeros.
func brotliBomb(size int64) []byte {
	const (
		maxMeta = 1 << 24 // the most one meta-block may hold
		minCopy = 2118    // the shortest copy of copy length code 23
	)
	blocks, rest := (size-4)/maxMeta, (size-4)%maxMeta
	stored := int64(4)
	if rest < minCopy {
		stored, rest = stored+rest, 0
	}
	w := &bitWriter{}
	w.bits(0, 1) // WBITS: 16
	metaHeader := func(mlen int64) {
		w.bits(0, 1) // ISLAST
		nibbles := uint(4)
		for mlen-1 >= 1<<(4*nibbles) {
			nibbles++
		}
		w.bits(uint64(nibbles-4), 2)
		w.bits(uint64(mlen-1), 4*nibbles)
	}
	metaHeader(stored)
	w.bits(1, 1) // ISUNCOMPRESSED
	w.align()
	w.out = append(w.out, make([]byte, stored)...)
	copyBlock := func(n int64) {
		metaHeader(n)
		w.bits(0, 1) // ISUNCOMPRESSED: no
		w.bits(0, 3) // one block type each of literals, commands, distances
		w.bits(0, 6) // NPOSTFIX 0, NDIRECT 0
		w.bits(0, 2) // literal context mode
		w.bits(0, 2) // one literal tree, one distance tree
		// Simple prefix codes of one symbol each, which then take no bits:
		// literal 0; command 391 (insert nothing, copy length code 23,
		// distance read); distance code 0 (the last distance).
		w.bits(1, 2)
		w.bits(0, 2)
		w.bits(0, 8)
		w.bits(1, 2)
		w.bits(0, 2)
		w.bits(391, 10)
		w.bits(1, 2)
		w.bits(0, 2)
		w.bits(0, 6)
		w.bits(uint64(n-minCopy), 24) // the copy length's extra bits
	}
	for range blocks {
		copyBlock(maxMeta)
	}
	if rest > 0 {
		copyBlock(rest)
	}
	w.bits(1, 1) // ISLAST
	w.bits(1, 1) // ISLASTEMPTY
	w.align()
	return w.out
}

// bitWriter packs fields least significant bit first, as brotli reads them.
type bitWriter struct {
	out   []byte
	acc   uint64
	nbits uint
}

func (w *bitWriter) bits(v uint64, n uint) {
	w.acc |= v << w.nbits
	w.nbits += n
	for w.nbits >= 8 {
		w.out = append(w.out, byte(w.acc))
		w.acc >>= 8
		w.nbits -= 8
	}
}

func (w *bitWriter) align() {
	if w.nbits > 0 {
		w.bits(0, 8-w.nbits)
	}
}

// The zlib bomb is what it claims: a small one decodes to its zeros.
func TestZlibBombDecodes(t *testing.T) {
	t.Parallel()
	const size = 3 << 20
	head, mid, tail, count := zlibBomb(t, size)
	stream := bytes.Join([][]byte{head, bytes.Repeat(mid, int(count)), tail}, nil)
	zr, err := zlib.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(zr)
	if err != nil || len(got) != size || !bytes.Equal(got, make([]byte, size)) {
		t.Fatalf("decoded %d bytes, err %v; want %d zeros", len(got), err, size)
	}
	t.Logf("%d MiB of zeros in %d bytes of zlib", size>>20, len(stream))
}

// bomb is a compression bomb of bombSize zeros, written as it is made.
type bomb struct {
	encoding string
	write    func(w io.Writer) error
}

// bombs returns a gzip, a deflate and a brotli bomb.
func bombs(t *testing.T) []bomb {
	member, members := gzipBomb(t) // 1 MiB of zeros a member: 1024 of them
	zHead, zMid, zTail, zCount := zlibBomb(t, bombSize)
	br := brotliBomb(bombSize)
	return []bomb{
		{"gzip", func(w io.Writer) error {
			for range members {
				if _, err := w.Write(member); err != nil {
					return err
				}
			}
			return nil
		}},
		{"deflate", func(w io.Writer) error {
			if _, err := w.Write(zHead); err != nil {
				return err
			}
			for range zCount {
				if _, err := w.Write(zMid); err != nil {
					return err
				}
			}
			_, err := w.Write(zTail)
			return err
		}},
		{"br", func(w io.Writer) error { _, err := w.Write(br); return err }},
	}
}

func bombServer(t *testing.T, b bomb) string {
	return newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", b.encoding)
		w.Header().Set("Content-Type", "text/html")
		b.write(w)
	}).URL
}

// Compression bombs of a GiB each, streamed as they are made: a gzip one
// (which Fetch asks for and decodes), and ones labelled deflate and br,
// which it does not ask for. Whatever the fetcher does with an encoding,
// the body kept is at most MaxBody and the heap grows by a few times it.
// Not parallel: it measures the heap.
func TestHostileCompressionBombs(t *testing.T) {
	tests := bombs(t)
	for _, tt := range tests {
		t.Run(tt.encoding, func(t *testing.T) {
			url := bombServer(t, tt)
			f := newTestFetcher(t, hostileOptions(hostileDeadline))
			r, m := measure(func() *Response { return fetchWithin(t, f, url, hostileDeadline) })
			if r.Err != nil || r.Status != 200 {
				t.Fatalf("status %d err %v, want 200 and no error", r.Status, r.Err)
			}
			if len(r.Body) > hostileMaxBody {
				t.Fatalf("kept %d bytes of body, more than MaxBody %d", len(r.Body), hostileMaxBody)
			}
			decoded := len(r.Body) > 0 && !bytes.ContainsFunc(r.Body, func(c rune) bool { return c != 0 })
			switch {
			case tt.encoding == "gzip" && !(decoded && r.Truncated && len(r.Body) == hostileMaxBody):
				t.Errorf("gzip: %d bytes, truncated %v, decoded %v; want MaxBody decoded zeros, truncated", len(r.Body), r.Truncated, decoded)
			case decoded && (!r.Truncated || len(r.Body) != hostileMaxBody):
				t.Errorf("%s decoded to %d bytes, truncated %v; want MaxBody, truncated", tt.encoding, len(r.Body), r.Truncated)
			}
			t.Logf("%s bomb: kept %d bytes (decoded %v, truncated %v)", tt.encoding, len(r.Body), decoded, r.Truncated)
			checkBounded(t, m, hostileMaxBody, 3, 12)
		})
	}
}

// The crawl reads bodies as they stream (Request.Read): there the bombs
// and an endless body are handed over decoded up to MaxBody and no
// further, recorded for an archive or not, and the Response keeps only
// their head. Not parallel: it measures the heap.
func TestHostileStreamedBodies(t *testing.T) {
	endless := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		chunk := bytes.Repeat([]byte("<p>endless</p>"), 4096)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}).URL
	type target struct {
		name, url string
		decoded   bool // the body reaches Read decoded, so MaxBody of it
	}
	targets := []target{{"endless body", endless, true}}
	for _, b := range bombs(t) {
		targets = append(targets, target{b.encoding + " bomb", bombServer(t, b), b.encoding == "gzip"})
	}
	for _, record := range []bool{false, true} {
		for _, tg := range targets {
			t.Run(fmt.Sprintf("%s, recorded %v", tg.name, record), func(t *testing.T) {
				o := hostileOptions(hostileDeadline)
				limit := int64(hostileMaxBody)
				if record {
					o.Record, o.RecordMax = true, 2*hostileMaxBody
					limit += o.RecordMax
				}
				f := newTestFetcher(t, o)
				var read int64
				var nonZero bool
				req := Request{URL: tg.url, Read: func(_ *Response, body io.Reader) {
					buf := make([]byte, 32<<10)
					for {
						n, err := body.Read(buf)
						read += int64(n)
						nonZero = nonZero || bytes.ContainsFunc(buf[:n], func(c rune) bool { return c != 0 })
						if err != nil {
							return
						}
					}
				}}
				start := time.Now()
				r, m := measure(func() *Response { return f.Fetch(context.Background(), req) })
				defer r.Release()
				if d := time.Since(start); d > hostileDeadline {
					t.Fatalf("fetch took %v", d)
				}
				if r.Err != nil || r.Status != 200 || !r.Streamed() {
					t.Fatalf("status %d streamed %v err %v, want 200, streamed, no error", r.Status, r.Streamed(), r.Err)
				}
				if read > hostileMaxBody || len(r.Body) > HeadSize {
					t.Fatalf("Read was handed %d bytes and the Response keeps %d: want at most MaxBody %d and HeadSize %d",
						read, len(r.Body), hostileMaxBody, HeadSize)
				}
				if tg.decoded && (read != hostileMaxBody || !r.Truncated) {
					t.Errorf("Read was handed %d bytes, truncated %v; want MaxBody, truncated", read, r.Truncated)
				}
				if tg.name == "gzip bomb" && nonZero {
					t.Error("the gzip bomb reached Read undecoded")
				}
				checkBounded(t, m, limit, 1, 2)
			})
		}
	}
}

// Response headers are capped well below a megabyte (browsers stop at
// about 256 KiB): a megabyte of them, as one header or as many, is refused
// with an error that says so, promptly, before it costs memory. A header
// block just under the cap is still read.
func TestHostileHugeHeaders(t *testing.T) {
	many := func(size int, line func(i int) string) string {
		var b strings.Builder
		for i := 0; b.Len() < size; i++ {
			b.WriteString(line(i))
		}
		return b.String()
	}
	const mb = 1000 * 1000
	tests := []struct {
		name    string
		headers string
		wantErr bool
	}{
		{"one header of 1 MB", "X-Big: " + strings.Repeat("a", mb) + "\r\n", true},
		{"1 MB of 1 KB headers", many(mb, func(int) string { return "X-Pad: " + strings.Repeat("b", 1000) + "\r\n" }), true},
		{"1 MB of tiny distinct headers", many(mb, func(i int) string { return fmt.Sprintf("X-%d: v\r\n", i) }), true},
		{"1 MB of one tiny header repeated", many(mb, func(int) string { return "Set-Cookie: a=b\r\n" }), true},
		{"64 KB of headers", many(64<<10, func(i int) string { return fmt.Sprintf("X-%d: %s\r\n", i, strings.Repeat("c", 100)) }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := rawServer(t, func(c net.Conn) {
				readRequestHead(c)
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"+tt.headers+"\r\nok")
				waitOrClosed(c, hostileDeadline)
			})
			f := newTestFetcher(t, hostileOptions(hostileDeadline))
			r, m := measure(func() *Response { return fetchWithin(t, f, "http://"+addr+"/", hostileDeadline/2) })
			if !tt.wantErr {
				if r.Err != nil || r.Status != 200 || string(r.Body) != "ok" {
					t.Fatalf("status %d body %q err %v, want 200 \"ok\"", r.Status, r.Body, r.Err)
				}
				return
			}
			if r.Err == nil || r.Status != 0 {
				t.Fatalf("status %d with %d headers, err %v: want the response refused", r.Status, len(r.Header), r.Err)
			}
			if msg := r.Err.Error(); !strings.Contains(msg, "headers exceeded") || !strings.Contains(msg, addr) {
				t.Errorf("err %q: want it to say the headers exceeded the cap, and name the URL", msg)
			}
			checkBounded(t, m, maxResponseHeaderBytes, 12, 40)
		})
	}
}
