package extract

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"breakwater/store"
)

// ParseRobotsDirectives reads a comma-separated list of robots directives,
// as <meta name="robots" content> and X-Robots-Tag carry them, in any case:
// noindex, nofollow, noarchive, and none (noindex and nofollow). The other
// directives ("all", "index", "max-snippet: 20", "unavailable_after: ...")
// say nothing the crawl keeps and are ignored.
func ParseRobotsDirectives(list string) store.Directives {
	var d store.Directives
	for _, item := range strings.Split(list, ",") {
		switch strings.ToLower(strings.TrimSpace(item)) {
		case "noindex":
			d |= store.Noindex
		case "nofollow":
			d |= store.Nofollow
		case "none":
			d |= store.Noindex | store.Nofollow
		case "noarchive":
			d |= store.Noarchive
		}
	}
	return d
}

// parseLinkRel reads a link's rel attribute, a set of space-separated
// keywords in any case, for what it says of the link: nofollow, ugc,
// sponsored.
func parseLinkRel(rel string) store.LinkRel {
	var r store.LinkRel
	for _, kw := range strings.Fields(rel) {
		switch strings.ToLower(kw) {
		case "nofollow":
			r |= store.RelNofollow
		case "ugc":
			r |= store.RelUGC
		case "sponsored":
			r |= store.RelSponsored
		}
	}
	return r
}

// textBuf gathers the text of an element as its tokens come: whitespace
// runs collapsed to one space, none at either end, invalid UTF-8 replaced,
// at most max runes (the rest is dropped as it arrives).
type textBuf struct {
	b     []byte
	runes int
	max   int
	space bool // a space is due before the next word
}

func (t *textBuf) reset(max int) { *t = textBuf{b: t.b[:0], max: max} }

func (t *textBuf) add(p []byte) {
	for len(p) > 0 && t.runes < t.max {
		r, size := utf8.DecodeRune(p)
		p = p[size:]
		if unicode.IsSpace(r) {
			t.wordBreak()
			continue
		}
		if t.space {
			t.space = false
			t.b = append(t.b, ' ')
			if t.runes++; t.runes == t.max {
				return
			}
		}
		t.b = utf8.AppendRune(t.b, r) // an invalid byte is U+FFFD
		t.runes++
	}
}

// wordBreak ends the word being written: a block element's edge, a <br>.
func (t *textBuf) wordBreak() { t.space = len(t.b) > 0 }

func (t *textBuf) String() string {
	s := string(t.b)
	return strings.TrimRight(s, " ")
}

// collapse is s with its whitespace collapsed, valid UTF-8, at most max
// runes.
func collapse(s string, max int) string {
	var t textBuf
	t.reset(max)
	t.add([]byte(s))
	return t.String()
}

// breaksWords reports whether a tag ends the word before it in the text
// a reader sees: a line break, or the edge of a block.
func breaksWords(name []byte) bool {
	switch string(name) {
	case "br", "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "td", "th", "tr", "table",
		"h1", "h2", "h3", "h4", "h5", "h6", "hr", "blockquote", "pre", "section", "article",
		"header", "footer", "nav", "aside", "figure", "figcaption", "address":
		return true
	}
	return false
}
