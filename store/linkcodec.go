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
//	string    the page's URL (a uvarint length and its bytes)
//
// then per link
//
//	16 bytes  the target's Hash
//	1 byte    kind in bits 0-1, rel in bits 2-4
//	1 byte    where it was written: an index into linkPlaces, or
//	          placeEscape followed by element and attr, each a uvarint
//	          length and its bytes
//	string    the anchor text
//	uvarint   how many bytes the target's URL shares with the page's,
//	          then the rest of it as a string
//
// Nothing else: the page's Hash is the record's key. A record names its
// page and targets itself: a table from hash to URL, written once per URL,
// was a random insert into a B-tree for every new target, and rewrote most
// of that table's pages at every commit of a large crawl. Records of
// format linksFormatHashed, written before, name neither (the store's URL
// table does); those of linksFormatBare have no page part either.
const (
	linksFormatBare   = 1
	linksFormatHashed = 2
	linksFormat       = 3
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
	// URL is the page's, which a record names (Named).
	URL string
	// Known is false for a record written before pages were described.
	Known bool
	// Named is false for a record written before records named their
	// page and targets: their URLs are in the store's URL table.
	Named bool
}

// LinksPageOf is what a links record keeps of it with directives d.
func LinksPageOf(it Item, d Directives) LinksPage {
	hops := 0
	if it.Kind == KindRequisite {
		hops = max(it.Hops, 1)
	}
	return LinksPage{Depth: it.Depth, Hops: hops, Directives: d, URL: it.URL, Known: true, Named: true}
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

// EncodeLinks encodes a page's links as one record (see linksFormat),
// naming the page by page.URL and each target by its Edge.To.
// The caller's goroutine pays for it, not the single writer's.
func EncodeLinks(page LinksPage, links []Outlink) []byte {
	size := 1 + uvarintLen(uint64(max(page.Depth, 0))) + uvarintLen(uint64(max(page.Hops, 0))) + 1 +
		uvarintLen(uint64(len(page.URL))) + len(page.URL)
	for i := range links {
		e := &links[i].Edge
		size += 16 + 2 + uvarintLen(uint64(len(e.Text))) + len(e.Text)
		if _, ok := placeCodes[[2]string{e.Element, e.Attr}]; !ok {
			size += uvarintLen(uint64(len(e.Element))) + len(e.Element) + uvarintLen(uint64(len(e.Attr))) + len(e.Attr)
		}
		shared := sharedPrefix(page.URL, e.To)
		size += uvarintLen(uint64(shared)) + uvarintLen(uint64(len(e.To)-shared)) + len(e.To) - shared
	}
	out := make([]byte, 0, size)
	out = append(out, linksFormat)
	out = binary.AppendUvarint(out, uint64(max(page.Depth, 0)))
	out = binary.AppendUvarint(out, uint64(max(page.Hops, 0)))
	out = append(out, byte(page.Directives))
	out = appendString(out, page.URL)
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
		shared := sharedPrefix(page.URL, e.To)
		out = binary.AppendUvarint(out, uint64(shared))
		out = appendString(out, e.To[shared:])
	}
	return out
}

// sharedPrefix is the length of the longest common prefix of a and b:
// a page's links mostly go to its own site, whose scheme and host, often
// more, their URLs share with it.
func sharedPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
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
	if len(rec) == 0 || rec[0] < linksFormatBare || rec[0] > linksFormat {
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
	rest = rest[n+1:]
	if rec[0] == linksFormat {
		var ok bool
		if page.URL, rest, ok = cutString(rest); !ok {
			return page, nil, fmt.Errorf("%w: the page's URL cut short", ErrBadLinks)
		}
		page.Named = true
	}
	return page, rest, nil
}

// DecodeLinksPage returns what a links record keeps of its page.
func DecodeLinksPage(rec []byte) (LinksPage, error) {
	page, _, err := splitLinks(rec)
	return page, err
}

// DecodeLinks calls fn with each link of a record made by EncodeLinks, in
// the order encoded, its Edge's From and To named by the record; in a
// record that does not name them (LinksPage.Named) both are left empty,
// for the caller to name from its URL table. It stops at fn's first error.
func DecodeLinks(rec []byte, fn func(Outlink) error) error {
	page, rest, err := splitLinks(rec)
	if err != nil {
		return err
	}
	for len(rest) > 0 {
		var l Outlink
		var err error
		if l, rest, err = decodeOutlink(rest, page); err != nil {
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
	page, rest, err := splitLinks(rec)
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
		if rest, err = skipOutlink(rest, page.Named); err != nil {
			return fmt.Errorf("link %d: %w", i, err)
		}
	}
	return nil
}

func decodeOutlink(b []byte, page LinksPage) (Outlink, []byte, error) {
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
	if page.Named {
		shared, n := binary.Uvarint(rest)
		if n <= 0 || shared > uint64(len(page.URL)) {
			return l, b, fmt.Errorf("%w: a link's URL shares %d bytes of a %d-byte page URL", ErrBadLinks, shared, len(page.URL))
		}
		var suffix string
		if suffix, rest, ok = cutString(rest[n:]); !ok {
			return l, b, fmt.Errorf("%w: a link's URL cut short", ErrBadLinks)
		}
		l.Edge.From, l.Edge.To = page.URL, page.URL[:shared]+suffix
	}
	return l, rest, nil
}

// skipOutlink skips one link (at least 18 bytes) without copying its
// strings.
func skipOutlink(b []byte, named bool) ([]byte, error) {
	rest, ok := b[18:], true
	strings := 1
	if b[17] == placeEscape {
		strings = 3
	}
	for ; strings > 0 && ok; strings-- {
		rest, ok = skipString(rest)
	}
	if named && ok {
		// The target's URL: its shared length, then the rest.
		if _, n := binary.Uvarint(rest); n <= 0 {
			ok = false
		} else {
			rest, ok = skipString(rest[n:])
		}
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
