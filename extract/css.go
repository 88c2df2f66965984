package extract

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/css"

	"breakwater/frontier"
)

// ScanCSS reads a stylesheet from body as it arrives and returns the URLs
// it loads, all Requisite: @import rules (a string or a url()), url()
// tokens (quoted or not) and the strings of image-set(), resolved against
// cssURL, each once in the order they appear, at most 10,000. A url() in
// an @namespace rule names a namespace, not a resource, and is skipped;
// @import rules are taken wherever they appear, though a browser ignores
// those after the first style rule. The body is decoded from its BOM, its
// Content-Type's charset or its @charset rule first. Whether body is a
// stylesheet is the caller's to decide (IsCSS); contentType only gives the
// charset. Malformed CSS is read as a browser's tokenizer would and is
// never an error; a read error ends the scan with what was found, and the
// only error is an unusable cssURL.
func ScanCSS(cssURL, contentType string, body io.Reader) ([]Link, error) {
	return scanCSS(cssURL, contentType, body, cssWindow)
}

// scanCSS is ScanCSS reading window bytes of the stylesheet at a time.
func scanCSS(cssURL, contentType string, body io.Reader, window int) ([]Link, error) {
	base, err := frontier.ParseBaseURL(cssURL)
	if err != nil {
		return nil, fmt.Errorf("scan stylesheet: stylesheet url: %w", err)
	}
	set := newLinkSet(base, false)
	sc := cssScan{take: func(ref, construct string) { set.add(ref, Requisite, construct, "") }}
	lexStream(cssDecodedReader(bufio.NewReader(body), contentType), window, sc.token)
	return set.links, nil
}

const (
	// cssWindow is how much of a stylesheet is read and lexed at a time.
	cssWindow = 16 << 10
	// cssLookahead bounds how far past a token's end the lexer looks to
	// decide where that token ends (a number's exponent, an escape, a
	// unicode-range: a few code points). A token ending closer than this
	// to the end of the bytes read so far is lexed again with more.
	cssLookahead = 32
)

// lexStream feeds the CSS tokens of r to visit, reading window bytes at a
// time. The tdewolff lexer wants its whole input in memory; CSS
// tokenization keeps no state from one token to the next, so each window
// is lexed on its own, and the tokens that end too near its end to be
// sure of (cssLookahead) are carried into the next window and lexed again
// there. The tokens are those of lexing the whole stylesheet at once,
// whatever the window. A token that outgrows maxTokenBytes, or a read
// error, ends the stream.
func lexStream(r io.Reader, window int, visit func(css.TokenType, []byte)) {
	buf := make([]byte, 0, window+1) // +1: the lexer's NUL sentinel
	for {
		n, err := io.ReadFull(r, buf[len(buf):cap(buf)-1])
		buf = buf[:len(buf)+n]
		atEOF := err != nil
		done := lexWindow(buf, atEOF, visit)
		if atEOF {
			return
		}
		kept := copy(buf, buf[done:])
		buf = buf[:kept]
		if kept == cap(buf)-1 { // one token fills the window
			if kept >= maxTokenBytes {
				return
			}
			grown := make([]byte, kept, min(2*kept, maxTokenBytes+cssLookahead)+1)
			copy(grown, buf)
			buf = grown
		}
	}
}

// lexWindow feeds visit the tokens of buf, but for the last ones when more
// may follow (not atEOF), and returns how many bytes it fed. buf must have
// room for one more byte: the lexer writes a NUL there.
func lexWindow(buf []byte, atEOF bool, visit func(css.TokenType, []byte)) int {
	l := css.NewLexer(parse.NewInputBytes(buf))
	done := 0
	for {
		tt, text := l.Next()
		end := done + len(text)
		if tt == css.ErrorToken || !atEOF && end > len(buf)-cssLookahead {
			return done
		}
		visit(tt, text)
		done = end
	}
}

// lexBytes feeds visit the CSS tokens of b, held whole (a style attribute,
// a <style> element), copying it to scratch for the lexer's sentinel.
func lexBytes(b []byte, scratch *[]byte, visit func(css.TokenType, []byte)) {
	*scratch = append(append((*scratch)[:0], b...), 0)
	lexWindow((*scratch)[:len(b)], true, visit)
}

// cssScan picks the URLs out of a stream of CSS tokens.
type cssScan struct {
	take func(ref, construct string)
	// prelude is the at-rule whose prelude is being read.
	prelude atRule
	// depth counts the open functions and parentheses; imageSet is the
	// depth of the innermost open image-set(), or 0.
	depth, imageSet int
}

type atRule uint8

const (
	noAtRule  atRule = iota
	importAt         // @import: the next token is the stylesheet
	namespace        // @namespace: its url() is a name, skipped to ";"
)

func (sc *cssScan) token(tt css.TokenType, text []byte) {
	if tt == css.WhitespaceToken || tt == css.CommentToken {
		return
	}
	switch sc.prelude {
	case importAt:
		sc.prelude = noAtRule
		switch tt {
		case css.StringToken:
			sc.take(cssString(text), "@import")
			return
		case css.URLToken:
			sc.take(cssURLValue(text), "@import")
			return
		}
	case namespace:
		if tt == css.SemicolonToken || tt == css.LeftBraceToken || tt == css.RightBraceToken {
			sc.prelude = noAtRule
		}
		return
	}
	switch tt {
	case css.AtKeywordToken:
		switch {
		case parse.EqualFold(text, []byte("@import")):
			sc.prelude = importAt
		case parse.EqualFold(text, []byte("@namespace")):
			sc.prelude = namespace
		}
	case css.URLToken:
		sc.take(cssURLValue(text), "url")
	case css.StringToken:
		if sc.imageSet > 0 && sc.depth == sc.imageSet {
			sc.take(cssString(text), "image-set")
		}
	case css.FunctionToken:
		sc.depth++
		if parse.EqualFold(text, []byte("image-set(")) || parse.EqualFold(text, []byte("-webkit-image-set(")) {
			sc.imageSet = sc.depth
		}
	case css.LeftParenthesisToken:
		sc.depth++
	case css.RightParenthesisToken:
		if sc.depth == sc.imageSet {
			sc.imageSet = 0
		}
		sc.depth = max(sc.depth-1, 0)
	}
}

// cssString returns the value of a string token (quotes included in text,
// the closing one missing at the end of the input), escapes undone.
func cssString(text []byte) string {
	if len(text) == 0 {
		return ""
	}
	return unescapeCSS(text[1:], text[0])
}

// cssURLValue returns the URL of a url() token: "url(" (its name perhaps
// written with escapes, never with "("), whitespace, a string or a bare
// URL, whitespace and ")" (missing at the end of the input).
func cssURLValue(text []byte) string {
	rest := text[bytes.IndexByte(text, '(')+1:]
	rest = bytes.TrimLeft(rest, " \t\n\r\f")
	if len(rest) > 0 && (rest[0] == '"' || rest[0] == '\'') {
		return cssString(rest)
	}
	return unescapeCSS(rest, ')')
}

// unescapeCSS returns the text of b up to the first unescaped delim (or
// all of it), with CSS escapes undone as CSS Syntax does: "\" and up to
// six hex digits (and one whitespace after them) is that code point,
// U+FFFD if none can be; "\" and a newline is nothing (a string's line
// continuation); "\" and any other character is that character.
func unescapeCSS(b []byte, delim byte) string {
	end := bytes.IndexByte(b, delim)
	if end < 0 {
		end = len(b)
	}
	if bytes.IndexByte(b[:end], '\\') < 0 {
		return string(b[:end])
	}
	var out []byte
	i := 0
	for ; i < len(b) && b[i] != delim; i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		i++
		switch {
		case i == len(b):
		case b[i] == '\r' && i+1 < len(b) && b[i+1] == '\n':
			i++
		case b[i] == '\n' || b[i] == '\r' || b[i] == '\f':
		case isHex(b[i]):
			var r rune
			j := i
			for ; j < len(b) && j < i+6 && isHex(b[j]); j++ {
				r = r<<4 | rune(hexValue(b[j]))
			}
			if r == 0 || r > utf8.MaxRune || 0xD800 <= r && r <= 0xDFFF {
				r = utf8.RuneError
			}
			out = utf8.AppendRune(out, r)
			i = j - 1
			if j < len(b) && isHTMLSpace(b[j]) {
				i = j
				if b[j] == '\r' && j+1 < len(b) && b[j+1] == '\n' {
					i++
				}
			}
		default:
			_, n := utf8.DecodeRune(b[i:])
			out = append(out, b[i:i+n]...)
			i += n - 1
		}
	}
	return string(out)
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c|0x20 && c|0x20 <= 'f' }

func hexValue(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c | 0x20 - 'a' + 10
}
