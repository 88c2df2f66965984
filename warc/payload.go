package warc

// The payload of a response record. WARC 1.1 defines it as the entity
// body of the HTTP message: the transfer coding removed (the chunk
// framing), the content coding kept (gzip bytes stay gzip). The record's
// block keeps the bytes as they crossed the wire, framing included, and
// WARC-Block-Digest covers them; WARC-Payload-Digest covers the payload,
// so the same body sent with a Content-Length or in chunks of any size
// has one digest, and --warc-dedupe, keyed by it, finds it again.
//
// Whether a body is chunked is read from the response's own header block:
// a Transfer-Encoding whose last coding is chunked (RFC 9112 section 6.1;
// other transfer codings listed before it are left as they are, as no
// client of the crawl's sends them). The chunks are decoded as they are
// read (a body is spooled up to 100 MiB, never held whole): sizes,
// extensions, line ends and trailers are dropped.
//
// A body whose framing breaks, or ends before its last chunk (a record
// cut at the cap, or a connection lost partway: WARC-Truncated), still
// gets a digest: that of the data de-chunked up to the break. It covers
// what a reader de-chunking the record gets, the record is written all
// the same, and Check computes it the same way.

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"errors"
	"hash"
	"io"
	"sync"
)

// digestScan is the state of one digests call, pooled: a page's digests
// are on every worker's path, and the reader's buffer is most of the cost
// of setting up.
type digestScan struct {
	block, payload hash.Hash
	src            io.SectionReader
	tee            hashingReader
	br             *bufio.Reader
}

const scanBuffer = 32 << 10

var digestScans = sync.Pool{New: func() any {
	s := &digestScan{block: sha1.New(), payload: sha1.New(), br: bufio.NewReaderSize(nil, scanBuffer)}
	s.tee.r = &s.src
	return s
}}

// hashingReader reads r and writes what it read to h (when set); err
// keeps the first failure to read that is not the end of the bytes, which
// a de-chunker stopping at broken framing must not mistake for it.
type hashingReader struct {
	r   io.Reader
	h   hash.Hash
	err error
}

func (t *hashingReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 && t.h != nil {
		t.h.Write(p[:n])
	}
	if err != nil && err != io.EOF && t.err == nil {
		t.err = err
	}
	return n, err
}

// digests reads msg once for the digests of the whole block and of its
// payload: the body after headEnd, de-chunked if the header block says
// it is chunked.
func digests(msg Block, headEnd int64) (block, payload string, err error) {
	s := digestScans.Get().(*digestScan)
	defer func() {
		s.br.Reset(nil) // hold on to no message in the pool
		s.src = io.SectionReader{}
		digestScans.Put(s)
	}()
	s.block.Reset()
	s.payload.Reset()
	s.tee.h, s.tee.err = s.block, nil

	s.src = *io.NewSectionReader(msg, 0, headEnd)
	s.br.Reset(&s.tee)
	chunked := readHead(s.br)
	s.discard()
	if s.tee.err != nil {
		return "", "", s.tee.err
	}

	s.src = *io.NewSectionReader(msg, headEnd, msg.Size()-headEnd)
	s.br.Reset(&s.tee)
	if err := writePayload(s.payload, s.br, chunked, &s.tee); err != nil {
		return "", "", err
	}
	s.discard() // the rest of the block, after framing that broke
	if s.tee.err != nil {
		return "", "", s.tee.err
	}
	return digestText(s.block), digestText(s.payload), nil
}

// discard reads the rest of the source through the block's digest.
func (s *digestScan) discard() {
	for {
		if _, err := s.br.Discard(scanBuffer); err != nil {
			return
		}
	}
}

// payloadOf writes the payload of the HTTP response block in r to w,
// reading it once: the header block is read to its empty line (where
// httpHeaderEnd ends it), then the body as writePayload does. chunked
// says whether the header block said the body is chunked.
func payloadOf(w io.Writer, r io.Reader) (chunked bool, err error) {
	src := &hashingReader{r: r}
	br := bufio.NewReaderSize(src, scanBuffer)
	chunked = readHead(br)
	if src.err != nil {
		return chunked, src.err
	}
	return chunked, writePayload(w, br, chunked, src)
}

// writePayload writes the payload of the body in br to w: every byte, or
// with chunked the chunks' data. It fails only when src failed to read.
func writePayload(w io.Writer, br *bufio.Reader, chunked bool, src *hashingReader) error {
	if !chunked {
		if _, err := br.WriteTo(w); err != nil && src.err == nil {
			return err // w failed; a hash never does
		}
	} else {
		dechunk(w, br)
	}
	return src.err
}

// readHead reads an HTTP response's header block from br, up to and
// including the line that ends it (a line shorter than three bytes, as
// httpHeaderEnd has it) or to the end, and reports whether the body is
// chunked: the last coding of Transfer-Encoding, over all its lines, is
// "chunked" (in any case).
func readHead(br *bufio.Reader) (chunked bool) {
	var te transferCodings
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if len(line) < 3 && err == nil {
			return te.chunked()
		}
		isTE := !first && hasFieldName(line, "transfer-encoding")
		if isTE {
			te.begin()
			te.add(line[len("transfer-encoding:"):])
		}
		for err == bufio.ErrBufferFull { // a line longer than the buffer: read on to its end
			line, err = br.ReadSlice('\n')
			if isTE {
				te.add(line)
			}
		}
		if err != nil {
			return te.chunked() // no empty line: all header
		}
	}
}

// hasFieldName reports whether line is a field of that name (lowercase),
// followed directly by its colon as RFC 9112 requires.
func hasFieldName(line []byte, name string) bool {
	return len(line) > len(name) && line[len(name)] == ':' && bytes.EqualFold(line[:len(name)], []byte(name))
}

// transferCodings follows the codings of Transfer-Encoding field values as
// they are read, possibly in pieces, keeping only the last one: the coding
// after the last comma of the last field.
type transferCodings struct {
	last   [len("chunked") + 1]byte
	n      int  // bytes of last in use
	seen   bool // a field was read
	tooBig bool // the last coding is longer than any that matters here
}

func (t *transferCodings) begin() { t.n, t.seen, t.tooBig = 0, true, false }

func (t *transferCodings) add(p []byte) {
	if i := bytes.LastIndexByte(p, ','); i >= 0 {
		t.n, t.tooBig, p = 0, false, p[i+1:]
	}
	for _, c := range p {
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n':
			// optional whitespace around a coding, and the line's end
		case t.n < len(t.last):
			t.last[t.n] = c
			t.n++
		default:
			t.tooBig = true
		}
	}
}

func (t *transferCodings) chunked() bool {
	return t.seen && !t.tooBig && bytes.EqualFold(t.last[:t.n], []byte("chunked"))
}

// dechunk writes the data of the chunked body in br to w, each chunk's as
// it is read. It stops after the last chunk (size 0), whose trailers are
// not read, or where the framing breaks or the bytes end, having written
// the data read until then; whole reports whether it reached the last
// chunk.
func dechunk(w io.Writer, br *bufio.Reader) (whole bool) {
	for {
		size, ok := chunkSize(br)
		if !ok {
			return false
		}
		if size == 0 {
			return true
		}
		for size > 0 {
			p, err := br.Peek(int(min(size, int64(br.Size()))))
			if len(p) > 0 {
				w.Write(p)
				br.Discard(len(p))
				size -= int64(len(p))
			}
			if err != nil {
				return false // cut short inside a chunk
			}
		}
		if !lineEnd(br) {
			return false
		}
	}
}

// maxChunkDigits keeps a chunk size within an int64.
const maxChunkDigits = 15

var errBadChunk = errors.New("bad chunk size line")

// chunkSize reads a chunk-size line: hex digits, then optional
// whitespace, an extension after ';' (ignored, however long), and the
// line's end, CRLF or a bare LF.
func chunkSize(br *bufio.Reader) (int64, bool) {
	line, err := br.ReadSlice('\n')
	size, perr := parseChunkSize(line, err == nil)
	for err == bufio.ErrBufferFull { // a long extension: read on to the line's end
		_, err = br.ReadSlice('\n')
	}
	return size, err == nil && perr == nil
}

// parseChunkSize parses the start of a chunk-size line; complete is false
// when line is only its first part.
func parseChunkSize(line []byte, complete bool) (int64, error) {
	var size int64
	i := 0
	for ; i < len(line) && i <= maxChunkDigits; i++ {
		d := hexValue(line[i])
		if d < 0 {
			break
		}
		size = size<<4 | int64(d)
	}
	if i == 0 || i > maxChunkDigits {
		return 0, errBadChunk
	}
	for ; i < len(line) && (line[i] == ' ' || line[i] == '\t'); i++ {
	}
	rest := line[i:]
	switch {
	case len(rest) > 0 && rest[0] == ';':
	case !complete:
		return 0, errBadChunk
	case bytes.Equal(rest, []byte("\r\n")) || bytes.Equal(rest, []byte("\n")):
	default:
		return 0, errBadChunk
	}
	return size, nil
}

func hexValue(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// lineEnd reads the CRLF (or bare LF) after a chunk's data.
func lineEnd(br *bufio.Reader) bool {
	c, err := br.ReadByte()
	if err == nil && c == '\r' {
		c, err = br.ReadByte()
	}
	return err == nil && c == '\n'
}
