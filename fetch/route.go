package fetch

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/proxy"
)

// errHostClosed ends a request CloseHost cut short behind an HTTP proxy.
var errHostClosed = fmt.Errorf("closed by CloseHost: %w", ErrHostRefused)

// router takes a Fetcher's requests through Options.Proxy while keeping
// the address guard and the per-host connection tracking of a direct
// fetch (see doc.go, Proxies).
//
// Unless AllowPrivate, the proxy is never handed a name to resolve: the
// transport is shown no proxy, and dials the target through dial, which
// resolves and checks the target's name here, connects to the proxy and
// asks it for a tunnel (HTTP CONNECT or SOCKS5) to the checked address.
// The transport then runs TLS over the tunnel under the target's name
// and writes the request as to the target itself. With AllowPrivate an
// http target through an HTTP proxy goes absolute-form over the proxy's
// shared connections, the transport speaking to the proxy; the dial hook
// learns from the request's context (a dial keeps its request's values)
// which route it dials for.
type router struct {
	choose       func(*url.URL) (*url.URL, error) // the proxy for a target, nil for direct
	allowPrivate bool
	// sharesConns is set when http targets may share the connections to
	// an HTTP proxy (AllowPrivate): the transport then counts them as one
	// host's, and its per-host caps are lifted.
	sharesConns bool
	timeout     time.Duration // bounds the guard's lookup, and each tunnel's setup
	conns       *connTracker
	direct      dialFunc // guarded and tracked under the address dialled
	forward     dialFunc // to the proxy itself, which may be private
	lookup      func(ctx context.Context, host string) ([]netip.Addr, error)
	tlsConfig   func() *tls.Config // the transport's, for the TLS to an https:// proxy
	userAgent   string             // sent with a CONNECT, as the transport would
}

func newRouter(o Options, conns *connTracker, direct dialFunc) *router {
	forward := NewSafeDialer(o.ConnectTimeout, true)
	r := &router{allowPrivate: o.AllowPrivate, timeout: o.ConnectTimeout, conns: conns,
		direct: direct, forward: forward.DialContext, lookup: lookupIP, userAgent: o.UserAgent}
	p := o.Proxy
	if p.env != nil {
		r.choose = p.env
	} else {
		r.choose = func(*url.URL) (*url.URL, error) { return p.url, nil }
	}
	r.sharesConns = o.AllowPrivate && !p.isSOCKS()
	return r
}

func lookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// install puts the router's hooks into tr.
func (r *router) install(tr *http.Transport) {
	tr.Proxy = r.proxyFor
	tr.DialContext = r.dial
	r.tlsConfig = func() *tls.Config { return tr.TLSClientConfig }
	if r.sharesConns {
		// The transport pools the connections to an HTTP proxy that carry
		// http targets as one "host": its per-host caps would cap the whole
		// crawl. The politeness layer bounds each target's concurrency. A
		// tunnel is pooled under its target, as a direct connection is.
		tr.MaxConnsPerHost = 0
		tr.MaxIdleConnsPerHost = tr.MaxIdleConns
	}
}

type routeKey struct{}

// route is how one request leaves through a proxy, or the environment's
// choice of none, decided once by begin and read from the request's
// context by the transport's hooks.
type route struct {
	proxy *url.URL // nil: direct
	err   error    // the environment's choice failed
	// host and port are the target's: lower-case host, port defaulted by
	// scheme; plain is set for an http target.
	host, port string
	plain      bool
	// shared is set for an http target through an HTTP proxy with
	// AllowPrivate: the request goes absolute-form over a connection that
	// carries other hosts' requests, so the request, not the connection,
	// is tracked under the target, and cancel ends it. Every other proxied
	// request goes through a tunnel dial opens to the target.
	shared bool
	// hop is proxy as the transport is shown it, for a shared route: an
	// https:// proxy as http://, its TLS done by dial, since the transport
	// would offer the proxy h2 (it uses one TLS config for proxy and
	// target) and then write HTTP/1.1 to a proxy that took it up.
	hop    *url.URL
	cancel context.CancelCauseFunc
}

func (rt *route) hostPort() (string, string) { return rt.host, rt.port }

// Close ends the request; the transport then drops the connection it was
// using, which no other request is using at the time.
func (rt *route) Close() error {
	rt.cancel(errHostClosed)
	return nil
}

// isHTTPProxy reports whether u is an HTTP proxy (spoken to in the clear
// or over TLS) rather than a SOCKS5 one.
func isHTTPProxy(u *url.URL) bool { return u.Scheme == "http" || u.Scheme == "https" }

// begin decides req's route and returns req carrying it; end(rt) must
// follow once the exchange, body included, is over. rt is nil for a
// request the environment sends direct.
func (r *router) begin(req *http.Request) (_ *http.Request, rt *route) {
	u := req.URL
	chosen, err := r.choose(u)
	if chosen == nil && err == nil {
		return req, nil // the environment says direct: as with no proxy at all
	}
	rt = &route{host: strings.ToLower(u.Hostname()), port: u.Port(), plain: u.Scheme == "http", proxy: chosen, err: err}
	if rt.port == "" {
		rt.port = "80"
		if u.Scheme == "https" {
			rt.port = "443"
		}
	}
	ctx := req.Context()
	if chosen != nil && isHTTPProxy(chosen) && rt.plain && r.allowPrivate {
		rt.shared, rt.hop = true, chosen
		if chosen.Scheme == "https" {
			hop := *chosen
			hop.Scheme = "http"
			rt.hop = &hop
		}
		ctx, rt.cancel = context.WithCancelCause(ctx)
		r.conns.add(rt)
	}
	return req.WithContext(context.WithValue(ctx, routeKey{}, rt)), rt
}

func (r *router) end(rt *route) {
	if rt != nil && rt.shared {
		r.conns.forget(rt)
		rt.cancel(nil)
	}
}

// proxyFor is the transport's Proxy hook, called for every attempt of a
// request: a request to a refused target fails here, before any
// connection, idle or new, is asked for. Only a shared route shows the
// transport its proxy; a tunnel is the target's connection to it.
func (r *router) proxyFor(req *http.Request) (*url.URL, error) {
	rt, _ := req.Context().Value(routeKey{}).(*route)
	switch {
	case rt == nil: // not proxied: direct, and guarded at the dial
		return nil, nil
	case rt.err != nil:
		return nil, fmt.Errorf("proxy from the environment: %w", rt.err)
	case rt.proxy == nil:
		return nil, nil
	case r.conns.refused(rt.host, rt.port):
		return nil, fmt.Errorf("%s: %w", net.JoinHostPort(rt.host, rt.port), ErrHostRefused)
	case !rt.shared:
		return nil, nil
	}
	return rt.hop, nil
}

// dial is the transport's DialContext behind a proxy. For a shared route
// it connects to the proxy (addr is the proxy's) and tracks the
// connection under the proxy's own address: it is every target's, and
// never refused. Otherwise addr is the target, and dial opens a tunnel to
// it.
func (r *router) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	rt, _ := ctx.Value(routeKey{}).(*route)
	switch {
	case rt == nil || rt.proxy == nil:
		return r.direct(ctx, network, addr)
	case !rt.shared:
		return r.tunnel(ctx, network, rt)
	}
	c, err := r.dialProxy(ctx, network, rt.proxy)
	if err != nil {
		return nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	return r.conns.track(c, host, port, false)
}

// dialProxy connects to the HTTP proxy via, over TLS for an https:// one.
// The proxy's address is allowed even when private.
func (r *router) dialProxy(ctx context.Context, network string, via *url.URL) (net.Conn, error) {
	c, err := r.forward(ctx, network, via.Host)
	if err != nil {
		return nil, err
	}
	if via.Scheme == "https" {
		if c, err = r.proxyTLS(ctx, c, via.Hostname()); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// proxyTLS starts TLS to an https:// proxy named host over c, offering
// HTTP/1.1 only: CONNECT and absolute-form requests are HTTP/1.1.
func (r *router) proxyTLS(ctx context.Context, c net.Conn, host string) (net.Conn, error) {
	cfg := &tls.Config{}
	if base := r.tlsConfig(); base != nil {
		cfg = base.Clone()
	}
	cfg.ServerName, cfg.NextProtos = host, []string{"http/1.1"}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	tc := tls.Client(c, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// ErrProxyResolvesNames fails every request through a socks5h proxy while
// the address guard is on (see Proxy.CheckGuard).
var ErrProxyResolvesNames = errors.New("a socks5h proxy resolves target names itself, where the address guard " +
	"cannot check them; use socks5:// (names resolved and checked here) or allow private addresses (--allow-private)")

// tunnelTargets says what the proxy via is asked to connect to for the
// target host (lower-case) and port: the addresses the guard checked, so
// that the proxy resolves nothing, or the name itself when nothing is
// checked (AllowPrivate) and the proxy resolves names (HTTP, socks5h).
// socks5 means names are resolved here, guard or not. Unless AllowPrivate,
// socks5h is refused: it would resolve the name again.
func (r *router) tunnelTargets(ctx context.Context, via *url.URL, host, port string) ([]string, error) {
	switch {
	case via.Scheme == "socks5h" && !r.allowPrivate:
		return nil, fmt.Errorf("%s through %s: %w", net.JoinHostPort(host, port), via.Redacted(), ErrProxyResolvesNames)
	case r.allowPrivate && via.Scheme != "socks5":
		return []string{net.JoinHostPort(host, port)}, nil
	}
	ips, err := r.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	targets := make([]string, len(ips))
	for i, ip := range ips {
		targets[i] = net.JoinHostPort(ip.Unmap().String(), port)
	}
	return targets, nil
}

// tunnel opens a connection to rt's target through rt's proxy, to the
// first checked address the proxy reaches. The tunnel carries that target
// only: it is tracked under it, Refuse is asked as the connection to the
// proxy completes (before the proxy is asked for anything) and CloseHost
// closes it, as a direct connection.
func (r *router) tunnel(ctx context.Context, network string, rt *route) (net.Conn, error) {
	if r.conns.refused(rt.host, rt.port) {
		return nil, fmt.Errorf("dial %s: %w", net.JoinHostPort(rt.host, rt.port), ErrHostRefused)
	}
	targets, err := r.tunnelTargets(ctx, rt.proxy, rt.host, rt.port)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, target := range targets {
		c, err := r.openTunnel(ctx, network, rt, target)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		var refusal *connectRefusedError
		if ctx.Err() != nil || errors.Is(err, ErrHostRefused) || errors.As(err, &refusal) && !refusal.retryable() {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// openTunnel asks rt's proxy for a tunnel to target, "ip:port" or
// "name:port" as tunnelTargets says, within the connect timeout.
func (r *router) openTunnel(ctx context.Context, network string, rt *route, target string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	via := rt.proxy
	if !isHTTPProxy(via) {
		var auth *proxy.Auth
		if via.User != nil {
			pass, _ := via.User.Password()
			auth = &proxy.Auth{User: via.User.Username(), Password: pass}
		}
		toProxy := contextDialer(func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := r.forward(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return r.conns.track(c, rt.host, rt.port, true)
		})
		d, _ := proxy.SOCKS5("tcp", via.Host, auth, toProxy) // fails only for a bad network
		return d.(proxy.ContextDialer).DialContext(ctx, network, target)
	}
	c, err := r.dialProxy(ctx, network, via)
	if err != nil {
		return nil, err
	}
	if c, err = r.conns.track(c, rt.host, rt.port, true); err != nil {
		return nil, err
	}
	return r.connect(ctx, c, rt, target)
}

// contextDialer is a dial function as the SOCKS5 client's way to its proxy.
type contextDialer dialFunc

func (d contextDialer) Dial(network, addr string) (net.Conn, error) {
	return d(context.Background(), network, addr)
}

func (d contextDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return d(ctx, network, addr)
}

// connectRefusedError is an HTTP proxy's answer other than 200 to CONNECT.
type connectRefusedError struct {
	proxy, target, host string // host is the target's name, target what the proxy was asked for
	status              string
	code                int
	plain               bool // the target is http, tunnelled because the guard is on
}

func (e *connectRefusedError) Error() string {
	msg := fmt.Sprintf("proxy %s answered CONNECT %s", e.proxy, e.target)
	if h, _, _ := net.SplitHostPort(e.target); h != e.host {
		msg += " (for " + e.host + ")"
	}
	msg += ": " + e.status
	if e.plain && !e.retryable() && e.code != http.StatusProxyAuthRequired {
		// Many proxies tunnel to port 443 only: say why an http target was
		// asked for as a tunnel at all.
		msg += " (with the address guard on, http targets are tunnelled through CONNECT too, to the address checked here)"
	}
	return msg
}

// retryable reports whether another of the target's addresses may fare
// better: the proxy could not reach this one, rather than refusing us.
func (e *connectRefusedError) retryable() bool {
	return e.code == http.StatusBadGateway || e.code == http.StatusServiceUnavailable || e.code == http.StatusGatewayTimeout
}

// connect asks the HTTP proxy at the other end of c for a tunnel to
// target, as the transport would (User-Agent, and Proxy-Authorization from
// the proxy URL), and returns the tunnel, or closes c. ctx bounds it.
func (r *router) connect(ctx context.Context, c net.Conn, rt *route, target string) (net.Conn, error) {
	via := rt.proxy
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: target}, Host: target,
		Header: http.Header{"User-Agent": {r.userAgent}}}
	if via.User != nil {
		pass, _ := via.User.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(via.User.Username()+":"+pass)))
	}
	if deadline, ok := ctx.Deadline(); ok {
		c.SetDeadline(deadline)
	}
	interrupt := context.AfterFunc(ctx, func() { c.SetDeadline(time.Unix(1, 0)) })
	br := bufio.NewReader(c)
	err := req.Write(c)
	var resp *http.Response
	if err == nil {
		resp, err = http.ReadResponse(br, req)
	}
	if !interrupt() {
		err = context.Cause(ctx)
	}
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("CONNECT %s through proxy %s: %w", target, via.Redacted(), err)
	}
	// The body is not read: after a 200 the bytes are the tunnel's, and
	// a refusal's are not needed (the connection is closed).
	if resp.StatusCode != http.StatusOK {
		c.Close()
		return nil, &connectRefusedError{proxy: via.Redacted(), target: target, host: rt.host,
			status: resp.Status, code: resp.StatusCode, plain: rt.plain}
	}
	c.SetDeadline(time.Time{})
	if br.Buffered() > 0 {
		return &prereadConn{Conn: c, r: br}, nil // the target spoke first
	}
	return c, nil
}

// prereadConn reads first what was read past the proxy's answer.
type prereadConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *prereadConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// resolve returns the addresses of host, looked up here unless it is an
// IP literal. Unless AllowPrivate, a host with any blocked address fails
// with a *BlockedAddressError, and one that does not resolve here fails
// too: the guard cannot vouch for it.
func (r *router) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		ctx, cancel := context.WithTimeout(ctx, r.timeout)
		defer cancel()
		if ips, err = r.lookup(ctx, host); err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no addresses", Name: host, IsNotFound: true}
		}
	}
	if r.allowPrivate {
		return ips, nil
	}
	for _, ip := range ips {
		ip = ip.Unmap()
		if reason := blockedReason(ip); reason != "" {
			return nil, fmt.Errorf("proxy target %s: %w", host, &BlockedAddressError{Addr: ip, Reason: reason})
		}
	}
	return ips, nil
}
