package frontier

import "strings"

// fastCanonical canonicalizes the common plain URL without the WHATWG
// parser, which costs about 4 µs a URL and is most of the time spent on a
// large seeds file. It handles only URLs whose canonical form can be read
// off them: a lower-case http(s) scheme, a lower-case ASCII host name or a
// dotted-quad IPv4 address, an optional port, and a path and query of
// characters the parser leaves as they are, with no dot segments and no
// percent escapes. Anything else reports ok false and takes the full
// parser; TestFastCanonicalAgreesWithParser and FuzzFastCanonical hold the
// two to the same answers.
func fastCanonical(raw string) (canonical, host string, ok bool) {
	u, ok := fastParse(raw)
	if !ok || !u.fits() {
		return "", "", false
	}
	return u.canonical(), u.host, true
}

// plainURL is a plain URL cut into its parts: origin is the scheme and
// host key ("http://example.com:8080"), path is never empty, and hasQuery
// tells "?" with an empty query from no "?" at all.
type plainURL struct {
	origin, host, path, query string
	hasQuery                  bool
}

// href is the URL as the parser writes it, without its fragment: what gets
// fetched.
func (u plainURL) href() string {
	if u.hasQuery {
		return u.origin + u.path + "?" + u.query
	}
	return u.origin + u.path
}

// canonical is the dedupe key: no fragment, no empty query.
func (u plainURL) canonical() string {
	if u.query != "" {
		return u.origin + u.path + "?" + u.query
	}
	return u.origin + u.path
}

// fits reports whether both forms stay within MaxURLLength: an empty path
// becomes "/", so they can be a byte longer than the URL as written.
func (u plainURL) fits() bool { return u.hrefLen() <= MaxURLLength }

// hrefLen is len(u.href()), without building it.
func (u plainURL) hrefLen() int {
	n := len(u.origin) + len(u.path)
	if u.hasQuery {
		n += 1 + len(u.query)
	}
	return n
}

// link is href and canonical together: they are one string unless the
// query is present but empty, so most links cost one allocation.
func (u plainURL) link() (href, canonical string) {
	href = u.href()
	if u.hasQuery && u.query == "" {
		return href, href[:len(href)-1]
	}
	return href, href
}

// fastParse cuts an absolute plain URL into its parts.
func fastParse(raw string) (plainURL, bool) {
	if len(raw) > MaxURLLength {
		return plainURL{}, false
	}
	var rest, defaultPort string
	switch {
	case strings.HasPrefix(raw, "http://"):
		rest, defaultPort = raw[len("http://"):], "80"
	case strings.HasPrefix(raw, "https://"):
		rest, defaultPort = raw[len("https://"):], "443"
	default:
		return plainURL{}, false
	}
	scheme := raw[:len(raw)-len(rest)]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	name, port, hasPort := strings.Cut(authority, ":")
	if !plainHost(name) || hasPort && !plainPort(port) {
		return plainURL{}, false
	}
	host := name
	if hasPort && port != defaultPort {
		host = authority
	}
	u, ok := fastRest(rest[end:])
	u.origin, u.host = scheme+host, host
	return u, ok
}

// fastRest cuts what follows the authority ("/p?q#f", or "" for none) into
// path and query, if they are plain.
func fastRest(rest string) (plainURL, bool) {
	var u plainURL
	path, tail := rest, ""
	if i := strings.IndexAny(rest, "?#"); i >= 0 {
		path, tail = rest[:i], rest[i:]
	}
	if strings.HasPrefix(tail, "?") {
		u.query, _, _ = strings.Cut(tail[1:], "#")
		u.hasQuery = true
	}
	if !plainPath(path) || !plainQuery(u.query) || !plainTail(rest) {
		return plainURL{}, false
	}
	if path == "" {
		path = "/"
	}
	u.path = path
	return u, true
}

// fastResolve resolves a link against a plain base without the parser,
// when the link is an absolute plain URL or a plain path from the root
// ("/p/2?x=1"), the common forms of links.
func fastResolve(base *plainURL, ref string) (plainURL, bool) {
	if len(ref) > MaxURLLength {
		return plainURL{}, false
	}
	var u plainURL
	var ok bool
	switch {
	case base != nil && strings.HasPrefix(ref, "/") && !strings.HasPrefix(ref, "//"):
		u, ok = fastRest(ref)
		u.origin, u.host = base.origin, base.host
	case base != nil && relativePath(ref):
		u, ok = fastRest(mergePath(base.path, ref))
		u.origin, u.host = base.origin, base.host
	default:
		u, ok = fastParse(ref)
	}
	return u, ok && u.fits()
}

// relativePath reports a reference relative to the base's directory
// ("p/2", "./p", "../p?x"): it starts with neither "/", "?" nor "#", and
// no ":" comes before its first "/", "?" or "#", so it has no scheme.
func relativePath(ref string) bool {
	if ref == "" || ref[0] == '/' || ref[0] == '?' || ref[0] == '#' {
		return false
	}
	end := strings.IndexAny(ref, "/?#")
	if end < 0 {
		end = len(ref)
	}
	return !strings.Contains(ref[:end], ":")
}

// mergePath resolves a relative path reference against a base path: the
// base's directory, less a segment for each leading "../", with each
// leading "./" dropped, then the rest of the reference. The rest is left
// for fastRest to vouch for: a dot segment or an odd byte in it sends the
// reference to the parser.
func mergePath(basePath, ref string) string {
	dir := basePath[:strings.LastIndexByte(basePath, '/')+1]
	for {
		switch {
		case strings.HasPrefix(ref, "./"):
			ref = ref[len("./"):]
		case strings.HasPrefix(ref, "../"):
			ref = ref[len("../"):]
			if dir != "/" {
				dir = dir[:strings.LastIndexByte(dir[:len(dir)-1], '/')+1]
			}
		default:
			if strings.HasPrefix(ref, "/") || ref == "." || ref == ".." ||
				strings.HasPrefix(ref, ".?") || strings.HasPrefix(ref, "..?") ||
				strings.HasPrefix(ref, ".#") || strings.HasPrefix(ref, "..#") {
				return "/./" // an empty segment or a last dot segment: the parser's
			}
			return dir + ref
		}
	}
}

// plainHost accepts lower-case host names whose labels are letters, digits
// and inner hyphens, not punycode, the last starting with a letter, and
// dotted-quad addresses written canonically.
func plainHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	if isDottedQuad(h) {
		return true
	}
	for l := range strings.SplitSeq(h, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' || strings.HasPrefix(l, "xn--") {
			return false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
				return false
			}
		}
	}
	// A last label that starts with a digit may be read as a number, and
	// the parser is laxer about that than the URL standard ("0-0" becomes
	// 0.0.0.0): only names whose last label starts with a letter are plain.
	last := h[strings.LastIndexByte(h, '.')+1:]
	return 'a' <= last[0] && last[0] <= 'z'
}

// isDottedQuad reports four decimal numbers 0-255 without leading zeros.
func isDottedQuad(h string) bool {
	if strings.Count(h, ".") != 3 {
		return false
	}
	for p := range strings.SplitSeq(h, ".") {
		if !plainDecimal(p, 255) {
			return false
		}
	}
	return true
}

// plainPort accepts a port number without a leading zero, at most 65535.
func plainPort(p string) bool { return plainDecimal(p, 65535) }

// plainDecimal reports whether s is a decimal number from 0 to limit,
// written as the parser writes numbers: no sign, no leading zero.
func plainDecimal(s string, limit int) bool {
	if s == "" || len(s) > decimalDigits(limit) || len(s) > 1 && s[0] == '0' {
		return false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n <= limit
}

// decimalDigits is the number of digits of n >= 0 written in decimal.
func decimalDigits(n int) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// plainPath accepts "" or "/..." of characters outside the parser's path
// percent-encode set, without "%" or "\" and without "." or ".." segments.
func plainPath(p string) bool {
	if p == "" {
		return true
	}
	if p[0] != '/' {
		return false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return allIn(p, pathSafe)
}

// plainQuery accepts characters outside the parser's special-query
// percent-encode set, without "%".
func plainQuery(q string) bool { return allIn(q, querySafe) }

// plainTail rejects what the parser would strip or rewrite anywhere in the
// URL: tabs, newlines, other controls, spaces and non-ASCII bytes. The
// fragment is dropped, but it must not hide such bytes either.
func plainTail(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

var (
	pathSafe  = asciiSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/!$&()*+,;=:@")
	querySafe = asciiSet("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/!$&()*+,;=:@?")
)

type charSet [128]bool

func asciiSet(chars string) *charSet {
	var s charSet
	for i := 0; i < len(chars); i++ {
		s[chars[i]] = true
	}
	return &s
}

func allIn(s string, set *charSet) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 128 || !set[s[i]] {
			return false
		}
	}
	return true
}

// otherScheme returns the scheme, lower-cased as the parser writes it, of
// a plain absolute reference whose scheme is neither http nor https
// ("mailto:a@b.c"): the parser would refuse it for its scheme alone.
func otherScheme(ref string) (string, bool) {
	if len(ref) > MaxURLLength || ref == "" || !isASCIILetter(ref[0]) || !plainTail(ref) {
		return "", false
	}
	for i := 1; i < len(ref); i++ {
		c := ref[i]
		switch {
		case c == ':':
			scheme := strings.ToLower(ref[:i])
			return scheme, scheme != "http" && scheme != "https"
		case isASCIILetter(c) || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.':
		default:
			return "", false
		}
	}
	return "", false
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
