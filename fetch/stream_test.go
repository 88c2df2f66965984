package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"io"
	"net/http"
	"testing"
)

// With Request.Read the body reaches the reader as it streams, capped at
// the limit and decoded; the Response keeps only its head, yet its digest
// and length are the whole body's, and a body longer than the limit is
// marked truncated, whether the reader read it all or stopped early.
func TestFetchStreamsBodyToRead(t *testing.T) {
	t.Parallel()
	const size = 3 * HeadSize
	page := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("gzip") != "" {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			zw.Write(page)
			zw.Close()
			return
		}
		w.Write(page)
	})
	f := newTestFetcher(t, testOptions())
	tests := []struct {
		name      string
		query     string
		maxBody   int64
		readUpTo  int // the reader stops after this many bytes; -1 reads all
		wantLen   int
		truncated bool
	}{
		{"all of it", "", size + 1, -1, size, false},
		{"reader stops early", "", size + 1, 100, size, false},
		{"capped", "", size / 2, -1, size / 2, true},
		{"capped, reader stops early", "", size / 2, 10, size / 2, true},
		{"exactly the cap", "", size, -1, size, false},
		{"gzip, decoded", "?gzip=1", size + 1, -1, size, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []byte
			var status int
			r := f.Fetch(context.Background(), Request{URL: srv.URL + "/" + tt.query, MaxBody: tt.maxBody,
				Read: func(r *Response, body io.Reader) {
					status = r.Status
					if tt.readUpTo >= 0 {
						body = io.LimitReader(body, int64(tt.readUpTo))
					}
					got, _ = io.ReadAll(body)
				}})
			if r.Err != nil {
				t.Fatalf("Fetch: %v", r.Err)
			}
			if status != 200 || !r.Streamed() {
				t.Fatalf("Read saw status %d, streamed %v", status, r.Streamed())
			}
			want := page[:tt.wantLen]
			if tt.readUpTo >= 0 {
				if !bytes.Equal(got, want[:tt.readUpTo]) {
					t.Errorf("Read got %d bytes, want the first %d", len(got), tt.readUpTo)
				}
			} else if !bytes.Equal(got, want) {
				t.Errorf("Read got %d bytes, want %d", len(got), len(want))
			}
			if !bytes.Equal(r.Body, want[:min(len(want), HeadSize)]) {
				t.Errorf("Body keeps %d bytes, want the first %d", len(r.Body), min(len(want), HeadSize))
			}
			n, sum := r.Digest()
			if n != int64(tt.wantLen) || sum != sha256.Sum256(want) || r.Truncated != tt.truncated {
				t.Errorf("digest of %d bytes, truncated %v; want the sha256 of %d bytes, truncated %v",
					n, r.Truncated, tt.wantLen, tt.truncated)
			}
		})
	}
}

// A Response built by hand (a test's fetcher) digests its Body.
func TestDigestOfAHandBuiltResponse(t *testing.T) {
	r := &Response{Body: []byte("hello")}
	if n, sum := r.Digest(); n != 5 || sum != sha256.Sum256([]byte("hello")) || r.Streamed() {
		t.Errorf("Digest = %d, %x; streamed %v", n, sum, r.Streamed())
	}
}

// KeepHead decides by status whether Body keeps the streamed head; the
// digest is the whole body's either way.
func TestStreamKeepsTheHeadOnlyWhereAsked(t *testing.T) {
	t.Parallel()
	page := bytes.Repeat([]byte("refused: breakwater "), 100)
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/denied" {
			w.WriteHeader(http.StatusForbidden)
		}
		w.Write(page)
	})
	f := newTestFetcher(t, testOptions())
	notOK := func(status int) bool { return status < 200 || status >= 300 }
	for _, tc := range []struct {
		path     string
		wantHead bool
	}{{"/page", false}, {"/denied", true}} {
		var got []byte
		r := f.Fetch(context.Background(), Request{URL: srv.URL + tc.path, KeepHead: notOK,
			Read: func(_ *Response, body io.Reader) { got, _ = io.ReadAll(body) }})
		if r.Err != nil {
			t.Fatalf("%s: %v", tc.path, r.Err)
		}
		if !bytes.Equal(got, page) {
			t.Errorf("%s: Read got %d bytes, want %d", tc.path, len(got), len(page))
		}
		if kept := len(r.Body) > 0; kept != tc.wantHead || kept && !bytes.Equal(r.Body, page) {
			t.Errorf("%s (status %d): Body keeps %d bytes, want the head: %v", tc.path, r.Status, len(r.Body), tc.wantHead)
		}
		if n, sum := r.Digest(); n != int64(len(page)) || sum != sha256.Sum256(page) {
			t.Errorf("%s: digest of %d bytes, want the whole body's", tc.path, n)
		}
	}
}
