package warc

import (
	"bytes"

	"breakwater/fetch"
)

// SecretMarker stands in a request record for the value of a secret
// header (see cleanRequest), so that whoever reads the archive sees that
// a credential was sent without seeing it.
const SecretMarker = "[masked by breakwater]"

// warcinfo's field and values saying whether request records keep secret
// header values.
const (
	secretsField  = "breakwater-secrets"
	secretsMasked = "masked"
	secretsKept   = "kept"
)

// cleanRequest returns the request raw as its record keeps it: the
// request to the origin as it would have gone without a proxy, and, with
// mask, without the credentials the crawl was given.
//
//   - The request line is in origin-form ("GET /path?q HTTP/1.1"): an
//     HTTP proxy is sent the absolute form ("GET http://host/path"), and
//     a target with no path is "/".
//   - Proxy-Authorization and Proxy-Connection are left out: they were the
//     proxy's, and the first is the proxy's password. This holds whatever
//     mask says.
//   - With mask, the value of every header fetch.IsSecretHeader names
//     (Authorization, Cookie, tokens...) is SecretMarker. An empty value
//     stays empty.
//
// Names are matched without regard to case. Only the header block is
// read: what follows its empty line is kept as it is, and a request cut
// before its end is cleaned as far as it goes. A line that is no header
// field (no colon) is kept as it is; a folded line (starting with a space
// or a tab) belongs to the field above it, and is left out or masked with
// it. raw itself is returned when nothing changes; otherwise the result
// is built in one allocation. It runs for every page archived.
func cleanRequest(raw []byte, mask bool) []byte {
	var store [8]requestEdit
	edits := store[:0]
	line, next := cutLine(raw, 0)
	if e, ok := originForm(raw[:line]); ok {
		edits = append(edits, e)
	}
	// The field being read: its first byte, and where its value starts
	// (-1 when it is neither dropped nor masked).
	var f struct {
		start, value, end, contentEnd int
		drop                          bool
	}
	f.value = -1
	finish := func() {
		switch {
		case f.drop:
			edits = append(edits, requestEdit{start: f.start, end: f.end})
		case f.value >= 0 && f.value < f.contentEnd:
			edits = append(edits, requestEdit{start: f.value, end: f.contentEnd, pre: SecretMarker})
		}
		f.drop, f.value = false, -1
	}
	for pos := next; pos < len(raw); pos = next {
		line, next = cutLine(raw, pos)
		if line == pos {
			break // the empty line: the header block ends
		}
		if c := raw[pos]; c == ' ' || c == '\t' {
			f.end, f.contentEnd = next, line // a folded line goes with its field
			continue
		}
		finish()
		content := raw[pos:line]
		colon := bytes.IndexByte(content, ':')
		if colon < 0 {
			continue // no header field: kept as it is
		}
		name := bytes.TrimRight(content[:colon], " \t")
		f.start, f.end, f.contentEnd = pos, next, line
		switch {
		case bytes.EqualFold(name, []byte("Proxy-Authorization")), bytes.EqualFold(name, []byte("Proxy-Connection")):
			f.drop = true
		case mask && fetch.IsSecretHeader(string(name)):
			v := pos + colon + 1
			for v < line && (raw[v] == ' ' || raw[v] == '\t') {
				v++
			}
			f.value = v
		}
	}
	finish()
	if len(edits) == 0 {
		return raw
	}
	size := len(raw)
	for _, e := range edits {
		size += len(e.pre) + len(e.keep) - (e.end - e.start)
	}
	out := make([]byte, 0, size)
	at := 0
	for _, e := range edits {
		out = append(out, raw[at:e.start]...)
		out = append(out, e.pre...)
		out = append(out, e.keep...)
		at = e.end
	}
	return append(out, raw[at:]...)
}

// requestEdit replaces raw[start:end] with pre followed by keep.
type requestEdit struct {
	start, end int
	pre        string
	keep       []byte
}

// cutLine returns where the line of raw starting at pos ends, before its
// CRLF or LF, and where the next line starts (len(raw) for a last line
// without an ending).
func cutLine(raw []byte, pos int) (contentEnd, next int) {
	i := bytes.IndexByte(raw[pos:], '\n')
	if i < 0 {
		return len(raw), len(raw)
	}
	end := pos + i
	next = end + 1
	if end > pos && raw[end-1] == '\r' {
		end--
	}
	return end, next
}

// originForm returns the edit that puts the request line's target in
// origin-form, if it is in absolute-form ("scheme://authority[/path][?q]").
// Other targets ("/path", "*", a CONNECT's host:port) and lines that are
// not "METHOD TARGET VERSION" are left alone.
func originForm(line []byte) (requestEdit, bool) {
	sp := bytes.IndexByte(line, ' ')
	if sp < 0 {
		return requestEdit{}, false
	}
	start := sp + 1
	n := bytes.IndexByte(line[start:], ' ')
	if n < 0 {
		return requestEdit{}, false
	}
	target := line[start : start+n]
	sep := bytes.Index(target, []byte("://"))
	if sep <= 0 || !isScheme(target[:sep]) {
		return requestEdit{}, false
	}
	e := requestEdit{start: start, end: start + n}
	rest := target[sep+3:]
	switch i := bytes.IndexAny(rest, "/?"); {
	case i < 0:
		e.pre = "/"
	case rest[i] == '/':
		e.keep = rest[i:]
	default:
		e.pre, e.keep = "/", rest[i:]
	}
	return e, true
}

// isScheme reports whether s is a URI scheme (RFC 3986: a letter, then
// letters, digits, "+", "-" or ".").
func isScheme(s []byte) bool {
	for i, c := range s {
		letter := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !letter && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return len(s) > 0
}
