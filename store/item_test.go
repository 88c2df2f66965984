package store

import (
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

func TestItemRoundTripKeepsEveryField(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		it := Item{
			Host:      rapid.StringMatching(`[a-z0-9.:]{0,20}`).Draw(t, "host"),
			URL:       rapid.String().Draw(t, "url"),
			Hash:      HashOf(rapid.String().Draw(t, "canonical")),
			Depth:     rapid.IntRange(0, 1<<40).Draw(t, "depth"),
			Attempts:  rapid.IntRange(0, 50).Draw(t, "attempts"),
			Redirects: rapid.IntRange(0, 20).Draw(t, "redirects"),
			Replaces:  rapid.Uint64().Draw(t, "replaces"),
			// Depth and the counts are never negative; a huge one still sizes right.
			Referrer: rapid.String().Draw(t, "referrer"),
			Kind:     ItemKind(rapid.IntRange(0, 2).Draw(t, "kind")),
			Hops:     rapid.IntRange(0, 255).Draw(t, "hops"),
			Lastmod:  rapid.String().Draw(t, "lastmod"),
		}
		enc := it.marshal(true)
		if len(enc) != cap(enc) {
			t.Fatalf("encoding sized %d for %d bytes", cap(enc), len(enc))
		}
		got, err := ParseItem(enc)
		if err != nil {
			t.Fatalf("unmarshal: %v", err)
		}
		if got != it {
			t.Fatalf("round trip changed the item:\n got %+v\nwant %+v", got, it)
		}
		// Every cut of a good encoding is refused or decodes without panicking.
		b := it.marshal(true)
		for n := range len(b) {
			ParseItem(b[:n])
		}
	})
}

// A queue written before referrers were kept (format 2) still reads.
func TestItemFormat2StillReads(t *testing.T) {
	want := Item{Host: "a.test", URL: "http://a.test/x", Hash: HashOf("http://a.test/x"), Depth: 3, Attempts: 1, Redirects: 2, Replaces: 9}
	b := []byte{itemFormatV2}
	b = append(b, want.Hash[:]...)
	for _, v := range []uint64{3, 1, 2, 9, uint64(len(want.Host))} {
		b = binary.AppendUvarint(b, v)
	}
	b = append(b, want.Host...)
	b = append(b, want.URL...)
	got, err := ParseItem(b)
	if err != nil {
		t.Fatalf("format 2 item: %v", err)
	}
	if got != want {
		t.Fatalf("format 2 item read as %+v, want %+v", got, want)
	}
}
