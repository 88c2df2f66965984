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
	l.Edge.Kind = LinkKind(rapid.IntRange(0, int(LinkFrame)).Draw(t, "kind"))
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

func TestLinksRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		links := rapid.SliceOfN(rapid.Custom(drawOutlink), 0, 40).Draw(t, "links")
		rec := EncodeLinks(links)
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
		links := rapid.SliceOfN(rapid.Custom(drawOutlink), 1, 5).Draw(t, "links")
		rec := EncodeLinks(links)
		cut := rapid.IntRange(0, len(rec)-1).Draw(t, "cut")
		if cut == 1 {
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
	rec := EncodeLinks([]Outlink{{Edge: Edge{Element: "a", Attr: "href"}}})
	if len(rec) != 1+16+2+1 {
		t.Errorf("an <a href> link without text takes %d bytes, want %d", len(rec), 20)
	}
	rec[17+1] = byte(len(linkPlaces))
	if err := DecodeLinks(rec, func(Outlink) error { return nil }); !errors.Is(err, ErrBadLinks) {
		t.Errorf("unknown place code: err %v, want ErrBadLinks", err)
	}
}
