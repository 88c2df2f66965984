package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"time"
)

// Result is the stored outcome of fetching one URL. Its JSON form is the
// export format: one object a line.
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

func (c *HostCounts) add(d HostCounts) {
	c.Queued += d.Queued
	c.Deferred += d.Deferred
	c.Fetched += d.Fetched
	c.Failed += d.Failed
}

func (c *HostCounts) zero() bool { return *c == HostCounts{} }

// A stored result is a header and the JSON of the Result. The header holds
// a flag byte ('P' page, 'F' failure), the URL's Hash, the HTTP status (2
// bytes) and the error class (a length byte and the bytes): enough for a
// commit to keep the counters and tallies right when a result is replaced,
// and for RequeueFailed to rebuild the URL's Item, without decoding JSON.
const (
	resultPage   = 'P'
	resultFailed = 'F'
	maxClassLen  = 255
)

// ResultRecord is a Result encoded for the results bucket.
type ResultRecord []byte

// EncodeResult encodes the result of it for Batch.CompleteRecord.
func EncodeResult(it Item, r *Result) ResultRecord {
	flag := byte(resultPage)
	if r.Failed() {
		flag = resultFailed
	}
	data, err := json.Marshal(r)
	if err != nil {
		// A Result holds only strings, numbers and times: this cannot fail.
		panic("encode result: " + err.Error())
	}
	class := r.ErrorClass[:min(len(r.ErrorClass), maxClassLen)]
	out := make([]byte, 0, 1+len(Hash{})+3+len(class)+len(data))
	out = append(out, flag)
	out = append(out, it.Hash[:]...)
	out = binary.BigEndian.AppendUint16(out, uint16(min(max(r.Status, 0), 0xFFFF)))
	out = append(out, byte(len(class)))
	out = append(out, class...)
	return append(out, data...)
}

var errBadResult = errors.New("malformed result record")

// resultHead is the decoded header of a result record.
type resultHead struct {
	failed bool
	hash   Hash
	status int
	class  string
	json   []byte
}

func parseResultHead(v []byte) (resultHead, error) {
	var h resultHead
	const fixed = 1 + len(Hash{}) + 3
	if len(v) < fixed || (v[0] != resultPage && v[0] != resultFailed) {
		return h, errBadResult
	}
	h.failed = v[0] == resultFailed
	copy(h.hash[:], v[1:])
	h.status = int(binary.BigEndian.Uint16(v[17:]))
	n := int(v[19])
	if len(v) < fixed+n+2 {
		return h, errBadResult
	}
	h.class = string(v[fixed : fixed+n])
	h.json = v[fixed+n:]
	return h, nil
}

func decodeResult(v []byte) (Hash, Result, error) {
	var r Result
	head, err := parseResultHead(v)
	if err != nil {
		return head.hash, r, err
	}
	err = json.Unmarshal(head.json, &r)
	return head.hash, r, err
}

// Tallies count the stored results by HTTP status (0 when no response came)
// and the failed ones by error class. They are kept in the file with the
// results, so `status` reads them instead of every result.
type Tallies struct {
	Status map[int]int64    `json:"status"`
	Failed map[string]int64 `json:"failed"`
}

// count adds sign times a result with this header.
func (t *Tallies) count(h resultHead, sign int64) {
	t.addStatus(h.status, sign)
	if h.failed {
		t.addFailed(h.class, sign)
	}
}

func (t *Tallies) addStatus(status int, n int64) {
	if t.Status == nil {
		t.Status = map[int]int64{}
	}
	if t.Status[status] += n; t.Status[status] == 0 {
		delete(t.Status, status)
	}
}

func (t *Tallies) addFailed(class string, n int64) {
	if t.Failed == nil {
		t.Failed = map[string]int64{}
	}
	if t.Failed[class] += n; t.Failed[class] == 0 {
		delete(t.Failed, class)
	}
}

func (t *Tallies) merge(d Tallies) {
	for k, v := range d.Status {
		t.addStatus(k, v)
	}
	for k, v := range d.Failed {
		t.addFailed(k, v)
	}
}

func (t *Tallies) empty() bool { return len(t.Status) == 0 && len(t.Failed) == 0 }
