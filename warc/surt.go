package warc

import (
	"slices"
	"strconv"
	"strings"

	whatwg "github.com/nlnwa/whatwg-url/url"
)

// surtParser parses as a browser does (WHATWG), as the replay tools'
// own URL parser does before they compute a key.
var surtParser = whatwg.NewParser()

// SURT is the key a CDXJ index files uri under: the key ReplayWeb.page
// (wabac.js, through warcio.js) and pywb compute for a lookup, so that a
// replay finds the record. For an http or https URL: the host lower-cased,
// a leading "www." (or "www2." and the like) dropped, its labels reversed
// and joined by commas; ":PORT" unless it is the scheme's default; ")";
// the path as the URL parser leaves it (dot segments resolved, lower-cased
// like the rest); then "?" and the query's arguments sorted, if it has
// any. The scheme and the fragment are left out: http and https share a
// key. Anything else (dns:, an unparsable URL) is its own key, spaces and
// control characters escaped so that the key stays one field of a line.
//
//	https://www.Example.com:443/a/../b?z=1&a=2#top  ->  com,example)/b?a=2&z=1
func SURT(uri string) string {
	if !strings.HasPrefix(uri, "http:") && !strings.HasPrefix(uri, "https:") {
		return fieldSafe(uri)
	}
	uri = dropWWW(uri)
	if key, ok := plainSURT(uri); ok {
		return key
	}
	u, err := surtParser.Parse(strings.ToLower(uri))
	if err != nil {
		return fieldSafe(uri)
	}
	labels := strings.Split(u.Hostname(), ".")
	slices.Reverse(labels)
	var b strings.Builder
	b.Grow(len(uri) + 2)
	b.WriteString(strings.Join(labels, ","))
	if port := u.Port(); port != "" {
		b.WriteString(":" + port)
	}
	b.WriteString(")")
	b.WriteString(u.Pathname())
	if q := u.Query(); q != "" {
		args := strings.Split(q, "&")
		slices.Sort(args)
		b.WriteString("?")
		b.WriteString(strings.Join(args, "&"))
	}
	return fieldSafe(b.String())
}

// plainSURT is SURT without the URL parser for the plain URLs a crawl
// mostly archives (ASCII; a host name of letters, digits and inner
// hyphens whose last label starts with a letter, or a dotted quad; a path
// and query of characters the parser keeps as they are, escapes included,
// and no dot segment), the key the parser's way gives; ok is false for
// any other, left to the parser.
func plainSURT(uri string) (key string, ok bool) {
	for i := 0; i < len(uri); i++ {
		if uri[i] >= 0x80 {
			return "", false
		}
	}
	lower := strings.ToLower(uri)
	rest, defaultPort := "", ""
	switch {
	case strings.HasPrefix(lower, "http://"):
		rest, defaultPort = lower[len("http://"):], "80"
	case strings.HasPrefix(lower, "https://"):
		rest, defaultPort = lower[len("https://"):], "443"
	default:
		return "", false
	}
	rest, _, _ = strings.Cut(rest, "#")
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	name, port, hasPort := strings.Cut(rest[:end], ":")
	path, query, _ := strings.Cut(rest[end:], "?")
	labels, ok := plainHostLabels(name)
	if !ok || hasPort && !plainPort(port) || !plainPathOrQuery(path, false) || !plainPathOrQuery(query, true) {
		return "", false
	}
	slices.Reverse(labels)
	var b strings.Builder
	b.Grow(len(rest) + 2)
	b.WriteString(strings.Join(labels, ","))
	if hasPort && port != defaultPort {
		b.WriteString(":" + port)
	}
	b.WriteString(")")
	if path == "" {
		path = "/"
	}
	b.WriteString(path)
	if query != "" {
		args := strings.Split(query, "&")
		slices.Sort(args)
		b.WriteString("?")
		b.WriteString(strings.Join(args, "&"))
	}
	return b.String(), true
}

// plainHostLabels splits a lower-cased host the parser leaves as it is:
// a name whose labels are letters, digits and inner hyphens, none
// punycode, the last starting with a letter (one that starts with a digit
// may be read as a number); or four decimal numbers 0-255 written
// without leading zeros.
func plainHostLabels(h string) ([]string, bool) {
	labels := strings.Split(h, ".")
	if len(h) == 0 || len(h) > 253 {
		return nil, false
	}
	if len(labels) == 4 && !slices.ContainsFunc(labels, func(l string) bool { return !plainDecimal(l, 255) }) {
		return labels, true
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' || strings.HasPrefix(l, "xn--") ||
			strings.ContainsFunc(l, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) {
			return nil, false
		}
	}
	last := labels[len(labels)-1]
	return labels, last[0] >= 'a' && last[0] <= 'z'
}

// plainPort accepts a port number as the parser writes it.
func plainPort(p string) bool { return plainDecimal(p, 65535) }

// plainDecimal reports whether s is a decimal number from 0 to limit,
// with no sign and no leading zero.
func plainDecimal(s string, limit int) bool {
	if s == "" || len(s) > 5 || len(s) > 1 && s[0] == '0' ||
		strings.ContainsFunc(s, func(r rune) bool { return r < '0' || r > '9' }) {
		return false
	}
	n, err := strconv.Atoi(s)
	return err == nil && n <= limit
}

// plainPathOrQuery reports whether a lower-cased path ("" or "/...") or
// query is made of characters outside both of the parser's percent-encode
// sets, and of escapes it keeps ("%" and two hex digits, not an encoded
// dot), a path with no "." or ".." segment.
func plainPathOrQuery(s string, query bool) bool {
	if !query && s != "" && s[0] != '/' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', strings.IndexByte("-._~!$&()*+,;=:@/", c) >= 0:
		case c == '?' && query:
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) && s[i+1:i+3] != "2e":
			i += 2
		default:
			return false
		}
	}
	if query {
		return true
	}
	for _, seg := range strings.Split(s, "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// dropWWW removes "www", any digits and a dot right after "http://" or
// "https://", as the replay tools do, before anything is lower-cased.
func dropWWW(uri string) string {
	scheme := "http://"
	if strings.HasPrefix(uri, "https://") {
		scheme = "https://"
	} else if !strings.HasPrefix(uri, scheme) {
		return uri
	}
	rest, ok := strings.CutPrefix(uri[len(scheme):], "www")
	if !ok {
		return uri
	}
	rest = strings.TrimLeft(rest, "0123456789")
	if rest, ok = strings.CutPrefix(rest, "."); !ok {
		return uri
	}
	return scheme + rest
}

// fieldSafe percent-encodes the bytes that would split a CDXJ line's
// key (space) or the line itself (control characters).
func fieldSafe(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c == 0x7f {
			const hex = "0123456789ABCDEF"
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
