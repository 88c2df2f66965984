package frontier

import (
	"breakwater/store"
	"fmt"
	neturl "net/url"
)

// Link is a URL ready for the frontier, parsed once: the URL as written
// (what gets fetched), its host key and the hash of its canonical form.
type Link struct {
	URL  string
	Host string
	Hash store.Hash
}

// ParseLink parses an absolute http(s) URL (a seed, a redirect target).
// The URL is fetched as written, so one that net/http cannot request (a
// stray "%", a control byte, surrounding spaces) is refused here rather
// than failing every fetch, as a transient fault of its host.
func ParseLink(rawURL string) (Link, error) {
	canonical, host, err := canonicalWithHost(rawURL)
	if err != nil {
		return Link{}, err
	}
	if u, err := neturl.Parse(rawURL); err != nil {
		return Link{}, fmt.Errorf("parse link %q: not requestable: %w", shorten(rawURL), err)
	} else if u.Host == "" {
		return Link{}, fmt.Errorf("parse link %q: not requestable: net/http would find no host in it", shorten(rawURL))
	}
	return Link{URL: rawURL, Host: host, Hash: store.HashOf(canonical)}, nil
}

// Item is the frontier item of l, found depth link hops from a seed after
// the given number of redirects.
func (l Link) Item(depth, redirects int) store.Item {
	return store.Item{Host: l.Host, URL: l.URL, Hash: l.Hash, Depth: depth, Redirects: redirects}
}

// NewItem prepares a URL for the frontier: its dedupe hash comes from the
// canonical form, while the URL itself is kept as written, since that is
// what gets fetched.
func NewItem(rawURL string, depth, redirects int) (store.Item, error) {
	l, err := ParseLink(rawURL)
	if err != nil {
		return store.Item{}, err
	}
	return l.Item(depth, redirects), nil
}
