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

// BenchmarkFetchTransports is BenchmarkFetch over each way a plain-http
// request can go: the fetcher's own HTTP/1.1 pool, as a direct request
// does, and net/http's Transport, as https and proxied requests do; one
// goroutine, and many at once, as a crawl's workers (where net/http's
// hand-offs between its per-connection goroutines cost the most).
func BenchmarkFetchTransports(b *testing.B) {
	srv := newBenchServer(b)
	for _, tc := range []struct {
		name    string
		netHTTP bool
	}{{"own-pool", false}, {"net-http", true}} {
		fetcher := func(b *testing.B) *Fetcher {
			opts := testOptions()
			opts.MaxConnsPerHost = 4
			f := New(opts)
			if tc.netHTTP {
				f.client.Transport = f.transport
			}
			b.Cleanup(f.Close)
			return f
		}
		b.Run(tc.name+"/serial", func(b *testing.B) {
			f := fetcher(b)
			b.ReportAllocs()
			for b.Loop() {
				if r := f.Get(context.Background(), srv); r.Err != nil {
					b.Fatal(r.Err)
				}
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			f := fetcher(b)
			b.ReportAllocs()
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if r := f.Get(context.Background(), srv); r.Err != nil {
						b.Error(r.Err)
						return
					}
				}
			})
		})
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
