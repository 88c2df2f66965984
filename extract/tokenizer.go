package extract

import (
	"bytes"
	"errors"
	"golang.org/x/net/html"
	"io"
)

// tokenizer splits an HTML document into the tokens golang.org/x/net/html's
// Tokenizer gives (the HTML5 tokenizer's data, tag, comment, raw text and
// script states), for a scan that needs each token's kind, raw bytes and
// text. It is that tokenizer's cost a page that this one removes: x/net
// reads a document one byte at a time through a method call and allocates
// a 4 KB buffer a page; this one finds the next '<', quote or '>' with
// bytes.IndexByte over a window of the input it keeps from page to page.
//
// A token is read from the window whole: when the window ends before the
// token does, more input is read and the token is read again from its
// start, so a state of the tokenizer is only ever the one between two
// tokens (the raw text element whose text comes next). FuzzTokenizer holds
// it to x/net's tokens, raw bytes and text, input read in any chunks.
type tokenizer struct {
	r   io.Reader
	buf []byte // the input read and not yet dropped; buf[start:] is unread
	// start and end are the current token's raw bytes in buf.
	start, end int
	// dataStart and dataEnd are a text token's text in buf.
	dataStart, dataEnd int
	kind               tokenKind
	// textIsRaw: the text is a raw text element's (no entities);
	// convertNUL: its NULs read as U+FFFD.
	textIsRaw, convertNUL bool
	// rawTag is the element whose raw text the next token reads ("" for
	// none): script, style, title and the others a start tag of which
	// switches the tokenizer to raw text.
	rawTag string
	// readErr is the reader's error (io.EOF at the end), once it returned
	// one; err is the error that ended the tokens, once they ended.
	readErr, err error
	// maxBuf caps a token's raw bytes, as x/net's SetMaxBuf does.
	maxBuf int
	// final: the window holds all the input a token may read (the reader
	// is done, or the cap is reached); limited: it is the cap.
	final, limited bool
	scratch        []byte // Text's result when it differs from the raw text
}

type tokenKind uint8

const (
	errorToken tokenKind = iota
	textToken
	startTagToken // and self-closing tags: the scan reads the "/" itself
	endTagToken
	commentToken // comments, doctypes, bogus comments and "</>": nothing the scan reads
)

// errTokenTooLong is x/net's ErrBufferExceeded: a token over maxBuf.
var errTokenTooLong = errors.New("extract: an HTML token is longer than the scan reads")

// initialTokenBuf is a tokenizer's first window; maxKeptTokenBuf is the
// largest kept for the next page.
const (
	initialTokenBuf = 8 << 10
	maxKeptTokenBuf = 64 << 10
)

// reset makes z read r from its start.
func (z *tokenizer) reset(r io.Reader, maxBuf int) {
	if cap(z.buf) > maxKeptTokenBuf || z.buf == nil {
		z.buf = make([]byte, 0, initialTokenBuf)
	}
	*z = tokenizer{r: r, buf: z.buf[:0], maxBuf: maxBuf, scratch: z.scratch[:0]}
}

// release drops the reader, for z to be pooled.
func (z *tokenizer) release() { z.r = nil }

// Raw returns the current token's bytes, valid until the next call to Next.
func (z *tokenizer) Raw() []byte { return z.buf[z.start:z.end] }

// Err returns the error that ended the tokens: io.EOF at the input's end.
func (z *tokenizer) Err() error { return z.err }

// Next reads the next token and returns its kind.
func (z *tokenizer) Next() tokenKind {
	z.start = z.end
	if z.err != nil {
		z.kind = errorToken
		return z.kind
	}
	for {
		window := len(z.buf) - z.start
		if z.maxBuf > 0 && window >= z.maxBuf {
			// x/net fails on reading a token's maxBuf-th byte: the window
			// holds one byte less, and a read past it fails with the cap.
			z.final, z.limited, window = true, true, z.maxBuf-1
		} else {
			z.final, z.limited = z.readErr != nil, false
		}
		kind, n, more := z.token(z.buf[z.start : z.start+window])
		if !more {
			z.kind, z.end = kind, z.start+n
			return kind
		}
		z.fill()
	}
}

// fill reads more input after what the window holds, dropping the tokens
// before the current one.
func (z *tokenizer) fill() {
	if z.start > 0 {
		n := copy(z.buf, z.buf[z.start:])
		z.buf, z.end, z.start = z.buf[:n], z.end-z.start, 0
	}
	if len(z.buf) == cap(z.buf) {
		grown := make([]byte, len(z.buf), 2*cap(z.buf))
		copy(grown, z.buf)
		z.buf = grown
	}
	for range 100 {
		n, err := z.r.Read(z.buf[len(z.buf):cap(z.buf)])
		z.buf = z.buf[:len(z.buf)+n]
		if err != nil {
			z.readErr = err
		}
		if n > 0 || err != nil {
			return
		}
	}
	z.readErr = io.ErrNoProgress
}

// stop is what a token reads when it runs past the window in its final
// state: it ends the tokens and returns where x/net's raw bytes end, one
// byte past the window when the cap stopped it (x/net counts the byte it
// failed on).
func (z *tokenizer) stop(window int) int {
	if z.limited {
		z.err = errTokenTooLong
		return window + 1
	}
	z.err = z.readErr
	return window
}

// token reads the token at the start of b: its kind and length, or more
// when b ends before the token does and more input may follow.
func (z *tokenizer) token(b []byte) (kind tokenKind, n int, more bool) {
	if z.rawTag != "" {
		n, more := z.rawText(b)
		if more {
			return 0, 0, true
		}
		if n > 0 {
			z.dataStart, z.dataEnd = z.start, z.start+n
			z.textIsRaw = z.rawTag != "textarea" && z.rawTag != "title"
			z.convertNUL = true
			if z.rawTag != "plaintext" { // plaintext runs to the end
				z.rawTag = ""
			}
			return textToken, n, false
		}
		if z.err != nil {
			return errorToken, 0, false
		}
		z.rawTag = ""
	}
	z.textIsRaw, z.convertNUL = false, false
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '<')
		if j < 0 {
			if !z.final {
				return 0, 0, true
			}
			if n := z.stop(len(b)); n > 0 {
				return z.text(n)
			}
			return errorToken, 0, false
		}
		i += j
		if i+1 >= len(b) {
			if !z.final {
				return 0, 0, true
			}
			return z.text(z.stop(len(b)))
		}
		switch c := b[i+1]; {
		case isASCIILetter(c), c == '/', c == '!', c == '?':
			if i > 0 {
				return z.text(i)
			}
			return z.markup(b)
		}
		i++ // the byte after '<' is read again: it may be a '<'
	}
}

func (z *tokenizer) text(n int) (tokenKind, int, bool) {
	z.dataStart, z.dataEnd = z.start, z.start+n
	return textToken, n, false
}

// markup reads the token b starts with: "<" and a letter, "/", "!" or "?".
func (z *tokenizer) markup(b []byte) (tokenKind, int, bool) {
	switch c := b[1]; {
	case isASCIILetter(c):
		n, more := z.tagEnd(b, 2)
		if more || n < 0 {
			return errorToken, 0, more
		}
		z.rawTag = rawTextElement(b[1:tagNameEnd(b, 1)])
		return startTagToken, n, false
	case c == '/':
		if len(b) < 3 {
			if !z.final {
				return 0, 0, true
			}
			// "</" at the end is text, as in x/net.
			return z.text(z.stop(len(b)))
		}
		switch c := b[2]; {
		case c == '>':
			return commentToken, 3, false
		case isASCIILetter(c):
			n, more := z.tagEnd(b, 3)
			if more || n < 0 {
				return errorToken, 0, more
			}
			return endTagToken, n, false
		}
		return z.untilCloseAngle(b, 2)
	case c == '!':
		if len(b) >= 4 && b[2] == '-' && b[3] == '-' {
			return z.comment(b)
		}
		if len(b) < 4 {
			// x/net reads the two bytes after "<!" first: the input
			// ending before them ends the tokens with a bogus comment.
			if !z.final {
				return 0, 0, true
			}
			return commentToken, z.stop(len(b)), false
		}
		// A doctype and a bogus comment both end at the first '>': the
		// scan reads neither.
		return z.untilCloseAngle(b, 2)
	}
	return z.untilCloseAngle(b, 1) // "<?": a bogus comment
}

// untilCloseAngle reads a comment token ending at the first '>' from i.
func (z *tokenizer) untilCloseAngle(b []byte, i int) (tokenKind, int, bool) {
	if j := bytes.IndexByte(b[i:], '>'); j >= 0 {
		return commentToken, i + j + 1, false
	}
	if !z.final {
		return 0, 0, true
	}
	return commentToken, z.stop(len(b)), false
}

// comment reads a "<!--" comment, ended as the HTML5 tokenizer ends one:
// at "-->", at "--!>", or at once by "<!-->" and "<!--->".
func (z *tokenizer) comment(b []byte) (tokenKind, int, bool) {
	dashes, beginning := 0, true
	for i := 4; ; i++ {
		if i >= len(b) {
			if !z.final {
				return 0, 0, true
			}
			return commentToken, z.stop(len(b)), false
		}
		switch b[i] {
		case '-':
			dashes++
			continue
		case '>':
			if dashes >= 2 || beginning {
				return commentToken, i + 1, false
			}
		case '!':
			if dashes >= 2 {
				i++
				if i >= len(b) {
					if !z.final {
						return 0, 0, true
					}
					return commentToken, z.stop(len(b)), false
				}
				switch b[i] {
				case '>':
					return commentToken, i + 1, false
				case '-':
					dashes, beginning = 1, false
					continue
				}
			}
		}
		dashes, beginning = 0, false
	}
}

// tagEnd returns the length of the tag b starts with, its name's second
// byte at i: it ends at the first '>' outside its attributes' quoted
// values. n is -1 when the input ends first, which x/net reads as the end
// of the tokens: an unfinished tag is no token.
func (z *tokenizer) tagEnd(b []byte, i int) (n int, more bool) {
	i = tagNameEnd(b, i)
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return z.unfinishedTag(b)
		}
		if b[i] == '>' {
			return i + 1, false
		}
		// The key; an '=' first is part of it.
		if b[i] == '=' {
			i++
		}
		for i < len(b) && !isSpace(b[i]) && b[i] != '=' && b[i] != '/' && b[i] != '>' {
			i++
		}
		// The value, if '=' follows.
		if i = skipSpace(b, i); i >= len(b) {
			return z.unfinishedTag(b)
		}
		switch b[i] {
		case '/':
			i++
			continue
		case '=':
		default:
			continue
		}
		if i = skipSpace(b, i+1); i >= len(b) {
			return z.unfinishedTag(b)
		}
		switch q := b[i]; q {
		case '>':
		case '"', '\'':
			j := bytes.IndexByte(b[i+1:], q)
			if j < 0 {
				return z.unfinishedTag(b)
			}
			i += j + 2
		default:
			for i < len(b) && !isSpace(b[i]) && b[i] != '>' {
				i++
			}
		}
	}
}

func (z *tokenizer) unfinishedTag(b []byte) (int, bool) {
	if !z.final {
		return 0, true
	}
	z.stop(len(b))
	return -1, false
}

// tagNameEnd returns where the tag name from i ends.
func tagNameEnd(b []byte, i int) int {
	for i < len(b) && !isTagNameEnd(b[i]) {
		i++
	}
	return i
}

// rawTextElement returns, as a constant, the element name names when a
// start tag of it switches the tokenizer to raw text, else "".
func rawTextElement(name []byte) string {
	if len(name) < 3 || len(name) > 9 {
		return ""
	}
	var lower [9]byte
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	switch string(lower[:len(name)]) {
	case "iframe":
		return "iframe"
	case "noembed":
		return "noembed"
	case "noframes":
		return "noframes"
	case "noscript":
		return "noscript"
	case "plaintext":
		return "plaintext"
	case "script":
		return "script"
	case "style":
		return "style"
	case "textarea":
		return "textarea"
	case "title":
		return "title"
	case "xmp":
		return "xmp"
	}
	return ""
}

// rawText returns the length of the raw text element's text b starts
// with: up to its end tag, or all of the input for plaintext.
func (z *tokenizer) rawText(b []byte) (n int, more bool) {
	switch z.rawTag {
	case "plaintext":
		if !z.final {
			return 0, true
		}
		return z.stop(len(b)), false
	case "script":
		return z.script(b)
	}
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '<')
		if j < 0 {
			return z.rawEnd(b)
		}
		i += j + 1
		if i >= len(b) {
			return z.rawEnd(b)
		}
		if b[i] != '/' {
			continue
		}
		switch m, _ := z.endTagAt(b, i+1); m {
		case endTagFound:
			return i - 1, false
		case endTagCut:
			return z.rawEnd(b)
		}
	}
}

// rawEnd is where raw text ends that runs to the end of the window.
func (z *tokenizer) rawEnd(b []byte) (int, bool) {
	if !z.final {
		return 0, true
	}
	return z.stop(len(b)), false
}

type endTagMatch uint8

const (
	endTagNot endTagMatch = iota
	endTagFound
	endTagCut // the window ends inside what may be the end tag
)

// endTagAt reports whether b holds, from i (after "</"), the raw text
// element's name in any case and then a space, '/' or '>'. When it does
// not, next is where reading resumes: the first byte that differed from
// the name (read again), or the byte after the name.
func (z *tokenizer) endTagAt(b []byte, i int) (m endTagMatch, next int) {
	name := z.rawTag
	for k := 0; k < len(name); k++ {
		if i+k >= len(b) {
			return endTagCut, 0
		}
		if c := b[i+k]; c != name[k] && c != name[k]-('a'-'A') {
			return endTagNot, i + k
		}
	}
	if i+len(name) >= len(b) {
		return endTagCut, 0
	}
	switch b[i+len(name)] {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		return endTagFound, 0
	}
	return endTagNot, i + len(name)
}

// The script data states of the HTML5 tokenizer: a script's "<!--" may
// hide a "<script>" whose "</script>" does not end the outer one.
const (
	scriptData = iota
	scriptEscaped
	scriptEscapedDash
	scriptEscapedDashDash
	scriptDoubleEscaped
	scriptDoubleEscapedDash
	scriptDoubleEscapedDashDash
)

// script returns the length of a script's text b starts with.
func (z *tokenizer) script(b []byte) (n int, more bool) {
	state := scriptData
	for i := 0; ; {
		if state == scriptData {
			j := bytes.IndexByte(b[i:], '<')
			if j < 0 {
				return z.rawEnd(b)
			}
			i += j
		}
		if i >= len(b) {
			return z.rawEnd(b)
		}
		c := b[i]
		i++
		switch state {
		case scriptData: // c is '<'
			if i >= len(b) {
				return z.rawEnd(b)
			}
			switch b[i] {
			case '/':
				m, next := z.endTagAt(b, i+1)
				switch m {
				case endTagFound:
					return i - 1, false
				case endTagCut:
					return z.rawEnd(b)
				}
				i = next // not the end tag: read on from where it differs
			case '!':
				// "<!--" escapes; "<!-" and "<!" alone do not.
				if i+1 >= len(b) {
					return z.rawEnd(b)
				}
				if b[i+1] != '-' {
					i++
					continue
				}
				if i+2 >= len(b) {
					return z.rawEnd(b)
				}
				if b[i+2] != '-' {
					i += 2
					continue
				}
				i += 3
				state = scriptEscapedDashDash
			}
		case scriptEscaped, scriptEscapedDash, scriptEscapedDashDash:
			switch c {
			case '-':
				state = min(state+1, scriptEscapedDashDash)
				continue
			case '>':
				if state == scriptEscapedDashDash {
					state = scriptData
					continue
				}
			case '<':
				if i >= len(b) {
					return z.rawEnd(b)
				}
				switch d := b[i]; {
				case d == '/':
					m, next := z.endTagAt(b, i+1)
					switch m {
					case endTagFound:
						return i - 1, false
					case endTagCut:
						return z.rawEnd(b)
					}
					i, state = next, scriptEscaped
					continue
				case isASCIILetter(d):
					next, double, cut := scriptWordAt(b, i)
					if cut {
						return z.rawEnd(b)
					}
					i = next
					if double {
						state = scriptDoubleEscaped
					} else {
						state = scriptEscaped
					}
					continue
				}
				// x/net goes back to the plain script data state here,
				// leaving the byte after '<' to be read again.
				state = scriptData
				continue
			}
			state = scriptEscaped
		default: // the double escaped states
			switch c {
			case '-':
				state = min(state+1, scriptDoubleEscapedDashDash)
				continue
			case '>':
				if state == scriptDoubleEscapedDashDash {
					state = scriptData
					continue
				}
			case '<':
				if i >= len(b) {
					return z.rawEnd(b)
				}
				if b[i] != '/' {
					state = scriptDoubleEscaped
					continue
				}
				m, next := z.endTagAt(b, i+1)
				switch m {
				case endTagFound:
					// "</script>" ends the hidden script, not this one.
					i += 1 + len("script") + 1
					state = scriptEscaped
					continue
				case endTagCut:
					return z.rawEnd(b)
				}
				i, state = next, scriptDoubleEscaped
				continue
			}
			state = scriptDoubleEscaped
		}
	}
}

// scriptWordAt reads, after "<" in an escaped script, whether "script" and
// a space, '/' or '>' follow (the start of a hidden script), and where
// reading resumes: after that byte, or at the first byte that differs.
func scriptWordAt(b []byte, i int) (next int, double, cut bool) {
	const word = "script"
	for k := 0; k < len(word); k++ {
		if i+k >= len(b) {
			return 0, false, true
		}
		if c := b[i+k]; c != word[k] && c != word[k]-('a'-'A') {
			return i + k, false, false
		}
	}
	j := i + len(word)
	if j >= len(b) {
		return 0, false, true
	}
	switch b[j] {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		return j + 1, true, false
	}
	return j, false, false
}

// Text returns a text token's text as x/net's Text does: line breaks
// normalised to "\n", entities decoded outside raw text, and NULs in raw
// text read as U+FFFD. It is valid until the next call to Next.
func (z *tokenizer) Text() []byte {
	if z.kind != textToken {
		return nil
	}
	s := z.buf[z.dataStart:z.dataEnd]
	if bytes.IndexByte(s, '\r') >= 0 {
		s = convertNewlines(s)
	}
	if z.convertNUL && bytes.IndexByte(s, 0) >= 0 {
		z.scratch = append(z.scratch[:0], bytes.ReplaceAll(s, []byte{0}, []byte("\ufffd"))...)
		s = z.scratch
	}
	if !z.textIsRaw && bytes.IndexByte(s, '&') >= 0 {
		z.scratch = append(z.scratch[:0], html.UnescapeString(string(s))...)
		s = z.scratch
	}
	return s
}

// convertNewlines rewrites s in place, "\r\n" and "\r" to "\n", and returns
// what it holds then.
func convertNewlines(s []byte) []byte {
	w := 0
	for r := 0; r < len(s); r++ {
		c := s[r]
		if c == '\r' {
			c = '\n'
			if r+1 < len(s) && s[r+1] == '\n' {
				r++
			}
		}
		s[w] = c
		w++
	}
	return s[:w]
}
