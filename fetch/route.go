package fetch

import (
	"context"
	"crypto/tls"
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
// Through an HTTP proxy the transport dials the proxy, never the target,
// so the guard runs in the transport's Proxy hook, on the target, before
// a connection is asked for; the dial hook learns from the request's
// context (a dial keeps its request's values) whether it dials the proxy
// and for which target. Through SOCKS5 the transport dials the target
// through dialSOCKS, which checks it first.
type router struct {
	choose       func(*url.URL) (*url.URL, error) // the proxy for a target, nil for direct; nil with SOCKS
	socks        proxy.ContextDialer              // the SOCKS5 proxy, or nil
	remoteDNS    bool                             // socks5h: the proxy resolves target names
	allowPrivate bool
	timeout      time.Duration // bounds the guard's lookup and a SOCKS5 handshake
	conns        *connTracker
	direct       dialFunc // guarded and tracked under the address dialled
	forward      dialFunc // to the proxy itself, which may be private
	lookup       func(ctx context.Context, host string) ([]netip.Addr, error)
	tlsConfig    func() *tls.Config // the transport's, for the TLS to an https:// proxy
}

func newRouter(o Options, conns *connTracker, direct dialFunc) *router {
	forward := NewSafeDialer(o.ConnectTimeout, true)
	r := &router{allowPrivate: o.AllowPrivate, timeout: o.ConnectTimeout, conns: conns,
		direct: direct, forward: forward.DialContext, lookup: lookupIP}
	p := o.Proxy
	switch {
	case p.isSOCKS():
		var auth *proxy.Auth
		if p.url.User != nil {
			pass, _ := p.url.User.Password()
			auth = &proxy.Auth{User: p.url.User.Username(), Password: pass}
		}
		d, _ := proxy.SOCKS5("tcp", p.url.Host, auth, forward) // fails only for a bad network
		r.socks, r.remoteDNS = d.(proxy.ContextDialer), p.url.Scheme == "socks5h"
	case p.env != nil:
		r.choose = p.env
	default:
		r.choose = func(*url.URL) (*url.URL, error) { return p.url, nil }
	}
	return r
}

func lookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// install puts the router's hooks into tr.
func (r *router) install(tr *http.Transport, userAgent string) {
	if r.socks != nil {
		// The transport dials each target, through the proxy: tracking,
		// Refuse and the per-host cap work on the target as they do direct.
		tr.DialContext = r.conns.wrap(r.dialSOCKS)
		return
	}
	tr.Proxy = r.proxyFor
	tr.DialContext = r.dial
	r.tlsConfig = func() *tls.Config { return tr.TLSClientConfig }
	tr.ProxyConnectHeader = http.Header{"User-Agent": {userAgent}}
	// The transport pools the connections to an HTTP proxy that carry http
	// targets as one "host": its per-host caps would cap the whole crawl.
	// The politeness layer bounds each target's concurrency.
	tr.MaxConnsPerHost = 0
	tr.MaxIdleConnsPerHost = tr.MaxIdleConns
}

type routeKey struct{}

// route is how one request leaves through an HTTP proxy, or the
// environment's choice of none, decided once by begin and read from the
// request's context by the transport's hooks.
type route struct {
	proxy *url.URL // nil: direct
	// hop is proxy as the transport is shown it: an https:// proxy as
	// http://, its TLS done by dial, since the transport would offer the
	// proxy h2 (it uses one TLS config for proxy and target) and then
	// write HTTP/1.1 to a proxy that took it up.
	hop        *url.URL
	err        error  // the environment's choice failed
	host, port string // the target: lower-case host, port defaulted by scheme
	// shared is set for an http target through an HTTP proxy, whose
	// connection carries other hosts' requests: the request, not the
	// connection, is tracked under the target, and cancel ends it.
	shared bool
	cancel context.CancelCauseFunc
}

func (rt *route) hostPort() (string, string) { return rt.host, rt.port }

// Close ends the request; the transport then drops the connection it was
// using, which no other request is using at the time.
func (rt *route) Close() error {
	rt.cancel(errHostClosed)
	return nil
}

// begin decides req's route and returns req carrying it; end(rt) must
// follow once the exchange, body included, is over. With SOCKS there is
// nothing to decide: rt is nil.
func (r *router) begin(req *http.Request) (_ *http.Request, rt *route) {
	if r.choose == nil {
		return req, nil
	}
	u := req.URL
	chosen, err := r.choose(u)
	if chosen == nil && err == nil {
		return req, nil // the environment says direct: as with no proxy at all
	}
	rt = &route{host: strings.ToLower(u.Hostname()), port: u.Port(), proxy: chosen, err: err}
	if rt.port == "" {
		rt.port = "80"
		if u.Scheme == "https" {
			rt.port = "443"
		}
	}
	rt.hop = rt.proxy
	if rt.proxy != nil && rt.proxy.Scheme == "https" {
		hop := *rt.proxy
		hop.Scheme = "http"
		rt.hop = &hop
	}
	ctx := req.Context()
	if rt.proxy != nil && (rt.proxy.Scheme == "http" || rt.proxy.Scheme == "https") && u.Scheme == "http" {
		rt.shared = true
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
// request: a request to a refused or blocked target fails here, before any
// connection to the proxy is asked for.
func (r *router) proxyFor(req *http.Request) (*url.URL, error) {
	rt, _ := req.Context().Value(routeKey{}).(*route)
	switch {
	case rt == nil: // not from Fetch: direct, and guarded at the dial
		return nil, nil
	case rt.err != nil:
		return nil, fmt.Errorf("proxy from the environment: %w", rt.err)
	case rt.proxy == nil:
		return nil, nil
	case r.conns.refused(rt.host, rt.port):
		return nil, fmt.Errorf("%s: %w", net.JoinHostPort(rt.host, rt.port), ErrHostRefused)
	}
	if !r.allowPrivate {
		if _, err := r.resolve(req.Context(), rt.host); err != nil {
			return nil, err
		}
	}
	return rt.hop, nil
}

// dial is the transport's DialContext behind an HTTP proxy. A connection
// to the proxy is not guarded (the target was, in proxyFor). A tunnel
// (CONNECT, or SOCKS5 named in the environment) serves one target and is
// tracked and refused under it; a connection carrying http targets is
// every target's, and is tracked under the proxy's own address.
func (r *router) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	rt, _ := ctx.Value(routeKey{}).(*route)
	if rt == nil || rt.proxy == nil {
		return r.direct(ctx, network, addr)
	}
	c, err := r.forward(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if rt.proxy.Scheme == "https" {
		if c, err = r.proxyTLS(ctx, c, rt.proxy.Hostname()); err != nil {
			return nil, err
		}
	}
	if rt.shared {
		host, port, _ := net.SplitHostPort(addr)
		return r.conns.track(c, host, port, false)
	}
	return r.conns.track(c, rt.host, rt.port, true)
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

// dialSOCKS dials addr, a target, through the SOCKS5 proxy, after
// checking it. With socks5 the name is resolved here and the proxy is
// given the checked addresses, so it cannot be talked into another; with
// socks5h the proxy resolves the name again itself.
func (r *router) dialSOCKS(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if r.conns.refused(strings.ToLower(host), port) {
		return nil, fmt.Errorf("dial %s: %w", addr, ErrHostRefused)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if r.remoteDNS && r.allowPrivate {
		return r.socks.DialContext(ctx, network, addr)
	}
	ips, err := r.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	if r.remoteDNS {
		return r.socks.DialContext(ctx, network, addr)
	}
	var errs []error
	for _, ip := range ips {
		c, err := r.socks.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		if errs = append(errs, err); ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

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
