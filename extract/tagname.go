package extract

import (
	"bytes"

	"golang.org/x/net/html"
)

// tagName returns the lower-cased name of the tag token z holds, read from
// its raw bytes into buf, and whether attributes may follow it (TagAttr
// then says whether there are any). The tokenizer's TagName copies every
// name it returns, to replace NUL bytes: a tenth of a page's scan. A name
// holding a NUL, or raw bytes this does not read as a tag, are left to it.
func tagName(z *html.Tokenizer, buf []byte) (name []byte, mayHaveAttr bool, _ []byte) {
	raw := z.Raw()
	i := 1 // after '<'
	if i < len(raw) && raw[i] == '/' {
		i++
	}
	start := i
	for i < len(raw) && !isTagNameEnd(raw[i]) {
		i++
	}
	if start == i || start >= len(raw) || !isASCIILetter(raw[start]) || bytes.IndexByte(raw[start:i], 0) >= 0 {
		n, has := z.TagName()
		return n, has, buf
	}
	buf = buf[:0]
	for _, c := range raw[start:i] {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	for ; i < len(raw); i++ {
		if c := raw[i]; c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '/' && c != '>' {
			return buf, true, buf
		}
	}
	return buf, false, buf
}

func isTagNameEnd(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '/' || c == '>'
}

func isASCIILetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
