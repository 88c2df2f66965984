package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrBlockedAddress is matched (errors.Is) by every dial refused because the
// resolved address is not a public unicast one. It survives the net/http
// error chain, so callers can test a Response's Err directly.
var ErrBlockedAddress = errors.New("blocked address")

// BlockedAddressError names the refused address and the reason.
type BlockedAddressError struct {
	Addr   netip.Addr
	Reason string // "loopback", "private", "link-local", ...
	// Host is the name or spelling the address was reached from
	// ("internal.example", "2130706433"); "" when it was the address itself.
	Host string
}

func (e *BlockedAddressError) Error() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("blocked address %s of %s: %s", e.Addr, e.Host, e.Reason)
	}
	return fmt.Sprintf("blocked address %s: %s", e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrBlockedAddress) true.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrBlockedAddress }

// IsBlocked reports whether err comes from a dial refused by the address
// policy (ErrBlockedAddress).
func IsBlocked(err error) bool { return errors.Is(err, ErrBlockedAddress) }

// Resolver looks up the addresses of a host name; *net.Resolver is one.
// Options.Resolver takes one so that a test can say what a name resolves
// to without asking DNS.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// NewSafeDialer returns a net.Dialer whose Control hook refuses, unless
// allowPrivate is set, every address blockedReason names, right before the
// connect and for every address a name resolves to. A Fetcher dials through
// a guardedDialer instead, which resolves names itself; this one is for the
// dials that need only the last check (a proxy's own address).
func NewSafeDialer(connectTimeout time.Duration, allowPrivate bool) *net.Dialer {
	d := &net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = checkDialAddress
	}
	return d
}

// checkDialAddress is a net.Dialer.Control hook: address is the resolved
// "ip:port" about to be connected.
func checkDialAddress(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP literal means something other than TCP/IP: refuse rather
		// than guess.
		return &BlockedAddressError{Reason: fmt.Sprintf("unparsable %s address %q", network, address)}
	}
	addr := ap.Addr().Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if reason := blockedReason(addr); reason != "" {
		return &BlockedAddressError{Addr: addr, Reason: reason}
	}
	return nil
}

// fallbackDelay is how long the first address family has before the other
// is tried alongside it (RFC 6555), as net.Dialer does by default.
const fallbackDelay = 300 * time.Millisecond

// guardedDialer is a Fetcher's direct dialler. It resolves a name itself
// rather than leaving it to net.Dialer, for three reasons: a name is refused
// as a whole when any of its addresses is blocked (a hostile DNS answer
// mixing a public and an internal address gets no connection at all, as
// through a proxy, see router.resolve); the resolver can be injected; and a
// host the URL standard reads as an IPv4 address ("2130706433", "0x7f.1",
// "127.1") is dialled as that address, as a browser would, instead of being
// sent to DNS, where it would fail as an unknown name, or resolve to
// somewhere else than the host key the crawl files it under.
type guardedDialer struct {
	resolver     Resolver
	allowPrivate bool
	timeout      time.Duration // lookup and connects together, like net.Dialer.Timeout
	// connect opens one connection to a checked "ip:port". It is a
	// NewSafeDialer's, so the address handed to the kernel is checked once
	// more whatever path led to it; tests replace it (export_test.go) to
	// serve an address the guard has passed from loopback.
	connect dialFunc
}

func newGuardedDialer(o Options) *guardedDialer {
	d := &guardedDialer{resolver: o.Resolver, allowPrivate: o.AllowPrivate, timeout: o.ConnectTimeout, connect: o.connect}
	if d.resolver == nil {
		d.resolver = net.DefaultResolver
	}
	if d.connect == nil {
		nd := NewSafeDialer(0, o.AllowPrivate) // the context carries the deadline
		d.connect = nd.DialContext
	}
	return d
}

// DialContext dials address ("host:port") after checking every address
// its host stands for.
func (d *guardedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if d.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.timeout)
		defer cancel()
	}
	ips, err := d.addrs(ctx, network, host)
	if err != nil {
		// A *net.OpError, as net.Dialer fails a lookup or a Control hook:
		// callers tell a dial failure by it.
		oe := &net.OpError{Op: "dial", Net: network, Err: err}
		var blocked *BlockedAddressError
		if errors.As(err, &blocked) {
			p, _ := strconv.ParseUint(port, 10, 16)
			oe.Addr = net.TCPAddrFromAddrPort(netip.AddrPortFrom(blocked.Addr, uint16(p)))
		}
		return nil, oe
	}
	return d.dialAddrs(ctx, network, ips, port)
}

// lookup is addrs for any address family, the router's check of a proxied
// target.
func (d *guardedDialer) lookup(ctx context.Context, host string) ([]netip.Addr, error) {
	return d.addrs(ctx, "tcp", host)
}

// addrs returns the addresses host stands for: itself if it is an IP
// literal or a URL-standard IPv4 spelling, else what the resolver says.
// Unless allowPrivate, any blocked address fails the whole host with a
// *BlockedAddressError.
func (d *guardedDialer) addrs(ctx context.Context, network, host string) ([]netip.Addr, error) {
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip.Unmap()}
	} else if endsInNumber(host) {
		// The URL standard makes such a host an IPv4 address or invalid;
		// no DNS name ends in a numeric label, so it is never looked up.
		ip, ok := parseIPv4Number(host)
		if !ok {
			return nil, fmt.Errorf("host %q is neither a name nor an IPv4 address", host)
		}
		ips = []netip.Addr{ip}
	} else {
		family := "ip"
		switch network {
		case "tcp4":
			family = "ip4"
		case "tcp6":
			family = "ip6"
		}
		found, err := d.resolver.LookupNetIP(ctx, family, host)
		if err != nil {
			return nil, err
		}
		for _, ip := range found {
			ips = append(ips, ip.Unmap()) // net.Resolver may return IPv4 as ::ffff:a.b.c.d
		}
		if len(ips) == 0 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
	}
	if d.allowPrivate {
		return ips, nil
	}
	for _, ip := range ips {
		if reason := blockedReason(ip); reason != "" {
			return nil, &BlockedAddressError{Addr: ip, Reason: reason, Host: host}
		}
	}
	return ips, nil
}

// dialAddrs connects to the first of ips that answers. With both address
// families the second is raced against the first after fallbackDelay (or
// at once when the first fails), so a host whose IPv6 is black-holed costs
// that delay, not the connect timeout: what net.Dialer does for a name.
func (d *guardedDialer) dialAddrs(ctx context.Context, network string, ips []netip.Addr, port string) (net.Conn, error) {
	var primaries, fallbacks []netip.Addr
	for _, ip := range ips {
		if network == "tcp" && ip.Is4() != ips[0].Is4() {
			fallbacks = append(fallbacks, ip)
		} else {
			primaries = append(primaries, ip)
		}
	}
	if len(fallbacks) == 0 {
		return d.dialSerial(ctx, network, primaries, port)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the loser
	type result struct {
		c       net.Conn
		err     error
		primary bool
	}
	results := make(chan result, 2) // neither racer waits for a reader
	race := func(ips []netip.Addr, primary bool) {
		c, err := d.dialSerial(ctx, network, ips, port)
		results <- result{c, err, primary}
	}
	go race(primaries, true)
	timer := time.NewTimer(fallbackDelay)
	defer timer.Stop()
	pending, started := 1, false
	startFallback := func() {
		if !started {
			started, pending = true, pending+1
			go race(fallbacks, false)
		}
	}
	var primaryErr, fallbackErr error
	for {
		select {
		case <-timer.C:
			startFallback()
		case r := <-results:
			pending--
			if r.err == nil {
				if pending > 0 {
					// The loser may still connect before it sees the cancel.
					go func() {
						if late := <-results; late.c != nil {
							late.c.Close()
						}
					}()
				}
				return r.c, nil
			}
			if r.primary {
				primaryErr = r.err
			} else {
				fallbackErr = r.err
			}
			startFallback()
			if pending == 0 {
				return nil, errors.Join(primaryErr, fallbackErr)
			}
		}
	}
}

// dialSerial tries ips in turn, each with an even share of the time left
// (at least 2s, as net.Dialer gives), so one silent address does not eat
// the whole connect timeout.
func (d *guardedDialer) dialSerial(ctx context.Context, network string, ips []netip.Addr, port string) (net.Conn, error) {
	var first error
	for i, ip := range ips {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if deadline, ok := ctx.Deadline(); ok && len(ips)-i > 1 {
			left := time.Until(deadline)
			share := left / time.Duration(len(ips)-i)
			share = max(share, min(2*time.Second, left))
			actx, cancel = context.WithTimeout(ctx, share)
		}
		c, err := d.connect(actx, network, net.JoinHostPort(ip.String(), port))
		cancel()
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// Address ranges the net/netip predicates do not cover.
var (
	cgnat     = netip.MustParsePrefix("100.64.0.0/10") // RFC 6598 shared address space
	reserved4 = netip.MustParsePrefix("240.0.0.0/4")   // "future use"; 255.255.255.255 is broadcast
	broadcast = netip.MustParseAddr("255.255.255.255")
	siteLocal = netip.MustParsePrefix("fec0::/10") // deprecated (RFC 3879), still routed inside old networks
	// IPv4-compatible addresses (RFC 4291, deprecated): ::127.0.0.1 is
	// neither loopback nor private to netip, and some stacks tunnel it.
	v4compat = netip.MustParsePrefix("::/96")
	// The local-use NAT64 prefix (RFC 8215) translates into a network's
	// own IPv4 space, in a layout the prefix length decides: all of it.
	nat64Local = netip.MustParsePrefix("64:ff9b:1::/48")
)

// ipv4Embeddings are IPv6 prefixes whose addresses carry an IPv4 address a
// gateway or relay delivers to: 64:ff9b::10.0.0.1 through a NAT64 gateway
// reaches 10.0.0.1 when the gateway does not filter it (RFC 6052 says it
// must, not all do). Each is checked as the IPv4 address it carries.
var ipv4Embeddings = []struct {
	prefix netip.Prefix
	at     int  // offset of the IPv4 address in the 16 bytes
	flip   bool // Teredo stores the client's address inverted
	via    string
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12, false, "NAT64"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), 12, false, "IPv4-translated"}, // SIIT, RFC 2765
	{netip.MustParsePrefix("2002::/16"), 2, false, "6to4"},
	{netip.MustParsePrefix("2001::/32"), 12, true, "Teredo"},
}

// blockedReason says why addr must not be dialled, or "" when it may be.
func blockedReason(addr netip.Addr) string {
	addr = addr.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1 on the wire
	switch {
	case !addr.IsValid():
		return "invalid"
	case addr.IsUnspecified():
		return "unspecified"
	case addr.Is4() && addr.As4()[0] == 0:
		return "this-network" // 0.0.0.0/8 reaches the local host on Linux
	case addr.IsLoopback():
		return "loopback"
	case addr.IsPrivate():
		return "private"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsMulticast():
		return "multicast"
	case addr == broadcast:
		return "broadcast"
	case reserved4.Contains(addr):
		return "reserved"
	case cgnat.Contains(addr):
		return "carrier-grade NAT"
	case siteLocal.Contains(addr.WithZone("")):
		return "site-local"
	case v4compat.Contains(addr.WithZone("")):
		return "IPv4-compatible"
	case nat64Local.Contains(addr.WithZone("")):
		return "local-use NAT64"
	}
	if addr.Is6() {
		b := addr.As16()
		for _, e := range ipv4Embeddings {
			if !e.prefix.Contains(addr.WithZone("")) {
				continue
			}
			v4 := [4]byte(b[e.at : e.at+4])
			if e.flip {
				for i := range v4 {
					v4[i] ^= 0xff
				}
			}
			if reason := blockedReason(netip.AddrFrom4(v4)); reason != "" {
				return reason + " via " + e.via
			}
		}
	}
	return ""
}

// endsInNumber is the URL standard's "ends in a number" check of a host:
// its last label (a trailing dot aside) is decimal digits or a 0x number.
// Such a host is an IPv4 address or no host at all.
func endsInNumber(host string) bool {
	labels := strings.Split(host, ".")
	if labels[len(labels)-1] == "" {
		if len(labels) == 1 {
			return false
		}
		labels = labels[:len(labels)-1]
	}
	last := labels[len(labels)-1]
	if last != "" && strings.Trim(last, "0123456789") == "" {
		return true
	}
	_, ok := parseIPv4Part(last)
	return ok
}

// parseIPv4Number is the URL standard's IPv4 parser: one to four parts,
// each decimal, octal (leading 0) or hex (0x), the last filling the bytes
// the others leave ("127.1" is 127.0.0.1, "2130706433" too).
func parseIPv4Number(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if parts[len(parts)-1] == "" && len(parts) > 1 {
		parts = parts[:len(parts)-1]
	}
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var n uint64
	for i, p := range parts {
		v, ok := parseIPv4Part(p)
		if !ok {
			return netip.Addr{}, false
		}
		if i < len(parts)-1 {
			if v > 255 {
				return netip.Addr{}, false
			}
			n |= v << (8 * (3 - i))
			continue
		}
		if v >= 1<<(8*(5-len(parts))) {
			return netip.Addr{}, false
		}
		n |= v
	}
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}), true
}

// parseIPv4Part is the URL standard's IPv4 number parser.
func parseIPv4Part(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" {
		return 0, true
	}
	v, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		// A value too large for 64 bits is still a number, and then too
		// large for an address: the caller's range check must refuse it.
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return 1 << 40, true
		}
		return 0, false
	}
	return v, true
}
