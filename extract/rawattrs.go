package extract

import "bytes"

// rawAttrs calls each with the attributes of the start tag raw (the
// token's bytes, "<" to ">"), read as the tokenizer reads them: keys of up
// to 32 bytes in lower case (longer ones as they are: no attribute the
// scan wants is that long), none empty, in order, a key given again
// after its first (the tokenizer keeps the first only, as the scan does).
// The tokenizer's TagAttr
// copies every key and value it returns; when raw holds nothing it would
// rewrite (a NUL, an entity's "&", a CR), the bytes are the values as they
// are, and rawAttrs reads them in place. Otherwise it calls nothing and
// returns false, for TagAttr to read. key is valid only during each.
func rawAttrs(raw []byte, each func(key, val []byte)) bool {
	if bytes.IndexByte(raw, 0) >= 0 || bytes.IndexByte(raw, '&') >= 0 || bytes.IndexByte(raw, '\r') >= 0 {
		return false
	}
	var lowered [32]byte
	i, n := 1, len(raw)
	for i < n && !isTagNameEnd(raw[i]) {
		i++
	}
	if i < n && isSpace(raw[i]) {
		i++ // the tag name's end, consumed
	}
	i = skipSpace(raw, i)
	for i < n && raw[i] != '>' {
		// The key: an "=" first is part of it.
		ks := i
		for i < n {
			c := raw[i]
			i++
			if c == '=' && i == ks+1 {
				continue
			}
			if c == '=' || isSpace(c) || c == '/' || c == '>' {
				i--
				break
			}
		}
		key := raw[ks:i]
		var val []byte
		// The value, if "=" follows.
		if i = skipSpace(raw, i); i < n {
			c := raw[i]
			i++
			switch {
			case c == '/':
			case c != '=':
				i--
			default:
				if i = skipSpace(raw, i); i < n {
					switch q := raw[i]; q {
					case '>':
					case '\'', '"':
						i++
						if j := bytes.IndexByte(raw[i:], q); j >= 0 {
							val, i = raw[i:i+j], i+j+1
						} else {
							val, i = raw[i:], n
						}
					default:
						vs := i
						for i < n && !isSpace(raw[i]) && raw[i] != '>' {
							i++
						}
						val = raw[vs:i]
						if i < n && isSpace(raw[i]) {
							i++
						}
					}
				}
			}
		}
		if len(key) > 0 {
			k := key
			if len(key) <= len(lowered) {
				k = lowered[:len(key)]
				for j, c := range key {
					if 'A' <= c && c <= 'Z' {
						c += 'a' - 'A'
					}
					k[j] = c
				}
			}
			each(k, val)
		}
		i = skipSpace(raw, i)
	}
	return true
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
