package store

import (
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
		Directives: Directives(rapid.Byte().Draw(t, "directives")), Known: true}
}

func TestLinksRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		page := drawLinksPage(t)
		links := rapid.SliceOfN(rapid.Custom(drawOutlink), 0, 40).Draw(t, "links")
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
			if got[i] != links[i] {
				t.Fatalf("link %d: got %+v, want %+v", i, got[i], links[i])
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
	head := len(EncodeLinks(LinksPage{}, nil))
	rec := EncodeLinks(LinksPage{}, []Outlink{{Edge: Edge{Element: "a", Attr: "href"}}})
	if len(rec)-head != 16+2+1 {
		t.Errorf("an <a href> link without text takes %d bytes, want %d", len(rec)-head, 19)
	}
	rec[head+17] = byte(len(linkPlaces))
	if err := DecodeLinks(rec, func(Outlink) error { return nil }); !errors.Is(err, ErrBadLinks) {
		t.Errorf("unknown place code: err %v, want ErrBadLinks", err)
	}
}

// A record of the first format, which kept nothing of its page, still
// decodes: its links, and a page that is not Known.
func TestLinksBareRecordDecodes(t *testing.T) {
	rec := EncodeLinks(LinksPage{Depth: 3, Known: true}, []Outlink{{Edge: Edge{Element: "a", Attr: "href", Text: "x"}}})
	head := len(EncodeLinks(LinksPage{Depth: 3}, nil))
	bare := append([]byte{linksFormatBare}, rec[head:]...)
	page, err := DecodeLinksPage(bare)
	if err != nil || page.Known {
		t.Fatalf("bare record's page: %+v, %v", page, err)
	}
	n := 0
	if err := DecodeLinks(bare, func(l Outlink) error { n++; return nil }); err != nil || n != 1 {
		t.Fatalf("bare record: %d links, %v", n, err)
	}
	if LinksEmpty(bare) || !LinksEmpty([]byte{linksFormatBare}) || !LinksEmpty(EncodeLinks(LinksPage{}, nil)) {
		t.Fatal("LinksEmpty wrong for a bare record")
	}
}
