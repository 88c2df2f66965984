package warc

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/klauspost/compress/gzip"
	"github.com/nlnwa/gowarc/v3"

	"breakwater/storage"
)

// Exchange is one request and its response as they crossed the wire.
type Exchange struct {
	URI      string
	Date     time.Time // when the request started
	Request  []byte    // as sent
	Response []byte    // as received: status line, headers, body
	IP       string    // the peer's address; "" if unknown
	// Truncated marks a response cut before the end of its body (the
	// record cap, or a failure partway): WARC-Truncated says so.
	Truncated bool
	// NotModified marks a 304 answer to a refresh: it is written as a
	// server-not-modified revisit of the capture of Previous.
	NotModified bool
	Previous    time.Time
}

// Entry is an exchange encoded for the archive, one gzip member per
// record, ready to be appended to a file. Workers encode; the one writer
// only appends (Writer.BeforeCommit), so compression runs in parallel.
type Entry struct {
	data []byte
	// first is set on a response that is the first capture of its
	// payload: the commit that archives it records it for revisits.
	first *claim
	// Revisit is set when data holds a revisit (of a payload archived
	// before, or for a 304).
	Revisit bool
	// of is the capture a revisit refers to when it was not yet written at
	// encoding time; fallback then holds the full records, written instead
	// if that capture is still not in the file (see BeforeCommit).
	of       *claim
	fallback []byte
}

// Size is the entry's size in the file.
func (e *Entry) Size() int { return len(e.data) }

// claim is a payload's first capture, from its encoding until the commit
// that records it in the database.
type claim struct {
	digest  string
	capture storage.Capture
	written bool // its records are in the file (read and set by the writer goroutine)
}

// firstCapture says what an encoder knows of a payload digest: the
// capture to refer to (known), an earlier capture not yet written (pending),
// or neither, and then claim is this entry's to be the first.
type firstCapture func(digest string, this storage.Capture) (known *storage.Capture, pending, claimed *claim, err error)

// recordOptions make gowarc compute what the records lack: ids, lengths,
// and sha1 digests in base32, as wget and Heritrix write them.
var recordOptions = []gowarc.WarcRecordOption{
	gowarc.WithAddMissingRecordId(true),
	gowarc.WithAddMissingContentLength(true),
	gowarc.WithAddMissingDigest(true),
	gowarc.WithDefaultDigestAlgorithm("sha1"),
	gowarc.WithDefaultDigestEncoding(gowarc.Base32),
	gowarc.WithFixContentLength(true),
	gowarc.WithBufferMaxMemBytes(1 << 30), // the bytes are in memory already
	gowarc.WithRecordIdFunc(newRecordID),
}

// newRecordID draws the uuid straight from crypto/rand: uuid's pooled
// generator reads a flag gowarc writes on every NewRecordBuilder.
func newRecordID() (string, error) {
	id, err := uuid.NewRandomFromReader(rand.Reader)
	if err != nil {
		return "", err
	}
	return id.URN(), nil
}

// builderMu serializes gowarc.NewRecordBuilder, which writes a global
// (uuid.EnableRandPool) each time it is called: a data race when workers
// build records at once. The building itself runs in parallel.
var builderMu sync.Mutex

func newBuilder(typ gowarc.RecordType) gowarc.WarcRecordBuilder {
	builderMu.Lock()
	defer builderMu.Unlock()
	return gowarc.NewRecordBuilder(typ, recordOptions...)
}

const (
	contentTypeRequest  = "application/http;msgtype=request"
	contentTypeResponse = "application/http;msgtype=response"
)

// encode builds the request and response (or revisit) records of ex.
// first finds the first capture of a payload, for --warc-dedupe; nil
// writes every payload in full.
func encode(ex Exchange, first firstCapture) (*Entry, error) {
	date := ex.Date.UTC()
	req, err := build(gowarc.Request, ex, date, ex.Request, contentTypeRequest)
	if err != nil {
		return nil, fmt.Errorf("request record of %s: %w", ex.URI, err)
	}
	defer req.Close()
	resp, err := build(gowarc.Response, ex, date, ex.Response, contentTypeResponse)
	if err != nil {
		return nil, fmt.Errorf("response record of %s: %w", ex.URI, err)
	}
	defer resp.Close()
	if ex.Truncated {
		resp.WarcHeader().Set(gowarc.WarcTruncated, "length")
	}
	// The request names the response; a revisit made of it keeps its id.
	req.WarcHeader().AddId(gowarc.WarcConcurrentTo, resp.WarcHeader().GetId(gowarc.WarcRecordID))
	resp.WarcHeader().AddId(gowarc.WarcConcurrentTo, req.WarcHeader().GetId(gowarc.WarcRecordID))
	entry := &Entry{}
	var revisit gowarc.WarcRecord
	digest := resp.WarcHeader().Get(gowarc.WarcPayloadDigest)
	switch {
	case ex.NotModified:
		ref := &gowarc.RevisitRef{Profile: gowarc.ProfileServerNotModifiedV1_1, TargetUri: ex.URI}
		if !ex.Previous.IsZero() {
			ref.TargetDate = ex.Previous.UTC().Format(time.RFC3339)
		}
		if revisit, err = resp.ToRevisitRecord(ref); err != nil {
			return nil, fmt.Errorf("revisit record of %s: %w", ex.URI, err)
		}
	case first != nil && digest != "" && !ex.Truncated:
		known, pending, claimed, err := first(digest, storage.Capture{URI: ex.URI, Date: date})
		if err != nil {
			return nil, fmt.Errorf("look up the payload of %s: %w", ex.URI, err)
		}
		entry.first, entry.of = claimed, pending
		if pending != nil {
			known = &pending.capture
		}
		if known == nil {
			break
		}
		ref := &gowarc.RevisitRef{Profile: gowarc.ProfileIdenticalPayloadDigestV1_1,
			TargetUri: known.URI, TargetDate: known.Date.UTC().Format(time.RFC3339)}
		if revisit, err = resp.ToRevisitRecord(ref); err != nil {
			return nil, fmt.Errorf("revisit record of %s: %w", ex.URI, err)
		}
		revisit.WarcHeader().Delete(gowarc.WarcTruncated) // gowarc marks every revisit; this one is whole
	}
	var reqData bytes.Buffer
	if err := appendMember(&reqData, req); err != nil {
		return nil, fmt.Errorf("write the records of %s: %w", ex.URI, err)
	}
	full := func() ([]byte, error) {
		buf := bytes.NewBuffer(make([]byte, 0, reqData.Len()+len(ex.Response)/2+1024))
		buf.Write(reqData.Bytes())
		err := appendMember(buf, resp)
		return buf.Bytes(), err
	}
	if revisit == nil {
		entry.data, err = full()
	} else {
		entry.Revisit = true
		buf := bytes.NewBuffer(bytes.Clone(reqData.Bytes()))
		if err = appendMember(buf, revisit); err == nil && entry.of != nil {
			entry.fallback, err = full()
		}
		entry.data = buf.Bytes()
	}
	if err != nil {
		return nil, fmt.Errorf("write the records of %s: %w", ex.URI, err)
	}
	return entry, nil
}

func build(typ gowarc.RecordType, ex Exchange, date time.Time, block []byte, contentType string) (gowarc.WarcRecord, error) {
	b := newBuilder(typ)
	if _, err := b.Write(block); err != nil {
		b.Close()
		return nil, err
	}
	b.AddWarcHeader(gowarc.WarcTargetURI, ex.URI)
	b.AddWarcHeaderTime(gowarc.WarcDate, date)
	b.AddWarcHeader(gowarc.ContentType, contentType)
	if ex.IP != "" {
		b.AddWarcHeader(gowarc.WarcIPAddress, ex.IP)
	}
	rec, _, err := b.Build() // validation findings are warnings: a hostile response is still what came
	return rec, err
}

var (
	gzipPool  = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
	marshaler = gowarc.NewMarshaler()
)

// appendMember writes r to buf as one gzip member, the unit a reader can
// seek to and a crash can cut between.
func appendMember(buf *bytes.Buffer, r gowarc.WarcRecord) error {
	zw := gzipPool.Get().(*gzip.Writer)
	defer gzipPool.Put(zw)
	zw.Reset(buf)
	if _, _, err := marshaler.Marshal(zw, r, 0); err != nil {
		return err
	}
	return zw.Close()
}
