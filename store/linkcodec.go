package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Outlink is one link of a page as a batch carries it to the store: the
// edge (its From is the page's, and not encoded) and the hash of its
// target, by which the edge names the target.
type Outlink struct {
	To   Hash
	Edge Edge
}

// A page's links are stored as one record: a format byte, what the
// record says of its page (LinksPage)
//
//	uvarint   the page's depth
//	uvarint   its requisite hops, 0 for a page (a frame's document has some)
//	1 byte    its robots directives (Directives)
//
// then per link
//
//	16 bytes  the target's Hash (its URL is in the store's URL table)
//	1 byte    kind in bits 0-1, rel in bits 2-4
//	1 byte    where it was written: an index into linkPlaces, or
//	          placeEscape followed by element and attr, each a uvarint
//	          length and its bytes
//	uvarint   the anchor text's length, then its bytes
//
// Nothing else: the page itself is the record's key. Records of format
// linksFormatBare, written before pages were described, have no page part.
const (
	linksFormatBare = 1
	linksFormat     = 2
)

// LinksPage is what a links record keeps of its page, so that a later run
// with a wider scope can follow the page's links as the crawl would have:
// how deep the page is, whether it is a requisite (a frame's document) and
// how many hops from its page, and whether its robots directives keep its
// links from being followed.
type LinksPage struct {
	Depth      int
	Hops       int // > 0: the page is a requisite (a frame's document)
	Directives Directives
	// Known is false for a record written before pages were described.
	Known bool
}

// LinksPageOf is what a links record keeps of it with directives d.
func LinksPageOf(it Item, d Directives) LinksPage {
	hops := 0
	if it.Kind == KindRequisite {
		hops = max(it.Hops, 1)
	}
	return LinksPage{Depth: it.Depth, Hops: hops, Directives: d, Known: true}
}

// placeEscape marks an element and attribute not in linkPlaces, written
// out in full.
const placeEscape = 0

// linkPlaces are the element and attribute pairs the page scan writes
// (extract), each stored as its index: two strings an edge become one byte.
// Indexes are stored: append only.
var linkPlaces = [...][2]string{
	{}, // placeEscape
	{"a", "href"}, {"area", "href"}, {"iframe", "src"}, {"frame", "src"},
	{"img", "src"}, {"img", "srcset"}, {"source", "src"}, {"source", "srcset"},
	{"video", "src"}, {"video", "poster"}, {"audio", "src"}, {"track", "src"},
	{"embed", "src"}, {"script", "src"}, {"object", "data"}, {"input", "src"},
	{"link", "href"}, {"image", "href"}, {"image", "xlink:href"}, {"use", "href"},
	{"use", "xlink:href"}, {"style", "@import"}, {"style", "url"}, {"style", "image-set"},
	{"@import", ""}, {"url", ""}, {"image-set", ""},
	{"http", "Location"}, // a redirect's
}

var placeCodes = func() map[[2]string]byte {
	m := make(map[[2]string]byte, len(linkPlaces))
	for i, p := range linkPlaces[1:] {
		m[p] = byte(i + 1)
	}
	return m
}()

// ErrBadLinks is the error of a links record that does not decode.
var ErrBadLinks = errors.New("malformed links record")

const (
	kindMask = 0x03
	relShift = 2
	relMask  = 0x07
)

// EncodeLinks encodes a page's links as one record (see linksFormat).
// The caller's goroutine pays for it, not the single writer's.
func EncodeLinks(page LinksPage, links []Outlink) []byte {
	size := 1 + uvarintLen(uint64(max(page.Depth, 0))) + uvarintLen(uint64(max(page.Hops, 0))) + 1
	for i := range links {
		e := &links[i].Edge
		size += 16 + 2 + uvarintLen(uint64(len(e.Text))) + len(e.Text)
		if _, ok := placeCodes[[2]string{e.Element, e.Attr}]; !ok {
			size += uvarintLen(uint64(len(e.Element))) + len(e.Element) + uvarintLen(uint64(len(e.Attr))) + len(e.Attr)
		}
	}
	out := make([]byte, 0, size)
	out = append(out, linksFormat)
	out = binary.AppendUvarint(out, uint64(max(page.Depth, 0)))
	out = binary.AppendUvarint(out, uint64(max(page.Hops, 0)))
	out = append(out, byte(page.Directives))
	for i := range links {
		e := &links[i].Edge
		out = append(out, links[i].To[:]...)
		out = append(out, byte(e.Kind)&kindMask|(byte(e.Rel)&relMask)<<relShift)
		if code, ok := placeCodes[[2]string{e.Element, e.Attr}]; ok {
			out = append(out, code)
		} else {
			out = append(out, placeEscape)
			out = appendString(out, e.Element)
			out = appendString(out, e.Attr)
		}
		out = appendString(out, e.Text)
	}
	return out
}

// LinksEmpty reports whether a links record holds no link: a page that
// has none keeps no record.
func LinksEmpty(rec []byte) bool {
	_, rest, err := splitLinks(rec)
	return err == nil && len(rest) == 0
}

// splitLinks parses a links record's format and page part and returns
// the links part.
func splitLinks(rec []byte) (LinksPage, []byte, error) {
	var page LinksPage
	if len(rec) == 0 || rec[0] != linksFormat && rec[0] != linksFormatBare {
		return page, nil, fmt.Errorf("%w: format %x", ErrBadLinks, rec[:min(len(rec), 1)])
	}
	if rec[0] == linksFormatBare {
		return page, rec[1:], nil
	}
	rest := rec[1:]
	depth, n := binary.Uvarint(rest)
	if n <= 0 || depth > 1<<31 {
		return page, nil, fmt.Errorf("%w: the page's depth", ErrBadLinks)
	}
	rest = rest[n:]
	hops, n := binary.Uvarint(rest)
	if n <= 0 || hops > 1<<31 || len(rest) < n+1 {
		return page, nil, fmt.Errorf("%w: the page's hops and directives", ErrBadLinks)
	}
	page = LinksPage{Depth: int(depth), Hops: int(hops), Directives: Directives(rest[n]), Known: true}
	return page, rest[n+1:], nil
}

// DecodeLinksPage returns what a links record keeps of its page.
func DecodeLinksPage(rec []byte) (LinksPage, error) {
	page, _, err := splitLinks(rec)
	return page, err
}

// DecodeLinks calls fn with each link of a record made by EncodeLinks, in
// the order encoded; the Edge's From and To are left empty, for the
// caller to name from its URL table. It stops at fn's first error.
func DecodeLinks(rec []byte, fn func(Outlink) error) error {
	_, rest, err := splitLinks(rec)
	if err != nil {
		return err
	}
	for len(rest) > 0 {
		var l Outlink
		var err error
		if l, rest, err = decodeOutlink(rest); err != nil {
			return err
		}
		if err := fn(l); err != nil {
			return err
		}
	}
	return nil
}

// LinkTargets calls fn with the target hash of each link of a record
// without decoding the rest: an inlinks scan reads every record.
func LinkTargets(rec []byte, fn func(i int, to Hash) bool) error {
	_, rest, err := splitLinks(rec)
	if err != nil {
		return err
	}
	for i := 0; len(rest) > 0; i++ {
		if len(rest) < 18 {
			return fmt.Errorf("%w: link %d cut short", ErrBadLinks, i)
		}
		if !fn(i, Hash(rest[:16])) {
			return nil
		}
		var err error
		if rest, err = skipOutlink(rest); err != nil {
			return fmt.Errorf("link %d: %w", i, err)
		}
	}
	return nil
}

func decodeOutlink(b []byte) (Outlink, []byte, error) {
	var l Outlink
	if len(b) < 18 {
		return l, b, fmt.Errorf("%w: a link cut short", ErrBadLinks)
	}
	l.To = Hash(b[:16])
	bits, code := b[16], b[17]
	l.Edge.Kind, l.Edge.Rel = LinkKind(bits&kindMask), LinkRel(bits>>relShift&relMask)
	if bits>>(relShift+3) != 0 || l.Edge.Kind > LinkRedirect {
		return l, b, fmt.Errorf("%w: kind and rel %#x", ErrBadLinks, bits)
	}
	rest := b[18:]
	ok := true
	switch {
	case code == placeEscape:
		if l.Edge.Element, rest, ok = cutString(rest); ok {
			l.Edge.Attr, rest, ok = cutString(rest)
		}
	case int(code) < len(linkPlaces):
		l.Edge.Element, l.Edge.Attr = linkPlaces[code][0], linkPlaces[code][1]
	default:
		return l, b, fmt.Errorf("%w: place %d", ErrBadLinks, code)
	}
	if ok {
		l.Edge.Text, rest, ok = cutString(rest)
	}
	if !ok {
		return l, b, fmt.Errorf("%w: a link's strings cut short", ErrBadLinks)
	}
	return l, rest, nil
}

// skipOutlink skips one link (at least 18 bytes) without copying its
// strings.
func skipOutlink(b []byte) ([]byte, error) {
	rest, ok := b[18:], true
	strings := 1
	if b[17] == placeEscape {
		strings = 3
	}
	for ; strings > 0 && ok; strings-- {
		rest, ok = skipString(rest)
	}
	if !ok {
		return b, fmt.Errorf("%w: a link's strings cut short", ErrBadLinks)
	}
	return rest, nil
}

func skipString(b []byte) ([]byte, bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return b, false
	}
	return b[k+int(n):], true
}
