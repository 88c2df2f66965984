package store

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"time"
)

// Result is the stored outcome of fetching one URL. Its JSON form is the
// export format: one object a line.
//
// A refresh answered 304 Not Modified keeps the content fields of the
// result it replaces (Title, SHA256, Length, ContentType, Outlinks...) with
// Status 304 and its own FetchedAt, DurationMS and Attempts: the status is
// the last answer's, the content the last one the host sent.
type Result struct {
	URL         string    `json:"url"`
	FinalURL    string    `json:"final_url"`
	Host        string    `json:"host"`
	Status      int       `json:"status"`
	ContentType string    `json:"content_type"`
	Length      int64     `json:"length"`
	Truncated   bool      `json:"truncated"`
	FetchedAt   time.Time `json:"fetched_at"`
	DurationMS  int64     `json:"duration_ms"`
	Depth       int       `json:"depth"`
	Title       string    `json:"title"`
	Outlinks    int       `json:"outlinks"`
	SHA256      string    `json:"sha256"`
	Attempts    int       `json:"attempts"`
	ErrorClass  string    `json:"error_class"`
	Error       string    `json:"error"`

	// ETag and LastModified are the response's validators, as sent: a
	// refresh sends them back as If-None-Match and If-Modified-Since.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"last_modified,omitempty"`

	// Referrer is the URL of the page (or sitemap) the URL was first found
	// on; "" for a seed. Location is a redirect's target, resolved. Lastmod
	// is the sitemap's lastmod for the URL, as written.
	Referrer string `json:"referrer"`
	Location string `json:"location,omitempty"`
	// Kind is what the URL was fetched as: a page, a requisite of one
	// (an image, a stylesheet, a frame) or a sitemap.
	Kind    ItemKind `json:"kind"`
	Lastmod string   `json:"lastmod,omitempty"`

	// WARCFile and WARCOffset say where the fetch's records are: the WARC
	// file (of the process that fetched it, in a fleet) and the offset of
	// its first record. Only a fleet's store keeps them (beside the
	// result, not in its encoding); "" and 0 otherwise.
	WARCFile   string `json:"warc_file,omitempty"`
	WARCOffset int64  `json:"warc_offset,omitempty"`

	// Archived is the full response record of the crawl's archive (--warc)
	// that holds the page: its WARC-Target-URI and WARC-Date, to the
	// nanosecond. It is the page's own last response record, or the one
	// its identical-payload revisit refers to; a 304 keeps it, and its
	// revisit refers to it, so a revisit never refers to a revisit. Zero
	// when no archive holds the page (fetched without --warc, or its
	// records could not be written): a refresh with --warc then asks for
	// the page unconditionally. Not exported: it is the archive's, and
	// the WARC files say the same.
	Archived Capture `json:"-"`

	// What a page says about itself, read from its HTML and its headers:
	// its robots directives (meta robots and X-Robots-Tag merged), its
	// canonical URL (<link rel=canonical>, else the Link header's), its
	// versions in other languages, its meta description, the text of its
	// first <h1> and the language it declares (<html lang>).
	Robots      Directives  `json:"robots,omitempty"`
	Canonical   string      `json:"canonical,omitempty"`
	Hreflang    []Alternate `json:"hreflang,omitempty"`
	Description string      `json:"description,omitempty"`
	H1          string      `json:"h1,omitempty"`
	Lang        string      `json:"lang,omitempty"`
}

// Failed reports whether the result records a failure rather than a page.
func (r *Result) Failed() bool { return r.ErrorClass != "" }

// Counts are the crawl-wide counters kept in the file, updated in the same
// transaction as the records they count.
type Counts struct {
	Seen     int64 `json:"seen"`
	Queued   int64 `json:"queued"`
	Deferred int64 `json:"deferred"`
	Fetched  int64 `json:"fetched"`
	Failed   int64 `json:"failed"`
}

// HostCounts are the per-host counters.
type HostCounts struct {
	Queued   int64 `json:"queued"`
	Deferred int64 `json:"deferred"`
	Fetched  int64 `json:"fetched"`
	Failed   int64 `json:"failed"`
}

// Add adds d to c.
func (c *HostCounts) Add(d HostCounts) {
	c.Queued += d.Queued
	c.Deferred += d.Deferred
	c.Fetched += d.Fetched
	c.Failed += d.Failed
}

// Zero reports whether c counts nothing.
func (c *HostCounts) Zero() bool { return *c == HostCounts{} }

// A stored result is a header and the Result's fields in a compact binary
// form (resultBody): about a third the size of its JSON, and results are
// most of the file. The header holds a flag byte ('P' page, 'F' failure,
// 'R' a page whose URL is queued again for a refresh: see recrawl.go),
// the URL's Hash, the HTTP status (2 bytes) and the error class (a length
// byte and the bytes): enough for a commit to keep the counters and tallies
// right when a result is replaced, and for RequeueFailed to rebuild the
// URL's Item, without decoding the rest.
const (
	RecordPage       = 'P'
	RecordFailed     = 'F'
	RecordRefreshing = 'R'
	maxClassLen      = 255
)

// ResultRecord is a Result encoded for the results bucket.
type ResultRecord []byte

// EncodeResult encodes the result of it for Batch.CompleteRecord.
func EncodeResult(it Item, r *Result) ResultRecord {
	flag := byte(RecordPage)
	if r.Failed() {
		flag = RecordFailed
	}
	class := r.ErrorClass[:min(len(r.ErrorClass), maxClassLen)]
	out := make([]byte, 0, 1+len(Hash{})+3+len(class)+64+len(r.URL)+len(r.Host)+len(r.ContentType)+
		len(r.Title)+len(r.ErrorClass)+len(r.Error)+len(r.SHA256)/2+len(r.ETag)+len(r.LastModified)+
		len(r.Referrer)+len(r.Location)+len(r.Lastmod))
	out = append(out, flag)
	out = append(out, it.Hash[:]...)
	out = binary.BigEndian.AppendUint16(out, uint16(min(max(r.Status, 0), 0xFFFF)))
	out = append(out, byte(len(class)))
	out = append(out, class...)
	return appendResultBody(out, r)
}

// Bits of the body's flags byte.
const (
	bodyFinalIsURL = 1 << iota // FinalURL equals URL and is not stored
	bodyTruncated
	bodyNoFetchTime // FetchedAt is the zero time
	bodyRawSHA256   // SHA256 is 64 lowercase hex digits, stored as 32 bytes
	bodyValidators  // ETag and LastModified follow Error (records before them lack both)
	bodyOrigin      // Referrer, Location and Lastmod follow (records before them lack all three)
	bodyArchived    // Archived follows: its date, and its URI, "" when it is URL (records before it lack both)
	bodyExtension   // an extension byte ends the record: the Kind and which of the fields after it are stored
)

// The extension byte: its low bits are the Kind (records before kinds
// were kept are pages), the others say which fields follow it. A record of
// a page with none of them has no extension byte; one of another kind
// without them ends with its Kind byte, as before they were stored.
const (
	extKindMask  = 0x03
	extRobots    = 1 << 2 // the Directives byte
	extCanonical = 1 << 3 // Canonical
	extHreflang  = 1 << 4 // the number of alternates, then each one's hreflang and URL
	extPageText  = 1 << 5 // Description, H1 and Lang
	extKnownBits = extKindMask | extRobots | extCanonical | extHreflang | extPageText
)

// appendResultBody appends r's fields: a flags byte, then strings as a
// uvarint length and bytes, integers as zigzag varints, FetchedAt (and
// Archived's date) as Unix nanoseconds. A result without validators is
// encoded exactly as before they were stored, one in no archive as before
// Archived was.
func appendResultBody(out []byte, r *Result) []byte {
	var flags byte
	if r.FinalURL == r.URL {
		flags |= bodyFinalIsURL
	}
	if r.Truncated {
		flags |= bodyTruncated
	}
	if r.FetchedAt.IsZero() {
		flags |= bodyNoFetchTime
	}
	sha, rawSHA := hexSHA256(r.SHA256)
	if rawSHA {
		flags |= bodyRawSHA256
	}
	if r.ETag != "" || r.LastModified != "" {
		flags |= bodyValidators
	}
	if r.Referrer != "" || r.Location != "" || r.Lastmod != "" {
		flags |= bodyOrigin
	}
	if !r.Archived.Date.IsZero() {
		flags |= bodyArchived
	}
	ext := extensionOf(r)
	if ext != 0 {
		flags |= bodyExtension
	}
	out = append(out, flags)
	out = appendString(out, r.URL)
	if flags&bodyFinalIsURL == 0 {
		out = appendString(out, r.FinalURL)
	}
	out = appendString(out, r.Host)
	out = binary.AppendVarint(out, int64(r.Status))
	out = appendString(out, r.ContentType)
	out = binary.AppendVarint(out, r.Length)
	if flags&bodyNoFetchTime == 0 {
		out = binary.AppendVarint(out, r.FetchedAt.UnixNano())
	}
	out = binary.AppendVarint(out, r.DurationMS)
	out = binary.AppendVarint(out, int64(r.Depth))
	out = appendString(out, r.Title)
	out = binary.AppendVarint(out, int64(r.Outlinks))
	if rawSHA {
		out = append(out, sha[:]...)
	} else {
		out = appendString(out, r.SHA256)
	}
	out = binary.AppendVarint(out, int64(r.Attempts))
	out = appendString(out, r.ErrorClass)
	out = appendString(out, r.Error)
	if flags&bodyValidators != 0 {
		out = appendString(out, r.ETag)
		out = appendString(out, r.LastModified)
	}
	if flags&bodyOrigin != 0 {
		out = appendString(out, r.Referrer)
		out = appendString(out, r.Location)
		out = appendString(out, r.Lastmod)
	}
	if flags&bodyArchived != 0 {
		out = binary.AppendVarint(out, r.Archived.Date.UnixNano())
		uri := r.Archived.URI
		if uri == r.URL {
			uri = ""
		}
		out = appendString(out, uri)
	}
	if ext != 0 {
		out = appendExtension(out, ext, r)
	}
	return out
}

// extensionOf returns r's extension byte, 0 when it needs none.
func extensionOf(r *Result) byte {
	ext := byte(r.Kind) & extKindMask
	if r.Robots != 0 {
		ext |= extRobots
	}
	if r.Canonical != "" {
		ext |= extCanonical
	}
	if len(r.Hreflang) > 0 {
		ext |= extHreflang
	}
	if r.Description != "" || r.H1 != "" || r.Lang != "" {
		ext |= extPageText
	}
	return ext
}

func appendExtension(out []byte, ext byte, r *Result) []byte {
	out = append(out, ext)
	if ext&extRobots != 0 {
		out = append(out, byte(r.Robots))
	}
	if ext&extCanonical != 0 {
		out = appendString(out, r.Canonical)
	}
	if ext&extHreflang != 0 {
		out = binary.AppendUvarint(out, uint64(len(r.Hreflang)))
		for _, a := range r.Hreflang {
			out = appendString(appendString(out, a.Hreflang), a.URL)
		}
	}
	if ext&extPageText != 0 {
		out = appendString(appendString(appendString(out, r.Description), r.H1), r.Lang)
	}
	return out
}

// readExtension reads the extension byte and the fields it names into r,
// and reports whether they were well formed.
func readExtension(d *bodyReader, r *Result) bool {
	b := d.bytes(1)
	if d.bad || b[0] == 0 || b[0]&^extKnownBits != 0 {
		return false
	}
	ext := b[0]
	r.Kind = ItemKind(ext & extKindMask)
	if ext&extRobots != 0 {
		robots := d.bytes(1)
		if d.bad || robots[0] == 0 || Directives(robots[0])&^allDirectives != 0 {
			return false
		}
		r.Robots = Directives(robots[0])
	}
	if ext&extCanonical != 0 {
		r.Canonical = d.string()
	}
	if ext&extHreflang != 0 {
		n, k := binary.Uvarint(d.b)
		// Each alternate takes two bytes at least: a bad count is caught
		// before it sizes anything.
		if k <= 0 || n == 0 || n > uint64(len(d.b)-k)/2 {
			return false
		}
		d.b = d.b[k:]
		r.Hreflang = make([]Alternate, n)
		for i := range r.Hreflang {
			r.Hreflang[i] = Alternate{Hreflang: d.string(), URL: d.string()}
		}
	}
	if ext&extPageText != 0 {
		r.Description, r.H1, r.Lang = d.string(), d.string(), d.string()
	}
	return !d.bad
}

func appendString(out []byte, s string) []byte {
	out = binary.AppendUvarint(out, uint64(len(s)))
	return append(out, s...)
}

// hexSHA256 decodes s if it is a SHA-256 digest in lowercase hex, the only
// form that re-encodes to itself.
func hexSHA256(s string) (sum [32]byte, ok bool) {
	if len(s) != 64 {
		return sum, false
	}
	for i := range 32 {
		hi, lo := hexDigit(s[2*i]), hexDigit(s[2*i+1])
		if hi < 0 || lo < 0 {
			return sum, false
		}
		sum[i] = byte(hi<<4 | lo)
	}
	return sum, true
}

func hexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	}
	return -1
}

var errBadResult = errors.New("malformed result record")

// RecordHead is the decoded header of a result record: what a store
// needs to keep its counters and tallies right when a result is replaced,
// without decoding the rest.
type RecordHead struct {
	Failed bool
	Hash   Hash
	Status int
	Class  string
	body   []byte
}

// ParseRecordHead decodes the header of a result record.
func ParseRecordHead(v []byte) (RecordHead, error) {
	var h RecordHead
	const fixed = 1 + len(Hash{}) + 3
	if len(v) < fixed || (v[0] != RecordPage && v[0] != RecordFailed && v[0] != RecordRefreshing) {
		return h, errBadResult
	}
	h.Failed = v[0] == RecordFailed
	copy(h.Hash[:], v[1:])
	h.Status = int(binary.BigEndian.Uint16(v[17:]))
	n := int(v[19])
	if len(v) < fixed+n+1 {
		return h, errBadResult
	}
	h.Class = string(v[fixed : fixed+n])
	h.body = v[fixed+n:]
	return h, nil
}

// DecodeResult decodes a result encoded by EncodeResult.
func DecodeResult(v []byte) (Hash, Result, error) {
	head, err := ParseRecordHead(v)
	if err != nil {
		return head.Hash, Result{}, err
	}
	r, err := decodeResultBody(head.body)
	return head.Hash, r, err
}

// bodyReader reads a result body; the first malformed field sets bad, and
// every read after it returns zero values.
type bodyReader struct {
	b   []byte
	bad bool
}

func (d *bodyReader) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad, d.b = true, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *bodyReader) bytes(n uint64) []byte {
	if n > uint64(len(d.b)) {
		d.bad, d.b = true, nil
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *bodyReader) string() string {
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.bad, d.b = true, nil
		return ""
	}
	d.b = d.b[k:]
	return string(d.bytes(n))
}

func decodeResultBody(body []byte) (Result, error) {
	var r Result
	d := bodyReader{b: body}
	flags := d.bytes(1)
	if d.bad {
		return r, errBadResult
	}
	f := flags[0]
	r.URL = d.string()
	r.FinalURL = r.URL
	if f&bodyFinalIsURL == 0 {
		r.FinalURL = d.string()
	}
	r.Host = d.string()
	r.Status = int(d.varint())
	r.ContentType = d.string()
	r.Length = d.varint()
	r.Truncated = f&bodyTruncated != 0
	if f&bodyNoFetchTime == 0 {
		r.FetchedAt = time.Unix(0, d.varint()).UTC()
	}
	r.DurationMS = d.varint()
	r.Depth = int(d.varint())
	r.Title = d.string()
	r.Outlinks = int(d.varint())
	if f&bodyRawSHA256 != 0 {
		r.SHA256 = hex.EncodeToString(d.bytes(32))
	} else {
		r.SHA256 = d.string()
	}
	r.Attempts = int(d.varint())
	r.ErrorClass = d.string()
	r.Error = d.string()
	if f&bodyValidators != 0 {
		r.ETag = d.string()
		r.LastModified = d.string()
	}
	if f&bodyOrigin != 0 {
		r.Referrer = d.string()
		r.Location = d.string()
		r.Lastmod = d.string()
	}
	if f&bodyArchived != 0 {
		r.Archived.Date = time.Unix(0, d.varint()).UTC()
		if r.Archived.URI = d.string(); r.Archived.URI == "" {
			r.Archived.URI = r.URL
		}
	}
	if f&bodyExtension != 0 && !readExtension(&d, &r) {
		return Result{}, errBadResult
	}
	if d.bad || len(d.b) != 0 {
		return Result{}, errBadResult
	}
	return r, nil
}

// Tallies count the stored results by HTTP status (0 when no response came)
// and the failed ones by error class. They are kept in the file with the
// results, so `status` reads them instead of every result.
type Tallies struct {
	Status map[int]int64    `json:"status"`
	Failed map[string]int64 `json:"failed"`
}

// Count adds sign times a result with this header.
func (t *Tallies) Count(h RecordHead, sign int64) {
	t.AddStatus(h.Status, sign)
	if h.Failed {
		t.AddFailed(h.Class, sign)
	}
}

// AddStatus counts n more results with this HTTP status.
func (t *Tallies) AddStatus(status int, n int64) {
	if t.Status == nil {
		t.Status = map[int]int64{}
	}
	if t.Status[status] += n; t.Status[status] == 0 {
		delete(t.Status, status)
	}
}

// AddFailed counts n more failed results of this class.
func (t *Tallies) AddFailed(class string, n int64) {
	if t.Failed == nil {
		t.Failed = map[string]int64{}
	}
	if t.Failed[class] += n; t.Failed[class] == 0 {
		delete(t.Failed, class)
	}
}

// Merge adds d to t.
func (t *Tallies) Merge(d Tallies) {
	for k, v := range d.Status {
		t.AddStatus(k, v)
	}
	for k, v := range d.Failed {
		t.AddFailed(k, v)
	}
}

// Empty reports whether t counts nothing.
func (t *Tallies) Empty() bool { return len(t.Status) == 0 && len(t.Failed) == 0 }

// RequisiteHops is the hops a requisite queued again from its result
// (a retry, a refresh) starts from: the result does not keep them, so
// it is taken as named by a page, which bounds what it brings as tightly
// as anything found on it.
func (r *Result) RequisiteHops() int {
	if r.Kind == KindRequisite {
		return 1
	}
	return 0
}

// ForItem is a FailHost template filled in for one of the host's URLs.
func (template *Result) ForItem(it Item) Result {
	r := *template
	r.URL, r.FinalURL, r.Host, r.Depth, r.Attempts = it.URL, it.URL, it.Host, it.Depth, it.Attempts
	r.Referrer, r.Lastmod, r.Kind = it.Referrer, it.Lastmod, it.Kind
	return r
}

// PageFetchedAt reads a page record's FetchedAt without decoding the rest
// of it, for an index of pages by fetch time; ok is false for a failure,
// a page flagged for a refresh and a record it cannot read.
func PageFetchedAt(v []byte) (at time.Time, ok bool) {
	h, err := ParseRecordHead(v)
	if err != nil || v[0] != RecordPage {
		return time.Time{}, false
	}
	d := bodyReader{b: h.body}
	flags := d.bytes(1)
	if d.bad {
		return time.Time{}, false
	}
	f := flags[0]
	d.skipString() // URL
	if f&bodyFinalIsURL == 0 {
		d.skipString()
	}
	d.skipString() // Host
	d.varint()     // Status
	d.skipString() // ContentType
	d.varint()     // Length
	if f&bodyNoFetchTime != 0 {
		return time.Time{}, !d.bad
	}
	ns := d.varint()
	if d.bad {
		return time.Time{}, false
	}
	return time.Unix(0, ns).UTC(), true
}

func (d *bodyReader) skipString() {
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.bad, d.b = true, nil
		return
	}
	d.b = d.b[k:]
	d.bytes(n)
}
