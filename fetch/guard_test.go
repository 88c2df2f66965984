package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"breakwater/frontier"
)

// fakeResolver answers from a table and remembers what it was asked.
type fakeResolver struct {
	names map[string][]string
	mu    sync.Mutex
	asked []string
}

func (r *fakeResolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	r.asked = append(r.asked, host)
	r.mu.Unlock()
	var ips []netip.Addr
	for _, s := range r.names[host] {
		ip := netip.MustParseAddr(s)
		if network == "ip4" && !ip.Unmap().Is4() || network == "ip6" && ip.Unmap().Is4() {
			continue
		}
		ips = append(ips, ip)
	}
	if ips == nil {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return ips, nil
}

func (r *fakeResolver) lookups() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.asked)
}

// fakeNet stands in for the TCP connect after the guard: it records every
// address the guard let through and connects only those routed to a
// loopback address, so nothing beyond loopback is ever contacted.
type fakeNet struct {
	routes map[string]string // "ip:port" as the guard passed it -> loopback "ip:port"
	mu     sync.Mutex
	dialed []string
}

func (n *fakeNet) connect(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, addr)
	n.mu.Unlock()
	to, ok := n.routes[addr]
	if !ok {
		return nil, fmt.Errorf("fake network: no route to %s", addr)
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

func (n *fakeNet) connects() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.dialed)
}

func guardFor(res Resolver, n *fakeNet, allowPrivate bool) *guardedDialer {
	return newGuardedDialer(Options{Resolver: res, AllowPrivate: allowPrivate,
		ConnectTimeout: 5 * time.Second, connect: n.connect})
}

// A name is refused when any address it resolves to is blocked, before any
// connect; an address the resolver gives as IPv4-mapped is checked as the
// IPv4 address it is. A name with only public addresses is dialled at them.
func TestGuardRefusesNamesResolvingToBlockedAddresses(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{names: map[string][]string{
		"intranet.test":  {"10.1.2.3"},
		"metadata.test":  {"169.254.169.254"},
		"self.test":      {"127.0.0.1", "::1"},
		"ula.test":       {"fd00::7"},
		"cgnat.test":     {"100.100.1.1"},
		"mapped.test":    {"::ffff:192.168.0.10"},
		"nat64.test":     {"64:ff9b::a00:1"},
		"mixed.test":     {"203.0.113.5", "10.0.0.1"},
		"mixed6.test":    {"2001:db8::5", "fe80::1"},
		"public.test":    {"203.0.113.5"},
		"public-v4.test": {"::ffff:203.0.113.6"},
	}}
	tests := []struct {
		host, addr, reason string // addr, reason "" for allowed
		connect            string
	}{
		{"intranet.test", "10.1.2.3", "private", ""},
		{"metadata.test", "169.254.169.254", "link-local", ""},
		{"self.test", "127.0.0.1", "loopback", ""},
		{"ula.test", "fd00::7", "private", ""},
		{"cgnat.test", "100.100.1.1", "carrier-grade NAT", ""},
		{"mapped.test", "192.168.0.10", "private", ""},
		{"nat64.test", "64:ff9b::a00:1", "private via NAT64", ""},
		{"mixed.test", "10.0.0.1", "private", ""},
		{"mixed6.test", "fe80::1", "link-local", ""},
		{"public.test", "", "", "203.0.113.5:80"},
		{"public-v4.test", "", "", "203.0.113.6:80"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			n := &fakeNet{}
			_, err := guardFor(res, n, false).DialContext(context.Background(), "tcp", tt.host+":80")
			if tt.reason == "" {
				if got := n.connects(); !slices.Equal(got, []string{tt.connect}) {
					t.Errorf("connects %q, want %q", got, tt.connect)
				}
				if err == nil || IsBlocked(err) {
					t.Errorf("err = %v, want the fake network's no route", err)
				}
				return
			}
			var be *BlockedAddressError
			if !errors.As(err, &be) || be.Addr != netip.MustParseAddr(tt.addr) || be.Reason != tt.reason || be.Host != tt.host {
				t.Fatalf("err = %v, want %s of %s blocked as %s", err, tt.addr, tt.host, tt.reason)
			}
			var op *net.OpError
			if !errors.As(err, &op) || op.Op != "dial" || !strings.Contains(err.Error(), tt.host) {
				t.Errorf("err = %v, want a dial *net.OpError naming %s", err, tt.host)
			}
			if got := n.connects(); len(got) != 0 {
				t.Errorf("blocked host was connected to: %q", got)
			}
		})
	}
}

// With AllowPrivate a name resolving to an internal address is dialled;
// a lookup failure stays a *net.DNSError the crawl classifies as dns.
func TestGuardAllowPrivateAndLookupFailure(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{names: map[string][]string{"intranet.test": {"10.1.2.3"}}}
	n := &fakeNet{}
	guardFor(res, n, true).DialContext(context.Background(), "tcp", "intranet.test:8080")
	if got := n.connects(); !slices.Equal(got, []string{"10.1.2.3:8080"}) {
		t.Errorf("allowPrivate: connects %q, want 10.1.2.3:8080", got)
	}
	_, err := guardFor(res, n, false).DialContext(context.Background(), "tcp", "missing.test:80")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) || IsBlocked(err) {
		t.Errorf("unknown name: err = %v, want a *net.DNSError", err)
	}
}

// The URL standard's IPv4 parser, checked against the canonicalizer the
// frontier files URLs under: the host dialled is the host key's address.
func TestParseIPv4NumberMatchesCanonicalizer(t *testing.T) {
	t.Parallel()
	for _, host := range []string{
		"2130706433", "0x7f.1", "017700000001", "127.1", "0", "0x7f000001",
		"0177.0.0.1", "127.000.000.001", "127.0.0.1.", "0X7F.0.0.1", "0x", "0x.0x.0x.0x",
		"1.2.3", "255.255.255.255", "4294967295", "10.0.0.010", "192.168.257",
		"0.0.0.0.", "00", "1.0x", "08", "1.2.3.4.5", "4294967296", "256.0.0.1",
		"0x100000000", "1.256.1.1", "1.2.65536", "99999999999999999999999", "1..2",
		"example.1", "example.0x1", "09.1",
	} {
		canon, err := frontier.Canonicalize("http://" + host + "/")
		wantOK := err == nil
		var want string
		if wantOK {
			u, _ := url.Parse(canon)
			want = u.Hostname()
		}
		if !endsInNumber(host) {
			t.Errorf("endsInNumber(%q) = false, want true", host)
			continue
		}
		got, ok := parseIPv4Number(host)
		if ok != wantOK || ok && got.String() != want {
			t.Errorf("parseIPv4Number(%q) = %v, %v; the canonicalizer says %q (err %v)", host, got, ok, want, err)
		}
	}
	for _, host := range []string{"example.com", "1.2.3.example", "0x7g", "localhost", "1e1", ".", "a.0xg"} {
		if endsInNumber(host) {
			t.Errorf("endsInNumber(%q) = true, want false", host)
		}
	}
}

// The odd spellings of an address reach the guard as the address the URL
// standard makes of them, as the frontier's host key does: refused without
// AllowPrivate, with no DNS lookup and no connect; with it, dialled at
// that address, still without a lookup.
func TestFetchOddAddressSpellings(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "reached") })
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	tests := []struct {
		host, addr, reason string
	}{
		{"2130706433", "127.0.0.1", "loopback"},
		{"0x7f.1", "127.0.0.1", "loopback"},
		{"017700000001", "127.0.0.1", "loopback"},
		{"[::ffff:127.0.0.1]", "127.0.0.1", "loopback"},
		{"127.1", "127.0.0.1", "loopback"},
		{"0", "0.0.0.0", "unspecified"},
		{"0x7f000001", "127.0.0.1", "loopback"},
		{"0177.0.0.1", "127.0.0.1", "loopback"},
		{"127.0.0.1.", "127.0.0.1", "loopback"},
		{"[::ffff:7f00:1]", "127.0.0.1", "loopback"},
		{"[0:0:0:0:0:ffff:127.0.0.1]", "127.0.0.1", "loopback"},
		{"0xa.0.0.1", "10.0.0.1", "private"},
		{"3232235521", "192.168.0.1", "private"},
		{"0251.0376.0251.0376", "169.254.169.254", "link-local"},
		{"[64:ff9b::7f00:1]", "64:ff9b::7f00:1", "loopback via NAT64"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			want := netip.MustParseAddr(tt.addr)
			rawURL := fmt.Sprintf("http://%s:%d/", tt.host, port)
			canon, err := frontier.Canonicalize(rawURL)
			if err != nil {
				t.Fatalf("canonicalize %s: %v", rawURL, err)
			}
			if u, _ := url.Parse(canon); netip.MustParseAddr(u.Hostname()).Unmap() != want {
				t.Fatalf("%s canonicalizes to %s, want host %s", rawURL, canon, tt.addr)
			}
			res, n := &fakeResolver{}, &fakeNet{}
			o := testOptions()
			o.AllowPrivate, o.Resolver, o.connect = false, res, n.connect
			r := newTestFetcher(t, o).Get(context.Background(), rawURL)
			var be *BlockedAddressError
			if !errors.As(r.Err, &be) || be.Addr != want || be.Reason != tt.reason {
				t.Fatalf("fetch %s: err = %v, want %s blocked as %s", rawURL, r.Err, tt.addr, tt.reason)
			}
			if got := n.connects(); len(got) != 0 {
				t.Errorf("blocked spelling was connected to: %q", got)
			}

			dialed := netip.AddrPortFrom(want, uint16(port)).String()
			n = &fakeNet{routes: map[string]string{dialed: srv.Listener.Addr().String()}}
			o.AllowPrivate, o.connect = true, n.connect
			r = newTestFetcher(t, o).Get(context.Background(), rawURL)
			if r.Err != nil || string(r.Body) != "reached" {
				t.Errorf("allowPrivate fetch %s: body %q err %v, want it dialled at %s", rawURL, r.Body, r.Err, dialed)
			}
			if got := n.connects(); !slices.Equal(got, []string{dialed}) {
				t.Errorf("allowPrivate: connects %q, want %s", got, dialed)
			}
			if got := res.lookups(); len(got) != 0 {
				t.Errorf("an address spelling went to DNS: %q", got)
			}
		})
	}
}

// A host the URL standard reads as a broken IPv4 address is no name to
// look up either.
func TestGuardInvalidNumericHost(t *testing.T) {
	t.Parallel()
	res, n := &fakeResolver{}, &fakeNet{}
	for _, host := range []string{"1.2.3.4.5", "256.0.0.1", "08.1", "4294967296"} {
		_, err := guardFor(res, n, true).DialContext(context.Background(), "tcp", host+":80")
		if err == nil || !strings.Contains(err.Error(), host) {
			t.Errorf("dial %s: err = %v, want one naming the host", host, err)
		}
	}
	if len(res.lookups()) != 0 || len(n.connects()) != 0 {
		t.Errorf("lookups %q connects %q, want none", res.lookups(), n.connects())
	}
}

// stallNet is a connect that answers per address: refused at once, never
// (until the context ends), or with one end of a pipe.
type stallNet struct {
	refuse, stall map[string]bool
	mu            sync.Mutex
	dialed        []string
}

func (n *stallNet) connect(ctx context.Context, _, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, addr)
	n.mu.Unlock()
	switch {
	case n.refuse[addr]:
		return nil, fmt.Errorf("connect %s: refused", addr)
	case n.stall[addr]:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c, peer := net.Pipe()
	go func() { <-ctx.Done(); peer.Close() }()
	return &namedConn{Conn: c, addr: addr}, nil
}

type namedConn struct {
	net.Conn
	addr string
}

// The guard dials a name's addresses as net.Dialer would: in turn within a
// family, and the other family raced in after fallbackDelay, or at once
// when the first family has failed.
func TestGuardDialsAddressesInTurnAndRacesFamilies(t *testing.T) {
	t.Parallel()
	res := &fakeResolver{names: map[string][]string{
		"two-v4.test":     {"203.0.113.1", "203.0.113.2"},
		"black-v6.test":   {"2001:db8::1", "203.0.113.3"},
		"refused-v6.test": {"2001:db8::2", "203.0.113.4"},
	}}
	n := &stallNet{
		refuse: map[string]bool{"203.0.113.1:80": true, "[2001:db8::2]:80": true},
		stall:  map[string]bool{"[2001:db8::1]:80": true},
	}
	g := newGuardedDialer(Options{Resolver: res, ConnectTimeout: 5 * time.Second, connect: n.connect})
	for _, tt := range []struct {
		host, want  string
		least, most time.Duration
	}{
		{"two-v4.test", "203.0.113.2:80", 0, time.Second},
		{"black-v6.test", "203.0.113.3:80", fallbackDelay, 2 * time.Second},
		{"refused-v6.test", "203.0.113.4:80", 0, fallbackDelay / 2},
	} {
		start := time.Now()
		c, err := g.DialContext(context.Background(), "tcp", tt.host+":80")
		took := time.Since(start)
		if err != nil {
			t.Errorf("dial %s: %v", tt.host, err)
			continue
		}
		if got := c.(*namedConn).addr; got != tt.want || took < tt.least || took > tt.most {
			t.Errorf("dial %s: connected to %s in %v, want %s in [%v, %v]", tt.host, got, took, tt.want, tt.least, tt.most)
		}
		c.Close()
	}
}
