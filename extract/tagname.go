package extract

import "bytes"

// tagName returns the lower-cased name of the tag token raw ("<" or "</",
// a letter, ...), read into buf, and whether attributes may follow it. A
// NUL in the name reads as U+FFFD, as in x/net's TagName.
func tagName(raw, buf []byte) (name []byte, mayHaveAttr bool, _ []byte) {
	i := 1 // after '<'
	if i < len(raw) && raw[i] == '/' {
		i++
	}
	start := i
	for i < len(raw) && !isTagNameEnd(raw[i]) {
		i++
	}
	buf = buf[:0]
	hasNUL := bytes.IndexByte(raw[start:i], 0) >= 0
	for _, c := range raw[start:i] {
		switch {
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		case c == 0 && hasNUL:
			buf = append(buf, "\ufffd"...)
			continue
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
