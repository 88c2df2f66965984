package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"breakwater/fetch/fetchtest"
)

// backend is a site behind the test proxies: it answers with the protocol
// it spoke and records what reached it.
type backend struct {
	srv  *httptest.Server
	addr string // 127.0.0.1:port
	mu   sync.Mutex
	seen []*http.Request
}

func newBackend(t *testing.T, useTLS bool) *backend {
	t.Helper()
	b := &backend{}
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.seen = append(b.seen, r.Clone(context.Background()))
		b.mu.Unlock()
		w.Write([]byte(r.Proto))
	}))
	if useTLS {
		b.srv.EnableHTTP2 = true
		b.srv.StartTLS()
	} else {
		b.srv.Start()
	}
	t.Cleanup(b.srv.Close)
	b.addr = b.srv.Listener.Addr().String()
	return b
}

func (b *backend) requests() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.seen)
}

// upstream maps the targets named in a test to loopback backends; any
// other target is dialled as asked (the test proxies dial only loopback).
func upstream(m map[string]string) func(string) string {
	return func(target string) string {
		if addr, ok := m[target]; ok {
			return addr
		}
		return target
	}
}

// testDNS stands in for the resolver the guard asks, so no test asks the
// machine's: names it does not list do not exist.
var testDNS = map[string][]string{
	"www.example.com":      {"93.184.216.34"},
	"example.com":          {"93.184.216.34"},
	"intranet.example.com": {"10.1.2.3"},
	"mixed.example.com":    {"93.184.216.34", "192.168.0.1"},
	"metadata.example.com": {"::ffff:169.254.169.254"},
}

func fakeLookup(calls *atomic.Int32) func(context.Context, string) ([]netip.Addr, error) {
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		if calls != nil {
			calls.Add(1)
		}
		var ips []netip.Addr
		for _, s := range testDNS[host] {
			ips = append(ips, netip.MustParseAddr(s))
		}
		if ips == nil {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return ips, nil
	}
}

// proxiedFetcher is a fetcher through proxyURL whose guard asks testDNS.
func proxiedFetcher(t *testing.T, o Options, proxyURL string) *Fetcher {
	t.Helper()
	p, err := ParseProxy(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	o.Proxy = p
	f := newTestFetcher(t, o)
	f.router.lookup = fakeLookup(nil)
	return f
}

// trustTLS makes f trust the httptest certificate (127.0.0.1, example.com
// and *.example.com).
func trustTLS(f *Fetcher, srv *httptest.Server) {
	f.transport.current().TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
}

func wantOK(t *testing.T, r *Response, proto string) {
	t.Helper()
	if r.Err != nil || r.Status != 200 || string(r.Body) != proto {
		t.Fatalf("fetch %s: status %d body %q err %v; want 200 %s", r.URL, r.Status, r.Body, r.Err, proto)
	}
}

func wantForwarded(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("proxy forwarded %q, want %q", got, want)
	}
}

// A crawl-style fetch through an HTTP proxy reaches the site: absolute-form
// for http, kept alive, with the fetcher's headers and none of the proxy's.
func TestFetchThroughHTTPProxy(t *testing.T) {
	t.Parallel()
	site := newBackend(t, false)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{User: "crawler", Password: "s3cret"})
	o := testOptions()
	o.Header = http.Header{"X-Crawl-Run": {"7"}}
	f := proxiedFetcher(t, o, "http://crawler:s3cret@"+px.Addr)
	url := "http://" + site.addr + "/page"
	wantOK(t, f.Get(context.Background(), url), "HTTP/1.1")
	wantOK(t, f.Get(context.Background(), url), "HTTP/1.1")
	wantForwarded(t, px.Forwarded(), "GET "+url, "GET "+url)
	if px.Conns() != 1 {
		t.Errorf("%d connections to the proxy for two fetches, want 1 (kept alive)", px.Conns())
	}
	r := site.requests()[0]
	if r.Header.Get("User-Agent") != "Breakwater-test/1.0" || r.Header.Get("X-Crawl-Run") != "7" || r.Header.Get("Proxy-Authorization") != "" {
		t.Errorf("site saw User-Agent %q X-Crawl-Run %q Proxy-Authorization %q", r.Header.Get("User-Agent"),
			r.Header.Get("X-Crawl-Run"), r.Header.Get("Proxy-Authorization"))
	}
}

// A proxy refusing our credentials is a 407 for an http target (a status
// is data) and a failed exchange for an https one (the tunnel never opens).
func TestFetchThroughHTTPProxyWrongPassword(t *testing.T) {
	t.Parallel()
	site, tlsSite := newBackend(t, false), newBackend(t, true)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{User: "crawler", Password: "s3cret"})
	f := proxiedFetcher(t, testOptions(), "http://crawler:wrong@"+px.Addr)
	trustTLS(f, tlsSite.srv)
	if r := f.Get(context.Background(), "http://"+site.addr+"/"); r.Err != nil || r.Status != 407 {
		t.Errorf("http target: status %d err %v, want 407", r.Status, r.Err)
	}
	if r := f.Get(context.Background(), "https://"+tlsSite.addr+"/"); r.Err == nil || !strings.Contains(r.Err.Error(), "Proxy Authentication Required") {
		t.Errorf("https target: status %d err %v, want the proxy's refusal", r.Status, r.Err)
	}
	wantForwarded(t, px.Forwarded())
	if len(site.requests())+len(tlsSite.requests()) != 0 {
		t.Error("a request reached a site past a proxy that refused us")
	}
}

// An https target goes through a CONNECT tunnel (HTTP/2 inside it) to the
// address the guard checked, the name kept for TLS and Host; the tunnel
// is the target's connection: tracked under its host, closed by CloseHost.
func TestFetchHTTPSThroughCONNECT(t *testing.T) {
	t.Parallel()
	site := newBackend(t, true)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: upstream(map[string]string{"93.184.216.34:443": site.addr})})
	o := testOptions()
	o.AllowPrivate = false // www.example.com is public in testDNS; the proxy may be private
	f := proxiedFetcher(t, o, px.URL)
	trustTLS(f, site.srv)
	wantOK(t, f.Get(context.Background(), "https://www.example.com/a"), "HTTP/2.0")
	wantOK(t, f.Get(context.Background(), "https://www.example.com/b"), "HTTP/2.0")
	wantForwarded(t, px.Forwarded(), "CONNECT 93.184.216.34:443")
	if r := site.requests()[0]; r.Host != "www.example.com" || r.TLS == nil || r.TLS.ServerName != "www.example.com" {
		t.Errorf("the site saw Host %q and TLS %v; want www.example.com for both", r.Host, r.TLS)
	}
	if n := f.conns.open(); n != 1 {
		t.Fatalf("%d connections tracked, want the one tunnel", n)
	}
	f.CloseHost("www.example.com")
	if n := f.conns.open(); n != 0 {
		t.Fatalf("%d connections tracked after CloseHost, want 0", n)
	}
	// As in TestFetchTracksTLSConnections, the HTTP/2 pool sees the close a
	// moment later.
	for tries := 1; ; tries++ {
		r := f.Get(context.Background(), "https://www.example.com/c")
		if r.Err == nil {
			break
		}
		if !errors.Is(r.Err, net.ErrClosed) || tries == 100 {
			t.Fatalf("fetch %d after CloseHost: %v", tries, r.Err)
		}
		time.Sleep(time.Millisecond)
	}
	wantForwarded(t, px.Forwarded(), "CONNECT 93.184.216.34:443", "CONNECT 93.184.216.34:443")
}

// An https:// proxy is spoken to over TLS, HTTP/1.1 only though it offers
// h2; an https target still gets HTTP/2 inside the tunnel.
func TestFetchThroughHTTPSProxy(t *testing.T) {
	t.Parallel()
	site, tlsSite := newBackend(t, false), newBackend(t, true)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{TLS: tlsSite.srv.TLS, User: "crawler", Password: "s3cret"})
	f := proxiedFetcher(t, testOptions(), "https://crawler:s3cret@"+px.Addr)
	trustTLS(f, tlsSite.srv)
	wantOK(t, f.Get(context.Background(), "http://"+site.addr+"/"), "HTTP/1.1")
	wantOK(t, f.Get(context.Background(), "https://"+tlsSite.addr+"/"), "HTTP/2.0")
	wantOK(t, f.Get(context.Background(), "http://"+site.addr+"/"), "HTTP/1.1")
	wantForwarded(t, px.Forwarded(), "GET http://"+site.addr+"/", "CONNECT "+tlsSite.addr, "GET http://"+site.addr+"/")
	if px.Conns() != 2 {
		t.Errorf("%d connections to the proxy, want 2 (one shared, one tunnel)", px.Conns())
	}
}

// Behind a proxy the guard checks the target here, before the proxy is
// asked: a target with any blocked address is refused and the proxy sees
// nothing; the proxy's own loopback address is allowed.
func TestFetchThroughProxyGuardsTheTarget(t *testing.T) {
	t.Parallel()
	site, tlsSite := newBackend(t, false), newBackend(t, true)
	for _, tt := range []struct {
		url        string
		wantBlock  string // "addr reason", "" when the fetch must succeed
		wantDNSErr bool
	}{
		{"http://127.0.0.1:1/", "127.0.0.1 loopback", false},
		{"http://[::1]:1/", "::1 loopback", false},
		{"http://10.0.0.1/", "10.0.0.1 private", false},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 link-local", false},
		{"https://10.0.0.1/", "10.0.0.1 private", false},
		{"http://intranet.example.com/", "10.1.2.3 private", false},
		{"http://mixed.example.com/", "192.168.0.1 private", false},
		{"http://metadata.example.com/", "169.254.169.254 link-local", false},
		{"http://nowhere.example.com/", "", true}, // the guard cannot vouch for it
		{"http://93.184.216.34/", "", false},
		{"http://www.example.com/", "", false},
		{"https://www.example.com/", "", false},
	} {
		t.Run(tt.url, func(t *testing.T) {
			px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: upstream(map[string]string{
				"93.184.216.34:80": site.addr, "93.184.216.34:443": tlsSite.addr})})
			o := testOptions()
			o.AllowPrivate = false
			f := proxiedFetcher(t, o, px.URL)
			trustTLS(f, tlsSite.srv)
			r := f.Get(context.Background(), tt.url)
			var be *BlockedAddressError
			switch {
			case tt.wantBlock != "":
				if !errors.Is(r.Err, ErrBlockedAddress) || !errors.As(r.Err, &be) || be.Addr.String()+" "+be.Reason != tt.wantBlock {
					t.Fatalf("err = %v, want %s blocked", r.Err, tt.wantBlock)
				}
			case tt.wantDNSErr:
				var dnsErr *net.DNSError
				if !errors.As(r.Err, &dnsErr) {
					t.Fatalf("err = %v, want the lookup's", r.Err)
				}
			default:
				if r.Err != nil || r.Status != 200 {
					t.Fatalf("status %d err %v, want through", r.Status, r.Err)
				}
				return
			}
			if r.Status != 0 || px.Conns() != 0 || len(px.Forwarded()) != 0 {
				t.Errorf("status %d, %d connections to the proxy, forwarded %q; want nothing", r.Status, px.Conns(), px.Forwarded())
			}
		})
	}
}

// With AllowPrivate a private target goes through the proxy, looked up by
// nobody here.
func TestFetchThroughProxyAllowPrivate(t *testing.T) {
	t.Parallel()
	site := newBackend(t, false)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: upstream(map[string]string{"intranet.example.com:80": site.addr})})
	f := proxiedFetcher(t, testOptions(), px.URL)
	var lookups atomic.Int32
	f.router.lookup = fakeLookup(&lookups)
	wantOK(t, f.Get(context.Background(), "http://"+site.addr+"/"), "HTTP/1.1")
	wantOK(t, f.Get(context.Background(), "http://intranet.example.com/"), "HTTP/1.1")
	if lookups.Load() != 0 {
		t.Errorf("%d lookups, want none: the proxy resolves", lookups.Load())
	}
}

func TestFetchThroughSOCKS5(t *testing.T) {
	t.Parallel()
	site := newBackend(t, false)
	ups := upstream(map[string]string{"93.184.216.34:80": site.addr, "www.example.com:80": site.addr})
	for _, tt := range []struct {
		name, scheme, user string
		allowPrivate       bool   // socks5h is refused without
		wantConnect        string // what the proxy was asked to connect to
	}{
		{"socks5 resolves here", "socks5", "", false, "www.example.com:80 as 93.184.216.34:80"},
		{"socks5h hands the name on", "socks5h", "", true, "www.example.com:80"},
		{"socks5 with a password", "socks5", "crawler", false, "www.example.com:80 as 93.184.216.34:80"},
		{"socks5h with a password", "socks5h", "crawler", true, "www.example.com:80"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			px := fetchtest.NewSOCKS5(t, fetchtest.ProxyOptions{User: tt.user, Password: "s3cret", Upstream: ups})
			o := testOptions()
			o.AllowPrivate = tt.allowPrivate
			f := proxiedFetcher(t, o, px.URL(tt.scheme))
			wantOK(t, f.Get(context.Background(), "http://www.example.com/"), "HTTP/1.1")
			wantOK(t, f.Get(context.Background(), "http://www.example.com/again"), "HTTP/1.1")
			want := tt.wantConnect
			if _, ip, ok := strings.Cut(want, " as "); ok {
				want = ip
			}
			wantForwarded(t, px.Forwarded(), "CONNECT "+want)
			// The tunnel is the target's connection.
			if n := f.conns.closeHost("www.example.com"); n != 1 {
				t.Errorf("CloseHost closed %d connections, want the tunnel", n)
			}
			wantOK(t, f.Get(context.Background(), "http://www.example.com/"), "HTTP/1.1")
			wantForwarded(t, px.Forwarded(), "CONNECT "+want, "CONNECT "+want)
		})
	}
}

func TestFetchThroughSOCKS5Refusals(t *testing.T) {
	t.Parallel()
	site := newBackend(t, false)
	px := fetchtest.NewSOCKS5(t, fetchtest.ProxyOptions{User: "crawler", Password: "s3cret",
		Upstream: upstream(map[string]string{"www.example.com:80": site.addr, "intranet.example.com:80": site.addr})})
	o := testOptions()
	o.AllowPrivate = false
	t.Run("wrong password", func(t *testing.T) {
		f := proxiedFetcher(t, o, "socks5://crawler:wrong@"+px.Addr)
		if r := f.Get(context.Background(), "http://www.example.com/"); r.Err == nil || !strings.Contains(r.Err.Error(), "authentication failed") {
			t.Errorf("err = %v, want authentication failed", r.Err)
		}
	})
	before := px.Conns()
	// socks5 checks the name and refuses it; socks5h, which would have
	// the proxy resolve it again, is refused whatever the target.
	for scheme, want := range map[string]error{"socks5": ErrBlockedAddress, "socks5h": ErrProxyResolvesNames} {
		f := proxiedFetcher(t, o, px.URL(scheme))
		if r := f.Get(context.Background(), "http://intranet.example.com/"); !errors.Is(r.Err, want) {
			t.Errorf("%s to a private target: err = %v, want %v", scheme, r.Err, want)
		}
	}
	if px.Conns() != before || len(site.requests()) != 0 || len(px.Forwarded()) != 0 {
		t.Errorf("%d connections to the proxy, %d requests to the site, forwarded %q; want none",
			px.Conns()-before, len(site.requests()), px.Forwarded())
	}
	// socks5h with AllowPrivate looks nothing up: the proxy resolves.
	o.AllowPrivate = true
	f := proxiedFetcher(t, o, px.URL("socks5h"))
	var lookups atomic.Int32
	f.router.lookup = fakeLookup(&lookups)
	wantOK(t, f.Get(context.Background(), "http://intranet.example.com/"), "HTTP/1.1")
	if lookups.Load() != 0 {
		t.Errorf("socks5h with AllowPrivate: %d lookups, want none", lookups.Load())
	}
}

// Not parallel: t.Setenv. In env mode HTTP_PROXY carries http targets,
// NO_PROXY ones and loopback ones go direct, through the dial guard.
func TestFetchProxyFromEnvironment(t *testing.T) {
	site := newBackend(t, false)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: upstream(map[string]string{"93.184.216.34:80": site.addr})})
	clearProxyEnv(t)
	t.Setenv("HTTP_PROXY", px.URL)
	t.Setenv("NO_PROXY", "10.9.9.9")
	o := testOptions()
	o.AllowPrivate = false
	f := proxiedFetcher(t, o, "env")
	wantOK(t, f.Get(context.Background(), "http://www.example.com/"), "HTTP/1.1")
	wantForwarded(t, px.Forwarded(), "CONNECT 93.184.216.34:80") // the guard is on: tunnelled to the checked address

	// 10.9.9.9 is in NO_PROXY: dialled direct and refused by the dial-time
	// check, before any packet; 10.9.9.8 is refused before the proxy.
	var op *net.OpError
	if r := f.Get(context.Background(), "http://10.9.9.9/"); !errors.Is(r.Err, ErrBlockedAddress) || !errors.As(r.Err, &op) || op.Op != "dial" {
		t.Errorf("NO_PROXY target: err = %v, want a direct dial refused", r.Err)
	}
	if r := f.Get(context.Background(), "http://10.9.9.8/"); !errors.Is(r.Err, ErrBlockedAddress) || !strings.Contains(r.Err.Error(), "proxy target 10.9.9.8") {
		t.Errorf("proxied target: err = %v, want it refused before the proxy", r.Err)
	}
	// A SOCKS5 proxy named in the environment is handed the checked
	// address too; its tunnels are the target's.
	socks := fetchtest.NewSOCKS5(t, fetchtest.ProxyOptions{Upstream: upstream(map[string]string{"93.184.216.34:80": site.addr})})
	t.Setenv("HTTP_PROXY", socks.URL("socks5"))
	f = proxiedFetcher(t, o, "env")
	wantOK(t, f.Get(context.Background(), "http://www.example.com/"), "HTTP/1.1")
	wantForwarded(t, socks.Forwarded(), "CONNECT 93.184.216.34:80")
	if n := f.conns.closeHost("www.example.com"); n != 1 {
		t.Errorf("CloseHost closed %d connections, want the SOCKS5 tunnel", n)
	}
	if r := f.Get(context.Background(), "http://intranet.example.com/"); !errors.Is(r.Err, ErrBlockedAddress) || socks.Conns() != 1 {
		t.Errorf("private target through SOCKS5 from the environment: err %v, %d connections; want blocked, 1", r.Err, socks.Conns())
	}

	// Loopback is never proxied from the environment (net/http's rule).
	o.AllowPrivate = true
	f = proxiedFetcher(t, o, "env")
	wantOK(t, f.Get(context.Background(), "http://"+site.addr+"/"), "HTTP/1.1")
	wantForwarded(t, px.Forwarded(), "CONNECT 93.184.216.34:80")
	if n := f.conns.open(); n != 1 {
		t.Errorf("%d connections tracked, want the direct one", n)
	}
}

// A refused host's request never reaches the proxy, whatever the route;
// other hosts' requests go through.
func TestRefuseUnderProxy(t *testing.T) {
	t.Parallel()
	site, tlsSite := newBackend(t, false), newBackend(t, true)
	ups := upstream(map[string]string{"down.example.com:80": site.addr, "down.example.com:443": tlsSite.addr,
		"www.example.com:80": site.addr, "www.example.com:443": tlsSite.addr})
	refuseDown := func(host string) bool { return host == "down.example.com" }
	for _, tt := range []struct {
		name, scheme string
		socks        bool
	}{
		{"http through an HTTP proxy", "http", false},
		{"https through CONNECT", "https", false},
		{"http through SOCKS5", "http", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var px interface{ Conns() int }
			var proxyURL string
			if tt.socks {
				s := fetchtest.NewSOCKS5(t, fetchtest.ProxyOptions{Upstream: ups})
				px, proxyURL = s, s.URL("socks5h")
			} else {
				h := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: ups})
				px, proxyURL = h, h.URL
			}
			o := testOptions()
			o.Refuse = refuseDown
			f := proxiedFetcher(t, o, proxyURL)
			trustTLS(f, tlsSite.srv)
			if r := f.Get(context.Background(), tt.scheme+"://down.example.com/"); !errors.Is(r.Err, ErrHostRefused) {
				t.Fatalf("refused host: err = %v, want ErrHostRefused", r.Err)
			}
			if px.Conns() != 0 {
				t.Errorf("%d connections to the proxy for a refused host, want 0", px.Conns())
			}
			if r := f.Get(context.Background(), tt.scheme+"://www.example.com/"); r.Err != nil {
				t.Errorf("other host: %v", r.Err)
			}
		})
	}
}

// A tunnel that completes for a host whose circuit opened while it was
// being dialled is closed before the CONNECT is sent.
func TestRefuseTunnelOpenedWhileDialling(t *testing.T) {
	t.Parallel()
	tlsSite := newBackend(t, true)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{})
	var open atomic.Bool
	o := testOptions()
	o.Refuse = func(string) bool { return open.Load() }
	f := proxiedFetcher(t, o, px.URL)
	trustTLS(f, tlsSite.srv)
	dial := f.router.forward
	f.router.forward = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		open.Store(true) // the circuit opens as the connection completes
		return c, err
	}
	if r := f.Get(context.Background(), "https://"+tlsSite.addr+"/"); !errors.Is(r.Err, ErrHostRefused) {
		t.Fatalf("err = %v, want ErrHostRefused", r.Err)
	}
	wantForwarded(t, px.Forwarded())
	if n := f.conns.open(); n != 0 {
		t.Errorf("%d connections tracked, want 0", n)
	}
}

// Behind an HTTP proxy, http targets share the proxy's connections, so
// CloseHost ends the host's requests and leaves the connections serving
// other hosts alone.
func TestCloseHostUnderHTTPProxy(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	release := make(chan struct{})
	slow := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	other := newBackend(t, false)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{})
	t.Cleanup(func() { close(release) }) // before the servers' Close waits
	f := proxiedFetcher(t, testOptions(), px.URL)
	slowKey := strings.TrimPrefix(slow.URL, "http://")

	done := make(chan *Response)
	go func() { done <- f.Get(context.Background(), slow.URL) }()
	<-entered
	wantOK(t, f.Get(context.Background(), "http://"+other.addr+"/"), "HTTP/1.1") // on a second connection
	if n := f.conns.open(); n != 3 {
		t.Fatalf("%d tracked, want 2 connections to the proxy and the slow request", n)
	}
	if n := f.conns.closeHost(slowKey); n != 1 {
		t.Errorf("CloseHost ended %d, want the one request", n)
	}
	select {
	case r := <-done:
		if !errors.Is(r.Err, ErrHostRefused) {
			t.Errorf("the slow request ended with %v, want ErrHostRefused", r.Err)
		}
	case <-time.After(hostileDeadline):
		t.Fatal("CloseHost did not end the request")
	}
	wantOK(t, f.Get(context.Background(), "http://"+other.addr+"/"), "HTTP/1.1")
	if px.Conns() != 2 {
		t.Errorf("%d connections to the proxy, want 2: the other host's stayed open", px.Conns())
	}
}

// The transport counts all connections to an HTTP proxy as one host's; a
// per-host cap must not make the crawl one request at a time.
func TestFetchThroughProxyIsNotCappedPerHost(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	wg.Add(2)
	both := make(chan struct{})
	go func() { wg.Wait(); close(both) }()
	h := func(w http.ResponseWriter, r *http.Request) {
		wg.Done()
		select {
		case <-both:
		case <-time.After(hostileDeadline):
			w.WriteHeader(http.StatusGatewayTimeout)
		}
	}
	a, b := newTestServer(t, h), newTestServer(t, h)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{})
	o := testOptions()
	o.MaxConnsPerHost = 1
	f := proxiedFetcher(t, o, px.URL)
	results := make(chan *Response, 2)
	for _, u := range []string{a.URL, b.URL} {
		go func() { results <- f.Get(context.Background(), u) }()
	}
	for range 2 {
		if r := <-results; r.Err != nil || r.Status != 200 {
			t.Errorf("%s: status %d err %v; want both requests in flight at once", r.URL, r.Status, r.Err)
		}
	}
}

// Cookies from a cookies.txt go to the hosts and paths they name, the
// secure one over https only, over a real exchange: the proxy lets the
// test name example.com and reach loopback.
func TestFetchSendsLoadedCookies(t *testing.T) {
	t.Parallel()
	site, tlsSite := newBackend(t, false), newBackend(t, true)
	ups := map[string]string{}
	for _, host := range []string{"www.example.com", "example.com", "other.example.org", "example.org"} {
		ups[host+":80"], ups[host+":443"] = site.addr, tlsSite.addr
	}
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: upstream(ups)})
	o := testOptions()
	o.Jar = loadTestCookies(t)
	f := proxiedFetcher(t, o, px.URL)
	trustTLS(f, tlsSite.srv)
	for _, tt := range []struct{ url, want string }{
		{"http://www.example.com/", "host_only=1; all_subdomains=2"},
		{"https://www.example.com/", "host_only=1; all_subdomains=2; secure_http_only=4"},
		{"http://example.com/shop/cart", "shop_path=3; all_subdomains=2"},
		{"http://example.com/", "all_subdomains=2"},
		{"http://other.example.org/", "elsewhere=6"},
		{"http://example.org/", ""},
	} {
		sites := [2]int{len(site.requests()), len(tlsSite.requests())}
		r := f.Get(context.Background(), tt.url)
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		var got *http.Request
		if strings.HasPrefix(tt.url, "https") {
			got = tlsSite.requests()[sites[1]]
		} else {
			got = site.requests()[sites[0]]
		}
		if c := got.Header.Get("Cookie"); !sameCookies(c, tt.want) {
			t.Errorf("%s carried Cookie %q, want %q", tt.url, c, tt.want)
		}
	}
}

// sameCookies compares Cookie headers ignoring order among cookies whose
// paths are equally long (the jar orders by path length, then age).
func sameCookies(a, b string) bool {
	split := func(s string) []string {
		parts := strings.Split(s, "; ")
		slices.Sort(parts)
		return parts
	}
	return slices.Equal(split(a), split(b))
}

// The zero Proxy goes direct, through the dial guard and tracking.
func TestZeroProxyIsDirect(t *testing.T) {
	t.Parallel()
	site := newBackend(t, false)
	o := testOptions()
	o.Proxy = &Proxy{}
	f := newTestFetcher(t, o)
	wantOK(t, f.Get(context.Background(), "http://"+site.addr+"/"), "HTTP/1.1")
	if n := f.conns.closeHost(site.addr); n != 1 || o.Proxy.String() != "direct" {
		t.Errorf("CloseHost closed %d, String %q; want 1, direct", n, o.Proxy.String())
	}
	o.AllowPrivate = false
	if r := newTestFetcher(t, o).Get(context.Background(), "http://"+site.addr+"/"); !errors.Is(r.Err, ErrBlockedAddress) {
		t.Errorf("err = %v, want ErrBlockedAddress", r.Err)
	}
}
