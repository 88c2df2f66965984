package fetchtest

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"
)

// SOCKS5 is a SOCKS5 proxy on loopback (RFC 1928, CONNECT only), with no
// authentication or, if ProxyOptions.User is set, user/password (RFC 1929).
type SOCKS5 struct {
	proxyBase
}

// NewSOCKS5 starts a SOCKS5 proxy, stopped at cleanup. Forwarded lists
// "CONNECT host:port" with the host as the client sent it: an IP, or a
// name for the proxy to resolve.
func NewSOCKS5(tb testing.TB, o ProxyOptions) *SOCKS5 {
	tb.Helper()
	p := &SOCKS5{proxyBase{opts: o}}
	p.Addr = RawServer(tb, p.serve)
	return p
}

// URL is the proxy's address with scheme (socks5 or socks5h) and, if the
// proxy requires them, the credentials.
func (p *SOCKS5) URL(scheme string) string {
	auth := ""
	if p.opts.User != "" {
		auth = p.opts.User + ":" + p.opts.Password + "@"
	}
	return scheme + "://" + auth + p.Addr
}

func (p *SOCKS5) serve(c net.Conn) {
	p.conns.Add(1)
	defer c.Close()
	br := bufio.NewReader(c)
	if !p.greet(c, br) {
		return
	}
	target, ok := readConnect(br)
	if !ok {
		c.Write([]byte{5, 7, 0, 1, 0, 0, 0, 0, 0, 0}) // command not supported
		return
	}
	p.recordAsk("CONNECT " + target)
	up, err := p.dialUpstream(context.Background(), target)
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0}) // connection refused
		return
	}
	p.record("CONNECT " + target)
	c.Write([]byte{5, 0, 0, 1, 0, 0, 0, 0, 0, 0})
	splice(bufferedConn{c, br}, up)
}

// greet negotiates the method and, if required, checks the credentials.
func (p *SOCKS5) greet(c net.Conn, br *bufio.Reader) bool {
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil || head[0] != 5 {
		return false
	}
	methods := make([]byte, head[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return false
	}
	want := byte(0) // no authentication
	if p.opts.User != "" {
		want = 2 // user/password
	}
	if !slices.Contains(methods, want) {
		c.Write([]byte{5, 0xff})
		return false
	}
	c.Write([]byte{5, want})
	if want == 0 {
		return true
	}
	// RFC 1929: ver 1, ulen, user, plen, password.
	ver, _ := br.ReadByte()
	user, ok1 := readShort(br)
	pass, ok2 := readShort(br)
	if ver != 1 || !ok1 || !ok2 || user != p.opts.User || pass != p.opts.Password {
		c.Write([]byte{1, 1})
		return false
	}
	c.Write([]byte{1, 0})
	return true
}

// readConnect reads a CONNECT request and returns its "host:port".
func readConnect(br *bufio.Reader) (string, bool) {
	head := make([]byte, 4)
	if _, err := io.ReadFull(br, head); err != nil || head[0] != 5 || head[1] != 1 {
		return "", false
	}
	var host string
	switch head[3] {
	case 1, 4: // IPv4, IPv6
		ip := make([]byte, map[byte]int{1: 4, 4: 16}[head[3]])
		if _, err := io.ReadFull(br, ip); err != nil {
			return "", false
		}
		addr, _ := netip.AddrFromSlice(ip)
		host = addr.String()
	case 3: // a name
		name, ok := readShort(br)
		if !ok {
			return "", false
		}
		host = name
	default:
		return "", false
	}
	port := make([]byte, 2)
	if _, err := io.ReadFull(br, port); err != nil {
		return "", false
	}
	return net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port)))), true
}

// readShort reads a string preceded by its length in one byte.
func readShort(br *bufio.Reader) (string, bool) {
	n, err := br.ReadByte()
	if err != nil {
		return "", false
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return "", false
	}
	return string(b), true
}
