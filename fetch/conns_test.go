package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

func mustFetch(t *testing.T, f *Fetcher, url string) {
	t.Helper()
	if r := f.Get(context.Background(), url); r.Err != nil {
		t.Fatalf("fetch %s: %v", url, r.Err)
	}
}

// CloseHost closes one host's connections and leaves the others' in the
// pool: only that host redials.
func TestFetchCloseHostKeepsOtherHostsConnections(t *testing.T) {
	t.Parallel()
	a, aDials := countingServer(t)
	b, bDials := countingServer(t)
	f := newTestFetcher(t, testOptions())
	mustFetch(t, f, a.URL)
	mustFetch(t, f, b.URL)
	f.CloseHost(strings.TrimPrefix(a.URL, "http://"))
	mustFetch(t, f, a.URL)
	mustFetch(t, f, b.URL)
	if got, want := [2]int32{aDials.Load(), bDials.Load()}, [2]int32{2, 1}; got != want {
		t.Errorf("connections opened to the closed host and the other = %v, want %v", got, want)
	}
}

// A connection that completes for a host Refuse names is closed, and its
// request fails with ErrHostRefused instead of reaching the host.
func TestFetchRefusedHostIsNotDialled(t *testing.T) {
	t.Parallel()
	a, _ := countingServer(t)
	b, _ := countingServer(t)
	refused := strings.TrimPrefix(b.URL, "http://")
	opts := testOptions()
	opts.Refuse = func(host string) bool { return host == refused }
	f := newTestFetcher(t, opts)
	mustFetch(t, f, a.URL)
	r := f.Get(context.Background(), b.URL)
	if !errors.Is(r.Err, ErrHostRefused) {
		t.Fatalf("fetch of a refused host: err = %v, want ErrHostRefused", r.Err)
	}
	if n := f.conns.open(); n != 1 {
		t.Errorf("%d connections tracked, want 1 (to the host not refused)", n)
	}
}

// A frontier host key without a port stands for the default ports, which
// a dialled address always carries.
func TestHostKeysOfDialledAddresses(t *testing.T) {
	for _, tc := range []struct {
		host, port string
		want       []string
	}{
		{"example.com", "80", []string{"example.com:80", "example.com"}},
		{"example.com", "443", []string{"example.com:443", "example.com"}},
		{"example.com", "8080", []string{"example.com:8080"}},
		{"::1", "443", []string{"[::1]:443", "[::1]"}},
		{"127.0.0.1", "41399", []string{"127.0.0.1:41399"}},
	} {
		if got := hostKeysFor(tc.host, tc.port); !slices.Equal(got, tc.want) {
			t.Errorf("hostKeysFor(%q, %q) = %q, want %q", tc.host, tc.port, got, tc.want)
		}
	}
	for key, want := range map[string][2]string{
		"Example.COM": {"example.com", ""}, "example.com:8080": {"example.com", "8080"},
		"[::1]": {"::1", ""}, "[::1]:8080": {"::1", "8080"},
	} {
		if h, p := splitHostKey(key); [2]string{h, p} != want {
			t.Errorf("splitHostKey(%q) = %q, %q; want %q", key, h, p, want)
		}
	}
}

// closeHost of a bare host key closes its connections on the default
// ports, not those to another port of the same name or to other hosts.
func TestCloseHostMatchesPorts(t *testing.T) {
	var tr connTracker
	var ends []net.Conn
	dial := tr.wrap(func(context.Context, string, string) (net.Conn, error) {
		c, s := net.Pipe()
		ends = append(ends, s)
		return c, nil
	})
	t.Cleanup(func() {
		for _, s := range ends {
			s.Close()
		}
	})
	for _, addr := range []string{"example.com:80", "EXAMPLE.com:443", "example.com:8080", "other.test:80"} {
		if _, err := dial(context.Background(), "tcp", addr); err != nil {
			t.Fatal(err)
		}
	}
	if n := tr.closeHost("example.com"); n != 2 {
		t.Errorf("closeHost(example.com) closed %d connections, want 2 (ports 80 and 443)", n)
	}
	if n := tr.open(); n != 2 {
		t.Errorf("%d connections left, want 2 (example.com:8080, other.test:80)", n)
	}
	if n := tr.closeHost("example.com:8080"); n != 1 || tr.open() != 1 {
		t.Errorf("closeHost(example.com:8080) closed %d, left %d; want 1 and 1", n, tr.open())
	}
}

// Connections under TLS, HTTP/2 included, are tracked like plain ones: the
// tracker sees the TCP connection the TLS session runs over.
func TestFetchTracksTLSConnections(t *testing.T) {
	t.Parallel()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.Proto) }))
	srv.EnableHTTP2 = true
	dials := countNewConns(srv.Config)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f := newTestFetcher(t, testOptions())
	f.transport.current().TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	for range 2 {
		r := f.Get(context.Background(), srv.URL)
		if r.Err != nil || string(r.Body) != "HTTP/2.0" {
			t.Fatalf("fetch over TLS: %q, %v; want HTTP/2.0", r.Body, r.Err)
		}
	}
	if n := f.conns.open(); n != 1 || dials.Load() != 1 {
		t.Fatalf("%d tracked, %d dialled after two fetches; want 1 and 1", n, dials.Load())
	}
	f.CloseHost(strings.TrimPrefix(srv.URL, "https://"))
	if n := f.conns.open(); n != 0 {
		t.Fatalf("%d tracked after CloseHost, want 0", n)
	}
	// The HTTP/2 pool drops the connection when its reader sees the close,
	// a moment after CloseHost; a request in that moment fails on the closed
	// connection. The engine's next request to the host comes after a rest.
	for tries := 1; ; tries++ {
		r := f.Get(context.Background(), srv.URL)
		if r.Err == nil {
			break
		}
		if !errors.Is(r.Err, net.ErrClosed) || tries == 100 {
			t.Fatalf("fetch %d after CloseHost: %v", tries, r.Err)
		}
		time.Sleep(time.Millisecond)
	}
	if dials.Load() != 2 {
		t.Errorf("%d connections after CloseHost and a fetch, want 2", dials.Load())
	}
}
