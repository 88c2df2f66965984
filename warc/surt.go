package warc

import (
	"slices"
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
