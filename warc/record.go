package warc

import (
	"bytes"
	"fmt"
	"sync"
	"time"

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
	first   *storage.Capture
	digest  string
	Revisit bool // written as a revisit (its payload was archived before, or a 304)
}

// Size is the entry's size in the file.
func (e *Entry) Size() int { return len(e.data) }

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
}

const (
	contentTypeRequest  = "application/http;msgtype=request"
	contentTypeResponse = "application/http;msgtype=response"
)

// encode builds the request and response (or revisit) records of ex.
// lookup finds the first capture of a payload digest, for
// --warc-dedupe; nil writes every payload in full.
func encode(ex Exchange, lookup func(digest string) (storage.Capture, bool, error)) (*Entry, error) {
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
	entry := &Entry{digest: resp.WarcHeader().Get(gowarc.WarcPayloadDigest)}
	out := resp
	switch {
	case ex.NotModified:
		ref := &gowarc.RevisitRef{Profile: gowarc.ProfileServerNotModifiedV1_1, TargetUri: ex.URI}
		if !ex.Previous.IsZero() {
			ref.TargetDate = ex.Previous.UTC().Format(time.RFC3339)
		}
		if out, err = resp.ToRevisitRecord(ref); err != nil {
			return nil, fmt.Errorf("revisit record of %s: %w", ex.URI, err)
		}
		entry.Revisit = true
	case lookup != nil && entry.digest != "" && !ex.Truncated:
		first, found, err := lookup(entry.digest)
		if err != nil {
			return nil, fmt.Errorf("look up the payload of %s: %w", ex.URI, err)
		}
		if !found {
			entry.first = &storage.Capture{URI: ex.URI, Date: date}
			break
		}
		ref := &gowarc.RevisitRef{Profile: gowarc.ProfileIdenticalPayloadDigestV1_1,
			TargetUri: first.URI, TargetDate: first.Date.UTC().Format(time.RFC3339)}
		if out, err = resp.ToRevisitRecord(ref); err != nil {
			return nil, fmt.Errorf("revisit record of %s: %w", ex.URI, err)
		}
		out.WarcHeader().Delete(gowarc.WarcTruncated) // gowarc marks every revisit; this one is whole
		entry.Revisit = true
	}
	// Each record names the other: readers pair them either way.
	req.WarcHeader().AddId(gowarc.WarcConcurrentTo, out.WarcHeader().GetId(gowarc.WarcRecordID))
	out.WarcHeader().AddId(gowarc.WarcConcurrentTo, req.WarcHeader().GetId(gowarc.WarcRecordID))
	var buf bytes.Buffer
	buf.Grow(len(ex.Request) + len(ex.Response)/2 + 2048)
	for _, r := range []gowarc.WarcRecord{req, out} {
		if err := appendMember(&buf, r); err != nil {
			return nil, fmt.Errorf("write the records of %s: %w", ex.URI, err)
		}
	}
	entry.data = buf.Bytes()
	return entry, nil
}

func build(typ gowarc.RecordType, ex Exchange, date time.Time, block []byte, contentType string) (gowarc.WarcRecord, error) {
	b := gowarc.NewRecordBuilder(typ, recordOptions...)
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
