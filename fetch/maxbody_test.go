package fetch

import (
	"bytes"
	"context"
	"net/http"
	"testing"
)

// A request's own MaxBody replaces the Fetcher's, up or down; zero keeps it.
func TestFetchRequestMaxBody(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write(bytes.Repeat([]byte("x"), 3*testMaxBody))
	})
	f := newTestFetcher(t, testOptions())
	tests := []struct {
		name          string
		maxBody       int64
		wantLen       int
		wantTruncated bool
	}{
		{"zero: the fetcher's", 0, testMaxBody, true},
		{"larger", 4 * testMaxBody, 3 * testMaxBody, false},
		{"smaller", 100, 100, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.Fetch(context.Background(), Request{URL: srv.URL, MaxBody: tt.maxBody})
			if r.Err != nil {
				t.Fatalf("Fetch: %v", r.Err)
			}
			if len(r.Body) != tt.wantLen || r.Truncated != tt.wantTruncated {
				t.Errorf("got %d bytes truncated %v, want %d %v", len(r.Body), r.Truncated, tt.wantLen, tt.wantTruncated)
			}
		})
	}
}
