package store

import (
	"encoding/binary"
	"errors"
	"testing"

	"pgregory.net/rapid"
)

// places draws element and attribute pairs: those of the code table, and
// strings it does not know (written out in full).
func drawOutlink(t *rapid.T) Outlink {
	var l Outlink
	copy(l.To[:], rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "to"))
	l.Edge.Kind = LinkKind(rapid.IntRange(0, int(LinkRedirect)).Draw(t, "kind"))
	l.Edge.Rel = LinkRel(rapid.IntRange(0, 7).Draw(t, "rel"))
	if rapid.Bool().Draw(t, "known") {
		p := linkPlaces[rapid.IntRange(1, len(linkPlaces)-1).Draw(t, "place")]
		l.Edge.Element, l.Edge.Attr = p[0], p[1]
	} else {
		l.Edge.Element = rapid.String().Draw(t, "element")
		l.Edge.Attr = rapid.String().Draw(t, "attr")
	}
	l.Edge.Text = rapid.String().Draw(t, "text")
	return l
}

func drawLinksPage(t *rapid.T) LinksPage {
	return LinksPage{Depth: rapid.IntRange(0, 1<<20).Draw(t, "depth"), Hops: rapid.IntRange(0, 8).Draw(t, "hops"),
		Directives: Directives(rapid.Byte().Draw(t, "directives")),
		URL:        rapid.SampledFrom([]string{"", "http://a.example/", "http://a.example/docs/p?id=1"}).Draw(t, "url"),
		Known:      true, Named: true}
}

// drawTarget draws a link's target URL: one sharing a prefix of the
// page's, as a site's own links do, or any string.
func drawTarget(t *rapid.T, page string) string {
	if rapid.Bool().Draw(t, "shared") {
		return page[:rapid.IntRange(0, len(page)).Draw(t, "prefix")] + rapid.String().Draw(t, "suffix")
	}
	return rapid.String().Draw(t, "to-url")
}

// hashedRecord is a record as files written before records named their
// URLs hold it (format 2, or format 1 when bare): no page URL, no target
// URLs.
func hashedRecord(page LinksPage, links []Outlink, bare bool) []byte {
	out := []byte{linksFormatHashed}
	if bare {
		out[0] = linksFormatBare
	} else {
		out = binary.AppendUvarint(out, uint64(page.Depth))
		out = binary.AppendUvarint(out, uint64(page.Hops))
		out = append(out, byte(page.Directives))
	}
	for _, l := range links {
		out = append(out, l.To[:]...)
		out = append(out, byte(l.Edge.Kind)|byte(l.Edge.Rel)<<relShift, placeEscape)
		out = appendString(out, l.Edge.Element)
		out = appendString(out, l.Edge.Attr)
		out = appendString(out, l.Edge.Text)
	}
	return out
}

func TestLinksRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		page := drawLinksPage(t)
		links := rapid.SliceOfN(rapid.Custom(drawOutlink), 0, 40).Draw(t, "links")
		for i := range links {
			links[i].Edge.To = drawTarget(t, page.URL)
		}
		rec := EncodeLinks(page, links)
		if got, err := DecodeLinksPage(rec); err != nil || got != page {
			t.Fatalf("page: got %+v, %v; want %+v", got, err, page)
		}
		if LinksEmpty(rec) != (len(links) == 0) {
			t.Fatalf("LinksEmpty(%x) with %d links", rec, len(links))
		}
		var got []Outlink
		if err := DecodeLinks(rec, func(l Outlink) error { got = append(got, l); return nil }); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(got) != len(links) {
			t.Fatalf("decoded %d links, encoded %d", len(got), len(links))
		}
		for i := range links {
			want := links[i]
			want.Edge.From = page.URL
			if got[i] != want {
				t.Fatalf("link %d: got %+v, want %+v", i, got[i], want)
			}
		}
		var targets []Hash
		if err := LinkTargets(rec, func(_ int, to Hash) bool { targets = append(targets, to); return true }); err != nil {
			t.Fatalf("targets: %v", err)
		}
		for i := range links {
			if targets[i] != links[i].To {
				t.Fatalf("target %d: got %x, want %x", i, targets[i], links[i].To)
			}
		}
	})
}

// A record cut anywhere, or with a byte changed to a value no encoding
// writes, is an error, never a panic or a link made up.
func TestLinksDecodeDamaged(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		page := drawLinksPage(t)
		links := rapid.SliceOfN(rapid.Custom(drawOutlink), 1, 5).Draw(t, "links")
		for i := range links {
			links[i].Edge.To = drawTarget(t, page.URL)
		}
		rec := EncodeLinks(page, links)
		cut := rapid.IntRange(0, len(rec)-1).Draw(t, "cut")
		if cut == len(EncodeLinks(page, nil)) {
			return // the empty record: no links, and valid
		}
		n := 0
		err := DecodeLinks(rec[:cut], func(Outlink) error { n++; return nil })
		if cut == 0 && !errors.Is(err, ErrBadLinks) {
			t.Fatalf("empty record: err %v", err)
		}
		if err == nil && n >= len(links) {
			t.Fatalf("a record cut at %d of %d gave all %d links", cut, len(rec), n)
		}
		_ = LinkTargets(rec[:cut], func(int, Hash) bool { return true })
	})
}

func TestLinksPlaceCodes(t *testing.T) {
	for code, p := range linkPlaces[1:] {
		if placeCodes[p] != byte(code+1) {
			t.Errorf("place %q: code %d, want %d (a pair listed twice?)", p, placeCodes[p], code+1)
		}
	}
	page := LinksPage{URL: "http://a.example/docs/"}
	head := len(EncodeLinks(page, nil))
	rec := EncodeLinks(page, []Outlink{{Edge: Edge{Element: "a", Attr: "href", To: "http://a.example/docs/p1"}}})
	// The hash, kind and place, the empty text, then the URL: 22 bytes
	// shared with the page's, and "p1".
	if len(rec)-head != 16+2+1+1+3 {
		t.Errorf("an <a href> link without text to a page beside its own takes %d bytes, want %d", len(rec)-head, 23)
	}
	rec[head+17] = byte(len(linkPlaces))
	if err := DecodeLinks(rec, func(Outlink) error { return nil }); !errors.Is(err, ErrBadLinks) {
		t.Errorf("unknown place code: err %v, want ErrBadLinks", err)
	}
}

// Records of the earlier formats, which named no URL (the URL table did),
// still decode: their links, unnamed, and a page that is not Named (nor
// Known, for the first format).
func TestLinksEarlierFormatsDecode(t *testing.T) {
	page := LinksPage{Depth: 3, Hops: 1, Directives: 5, Known: true}
	links := []Outlink{{To: Hash{1}, Edge: Edge{Element: "a", Attr: "href", Text: "x", Kind: LinkRequisite}},
		{To: Hash{2}, Edge: Edge{Element: "x-el", Attr: "x-attr", Rel: 3}}}
	for _, bare := range []bool{false, true} {
		rec := hashedRecord(page, links, bare)
		got, err := DecodeLinksPage(rec)
		want := page
		if bare {
			want = LinksPage{}
		}
		if err != nil || got != want {
			t.Fatalf("bare %v: page %+v, %v; want %+v", bare, got, err, want)
		}
		var decoded []Outlink
		if err := DecodeLinks(rec, func(l Outlink) error { decoded = append(decoded, l); return nil }); err != nil {
			t.Fatalf("bare %v: %v", bare, err)
		}
		if len(decoded) != len(links) || decoded[0] != links[0] || decoded[1] != links[1] {
			t.Fatalf("bare %v: links %+v, want %+v", bare, decoded, links)
		}
		n := 0
		if err := LinkTargets(rec, func(_ int, to Hash) bool { n++; return to == links[n-1].To }); err != nil || n != 2 {
			t.Fatalf("bare %v: %d targets, %v", bare, n, err)
		}
	}
	if !LinksEmpty([]byte{linksFormatBare}) || !LinksEmpty(hashedRecord(page, nil, false)) || !LinksEmpty(EncodeLinks(LinksPage{URL: "u"}, nil)) {
		t.Fatal("LinksEmpty wrong for a record without links")
	}
}

// A named record whose target claims more of the page's URL than there is
// is damaged, not read past the URL's end.
func TestLinksSharedPrefixPastThePageURL(t *testing.T) {
	page := LinksPage{URL: "http://a/"}
	rec := EncodeLinks(page, []Outlink{{Edge: Edge{Element: "a", Attr: "href", To: "http://a/b"}}})
	rec[len(rec)-3] = byte(len(page.URL) + 1) // the shared length, before "b"'s length and "b"
	if err := DecodeLinks(rec, func(Outlink) error { return nil }); !errors.Is(err, ErrBadLinks) {
		t.Fatalf("err %v, want ErrBadLinks", err)
	}
}
