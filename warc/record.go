package warc

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"hash"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc/v3"

	"breakwater/spool"
	"breakwater/store"
)

// Exchange is one request and its response as they crossed the wire.
type Exchange struct {
	URI      string
	Date     time.Time // when the request started
	Request  []byte    // as sent
	Response Block     // as received: status line, headers, body
	IP       string    // the peer's address; "" if unknown
	// Truncated marks a response cut before the end of its body (the
	// record cap, or a failure partway): WARC-Truncated says so.
	Truncated bool
	// NotModified marks a 304 answer to a refresh: it is written as a
	// server-not-modified revisit of Original, the full response record
	// that holds the page (see Entry.Original); without one it is written
	// as a response.
	NotModified bool
	Original    store.Capture
}

// Block is the bytes of a record's block, read as many times as encoding
// needs (digests first, then the record): a *spool.Buffer, or a
// *bytes.Reader for bytes at hand.
type Block interface {
	io.ReaderAt
	Size() int64
}

// Entry is an exchange encoded for the archive, one gzip member per
// record, ready to be appended to a file. Workers encode; the one writer
// only appends (Writer.BeforeCommit), so compression runs in parallel.
type Entry struct {
	data *spool.Buffer
	// first is set on a response that is the first capture of its
	// payload: the commit that archives it records it for revisits.
	first *claim
	// Revisit is set when data holds a revisit (of a payload archived
	// before, or for a 304).
	Revisit bool
	// Original is the response record that holds the payload: the entry's
	// own, or the one its revisit refers to (never a revisit), by its
	// WARC-Target-URI and WARC-Date. A 304 to a refresh of the page is a
	// revisit of it (Exchange.Original). A revisit of a capture still on
	// its way may be written in full instead (see BeforeCommit); Original
	// is then the capture it would have referred to, which the archive
	// gets all the same unless its own commit fails.
	Original store.Capture
	// of is the capture a revisit refers to when it was not yet written at
	// encoding time; fallback then holds the full records, written instead
	// if that capture is still not in the file (see BeforeCommit).
	of       *claim
	fallback *spool.Buffer
	// File and Offset are where BeforeCommit wrote the entry: the file's
	// finished name and the offset of its first record.
	File   string
	Offset int64
	// index and fallbackIndex are the CDXJ lines of the response (or
	// revisit) record in data and in fallback, but for their place in the
	// archive (cdxjHead); reqSize is the size of the request record
	// before it, in either.
	index, fallbackIndex []byte
	reqSize              int64
}

// Size is the entry's size in the file.
func (e *Entry) Size() int64 { return e.data.Size() }

// Close frees the entry's spooled records; the writer calls it once they
// are in the file.
func (e *Entry) Close() {
	e.data.Close()
	if e.fallback != nil {
		e.fallback.Close()
	}
}

// claim is a payload's first capture, from its encoding until the commit
// that records it in the database.
type claim struct {
	digest  string
	capture store.Capture
	written bool // its records are in the file (read and set by the writer goroutine)
}

// firstCapture says what an encoder knows of a payload digest: the
// capture to refer to (known), an earlier capture not yet written (pending),
// or neither, and then claim is this entry's to be the first.
type firstCapture func(digest string, this store.Capture) (known *store.Capture, pending, claimed *claim, err error)

// newRecordID draws a version 4 uuid straight from crypto/rand: uuid's
// pooled generator reads a flag gowarc writes whenever it makes options,
// a data race beside Check.
func newRecordID() (string, error) {
	id, err := uuid.NewRandomFromReader(rand.Reader)
	if err != nil {
		return "", err
	}
	return id.URN(), nil
}

const (
	contentTypeRequest  = "application/http;msgtype=request"
	contentTypeResponse = "application/http;msgtype=response"
)

// encode builds the request and response (or revisit) records of ex,
// their fields named as gowarc names them (warcFields) and read back by
// gowarc in Check. The records are laid out here rather than by gowarc's record
// builder, which buffers, parses and validates every block again: four
// fifths of the archive's cost per page, for bytes that are ours to start
// with. first finds the first capture of a payload, for --warc-dedupe; nil
// writes every payload in full.
func encode(ex Exchange, first firstCapture, spoolDir string) (*Entry, error) {
	date := ex.Date.UTC()
	reqID, err := newRecordID()
	if err != nil {
		return nil, err
	}
	respID, err := newRecordID()
	if err != nil {
		return nil, err
	}
	resp := ex.Response
	if resp == nil {
		resp = bytes.NewReader(nil)
	}
	headEnd, err := httpHeaderEnd(resp)
	if err != nil {
		return nil, fmt.Errorf("read the response of %s: %w", ex.URI, err)
	}
	blockDigest, payloadDigest, err := digests(resp, headEnd)
	if err != nil {
		return nil, fmt.Errorf("read the response of %s: %w", ex.URI, err)
	}
	head, err := messageHead(resp, headEnd)
	if err != nil {
		return nil, fmt.Errorf("read the response of %s: %w", ex.URI, err)
	}
	dateText := date.Format(time.RFC3339Nano)
	common := func(typ gowarc.RecordType, id, contentType string) *warcFields {
		f := newWarcFields()
		f.Add(gowarc.WarcType, typ.String())
		f.Add(gowarc.WarcRecordID, "<"+id+">")
		f.Add(gowarc.WarcDate, dateText)
		f.Add(gowarc.WarcTargetURI, ex.URI)
		if ex.IP != "" {
			f.Add(gowarc.WarcIPAddress, ex.IP)
		}
		f.Add(gowarc.ContentType, contentType)
		return f
	}
	req := common(gowarc.Request, reqID, contentTypeRequest)
	req.Add(gowarc.WarcConcurrentTo, "<"+respID+">")

	entry := &Entry{}
	var revisitRef *store.Capture
	profile := ""
	entry.Original = store.Capture{URI: ex.URI, Date: date}
	switch {
	case ex.NotModified && !ex.Original.Date.IsZero():
		profile = gowarc.ProfileServerNotModifiedV1_1
		revisitRef = &ex.Original
	case first != nil && !ex.Truncated:
		known, pending, claimed, err := first(payloadDigest, store.Capture{URI: ex.URI, Date: date})
		if err != nil {
			return nil, fmt.Errorf("look up the payload of %s: %w", ex.URI, err)
		}
		entry.first, entry.of = claimed, pending
		if pending != nil {
			known = &pending.capture
		}
		if known != nil {
			profile, revisitRef = gowarc.ProfileIdenticalPayloadDigestV1_1, known
		}
	}
	if revisitRef != nil {
		entry.Original = *revisitRef
	}
	response := func(buf io.Writer) error {
		f := common(gowarc.Response, respID, contentTypeResponse)
		f.Add(gowarc.WarcConcurrentTo, "<"+reqID+">")
		f.Add(gowarc.WarcPayloadDigest, payloadDigest)
		if ex.Truncated {
			f.Add(gowarc.WarcTruncated, "length")
		}
		return appendMember(buf, f, resp, blockDigest, precompressed(head))
	}
	buf := spool.New(spoolDir, 0)
	request := bytes.NewReader(ex.Request)
	if err := appendMember(buf, req, request, "", false); err != nil {
		buf.Close()
		return nil, fmt.Errorf("write the records of %s: %w", ex.URI, err)
	}
	reqOnly := buf.Size()
	entry.reqSize = reqOnly
	if revisitRef == nil {
		err = response(buf)
		entry.index = cdxjHead(ex.URI, dateText, false, head, payloadDigest)
	} else {
		// A revisit keeps the response's id, so the request names it either way.
		entry.Revisit = true
		revisitDigest := ""
		f := common(gowarc.Revisit, respID, contentTypeResponse)
		f.Add(gowarc.WarcConcurrentTo, "<"+reqID+">")
		f.Add(gowarc.WarcProfile, profile)
		f.Add(gowarc.WarcRefersToTargetURI, revisitRef.URI)
		if !revisitRef.Date.IsZero() {
			// As the original's WARC-Date was written, to the nanosecond
			// (stored as Unix nanoseconds): a reader matches it exactly.
			f.Add(gowarc.WarcRefersToDate, warcDate(revisitRef.Date))
		}
		if !ex.NotModified {
			f.Add(gowarc.WarcPayloadDigest, payloadDigest)
			revisitDigest = payloadDigest
		}
		entry.index = cdxjHead(ex.URI, dateText, true, head, revisitDigest)
		if err = appendMember(buf, f, io.NewSectionReader(resp, 0, headEnd), "", false); err == nil && entry.of != nil {
			full := spool.New(spoolDir, 0)
			entry.fallback = full
			entry.fallbackIndex = cdxjHead(ex.URI, dateText, false, head, payloadDigest)
			if err = copyBlock(full, buf, 0, reqOnly); err == nil {
				err = response(full)
			}
		}
	}
	entry.data = buf
	if err != nil {
		entry.Close()
		return nil, fmt.Errorf("write the records of %s: %w", ex.URI, err)
	}
	return entry, nil
}

// httpHeaderEnd is where an HTTP message's header block ends (after its
// empty line), found as gowarc finds it for the payload digest; the whole
// block when there is none.
func httpHeaderEnd(msg Block) (int64, error) {
	s := headScans.Get().(*headScan)
	defer func() {
		s.br.Reset(nil) // hold on to no message in the pool
		s.src = io.SectionReader{}
		headScans.Put(s)
	}()
	s.src = *io.NewSectionReader(msg, 0, msg.Size())
	s.br.Reset(&s.src)
	r := s.br
	var at int64
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long header line: read on to its end.
			for err == bufio.ErrBufferFull {
				at += int64(len(line))
				line, err = r.ReadSlice('\n')
			}
			at += int64(len(line))
			if err != nil {
				return msg.Size(), ignoreEOF(err)
			}
			continue
		}
		if err != nil {
			return msg.Size(), ignoreEOF(err) // no empty line: all header
		}
		at += int64(len(line))
		if len(line) < 3 {
			return at, nil
		}
	}
}

// headScan is httpHeaderEnd's reader, pooled: a new one a page was 4 KiB
// of garbage a page.
type headScan struct {
	src io.SectionReader
	br  *bufio.Reader
}

var headScans = sync.Pool{New: func() any {
	s := &headScan{}
	s.br = bufio.NewReader(&s.src)
	return s
}}

// messageHead is the start of msg that a CDXJ line is made from: its
// head, up to httpHeadCap bytes, as an indexer reading the record back
// reads it (index.go).
func messageHead(msg Block, headEnd int64) ([]byte, error) {
	head := make([]byte, min(headEnd, httpHeadCap))
	n, err := msg.ReadAt(head, 0)
	if n == len(head) {
		err = nil
	}
	return head[:n], err
}

func ignoreEOF(err error) error {
	if err == io.EOF {
		return nil
	}
	return err
}

// warcDate is t as a record's WARC-Date is written (see encode's common)
// and so as a revisit's WARC-Refers-To-Date must be: UTC, as precise as t.
func warcDate(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// digestText is a digest as WARC fields carry it: sha1, base32, as wget
// and Heritrix write it.
func digestText(h hash.Hash) string {
	return "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil))
}

// sha1Digest is digestText of b.
func sha1Digest(b []byte) string {
	sum := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(sum[:])
}

// Two gzip writers: records are small, and compressing one costs mostly a
// fixed amount (building its Huffman tables), so a short record (a request,
// a revisit, most redirects: under smallRecord bytes) is stored in its
// member uncompressed, a few hundred bytes more, for a third of the cost
// of a page. Longer ones are compressed at the fastest level, whose cost
// on a page barely differs from the default's and whose size is close.
var (
	fastGzip   = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w }}
	storedGzip = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.NoCompression); return w }}
)

const smallRecord = 1024

// warcFields is a record's version line and header fields as they are
// written: "Name: value" and CRLF each, in order. gowarc's WarcFields
// normalizes every name it is given (a lowercase copy and a lookup per
// field, a tenth of a page's encode); the names written here are gowarc's
// own constants, already in the form it reads back.
type warcFields struct{ b []byte }

func newWarcFields() *warcFields {
	f := &warcFields{b: make([]byte, 0, 640)}
	f.b = append(f.b, "WARC/1.1\r\n"...)
	return f
}

// Add appends one field.
func (f *warcFields) Add(name, value string) {
	f.b = append(f.b, name...)
	f.b = append(f.b, ": "...)
	f.b = append(f.b, value...)
	f.b = append(f.b, "\r\n"...)
}

// appendMember writes one record, its fields and block, to buf as one
// gzip member: the unit a reader can seek to and a crash can cut between.
// digest is the block's, or "" to have it computed here. A short record,
// or one whose body is compressed already (precompressed), is stored in
// its member, not compressed again.
func appendMember(buf io.Writer, f *warcFields, block Block, digest string, stored bool) error {
	if digest == "" {
		h := sha1.New()
		if err := copyBlock(h, block, 0, block.Size()); err != nil {
			return err
		}
		digest = digestText(h)
	}
	f.Add(gowarc.WarcBlockDigest, digest)
	f.Add(gowarc.ContentLength, strconv.FormatInt(block.Size(), 10))
	f.b = append(f.b, "\r\n"...)
	pool := &fastGzip
	if stored || block.Size() < smallRecord {
		pool = &storedGzip
	}
	zw := pool.Get().(*gzip.Writer)
	defer pool.Put(zw)
	zw.Reset(buf)
	if _, err := zw.Write(f.b); err != nil {
		return err
	}
	if err := copyBlock(zw, block, 0, block.Size()); err != nil {
		return err
	}
	if _, err := zw.Write([]byte("\r\n\r\n")); err != nil {
		return err
	}
	return zw.Close()
}

// copyBuffers are copyBlock's buffers: io.Copy between a section of a
// block and a hash or a gzip writer (neither side a WriterTo or a
// ReaderFrom) made a new 32 KiB buffer for each copy, three a page, more
// than the page itself.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBlock writes the n bytes of block from off to w.
func copyBlock(w io.Writer, block io.ReaderAt, off, n int64) error {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	for n > 0 {
		m, err := block.ReadAt(buf[:min(n, int64(len(buf)))], off)
		if m > 0 {
			if _, werr := w.Write(buf[:m]); werr != nil {
				return werr
			}
			off, n = off+int64(m), n-int64(m)
		}
		switch {
		case err == io.EOF && n > 0:
			return io.ErrUnexpectedEOF // shorter than its Size: the record would lie
		case err != nil && err != io.EOF:
			return err
		}
	}
	return nil
}

// Placement is where BeforeCommit wrote the entry (see File and Offset).
func (e *Entry) Placement() (file string, offset int64) { return e.File, e.Offset }
