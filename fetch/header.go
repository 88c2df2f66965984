package fetch

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"
)

// ownedHeaders are the request headers a user may not set: the transport
// writes them from the URL or the connection, or they describe one hop
// rather than the request. The value says why, for the error.
var ownedHeaders = map[string]string{
	"Host":                "Host is set from the URL and cannot be overridden",
	"Content-Length":      "Content-Length frames the message and is set by the transport",
	"Transfer-Encoding":   "Transfer-Encoding frames the message and is set by the transport",
	"Trailer":             "Trailer frames the message and is set by the transport",
	"Te":                  "TE is a hop-by-hop header the transport manages",
	"Connection":          "Connection is a hop-by-hop header the transport manages",
	"Keep-Alive":          "Keep-Alive is a hop-by-hop header the transport manages",
	"Proxy-Connection":    "Proxy-Connection is a hop-by-hop header the transport manages",
	"Upgrade":             "Upgrade is a hop-by-hop header the transport manages",
	"Proxy-Authorization": "Proxy-Authorization belongs in the proxy URL (http://user:pass@host:port)",
	"Accept-Encoding": "Accept-Encoding is negotiated by the transport, which decodes gzip; " +
		"setting it would leave bodies compressed",
}

// ParseHeader parses one extra request header written "Name: value", as
// the --header flag takes it. Spaces around the name and the value are
// trimmed, the name is returned in canonical form and must be an HTTP
// token, and the value may be empty. The headers the transport owns or
// that are hop-by-hop (Host, Content-Length, Transfer-Encoding, Trailer,
// TE, Connection, Keep-Alive, Proxy-Connection, Upgrade,
// Proxy-Authorization, Accept-Encoding) are refused. Errors quote the
// input, with the value masked when the name is secret (IsSecretHeader).
func ParseHeader(s string) (name, value string, err error) {
	rawName, rawValue, ok := strings.Cut(s, ":")
	if !ok {
		// What follows the first word may be a secret typed without its
		// colon ("Authorization Bearer ..."): it is not shown.
		shown := s
		if i := strings.IndexAny(s, " =\t"); i >= 0 {
			shown = s[:i] + " " + MaskValue(strings.TrimSpace(s[i+1:]))
		}
		return "", "", fmt.Errorf("--header %q: want \"Name: value\", there is no colon", shown)
	}
	name, value = strings.TrimSpace(rawName), strings.TrimSpace(rawValue)
	shown := s
	if IsSecretHeader(name) {
		shown = name + ": " + MaskValue(value)
	}
	switch {
	case name == "":
		return "", "", fmt.Errorf("--header %q: the header name is empty", shown)
	case !httpguts.ValidHeaderFieldName(name):
		return "", "", fmt.Errorf("--header %q: %q is not a valid header name (an HTTP token)", shown, name)
	case !httpguts.ValidHeaderFieldValue(value):
		return "", "", fmt.Errorf("--header %q: the value holds a control character", shown)
	}
	name = http.CanonicalHeaderKey(name)
	if why, owned := ownedHeaders[name]; owned {
		return "", "", fmt.Errorf("--header %q: %s", shown, why)
	}
	return name, value, nil
}

// extraHeaders returns h with canonical names and without the headers
// ParseHeader refuses (a hand-edited setting must not break framing or
// gzip decoding), or nil when nothing is left, so a fetch without extra
// headers skips them with one nil check.
func extraHeaders(h http.Header) http.Header {
	var out http.Header
	for name, values := range h {
		name = http.CanonicalHeaderKey(name)
		if _, owned := ownedHeaders[name]; owned || len(values) == 0 {
			continue
		}
		if out == nil {
			out = make(http.Header, len(h))
		}
		// A copy, clipped: neither the caller's later edits nor an append
		// down the line can reach the slice every request shares.
		out[name] = slices.Clip(append(out[name], values...))
	}
	return out
}

// secretHeaderWords mark a header whose value is a credential when they
// appear anywhere in its name.
var secretHeaderWords = []string{"token", "secret", "api-key", "apikey", "api_key", "password", "passwd", "auth", "cookie", "session"}

// IsSecretHeader reports whether the value of the header name is a
// credential: status output masks it (MaskValue), the archive masks it in
// request records unless told to keep it, and a request WithoutSecrets
// leaves it out of Options.Header. It is true of Authorization,
// Cookie, Proxy-Authorization, and any name containing token, secret,
// api-key, apikey, api_key, password, passwd, auth, cookie or session,
// case-insensitively.
//
// It allocates nothing: the archive asks it of every request header it
// writes.
func IsSecretHeader(name string) bool {
	for i := range len(name) {
		for _, w := range secretWordsByFirst[lowerASCII(name[i])] {
			if hasPrefixFold(name[i:], w) {
				return true
			}
		}
	}
	return false
}

// secretWordsByFirst is secretHeaderWords by their first byte, so that
// IsSecretHeader reads a name once instead of once a word.
var secretWordsByFirst = func() (by [256][]string) {
	for _, w := range secretHeaderWords {
		by[w[0]] = append(by[w[0]], w)
	}
	return by
}()

// hasPrefixFold reports whether s starts with word, ASCII letters matched
// without regard to case; word is lower-case.
func hasPrefixFold(s, word string) bool {
	if len(s) < len(word) {
		return false
	}
	for j := range len(word) {
		if lowerASCII(s[j]) != word[j] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// maskShown is the most characters MaskValue reveals.
const maskShown = 3

// MaskValue hides a secret value for status output: at most its first
// three characters, and never more than a quarter of them, then its
// length, so "Bearer abcdef123" is "Bea…(16 bytes)" and "abc" is
// "…(3 bytes)". The empty value stays empty.
func MaskValue(v string) string {
	if v == "" {
		return ""
	}
	show := min(maskShown, utf8.RuneCountInString(v)/4)
	end := 0
	for range show {
		_, size := utf8.DecodeRuneInString(v[end:])
		end += size
	}
	return v[:end] + "…(" + strconv.Itoa(len(v)) + " bytes)"
}
