package demosite

import (
	"bytes"
	"encoding/binary"
	"slices"
	"unicode/utf16"
)

// requisiteFont is the smallest TrueType font a browser's font sanitizer
// accepts: every table it requires (cmap, head, hhea, hmtx, maxp, name,
// OS/2, post, glyf and loca), two glyphs (.notdef, empty, and a square)
// and printable ASCII mapped to the square. Built here rather than
// shipped, so the site needs no file; a browser that loads it reports the
// font face as loaded.
func requisiteFont() []byte {
	const (
		unitsPerEm = 1000
		lo, hi     = 100, 700 // the square's corners, both axes
		advance    = 800
	)
	glyf := be(
		int16(1), int16(lo), int16(lo), int16(hi), int16(hi), // one contour and its box
		uint16(3), uint16(0), // last point index, no instructions
		[]byte{0x01, 0x01, 0x01, 0x01},                  // four on-curve points, two-byte coordinates
		int16(lo), int16(hi-lo), int16(0), int16(lo-hi), // x deltas
		int16(lo), int16(0), int16(hi-lo), int16(0), // y deltas
	)
	for len(glyf)%4 != 0 {
		glyf = append(glyf, 0)
	}
	printable := make([]uint16, 0x7E-0x20+1)
	for i := range printable {
		printable[i] = 1 // the square
	}
	tables := map[string][]byte{
		"head": be(uint16(1), uint16(0), uint32(0x00010000), uint32(0), uint32(0x5F0F3CF5),
			uint16(0x000B), uint16(unitsPerEm), int64(0), int64(0),
			int16(lo), int16(lo), int16(hi), int16(hi), uint16(0), uint16(8), int16(2),
			int16(0), int16(0)), // short loca offsets, glyph format 0
		"hhea": be(uint32(0x00010000), int16(800), int16(-200), int16(0), uint16(advance),
			int16(0), int16(lo), int16(hi), int16(1), int16(0), int16(0),
			int16(0), int16(0), int16(0), int16(0), int16(0), uint16(2)),
		"maxp": be(uint32(0x00010000), uint16(2), uint16(4), uint16(1), uint16(0), uint16(0),
			uint16(1), uint16(0), uint16(0), uint16(0), uint16(0), uint16(0), uint16(0), uint16(0), uint16(0)),
		"hmtx": be(uint16(advance), int16(0), uint16(advance), int16(lo)),
		"loca": be(uint16(0), uint16(0), uint16(len(glyf)/2)),
		"glyf": glyf,
		"cmap": be(uint16(0), uint16(1), uint16(3), uint16(1), uint32(12), // one subtable: Windows, Unicode BMP
			uint16(4), uint16(32+2*len(printable)), uint16(0), uint16(4), uint16(4), uint16(1), uint16(0), // format 4, two segments
			uint16(0x7E), uint16(0xFFFF), uint16(0), uint16(0x20), uint16(0xFFFF), // ' '..'~', then 0xFFFF
			uint16(0), uint16(1), // no delta for the first (its glyphs are listed), 0xFFFF+1 is .notdef
			uint16(4), uint16(0), printable), // the first's glyph list starts just after these offsets
		"OS/2": be(uint16(4), int16(advance), uint16(400), uint16(5), uint16(0),
			[20]byte{}, int16(0), [10]byte{}, [16]byte{}, []byte("BWTR"),
			uint16(0x40), uint16(0x20), uint16(0x7E), int16(800), int16(-200), int16(0),
			uint16(800), uint16(200), uint32(1), uint32(0), int16(hi), int16(hi), uint16(0), uint16(0x20), uint16(1)),
		"post": be(uint32(0x00030000), uint32(0), int16(-100), int16(50), uint32(0),
			uint32(0), uint32(0), uint32(0), uint32(0)),
		"name": fontNames(RequisiteFontFamily, "Regular", RequisiteFontFamily+" Regular", "Version 1.0", RequisiteFontFamily+"-Regular"),
	}
	return sfnt(tables)
}

// fontNames is a name table of Windows Unicode English records for name
// IDs 1, 2, 4, 5 and 6, in that order.
func fontNames(family, subfamily, full, version, postscript string) []byte {
	ids := []uint16{1, 2, 4, 5, 6}
	values := []string{family, subfamily, full, version, postscript}
	var records, storage bytes.Buffer
	for i, v := range values {
		s := be(utf16.Encode([]rune(v)))
		records.Write(be(uint16(3), uint16(1), uint16(0x409), ids[i], uint16(len(s)), uint16(storage.Len())))
		storage.Write(s)
	}
	head := be(uint16(0), uint16(len(values)), uint16(6+records.Len()))
	return slices.Concat(head, records.Bytes(), storage.Bytes())
}

// sfnt lays tables out as a TrueType file: the table directory, sorted
// by tag, then each table on a 4-byte boundary, with their checksums and
// head's checkSumAdjustment.
func sfnt(tables map[string][]byte) []byte {
	tags := make([]string, 0, len(tables))
	for tag := range tables {
		tags = append(tags, tag)
	}
	slices.Sort(tags)
	n := len(tags)
	pow, log2 := 1, 0
	for pow*2 <= n {
		pow, log2 = pow*2, log2+1
	}
	out := be(uint32(0x00010000), uint16(n), uint16(16*pow), uint16(log2), uint16(16*(n-pow)))
	offset := len(out) + 16*n
	var body []byte
	headAt := 0
	for _, tag := range tags {
		t := tables[tag]
		if tag == "head" {
			headAt = offset + len(body)
		}
		out = append(out, be([]byte(tag), fontChecksum(t), uint32(offset+len(body)), uint32(len(t)))...)
		body = append(body, t...)
		for len(body)%4 != 0 {
			body = append(body, 0)
		}
	}
	out = append(out, body...)
	binary.BigEndian.PutUint32(out[headAt+8:], 0xB1B0AFBA-fontChecksum(out))
	return out
}

func fontChecksum(b []byte) uint32 {
	var sum uint32
	for i := 0; i < len(b); i += 4 {
		var word [4]byte
		copy(word[:], b[i:])
		sum += binary.BigEndian.Uint32(word[:])
	}
	return sum
}

// be writes values big-endian, one after the other.
func be(values ...any) []byte {
	var buf bytes.Buffer
	for _, v := range values {
		binary.Write(&buf, binary.BigEndian, v) // only fixed-size values: cannot fail
	}
	return buf.Bytes()
}
