package fetch

import (
	"context"
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkFetch is one GET of a small page from a loopback server over a
// kept-alive connection: the cost the fetcher adds to every request of a
// crawl with no proxy, no cookie jar and no extra headers.
func BenchmarkFetch(b *testing.B) {
	srv := newBenchServer(b)
	f := New(testOptions())
	b.Cleanup(f.Close)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r := f.Get(ctx, srv); r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

func newBenchServer(b *testing.B) string {
	b.Helper()
	page := []byte("<html><title>bench</title><a href=/next>next</a></html>")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(page)
	})}
	ln := listenLoopback(b)
	go srv.Serve(ln)
	b.Cleanup(func() { srv.Close() })
	return fmt.Sprintf("http://%s/", ln.Addr())
}
