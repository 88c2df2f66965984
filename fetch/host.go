package fetch

import (
	"net/netip"
	"strings"
)

// BlockedHost says whether a URL's host (without its port; IPv6 with or
// without brackets) is refused by the address guard whatever DNS says: an
// IP literal of a blocked kind, or localhost. It lets a caller refuse such
// a seed up front with a hint, instead of finding it failed later. Other
// names are checked at dial time, on every address they resolve to.
func BlockedHost(host string) (reason string, blocked bool) {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return "loopback", true // RFC 6761: always the local host
	}
	addr, err := netip.ParseAddr(h)
	if err != nil {
		return "", false
	}
	reason = blockedReason(addr.Unmap())
	return reason, reason != ""
}
