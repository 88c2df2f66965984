package fetchtest

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// ProxyOptions configures the test proxies.
type ProxyOptions struct {
	// User and Password, if User is set, are required of every client:
	// Proxy-Authorization basic auth, or SOCKS5 user/password.
	User, Password string
	// Upstream maps a requested target "host:port" to the address the
	// proxy dials instead, so a test can name example.com and reach an
	// httptest server; nil dials the target as asked. The proxy dials only
	// 127.0.0.0/8 and fails any other target, so no test leaves loopback.
	Upstream func(target string) string
	// TLS, if set, makes an HTTP proxy speak TLS to its clients (an
	// https:// proxy). It offers h2 by ALPN but speaks HTTP/1.1 only, and
	// drops a client that chose h2.
	TLS *tls.Config
}

// proxyBase is what the HTTP and SOCKS5 proxies share: a loopback
// listener, counts, and the upstream dial.
type proxyBase struct {
	Addr  string // host:port of the listener
	opts  ProxyOptions
	conns atomic.Int32
	mu    sync.Mutex
	log   []string
	asked []string
}

func (p *proxyBase) record(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, s)
}

func (p *proxyBase) recordAsk(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, s)
}

// Conns counts the connections clients opened to the proxy.
func (p *proxyBase) Conns() int { return int(p.conns.Load()) }

// Forwarded lists what the proxy passed on, in order: "GET
// http://host/path" for a request, "CONNECT host:port" for a tunnel.
// Refused requests are not in it.
func (p *proxyBase) Forwarded() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.log)
}

// Asked lists, in Forwarded's form, every target an authorized client
// asked the proxy for, whether or not the proxy could reach it: a test
// of what a client hands its proxy to resolve reads it, since the
// proxy fails a target its Upstream does not route to loopback.
func (p *proxyBase) Asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.asked)
}

func (p *proxyBase) dialUpstream(ctx context.Context, target string) (net.Conn, error) {
	addr := target
	if p.opts.Upstream != nil {
		addr = p.opts.Upstream(target)
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Unmap().IsLoopback() || !ap.Addr().Unmap().Is4() {
		return nil, fmt.Errorf("test proxy dials 127.0.0.0/8 only, not %q for %q", addr, target)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// HTTPProxy is a forward HTTP proxy on loopback: absolute-form requests
// are passed on, keep-alive included, and CONNECT opens a tunnel.
type HTTPProxy struct {
	proxyBase
	URL string // http://127.0.0.1:port, or https:// with TLS
	tr  *http.Transport
}

// NewHTTPProxy starts an HTTP proxy, stopped at cleanup.
func NewHTTPProxy(tb testing.TB, o ProxyOptions) *HTTPProxy {
	tb.Helper()
	p := &HTTPProxy{proxyBase: proxyBase{opts: o}}
	p.tr = &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return p.dialUpstream(ctx, addr)
	}, DisableCompression: true}
	tb.Cleanup(p.tr.CloseIdleConnections)
	p.Addr = RawServer(tb, p.serve)
	p.URL = "http://" + p.Addr
	if o.TLS != nil {
		p.URL = "https://" + p.Addr
	}
	return p
}

func (p *HTTPProxy) serve(c net.Conn) {
	p.conns.Add(1)
	defer c.Close()
	if p.opts.TLS != nil {
		// Like many HTTPS proxies it offers h2, and, speaking HTTP/1.1
		// only, drops a client that takes it up.
		cfg := p.opts.TLS.Clone()
		cfg.NextProtos = []string{"h2", "http/1.1"}
		tc := tls.Server(c, cfg)
		if tc.Handshake() != nil || tc.ConnectionState().NegotiatedProtocol == "h2" {
			return
		}
		c = tc
	}
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if !p.authorized(req) {
			io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\n"+
				"Proxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\n\r\n")
			continue
		}
		if req.Method == http.MethodConnect {
			p.tunnel(c, br, req.Host)
			return
		}
		if !p.forward(c, req) {
			return
		}
	}
}

func (p *HTTPProxy) authorized(req *http.Request) bool {
	if p.opts.User == "" {
		return true
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(p.opts.User+":"+p.opts.Password))
	return req.Header.Get("Proxy-Authorization") == want
}

// forward passes an absolute-form request on and writes the answer back;
// it reports whether the client connection may carry another request.
func (p *HTTPProxy) forward(c net.Conn, req *http.Request) bool {
	if !req.URL.IsAbs() {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		return false
	}
	p.recordAsk(req.Method + " " + req.URL.String())
	p.record(req.Method + " " + req.URL.String())
	req.RequestURI = ""
	for _, h := range []string{"Proxy-Authorization", "Proxy-Connection", "Connection", "Keep-Alive"} {
		req.Header.Del(h)
	}
	resp, err := p.tr.RoundTrip(req)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return true
	}
	defer resp.Body.Close()
	if resp.Write(c) != nil || resp.Close {
		return false
	}
	return !req.Close
}

func (p *HTTPProxy) tunnel(c net.Conn, br *bufio.Reader, target string) {
	p.recordAsk("CONNECT " + target)
	up, err := p.dialUpstream(context.Background(), target)
	if err != nil {
		io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
		return
	}
	p.record("CONNECT " + target)
	io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
	splice(bufferedConn{c, br}, up)
}

// bufferedConn reads through the reader that may hold the start of the
// tunnelled bytes.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (b bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

// splice copies both ways until either side ends, then closes both.
func splice(client io.ReadWriteCloser, up net.Conn) {
	var wg sync.WaitGroup
	wg.Go(func() {
		io.Copy(up, client)
		up.Close()
		client.Close()
	})
	io.Copy(client, up)
	up.Close()
	client.Close()
	wg.Wait()
}
