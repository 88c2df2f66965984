package fetch_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"breakwater/backend"
	"breakwater/crawl"
	"breakwater/fetch"
	"breakwater/storage"
	"breakwater/store"
)

// tableResolver answers names from a table, without DNS.
type tableResolver map[string]string

func (r tableResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if ip, ok := r[host]; ok {
		return []netip.Addr{netip.MustParseAddr(ip)}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// A crawl without AllowPrivate follows a redirect by queueing its target
// and fetching it through the same guarded fetcher: targets on loopback,
// on a name resolving to a private address, on an odd spelling of
// loopback, on IPv4-mapped loopback and on the metadata address all end
// with the class "blocked", and none is connected to. A redirect to a
// public target is followed, so the blocked ones are not merely ignored.
//
// The site is served from loopback, yet stands at a public-looking
// address: the resolver says www.example.test is 192.0.2.10, the guard
// passes that, and only then is the connect routed to the loopback server.
// The loopback server's own address, reached by redirect, is refused.
func TestRedirectIntoBlockedAddressIsBlocked(t *testing.T) {
	t.Parallel()
	var secrets atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		port := srv.Listener.Addr().(*net.TCPAddr).Port
		targets := map[string]string{
			"/to-loopback": fmt.Sprintf("http://127.0.0.1:%d/secret1", port),
			"/to-name":     fmt.Sprintf("http://intranet.test:%d/secret2", port),
			"/to-spelling": fmt.Sprintf("http://2130706433:%d/secret3", port),
			"/to-mapped":   fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/secret4", port),
			"/to-metadata": "http://169.254.169.254/latest/meta-data/",
			"/to-public":   "http://www.example.test/landing",
		}
		switch {
		case strings.HasPrefix(r.URL.Path, "/secret"), strings.HasPrefix(r.URL.Path, "/latest"):
			secrets.Add(1)
			fmt.Fprint(w, "internal")
		case targets[r.URL.Path] != "":
			http.Redirect(w, r, targets[r.URL.Path], http.StatusFound)
		case r.URL.Path == "/landing":
			fmt.Fprint(w, "<title>landing</title>")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)

	var mu sync.Mutex
	var connects []string
	connect := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		connects = append(connects, addr)
		mu.Unlock()
		if addr != "192.0.2.10:80" {
			return nil, fmt.Errorf("test network: no route to %s", addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	fo := fetch.WithConnect(fetch.Options{Timeout: 5 * time.Second, ConnectTimeout: time.Second,
		Resolver: tableResolver{"www.example.test": "192.0.2.10", "intranet.test": "10.20.30.40"}}, connect)
	fetcher := fetch.New(fo)
	t.Cleanup(fetcher.Close)

	db, err := storage.Open(filepath.Join(t.TempDir(), "crawl.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	opts := crawl.DefaultOptions()
	for _, p := range []string{"/to-loopback", "/to-name", "/to-spelling", "/to-mapped", "/to-metadata", "/to-public"} {
		opts.Seeds = append(opts.Seeds, "http://www.example.test"+p)
	}
	opts.AllowPrivate = false
	opts.Fetcher = fetcher
	opts.Scope = crawl.ScopeAny
	opts.Workers, opts.Delay, opts.Sitemaps, opts.Retries = 4, 0, false, 0
	opts.StopGrace = 0
	opts.Logger = slog.New(slog.DiscardHandler)
	e, err := crawl.New(opts, backend.File(db))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := e.Run(ctx); err != nil {
		t.Fatalf("run: %v", err)
	}

	got := map[string]store.Result{}
	if err := db.ForEachResult(func(r *store.Result) error { got[r.URL] = *r; return nil }); err != nil {
		t.Fatal(err)
	}
	// A redirect's target is queued as Location resolved by the URL
	// standard: the odd spelling and the mapped form arrive as the
	// addresses they are, and are fetched, and refused, as such.
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	for _, tt := range []struct{ seed, location string }{
		{"/to-loopback", fmt.Sprintf("http://127.0.0.1:%d/secret1", port)},
		{"/to-name", fmt.Sprintf("http://intranet.test:%d/secret2", port)},
		{"/to-spelling", fmt.Sprintf("http://127.0.0.1:%d/secret3", port)},
		{"/to-mapped", fmt.Sprintf("http://[::ffff:7f00:1]:%d/secret4", port)},
		{"/to-metadata", "http://169.254.169.254/latest/meta-data/"},
	} {
		hop := got["http://www.example.test"+tt.seed]
		if hop.Status != http.StatusFound || hop.Location != tt.location {
			t.Errorf("%s: status %d location %q, want 302 to %s", tt.seed, hop.Status, hop.Location, tt.location)
			continue
		}
		r, ok := got[tt.location]
		if !ok {
			t.Errorf("redirect target %s: no result, want one classed blocked", tt.location)
			continue
		}
		if r.ErrorClass != "blocked" || r.Status != 0 {
			t.Errorf("redirect target %s: class %q status %d error %q, want blocked with no response", tt.location, r.ErrorClass, r.Status, r.Error)
		}
	}
	if r := got["http://www.example.test/landing"]; r.Status != http.StatusOK || r.Title != "landing" {
		t.Errorf("public redirect target: status %d title %q class %q, want it fetched", r.Status, r.Title, r.ErrorClass)
	}
	if n := secrets.Load(); n != 0 {
		t.Errorf("internal paths were served %d times, want none", n)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, addr := range connects {
		if addr != "192.0.2.10:80" {
			t.Errorf("connect to %s: only the public-looking site may be connected to", addr)
		}
	}
}
