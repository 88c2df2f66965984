package demosite

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// VirtualHosts serves many small hosts from one loopback port: a SOCKS5
// front (RFC 1928, no authentication, CONNECT only) that answers HTTP
// itself for the host named in each CONNECT. A crawler sent through it
// with a socks5h:// proxy dials, pools and tracks a connection per target
// host as it would directly, yet the machine needs one listening socket
// rather than one per host: a hundred thousand listeners would not fit
// the file descriptor limit.
//
// Host i is named VirtualHostName(i), port 80. Its "/" links to its pages
// "/p/1" ... "/p/Pages-1", which link back to "/"; robots.txt is 404. A
// CONNECT to any other target is refused, as a host with no listener.
type VirtualHosts struct {
	hosts, pages int
	ln           net.Listener
	srv          *http.Server
	conns        chan net.Conn
	quit         chan struct{}
	wg           sync.WaitGroup

	pageRequests   atomic.Int64
	robotsRequests atomic.Int64
	refused        atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

// VirtualHostName is the name of virtual host i.
func VirtualHostName(i int) string { return "vhost-" + strconv.Itoa(i) + ".test" }

// virtualHostIndex is the inverse of VirtualHostName; false for any other name.
func virtualHostIndex(name string) (int, bool) {
	digits, ok := strings.CutPrefix(name, "vhost-")
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, ".test"); !ok {
		return 0, false
	}
	i, err := strconv.Atoi(digits)
	if err != nil || i < 0 || strconv.Itoa(i) != digits {
		return 0, false
	}
	return i, true
}

// StartVirtual serves hosts virtual hosts of pages pages each (at least
// one) on a fresh port of 127.0.0.1 until Close.
func StartVirtual(hosts, pages int) (*VirtualHosts, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("virtual hosts: listen: %w", err)
	}
	v := &VirtualHosts{hosts: hosts, pages: max(pages, 1), ln: ln,
		conns: make(chan net.Conn), quit: make(chan struct{})}
	v.srv = &http.Server{
		Handler:           http.HandlerFunc(v.serveHTTP),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if vc, ok := c.(*virtualConn); ok {
				return context.WithValue(ctx, virtualHostKey{}, vc.host)
			}
			return ctx
		},
	}
	v.wg.Add(2)
	go func() {
		defer v.wg.Done()
		v.accept()
	}()
	go func() {
		defer v.wg.Done()
		_ = v.srv.Serve(chanListener{v}) // returns ErrServerClosed after Close
	}()
	return v, nil
}

// Proxy is the URL to give the crawler's --proxy.
func (v *VirtualHosts) Proxy() string { return "socks5h://" + v.ln.Addr().String() }

// Roots returns the root URL of every host, in index order.
func (v *VirtualHosts) Roots() []string {
	out := make([]string, v.hosts)
	for i := range out {
		out[i] = "http://" + VirtualHostName(i) + "/"
	}
	return out
}

// URLs returns every page URL of every host exactly once.
func (v *VirtualHosts) URLs() []string {
	out := make([]string, 0, v.hosts*v.pages)
	for i := range v.hosts {
		for p := range v.pages {
			out = append(out, "http://"+VirtualHostName(i)+pagePath(p))
		}
	}
	return out
}

// PageRequests counts requests for anything but robots.txt, answered or not.
func (v *VirtualHosts) PageRequests() int64 { return v.pageRequests.Load() }

// RobotsRequests counts requests for /robots.txt.
func (v *VirtualHosts) RobotsRequests() int64 { return v.robotsRequests.Load() }

// Refused counts CONNECTs refused: targets that are not one of the hosts.
func (v *VirtualHosts) Refused() int64 { return v.refused.Load() }

// Close stops the front and the server, drops every connection and waits.
func (v *VirtualHosts) Close() error {
	v.closeOnce.Do(func() {
		close(v.quit)
		v.closeErr = errors.Join(v.ln.Close(), v.srv.Close())
		v.wg.Wait()
	})
	return v.closeErr
}

func (v *VirtualHosts) accept() {
	for {
		c, err := v.ln.Accept()
		if err != nil {
			return // closed
		}
		v.wg.Add(1)
		go func() {
			defer v.wg.Done()
			v.handshake(c)
		}()
	}
}

// handshake reads the client's SOCKS5 greeting and CONNECT and hands the
// connection to the HTTP server, tagged with its host, or refuses it.
func (v *VirtualHosts) handshake(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	host, err := readConnect(br, c)
	if err != nil {
		c.Close()
		return
	}
	i, ok := virtualHostIndex(host)
	if !ok || i >= v.hosts {
		v.refused.Add(1)
		// 0x05: connection refused, as a port with no listener answers.
		_, _ = c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		c.Close()
		return
	}
	if _, err := c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 80}); err != nil {
		c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	select {
	case v.conns <- &virtualConn{Conn: c, r: br, host: i}:
	case <-v.quit:
		c.Close()
	}
}

// readConnect reads a SOCKS5 greeting, accepts "no authentication", and
// returns the host of the CONNECT that follows. Only port 80 is served.
func readConnect(br *bufio.Reader, w io.Writer) (string, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 {
		return "", fmt.Errorf("socks greeting: %v", err)
	}
	if _, err := br.Discard(int(hdr[1])); err != nil {
		return "", err
	}
	if _, err := w.Write([]byte{5, 0}); err != nil {
		return "", err
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 || req[1] != 1 {
		return "", fmt.Errorf("socks request: %v", err)
	}
	var host string
	switch req[3] {
	case 1: // IPv4
		var a [4]byte
		if _, err := io.ReadFull(br, a[:]); err != nil {
			return "", err
		}
		host = net.IP(a[:]).String()
	case 3: // a name
		n, err := br.ReadByte()
		if err != nil {
			return "", err
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return "", err
		}
		host = string(name)
	default:
		return "", fmt.Errorf("socks address type %d", req[3])
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return "", err
	}
	if binary.BigEndian.Uint16(port[:]) != 80 {
		return "", nil // no host is named "": refused
	}
	return host, nil
}

type virtualHostKey struct{}

// virtualConn is a connection past its SOCKS5 handshake; r holds whatever
// the client sent after the CONNECT.
type virtualConn struct {
	net.Conn
	r    *bufio.Reader
	host int
}

func (c *virtualConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener hands the HTTP server the connections the front accepted.
type chanListener struct{ v *VirtualHosts }

func (l chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.v.conns:
		return c, nil
	case <-l.v.quit:
		return nil, net.ErrClosed
	}
}
func (l chanListener) Close() error   { return nil }
func (l chanListener) Addr() net.Addr { return l.v.ln.Addr() }

func (v *VirtualHosts) serveHTTP(w http.ResponseWriter, r *http.Request) {
	i, _ := r.Context().Value(virtualHostKey{}).(int)
	if r.URL.Path == "/robots.txt" {
		v.robotsRequests.Add(1)
		http.NotFound(w, r)
		return
	}
	v.pageRequests.Add(1)
	if r.Host != VirtualHostName(i) {
		http.Error(w, "wrong host for this connection", http.StatusMisdirectedRequest)
		return
	}
	page, ok := pageNumber(r.URL.Path, v.pages)
	if !ok {
		http.NotFound(w, r)
		return
	}
	var b strings.Builder
	b.WriteString("<!doctype html><html><head><title>")
	b.WriteString(VirtualHostName(i))
	b.WriteString("</title></head><body>\n")
	if page == 0 {
		for p := 1; p < v.pages; p++ {
			fmt.Fprintf(&b, "<a href=%q>page %d</a>\n", pagePath(p), p)
		}
	} else {
		b.WriteString(`<a href="/">home</a>` + "\n")
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}
