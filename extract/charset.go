package extract

import (
	"bufio"
	"bytes"
	"io"
	"mime"
	"net/http"
	"strings"

	"golang.org/x/net/html/charset"
)

// IsHTML reports whether a body is an HTML page: by its Content-Type, or
// when that is empty by its first bytes (sniff, up to 512 of them). It is
// what ScanHTML reads and what it skips.
func IsHTML(contentType string, sniff []byte) bool {
	return htmlMediaType(contentType, sniff) != ""
}

// IsCSS reports whether the Content-Type is a stylesheet's (text/css).
// Browsers apply a stylesheet served as anything else only to a quirks
// mode page of its own origin, so this is the test a crawler wants.
func IsCSS(contentType string) bool {
	return mediaType(contentType) == "text/css"
}

// htmlMediaType returns "text/html" or "application/xhtml+xml" when the
// declared (or, if none, sniffed) type is HTML, else "".
func htmlMediaType(contentType string, body []byte) string {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	if mt := mediaType(contentType); mt == "text/html" || mt == "application/xhtml+xml" {
		return mt
	}
	return ""
}

// mediaType returns the Content-Type's type and subtype, lower case: the
// type before ";", as mime.ParseMediaType gives it for a valid one, and
// what counts when servers send junk parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// charsetParam returns the Content-Type's charset parameter, lower case,
// or "".
func charsetParam(contentType string) string {
	if cs, ok := simpleCharset(contentType); ok {
		return cs
	}
	_, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(params["charset"]))
}

// simpleCharset reads the charset of the common Content-Type forms
// ("text/html", "text/html; charset=UTF-8") without mime.ParseMediaType's
// map and copies, 4 of a page scan's allocations; ok is false for any
// other form, which ParseMediaType then reads.
func simpleCharset(ct string) (charset string, ok bool) {
	typ, param, hasParam := strings.Cut(ct, ";")
	if !isSimpleToken(strings.TrimSpace(typ), true) {
		return "", false
	}
	if !hasParam {
		return "", true
	}
	key, value, found := strings.Cut(strings.TrimSpace(param), "=")
	if !found || !strings.EqualFold(key, "charset") || !isSimpleToken(value, false) {
		return "", false
	}
	return strings.ToLower(value), true
}

// isSimpleToken: letters, digits and "-_.+" (and one "/" in a media type).
func isSimpleToken(s string, mediaType bool) bool {
	slashes := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.', c == '+':
		case c == '/' && mediaType:
			slashes++
		default:
			return false
		}
	}
	return s != "" && (!mediaType || slashes == 1 && s[0] != '/' && s[len(s)-1] != '/')
}

// decodedReader converts a page to UTF-8 from the charset named by the
// Content-Type, a BOM or a <meta> tag (charset peeks at the first 1024
// bytes). A body declared UTF-8 without a UTF-16 BOM (the one thing that
// outranks the server's charset) is read as is: the tokenizer copes with
// invalid bytes, and the title is made valid at the end.
func decodedReader(body *bufio.Reader, contentType string) io.Reader {
	if bom, _ := body.Peek(2); declaresUTF8(contentType) && !isUTF16BOM(bom) {
		return body
	}
	r, err := charset.NewReader(body, contentType)
	if err != nil {
		return body
	}
	return r
}

// declaresUTF8 reports whether the Content-Type names UTF-8 as the charset.
// The server's charset outranks a <meta> tag; only a BOM outranks it, and a
// UTF-16 BOM is not valid UTF-8, so such a body still takes the slow path.
func declaresUTF8(contentType string) bool {
	cs := charsetParam(contentType)
	return cs == "utf-8" || cs == "utf8"
}

func isUTF16BOM(b []byte) bool {
	return bytes.HasPrefix(b, []byte{0xFE, 0xFF}) || bytes.HasPrefix(b, []byte{0xFF, 0xFE})
}

// cssDecodedReader converts a stylesheet to UTF-8, taking its encoding as
// CSS Syntax does: a BOM, else the Content-Type's charset, else a leading
// @charset rule (where a UTF-16 label means UTF-8), else UTF-8. Bytes
// already UTF-8 are read as they are: the lexer copes with invalid ones.
func cssDecodedReader(body *bufio.Reader, contentType string) io.Reader {
	head, _ := body.Peek(3)
	switch {
	case bytes.HasPrefix(head, []byte{0xEF, 0xBB, 0xBF}):
		_, _ = body.Discard(3)
		return body
	case bytes.HasPrefix(head, []byte{0xFE, 0xFF}):
		_, _ = body.Discard(2)
		return decodeFrom(body, "utf-16be")
	case bytes.HasPrefix(head, []byte{0xFF, 0xFE}):
		_, _ = body.Discard(2)
		return decodeFrom(body, "utf-16le")
	}
	if label := charsetParam(contentType); label != "" {
		return decodeFrom(body, label)
	}
	label := atCharset(body)
	if _, name := charset.Lookup(label); name == "utf-16be" || name == "utf-16le" {
		return body
	}
	return decodeFrom(body, label)
}

// atCharset returns the label of a @charset rule that opens the
// stylesheet, written exactly as CSS Syntax requires (`@charset "x";`
// within the first 1024 bytes), or "".
func atCharset(body *bufio.Reader) string {
	const open = `@charset "`
	head, _ := body.Peek(1024)
	if !bytes.HasPrefix(head, []byte(open)) {
		return ""
	}
	label, _, found := bytes.Cut(head[len(open):], []byte(`";`))
	if !found || bytes.IndexByte(label, '"') >= 0 {
		return ""
	}
	return string(label)
}

// decodeFrom reads body as the named encoding, or as it is when the label
// is unknown or names UTF-8.
func decodeFrom(body io.Reader, label string) io.Reader {
	enc, name := charset.Lookup(label)
	if enc == nil || name == "utf-8" {
		return body
	}
	return enc.NewDecoder().Reader(body)
}
