package fetch

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// closedAddr is a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestTransportPoolRenewsAfterFailedHosts(t *testing.T) {
	built := 0
	p := newTransportPool(func() *http.Transport { built++; return &http.Transport{} })
	p.renewAfter = 3
	first := p.current()
	for range 5 { // one host failing again and again is one host
		p.dialFailed(first, "a:80")
	}
	p.dialFailed(first, "b:80")
	if p.current() != first || built != 1 {
		t.Fatalf("renewed after 2 failed hosts (built %d)", built)
	}
	p.dialFailed(first, "c:80")
	second := p.current()
	if second == first || built != 2 {
		t.Fatalf("not renewed after 3 failed hosts (built %d)", built)
	}
	// A retired transport's late failures count for nothing.
	for i := range 5 {
		p.dialFailed(first, fmt.Sprintf("late%d:80", i))
	}
	p.dialFailed(second, "d:80")
	p.dialFailed(second, "e:80")
	if p.current() != second || built != 2 {
		t.Fatalf("renewed by a retired transport's failures (built %d)", built)
	}
}

// A fetcher that tried many unreachable https hosts goes on fetching from
// live ones, across the transport's renewals, and its dials still go
// through the guard and the tracker. (Plain http has its own pool, which
// keeps nothing of a host whose dials failed.)
func TestFetcherRenewsItsTransportAndKeepsFetching(t *testing.T) {
	srv, opts, _ := tlsTestServer(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	f := newTestFetcher(t, opts)
	f.transport.renewAfter = 2
	first := f.transport.current()
	for range 3 {
		if resp := f.Fetch(context.Background(), Request{URL: "https://" + closedAddr(t) + "/"}); resp.Err == nil {
			t.Fatalf("fetch of a closed port: status %d, want an error", resp.Status)
		}
	}
	if f.transport.current() == first {
		t.Fatal("transport not renewed after 3 unreachable hosts")
	}
	for range 2 {
		resp := f.Fetch(context.Background(), Request{URL: srv.URL + "/"})
		if resp.Err != nil || resp.Status != 200 || string(resp.Body) != "ok" {
			t.Fatalf("fetch after renewal: %d %q %v", resp.Status, resp.Body, resp.Err)
		}
	}
	if n := f.conns.open(); n != 1 {
		t.Errorf("%d tracked connections after two fetches from one host, want 1 (reused)", n)
	}
}
