package storage

import (
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

// A stored result is one flag byte, the URL's Hash and the JSON of the
// Result. The flag lets a commit adjust the counters when a result is
// replaced without decoding it; the hash lets RequeueFailed rebuild the
// URL's Item.
const (
	resultPage   = 'P'
	resultFailed = 'F'
	resultHeader = 1 + len(Hash{})
)

// ResultRecord is a Result encoded for the results bucket.
type ResultRecord []byte

// EncodeResult encodes the result of it for Batch.CompleteRecord.
func EncodeResult(it Item, r *Result) ResultRecord {
	h := it.Hash
	flag := byte(resultPage)
	if r.Failed() {
		flag = resultFailed
	}
	data, err := json.Marshal(r)
	if err != nil {
		// A Result holds only strings, numbers and times: this cannot fail.
		panic("encode result: " + err.Error())
	}
	out := make([]byte, resultHeader, resultHeader+len(data))
	out[0] = flag
	copy(out[1:], h[:])
	return append(out, data...)
}

var errBadResult = errors.New("malformed result record")

func decodeResult(v []byte) (Hash, Result, error) {
	var r Result
	var h Hash
	if len(v) < resultHeader+2 || (v[0] != resultPage && v[0] != resultFailed) {
		return h, r, errBadResult
	}
	copy(h[:], v[1:resultHeader])
	err := json.Unmarshal(v[resultHeader:], &r)
	return h, r, err
}
