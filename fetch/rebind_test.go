package fetch

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"breakwater/fetch/fetchtest"
)

// rebindName is a name whose DNS rebinds: public to the guard's first
// lookup, loopback to any lookup after it, and (through the test proxies'
// Upstream) an internal service to a proxy that resolves it itself.
const rebindName = "rebind.example.com"

// rebindPublic is what rebindName first answers: a documentation address
// no test dials; the test proxies route it to a loopback "public" site.
var rebindPublic = netip.MustParseAddr("198.51.100.7")

// rebindingResolver answers rebindName with rebindPublic the first time
// and 127.0.0.1 every time after, and counts the lookups.
type rebindingResolver struct{ calls atomic.Int32 }

func (r *rebindingResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if host != rebindName {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	if r.calls.Add(1) == 1 {
		return []netip.Addr{rebindPublic}, nil
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

// testProxy is what the rebinding tests read of either test proxy.
type testProxy interface {
	Asked() []string
	Forwarded() []string
	Conns() int
}

// rebindSites are the loopback sites behind the test proxies: public ones
// for the checked address, and internal ones for the name, which a proxy
// that resolved rebindName itself would reach.
type rebindSites struct {
	public, publicTLS, internal, internalTLS *backend
}

func newRebindSites(t *testing.T) *rebindSites {
	return &rebindSites{newBackend(t, false), newBackend(t, true), newBackend(t, false), newBackend(t, true)}
}

func (s *rebindSites) upstream() fetchtest.ProxyOptions {
	return fetchtest.ProxyOptions{Upstream: upstream(map[string]string{
		"198.51.100.7:80": s.public.addr, "198.51.100.7:443": s.publicTLS.addr,
		rebindName + ":80": s.internal.addr, rebindName + ":443": s.internalTLS.addr})}
}

// checkRebinding fetches rebindName's url through proxyURL with the guard
// on, and checks that the proxy was asked for the checked address only
// (wantAsk) and that the request reached the public site under its name;
// then, with the name rebound to loopback, that a new connection is
// refused here. An empty wantAsk means the proxy must be refused
// outright with ErrProxyResolvesNames.
func checkRebinding(t *testing.T, sites *rebindSites, px testProxy, proxyURL, url, wantAsk string) {
	t.Helper()
	p, err := ParseProxy(proxyURL)
	if err != nil {
		t.Fatal(err)
	}
	res := &rebindingResolver{}
	o := testOptions()
	o.AllowPrivate, o.Resolver, o.Proxy = false, res, p
	f := newTestFetcher(t, o)
	trustTLS(f, sites.publicTLS.srv)
	defer func() {
		if n := len(sites.internal.requests()) + len(sites.internalTLS.requests()); n != 0 {
			t.Errorf("%d requests reached the internal address the name rebinds to", n)
		}
	}()

	r := f.Get(context.Background(), url)
	if wantAsk == "" {
		if !errors.Is(r.Err, ErrProxyResolvesNames) || !strings.Contains(r.Err.Error(), rebindName) {
			t.Errorf("err = %v, want ErrProxyResolvesNames naming the target", r.Err)
		}
		if px.Conns() != 0 || res.calls.Load() != 0 {
			t.Errorf("%d connections to the proxy, %d lookups; want none", px.Conns(), res.calls.Load())
		}
		return
	}
	site := sites.public
	if strings.HasPrefix(url, "https:") {
		site = sites.publicTLS
	}
	if r.Err != nil || r.Status != 200 || len(site.requests()) != 1 {
		t.Fatalf("status %d err %v, %d requests at the checked address; want 200 there", r.Status, r.Err, len(site.requests()))
	}
	if got := site.requests()[0]; got.Host != rebindName || got.RequestURI != "/page" ||
		got.TLS != nil && got.TLS.ServerName != rebindName {
		t.Errorf("the site saw %s with Host %q, TLS %v; want /page under %s", got.RequestURI, got.Host, got.TLS, rebindName)
	}
	if n := res.calls.Load(); n != 1 {
		t.Errorf("%d lookups of %s, want 1: the guard's answer is the address reached", n, rebindName)
	}
	if got := px.Asked(); !slices.Equal(got, []string{wantAsk}) {
		t.Errorf("the proxy was asked for %q, want only %q", got, wantAsk)
	}

	// The name now answers loopback: the next connection is refused here,
	// before the proxy is asked for anything.
	f.CloseIdle()
	r = f.Get(context.Background(), url)
	var be *BlockedAddressError
	if !errors.As(r.Err, &be) || be.Addr.String() != "127.0.0.1" || be.Host != rebindName {
		t.Errorf("after rebinding: err = %v, want 127.0.0.1 of %s blocked", r.Err, rebindName)
	}
	if got := px.Asked(); len(got) != 1 {
		t.Errorf("after rebinding the proxy was asked for %q, want nothing more", got)
	}
}

// DNS rebinding through a proxy: the guard's lookup is the address the
// request reaches. An HTTP proxy is asked for a tunnel to the checked
// address, for http targets too, and a SOCKS5 proxy is given it; socks5h,
// which would resolve the name again, is refused. No proxy is ever handed
// the name, so the internal service behind it is never reached.
func TestFetchThroughProxyPinsTheCheckedAddress(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, url, wantAsk string
		proxy              proxyMaker
	}{
		{"https through CONNECT", "https://" + rebindName + "/page", "CONNECT 198.51.100.7:443", httpProxyFor(false)},
		{"http through CONNECT", "http://" + rebindName + "/page", "CONNECT 198.51.100.7:80", httpProxyFor(false)},
		{"http through an https proxy", "http://" + rebindName + "/page", "CONNECT 198.51.100.7:80", httpProxyFor(true)},
		{"https through an https proxy", "https://" + rebindName + "/page", "CONNECT 198.51.100.7:443", httpProxyFor(true)},
		{"socks5", "http://" + rebindName + "/page", "CONNECT 198.51.100.7:80", socksFor("socks5")},
		{"socks5 to https", "https://" + rebindName + "/page", "CONNECT 198.51.100.7:443", socksFor("socks5")},
		{"socks5h is refused", "http://" + rebindName + "/page", "", socksFor("socks5h")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sites := newRebindSites(t)
			px, proxyURL := tt.proxy(t, sites)
			checkRebinding(t, sites, px, proxyURL, tt.url, tt.wantAsk)
		})
	}
}

// proxyMaker starts a test proxy in front of sites and returns it with
// the --proxy URL to reach it by.
type proxyMaker func(t *testing.T, sites *rebindSites) (testProxy, string)

func httpProxyFor(overTLS bool) proxyMaker {
	return func(t *testing.T, sites *rebindSites) (testProxy, string) {
		o := sites.upstream()
		o.User, o.Password = "crawler", "s3cret"
		if overTLS {
			o.TLS = sites.publicTLS.srv.TLS
		}
		px := fetchtest.NewHTTPProxy(t, o)
		scheme, addr, _ := strings.Cut(px.URL, "://")
		return px, scheme + "://crawler:s3cret@" + addr
	}
}

func socksFor(scheme string) proxyMaker {
	return func(t *testing.T, sites *rebindSites) (testProxy, string) {
		px := fetchtest.NewSOCKS5(t, sites.upstream())
		return px, px.URL(scheme)
	}
}

// Not parallel: t.Setenv. The proxies the environment names follow the
// same rules, each by its scheme.
func TestFetchThroughProxyFromEnvironmentPins(t *testing.T) {
	for _, tt := range []struct {
		name, variable, url, wantAsk string
		proxy                        proxyMaker
	}{
		{"HTTPS_PROXY http", "HTTPS_PROXY", "https://" + rebindName + "/page", "CONNECT 198.51.100.7:443", httpProxyFor(false)},
		{"HTTP_PROXY http", "HTTP_PROXY", "http://" + rebindName + "/page", "CONNECT 198.51.100.7:80", httpProxyFor(false)},
		{"HTTP_PROXY socks5", "HTTP_PROXY", "http://" + rebindName + "/page", "CONNECT 198.51.100.7:80", socksFor("socks5")},
		{"HTTP_PROXY socks5h", "HTTP_PROXY", "http://" + rebindName + "/page", "", socksFor("socks5h")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sites := newRebindSites(t)
			px, proxyURL := tt.proxy(t, sites)
			clearProxyEnv(t)
			t.Setenv(tt.variable, proxyURL)
			checkRebinding(t, sites, px, "env", tt.url, tt.wantAsk)
		})
	}
}

// With AllowPrivate nothing is pinned, as before: an HTTP proxy gets the
// name (absolute-form for http, CONNECT for https), socks5h the name,
// socks5 the address looked up here, and the guard looks nothing up for
// a proxy that resolves names.
func TestFetchThroughProxyAllowPrivateNamesTheTarget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, url   string
		proxy       proxyMaker
		wantAsk     string
		wantLookups int32
	}{
		{"http absolute-form", "http://" + rebindName + "/page", httpProxyFor(false), "GET http://" + rebindName + "/page", 0},
		{"https through CONNECT", "https://" + rebindName + "/page", httpProxyFor(false), "CONNECT " + rebindName + ":443", 0},
		{"socks5h", "http://" + rebindName + "/page", socksFor("socks5h"), "CONNECT " + rebindName + ":80", 0},
		{"socks5", "http://" + rebindName + "/page", socksFor("socks5"), "CONNECT 198.51.100.7:80", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sites := newRebindSites(t)
			px, proxyURL := tt.proxy(t, sites)
			p, err := ParseProxy(proxyURL)
			if err != nil {
				t.Fatal(err)
			}
			res := &rebindingResolver{}
			o := testOptions()
			o.Resolver, o.Proxy = res, p
			f := newTestFetcher(t, o)
			trustTLS(f, sites.publicTLS.srv)
			if r := f.Get(context.Background(), tt.url); r.Err != nil || r.Status != 200 {
				t.Fatalf("status %d err %v, want 200", r.Status, r.Err)
			}
			if got := px.Asked(); !slices.Equal(got, []string{tt.wantAsk}) || res.calls.Load() != tt.wantLookups {
				t.Errorf("the proxy was asked for %q after %d lookups, want %q after %d", got, res.calls.Load(), tt.wantAsk, tt.wantLookups)
			}
		})
	}
}

// A name with several public addresses: a proxy that cannot reach one (502)
// is asked for the next, on a new connection; a proxy that refuses us
// (403) is not asked again, and the error names the target and why an
// http target was tunnelled.
func TestTunnelTriesEachCheckedAddress(t *testing.T) {
	t.Parallel()
	site := newBackend(t, false)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{Upstream: upstream(map[string]string{"203.0.113.9:80": site.addr})})
	res := &fakeResolver{names: map[string][]string{"two.example.com": {"203.0.113.8", "203.0.113.9"}}}
	p, err := ParseProxy(px.URL)
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions()
	o.AllowPrivate, o.Resolver, o.Proxy = false, res, p
	f := newTestFetcher(t, o)
	wantOK(t, f.Get(context.Background(), "http://two.example.com/"), "HTTP/1.1")
	if got := px.Asked(); !slices.Equal(got, []string{"CONNECT 203.0.113.8:80", "CONNECT 203.0.113.9:80"}) {
		t.Errorf("the proxy was asked for %q, want each address in turn", got)
	}

	var asked atomic.Int32
	forbidding := fetchtest.RawServer(t, func(c net.Conn) {
		defer c.Close()
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			asked.Add(1)
			c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"))
		}
	})
	if o.Proxy, err = ParseProxy("http://" + forbidding); err != nil {
		t.Fatal(err)
	}
	r := newTestFetcher(t, o).Get(context.Background(), "http://two.example.com/")
	want := "proxy http://" + forbidding + " answered CONNECT 203.0.113.8:80 (for two.example.com): 403 Forbidden " +
		"(with the address guard on, http targets are tunnelled through CONNECT too"
	var refusal *connectRefusedError
	if !errors.As(r.Err, &refusal) || !strings.Contains(r.Err.Error(), want) || asked.Load() != 1 {
		t.Errorf("err = %v after %d CONNECTs; want one, refused with %q", r.Err, asked.Load(), want)
	}
}

// connect writes the CONNECT the transport would (the target as
// request-target and Host, User-Agent, Proxy-Authorization from the proxy
// URL), hands on bytes the proxy sent past its answer, and gives up on a
// silent proxy when its context ends.
func TestConnectRequest(t *testing.T) {
	t.Parallel()
	p, err := ParseProxy("http://crawler:s3cret@proxy.example.com:3128")
	if err != nil {
		t.Fatal(err)
	}
	r := &router{userAgent: "Breakwater-test/1.0"}
	rt := &route{proxy: p.url, host: "www.example.com", port: "443"}

	client, server := net.Pipe()
	got := make(chan *http.Request, 1)
	go func() {
		req, err := http.ReadRequest(bufio.NewReader(server))
		if err != nil {
			server.Close()
			close(got)
			return
		}
		got <- req
		server.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\nhello"))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hostileDeadline)
	defer cancel()
	tunnel, err := r.connect(ctx, client, rt, "198.51.100.7:443")
	if err != nil {
		t.Fatal(err)
	}
	defer tunnel.Close()
	req := <-got
	if req == nil || req.Method != http.MethodConnect || req.RequestURI != "198.51.100.7:443" || req.Host != "198.51.100.7:443" ||
		req.Header.Get("User-Agent") != "Breakwater-test/1.0" ||
		req.Header.Get("Proxy-Authorization") != "Basic Y3Jhd2xlcjpzM2NyZXQ=" { // crawler:s3cret
		t.Fatalf("proxy got %+v", req)
	}
	buf := make([]byte, 5)
	tunnel.SetReadDeadline(time.Now().Add(hostileDeadline))
	if n, err := tunnel.Read(buf); string(buf[:n]) != "hello" {
		t.Errorf("tunnel read %q, %v; want the bytes after the proxy's answer", buf[:n], err)
	}

	silent, peer := net.Pipe()
	defer peer.Close()
	go func() { http.ReadRequest(bufio.NewReader(peer)) }() // reads, never answers
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.connect(ctx, silent, rt, "198.51.100.7:443"); (!errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, os.ErrDeadlineExceeded)) || time.Since(start) > hostileDeadline {
		// The connection's deadline is the context's: whichever fires first says so.
		t.Errorf("silent proxy: err = %v after %s, want the context's deadline", err, time.Since(start))
	}
}

// tunnelTargets decides what a proxy is asked for: the checked addresses
// unless AllowPrivate lets a proxy that resolves names have the name;
// socks5 always resolves here; socks5h is refused under the guard.
func TestTunnelTargets(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{names: map[string][]string{
		"www.example.com":    {"93.184.216.34", "2001:db8::34"},
		"mapped.example.com": {"::ffff:203.0.113.6"},
		"inside.example.com": {"203.0.113.5", "10.0.0.1"},
	}}
	for _, tt := range []struct {
		proxy, host  string
		allowPrivate bool
		want         string // targets joined by " ", or "error: " and what the error says
	}{
		{"http://p:1", "www.example.com", false, "93.184.216.34:443 [2001:db8::34]:443"},
		{"https://p:1", "mapped.example.com", false, "203.0.113.6:443"},
		{"http://p:1", "1572395042", false, "93.184.216.34:443"}, // a URL-standard IPv4 spelling, not sent to DNS
		{"http://p:1", "2001:db8::1", false, "[2001:db8::1]:443"},
		{"http://p:1", "inside.example.com", false, "error: blocked address 10.0.0.1 of inside.example.com: private"},
		{"http://p:1", "2130706433", false, "error: blocked address 127.0.0.1 of 2130706433: loopback"},
		{"http://p:1", "nowhere.example.com", false, "error: no such host"},
		{"http://p:1", "inside.example.com", true, "inside.example.com:443"},
		{"socks5://p:1", "www.example.com", false, "93.184.216.34:443 [2001:db8::34]:443"},
		{"socks5://p:1", "inside.example.com", true, "203.0.113.5:443 10.0.0.1:443"},
		{"socks5h://p:1", "www.example.com", false, "error: www.example.com:443 through socks5h://p:1: a socks5h proxy resolves target names itself"},
		{"socks5h://p:1", "inside.example.com", true, "inside.example.com:443"},
	} {
		p, err := ParseProxy(tt.proxy)
		if err != nil {
			t.Fatal(err)
		}
		guard := newGuardedDialer(Options{Resolver: res, AllowPrivate: tt.allowPrivate})
		r := &router{allowPrivate: tt.allowPrivate, timeout: time.Second, lookup: guard.lookup}
		targets, err := r.tunnelTargets(context.Background(), p.url, tt.host, "443")
		got := strings.Join(targets, " ")
		if err != nil {
			got = "error: " + err.Error()
		}
		if want, isErr := strings.CutPrefix(tt.want, "error: "); isErr && !strings.Contains(got, want) || !isErr && got != tt.want {
			t.Errorf("%s to %s (allow-private %v): %s, want %s", tt.proxy, tt.host, tt.allowPrivate, got, tt.want)
		}
	}
}
