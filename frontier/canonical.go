// URL canonicalization: the dedupe key, link resolution and the per-host key.
//
// Two forms of a URL exist in Breakwater. The original form (from Resolve) is
// what gets fetched: it is parsed the way a browser parses it but otherwise
// left as written. The canonical form (from Canonicalize) is only a key: two
// URLs with the same canonical form are the same page for deduplication.
// Canonicalization never decodes reserved characters (%2F stays %2F) and never
// reorders the query, because servers may give either a meaning.
//
// All functions here are pure and safe for concurrent use.

package frontier

import (
	"breakwater/store"
	"errors"
	"fmt"
	neturl "net/url"
	"strings"

	"github.com/nlnwa/whatwg-url/canonicalizer"
	"github.com/nlnwa/whatwg-url/url"
)

// MaxURLLength is the longest URL, in bytes, that Canonicalize and Resolve
// accept, before and after normalization.
const MaxURLLength = 2048

// Sentinel errors callers may branch on with errors.Is.
var (
	// ErrUnsupportedScheme means the URL is not http or https.
	ErrUnsupportedScheme = errors.New("unsupported scheme")
	// ErrURLTooLong means the URL is longer than MaxURLLength bytes.
	ErrURLTooLong = errors.New("url too long")
)

// The WHATWG parser already lower-cases scheme and host, applies IDNA,
// drops default ports and resolves dot segments. The plain profile is not
// GoogleSafeBrowsing on purpose: that one strips every port and decodes %2F.
var (
	canonParser  = canonicalizer.New(canonicalizer.WithRemoveFragment())
	resolveParse = url.NewParser()
)

// Canonicalize returns the dedupe key of an absolute http or https URL:
// lower-case scheme and host, IDNA (punycode) host, no default port, no
// fragment, dot segments resolved, percent escapes in upper-case hex with
// unreserved characters (ALPHA DIGIT - . _ ~) decoded, and no empty query.
// Reserved escapes such as %2F stay encoded; the query order is kept.
// Canonicalize is idempotent.
func Canonicalize(raw string) (string, error) {
	canonical, _, err := canonicalWithHost(raw)
	return canonical, err
}

// canonicalWithHost parses raw once and returns both its canonical form and
// its host key: the frontier needs both for every URL it sees.
func canonicalWithHost(raw string) (canonical, host string, err error) {
	if canonical, host, ok := fastCanonical(raw); ok {
		return canonical, host, nil
	}
	u, err := parseHTTP(canonParser, raw)
	if err != nil {
		return "", "", fmt.Errorf("canonicalize %q: %w", shorten(raw), err)
	}
	return canonicalOf(raw, u)
}

// canonicalOf finishes canonicalizing u, parsed from raw, in place: a link
// resolved against its page is canonicalized without being parsed again.
func canonicalOf(raw string, u *url.Url) (canonical, host string, err error) {
	u.SetHash("")
	if u.Query() == "" {
		u.SetSearch("") // "?" alone means the same resource as no query
	}
	out := normalizePercent(u.Href(true))
	if len(out) > MaxURLLength {
		return "", "", fmt.Errorf("canonicalize %q: %w (%d bytes normalized)", shorten(raw), ErrURLTooLong, len(out))
	}
	// The parser has already dropped a default port, so Host is the key.
	return out, u.Host(), nil
}

func Resolve(base, ref string) (string, error) {
	if base == "" {
		u, err := parseHTTP(resolveParse, ref)
		if err != nil {
			return "", fmt.Errorf("resolve %q: %w", shorten(ref), err)
		}
		return requestable(ref, u)
	}
	b, err := ParseBaseURL(base)
	if err != nil {
		return "", fmt.Errorf("resolve %q: %w", shorten(ref), err)
	}
	return b.Resolve(ref)
}

// BaseURL is a parsed base URL, for resolving many references against one
// base (every link of a page) without parsing it again each time. It is not
// safe for concurrent use.
type BaseURL struct {
	raw string
	// u is the parser's form of raw; for a plain URL it is made only when
	// a reference needs the parser, as most links of a page do not.
	u     *url.Url
	plain *plainURL // nil unless raw is a plain URL (see fastParse)
}

// ParseBaseURL parses an absolute http(s) base URL.
func ParseBaseURL(raw string) (*BaseURL, error) {
	if p, ok := fastParse(raw); ok {
		// A plain URL is an http(s) URL with a host that the parser
		// accepts (TestFastCanonicalAgreesWithParser): no parse is needed
		// to know it is a valid base.
		return &BaseURL{raw: raw, plain: &p}, nil
	}
	u, err := parseHTTP(resolveParse, raw)
	if err != nil {
		return nil, fmt.Errorf("base %q: %w", shorten(raw), err)
	}
	return &BaseURL{raw: raw, u: u}, nil
}

// parsed returns the parser's form of the base, parsing it the first time.
func (b *BaseURL) parsed() (*url.Url, error) {
	if b.u == nil {
		u, err := parseHTTP(resolveParse, b.raw)
		if err != nil {
			return nil, fmt.Errorf("base %q: %w", shorten(b.raw), err)
		}
		b.u = u
	}
	return b.u, nil
}

// Resolve is the package-level Resolve with this base.
func (b *BaseURL) Resolve(ref string) (string, error) {
	u, err := b.resolve(ref)
	if err != nil {
		return "", fmt.Errorf("resolve %q against %q: %w", shorten(ref), shorten(b.raw), err)
	}
	return requestable(ref, u)
}

// ResolveLink resolves ref like Resolve and also returns its host key and
// dedupe hash, from the one parse.
func (b *BaseURL) ResolveLink(ref string) (Link, error) {
	if p, ok := fastResolve(b.plain, ref); ok {
		href, canonical := p.link()
		return Link{URL: href, Host: p.host, Hash: store.HashOf(canonical)}, nil
	}
	if scheme, ok := otherScheme(ref); ok {
		// mailto:, javascript:, tel:: the parser would take them whole only
		// to be refused for their scheme.
		return Link{}, fmt.Errorf("resolve %q against %q: %w %q", shorten(ref), shorten(b.raw), ErrUnsupportedScheme, scheme)
	}
	return b.parseLink(ref)
}

// parseLink is ResolveLink through the WHATWG parser.
func (b *BaseURL) parseLink(ref string) (Link, error) {
	u, err := b.resolve(ref)
	if err != nil {
		return Link{}, fmt.Errorf("resolve %q against %q: %w", shorten(ref), shorten(b.raw), err)
	}
	abs, err := requestable(ref, u)
	if err != nil {
		return Link{}, err
	}
	canonical, host, err := canonicalOf(abs, u)
	if err != nil {
		return Link{}, err
	}
	return Link{URL: abs, Host: host, Hash: store.HashOf(canonical)}, nil
}

// The parser clones the base for every reference, so reusing it is safe.
func (b *BaseURL) resolve(ref string) (*url.Url, error) {
	if len(ref) > MaxURLLength {
		return nil, ErrURLTooLong
	}
	base, err := b.parsed()
	if err != nil {
		return nil, err
	}
	u, err := base.Parse(ref)
	if err != nil {
		return nil, err
	}
	if err := checkScheme(u); err != nil {
		return nil, err
	}
	return u, nil
}

// requestable renders u without its fragment and checks that net/http can
// request it.
func requestable(ref string, u *url.Url) (string, error) {
	out := u.Href(true)
	if len(out) > MaxURLLength {
		return "", fmt.Errorf("resolve %q: %w", shorten(ref), ErrURLTooLong)
	}
	// A URL the browser grammar accepts may still be one net/url rejects
	// (a stray "%" in the path, say); such a link could never be fetched.
	if _, err := neturl.Parse(out); err != nil {
		return "", fmt.Errorf("resolve %q: not requestable: %w", shorten(ref), err)
	}
	return out, nil
}

// HostKey returns the per-host key used for politeness, the breaker and
// robots.txt: the canonical host, plus ":port" only when the port is not the
// scheme's default ("example.com", "127.0.0.1:8080", "xn--bcher-kva.example").
func HostKey(rawURL string) (string, error) {
	if _, host, ok := fastCanonical(rawURL); ok {
		return host, nil
	}
	u, err := parseHTTP(canonParser, rawURL)
	if err != nil {
		return "", fmt.Errorf("host key %q: %w", shorten(rawURL), err)
	}
	// The parser has already dropped a default port, so Host is the key.
	return u.Host(), nil
}

// parseHTTP parses an absolute URL and insists on http or https.
func parseHTTP(p url.Parser, raw string) (*url.Url, error) {
	if len(raw) > MaxURLLength {
		return nil, fmt.Errorf("%w (%d bytes)", ErrURLTooLong, len(raw))
	}
	u, err := p.Parse(raw)
	if err != nil {
		return nil, err
	}
	if err := checkScheme(u); err != nil {
		return nil, err
	}
	return u, nil
}

func checkScheme(u *url.Url) error {
	switch u.Scheme() {
	case "http", "https":
		if u.Hostname() == "" {
			return errors.New("missing host")
		}
		return nil
	}
	return fmt.Errorf("%w %q", ErrUnsupportedScheme, u.Scheme())
}

// normalizePercent upper-cases the hex of every percent escape and decodes
// the ones that encode an unreserved character. Decoding anything else could
// change the meaning (%2F is not /, %3F is not ?), so it is left alone. The
// parser has already resolved escaped dot segments (%2e%2e), so decoding "."
// cannot create new ones; completesStrayEscape stops decoding from creating
// new escapes.
func normalizePercent(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' || i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			b.WriteByte(c)
			continue
		}
		v := unhex(s[i+1])<<4 | unhex(s[i+2])
		if isUnreserved(v) && !completesStrayEscape(b.String(), v) {
			b.WriteByte(v)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex(s[i+1]))
			b.WriteByte(upperHex(s[i+2]))
		}
		i += 2
	}
	return b.String()
}

// completesStrayEscape reports whether writing c after out would turn a
// stray "%" or "%X" already in out into a new escape ("%7%41" must not become
// "%7A"), which the next pass would decode: that would break idempotence.
// Every escape this package writes is complete, so a "%" one or two bytes
// from the end is always a stray one.
func completesStrayEscape(out string, c byte) bool {
	if !isHex(c) {
		return false
	}
	n := len(out)
	return n >= 1 && out[n-1] == '%' || n >= 2 && out[n-2] == '%' && isHex(out[n-1])
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	default:
		return c - 'a' + 10
	}
}

func upperHex(c byte) byte {
	if 'a' <= c && c <= 'f' {
		return c - 'a' + 'A'
	}
	return c
}

// isUnreserved reports RFC 3986 unreserved characters.
func isUnreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// shorten keeps error messages readable when the URL is huge.
func shorten(s string) string {
	const limit = 200
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}
