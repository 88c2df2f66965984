package fetch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
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
}

func (e *BlockedAddressError) Error() string {
	return fmt.Sprintf("blocked address %s: %s", e.Addr, e.Reason)
}

// Is makes errors.Is(err, ErrBlockedAddress) true.
func (e *BlockedAddressError) Is(target error) bool { return target == ErrBlockedAddress }

// IsBlocked reports whether err comes from a dial refused by the address
// policy (ErrBlockedAddress).
func IsBlocked(err error) bool { return errors.Is(err, ErrBlockedAddress) }

// cgnat is the shared address space of RFC 6598, not covered by IsPrivate.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// NewSafeDialer returns a dialer that checks the resolved IP right before
// each connect, after DNS: a hostname that resolves to an internal address
// (DNS rebinding, a hostile link to http://10.0.0.1/) is refused there, for
// every address tried. Unless allowPrivate is set it refuses loopback,
// private (RFC 1918, fc00::/7), link-local, unspecified, multicast and CGNAT
// (100.64.0.0/10) addresses with a *BlockedAddressError.
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

// blockedReason says why addr must not be dialled, or "" when it may be.
func blockedReason(addr netip.Addr) string {
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
	case cgnat.Contains(addr):
		return "carrier-grade NAT"
	}
	return ""
}
