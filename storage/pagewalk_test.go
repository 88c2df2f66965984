package storage

import (
	"breakwater/store"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// flipFixture is the well-formed file with enough more in it for every
// kind of page bbolt writes: results over several leaf pages under a
// branch page, a value over overflow pages, buckets inline and not, the
// freelist. It returns the path, closed, and the archive a crawl of it
// left.
func flipFixture(t *testing.T) (path string, archive map[string]int) {
	t.Helper()
	path = wellFormed(t)
	db, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var items []store.Item
	for i := range 120 {
		items = append(items, item("f.com", fmt.Sprintf("/page/%03d", i)))
	}
	q := enqueue(t, db, items...)
	commit(t, db, func(b *store.Batch) {
		for _, it := range q {
			b.Complete(it, ok200(it))
		}
	})
	// Settings longer than a page: the value runs over overflow pages.
	if err := db.PutSettings([]byte(`{"seeds":["http://a.com/"],"note":"` + strings.Repeat("n", 5000) + `"}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	archive = archiveOf()
	for _, it := range q {
		archive[it.URL] = 1
	}
	return path, archive
}

// boltReading is what bbolt reads in a file: its buckets, the sizes of
// their keys and values, and the bytes of both, apart.
type boltReading struct {
	structure, content string
	checkErrs          []string
}

// readAsBolt reads every bucket, key and value of the file at path as
// bbolt does, and runs bbolt's check. Only for a file the walk found
// sound: bbolt would fault on others.
func readAsBolt(path string) (r boltReading, err error) {
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return r, err
	}
	defer bdb.Close()
	err = guard(func() error {
		return bdb.View(func(tx *bolt.Tx) error {
			var structure, content strings.Builder
			// A bucket is named by its place in the structure, by its name in
			// the content: a name is a key's bytes.
			var dump func(place, name string, b *bolt.Bucket)
			dump = func(place, name string, b *bolt.Bucket) {
				if b == nil {
					fmt.Fprintf(&structure, "bucket %s cannot be found by its name\n", place)
					return
				}
				fmt.Fprintf(&structure, "bucket %s\n", place)
				fmt.Fprintf(&content, "bucket %s, sequence %d\n", name, b.Sequence())
				i := 0
				_ = b.ForEach(func(k, v []byte) error {
					i++
					if v == nil {
						dump(fmt.Sprintf("%s/%d", place, i), name+"/"+strconv.Quote(string(k)), b.Bucket(k))
						return nil
					}
					fmt.Fprintf(&structure, "  a key of %d bytes, a value of %d\n", len(k), len(v))
					fmt.Fprintf(&content, "  %q = %q\n", k, v)
					return nil
				})
			}
			i := 0
			_ = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
				i++
				dump(strconv.Itoa(i), strconv.Quote(string(name)), b)
				return nil
			})
			r.structure, r.content = structure.String(), content.String()
			for err := range tx.Check() {
				r.checkErrs = append(r.checkErrs, err.Error())
			}
			return nil
		})
	})
	return r, err
}

// flipOutcome is what one bit flip came to.
type flipOutcome int

const (
	flipWalked     flipOutcome = iota // the walk found it, and verify refused the file
	flipRefused                       // the open refused the file otherwise (meta, freelist, schema)
	flipVerified                      // verify's report names a problem (bbolt's check, the invariants)
	flipContent                       // unreported: bbolt reads other bytes in a key, a value or a sequence
	flipHarmless                      // unreported: bbolt reads exactly what it read before
	flipStructural                    // unreported, and bbolt's reading of the tree differs: a failure
	flipOutcomes
)

var flipOutcomeNames = [flipOutcomes]string{"found by the page walk", "refused by the open", "reported by verify",
	"unreported, another key, value or sequence", "harmless", "MISSED"}

// Every single-bit flip of a real file: verify, in this process, never
// crashes or hangs on it, never writes to it, and reports the file as
// damaged whenever bbolt's reading of it differs in more than the bytes
// of a key, a value or a bucket's sequence number. That is, whenever
// bbolt's own check fails on it, or bbolt panics reading it, or its
// reading of the tree differs (the buckets, how many keys each holds, the
// sizes of keys and values). A flip of a key's, a value's or a
// sequence's bytes only is reported when the crawl's invariants catch it
// (a result's URL not in the archive, a count off): text such as a
// page's title has nothing to check it by. The rest are harmless: bbolt
// reads exactly what it did. The flips: every bit of the file with
// BREAKWATER_FLIP_SWEEP=all, every bit of what the pages hold (headers,
// elements, keys and values) with =live; by default a sample of 2000, half
// from what the pages hold, half from the whole file, seeded by
// BREAKWATER_FLIP_SEED or the clock (logged).
func TestVerifyBitFlips(t *testing.T) {
	path, archive := flipFixture(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if rep := verify(t, path, VerifyOptions{Archive: archive}); !rep.OK() {
		t.Fatalf("the fixture has problems: %q", rep.Problems)
	}
	base, err := readAsBolt(path)
	if err != nil || len(base.checkErrs) > 0 {
		t.Fatalf("bbolt reading the fixture: %v %q", err, base.checkErrs)
	}
	meta, err := decodeMeta(orig)
	if err != nil {
		t.Fatal(err)
	}
	pageSize := int(meta.pageSize)
	ends := map[uint64]int{0: pageHeaderSize + metaSize, 1: pageHeaderSize + metaSize}
	if sound, err := walkPages(path, 0, t.Fatalf, ends); !sound || err != nil {
		t.Fatalf("the walk of the fixture: %v", err)
	}
	var live []int // the bytes the pages hold
	for id, end := range ends {
		for off := int(id) * pageSize; off < int(id)*pageSize+end; off++ {
			live = append(live, off)
		}
	}
	slices.Sort(live)
	flips := chooseFlips(t, len(orig), live)

	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	poke := func(off int, b byte) {
		if _, err := f.WriteAt([]byte{b}, int64(off)); err != nil {
			t.Fatal(err)
		}
	}
	var tally [flipOutcomes]int
	var liveTally [flipOutcomes]int
	harmlessWhere, contentWhere := map[string]int{}, map[string]int{}
	examples := map[flipOutcome][]string{}
	start := time.Now()
	for _, bit := range flips {
		off, mask := bit/8, byte(1)<<(bit%8)
		flipped := bytes.Clone(orig)
		flipped[off] ^= mask
		poke(off, flipped[off])
		where := fmt.Sprintf("byte %d (page %d, at %d) bit %d", off, off/pageSize, off%pageSize, bit%8)
		hung := time.AfterFunc(20*time.Second, func() { panic("verify of the file with " + where + " flipped has not ended in 20 s") })
		o, detail := judgeFlip(t, path, archive, base)
		hung.Stop()
		if after, _ := os.ReadFile(path); !bytes.Equal(after, flipped) {
			t.Fatalf("%s flipped: verify wrote to the file", where)
		}
		poke(off, orig[off])
		tally[o]++
		if _, ok := slices.BinarySearch(live, off); ok {
			liveTally[o]++
		}
		switch o {
		case flipHarmless:
			harmlessWhere[placeOf(off, orig, meta, ends, live)]++
		case flipContent:
			contentWhere[bucketOf(detail)]++
		}
		if len(examples[o]) < 5 {
			examples[o] = append(examples[o], where+": "+detail)
		}
		if o == flipStructural {
			t.Errorf("%s flipped: bbolt reads the file otherwise, and verify reports nothing: %s", where, detail)
		}
	}
	elapsed := time.Since(start)
	reported := tally[flipWalked] + tally[flipRefused] + tally[flipVerified]
	t.Logf("%d flips of a %d-byte file (%d pages of %d, %d bytes held) in %s: %d reported (%.1f%%)",
		len(flips), len(orig), len(orig)/pageSize, pageSize, len(live), elapsed.Round(time.Millisecond),
		reported, 100*float64(reported)/float64(len(flips)))
	for o, name := range flipOutcomeNames {
		t.Logf("  %-44s %5d (%d of them in bytes the pages hold)", name, tally[o], liveTally[o])
	}
	t.Logf("  harmless flips by place: %v", harmlessWhere)
	t.Logf("  unreported flips of bytes by bucket: %v", contentWhere)
	for _, o := range []flipOutcome{flipContent, flipHarmless, flipWalked, flipRefused, flipVerified} {
		for _, e := range examples[o] {
			t.Logf("  e.g. %s: %s", flipOutcomeNames[o], e)
		}
	}
}

// chooseFlips picks the bits to flip (see TestVerifyBitFlips).
func chooseFlips(t *testing.T, size int, live []int) []int {
	t.Helper()
	var out []int
	switch sweep := os.Getenv("BREAKWATER_FLIP_SWEEP"); sweep {
	case "all":
		for bit := range size * 8 {
			out = append(out, bit)
		}
		return out
	case "live":
		for _, off := range live {
			for i := range 8 {
				out = append(out, off*8+i)
			}
		}
		return out
	case "":
	default:
		t.Fatalf("BREAKWATER_FLIP_SWEEP=%q: want all or live", sweep)
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BREAKWATER_FLIP_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("BREAKWATER_FLIP_SEED=%q: %v", s, err)
		}
	}
	t.Logf("flips seeded by BREAKWATER_FLIP_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(seed, 23))
	for range 1000 {
		out = append(out, live[rng.IntN(len(live))]*8+rng.IntN(8), rng.IntN(size*8))
	}
	return out
}

// judgeFlip verifies the flipped file at path as the verify command does,
// and if that reports nothing, compares bbolt's reading of it with base.
func judgeFlip(t *testing.T, path string, archive map[string]int, base boltReading) (flipOutcome, string) {
	t.Helper()
	db, err := Open(path, &Options{ReadOnly: true, CheckPages: true})
	var dmg *DamageError
	switch {
	case errors.As(err, &dmg):
		return flipWalked, dmg.Problems[0]
	case errors.Is(err, ErrDamaged), errors.Is(err, ErrSchema):
		return flipRefused, err.Error()
	case err != nil:
		t.Fatalf("Open: %v, neither damage nor schema", err)
	}
	rep, err := db.Verify(VerifyOptions{Archive: archive})
	db.Close()
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !rep.OK() {
		return flipVerified, rep.Problems[0]
	}
	got, err := readAsBolt(path)
	switch {
	case err != nil:
		return flipStructural, "bbolt cannot read it: " + err.Error()
	case len(got.checkErrs) > 0:
		return flipStructural, "bbolt's check: " + got.checkErrs[0]
	case got.structure != base.structure:
		return flipStructural, "the tree differs: " + firstDifference(base.structure, got.structure)
	case got.content != base.content:
		return flipContent, firstDifference(base.content, got.content)
	}
	return flipHarmless, "bbolt reads the same"
}

// firstDifference shows the first line where the dumps a and b differ,
// after the bucket it is in.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	bucket := ""
	for i := range min(len(al), len(bl)) {
		if strings.HasPrefix(al[i], "bucket ") {
			bucket = strings.TrimPrefix(strings.Split(al[i], ",")[0], "bucket ")
		}
		if al[i] != bl[i] {
			return fmt.Sprintf("in %s: %.100s -> %.100s", bucket, al[i], bl[i])
		}
	}
	return fmt.Sprintf("%d lines -> %d", len(al), len(bl))
}

// bucketOf is the bucket a firstDifference names.
func bucketOf(difference string) string {
	b, _, _ := strings.Cut(strings.TrimPrefix(difference, "in "), ": ")
	return b
}

// placeOf names where in the file off lies, for the tally of harmless
// flips: in what a page holds, in the slack after it, in a free page.
func placeOf(off int, orig []byte, meta boltMeta, ends map[uint64]int, live []int) string {
	pageSize := int(meta.pageSize)
	id := uint64(off / pageSize)
	if _, ok := slices.BinarySearch(live, off); ok {
		return "held"
	}
	switch {
	case id >= meta.hwm:
		return "past the last page"
	case id < 2:
		return "meta page slack"
	}
	for first := range ends {
		_, _, _, overflow := pageHeader(orig[int(first)*pageSize:])
		if id >= first && id <= first+uint64(overflow) {
			return "page slack"
		}
	}
	return "free page"
}

// The open bug this walk closes: a branch page's child pointer bent past
// the end of the file made bbolt's check fault in a goroutine of its own,
// killing the process. Now the walk names it, whether verify opened the
// file with CheckPages or not, and bbolt never reads the page.
func TestVerifyPointerPastTheEnd(t *testing.T) {
	path, archive := flipFixture(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	meta, _ := decodeMeta(data)
	ps := int(meta.pageSize)
	var bent uint64 // the results bucket's root: no open reads it
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		bent = uint64(tx.Bucket(bucketResults).Root())
		return nil
	})
	bdb.Close()
	if _, flags, _, _ := pageHeader(data[int(bent)*ps:]); flags != branchPageFlag {
		t.Fatalf("the results bucket's root, page %d, is not a branch page (flags %#x)", bent, flags)
	}
	_, _, count, _ := pageHeader(data[int(bent)*ps:])
	last := int(bent)*ps + pageHeaderSize + int(count-1)*elementSize + 8 // its last child's pgid
	past := uint64(1) << 40
	binary.LittleEndian.PutUint64(data[last:], past)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	before := freeze(t, path)
	want := fmt.Sprintf("element %d of branch page %d", count-1, bent)

	db, err := Open(path, &Options{ReadOnly: true}) // the open alone reads no further than the meta bucket
	if err != nil {
		t.Fatalf("Open without CheckPages: %v", err)
	}
	rep, err := db.Verify(VerifyOptions{Archive: archive})
	db.Close()
	if err != nil || rep.OK() || !rep.PagesDamaged || !strings.Contains(strings.Join(rep.Problems, "\n"), want) ||
		!strings.Contains(rep.Problems[0], fmt.Sprintf("points at page %d, past the file's", past)) {
		t.Errorf("Verify: %v, damaged pages %v, problems %q; want one naming %s", err, rep.PagesDamaged, rep.Problems, want)
	}

	_, err = Open(path, &Options{ReadOnly: true, CheckPages: true})
	var dmg *DamageError
	if !errors.As(err, &dmg) || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), want) {
		t.Errorf("Open with CheckPages: %v, want a DamageError naming %s", err, want)
	}
	checkUnchanged(t, path, before)
}

// Each kind of damage the walk looks for is named, with the page.
func TestWalkNamesEachDamage(t *testing.T) {
	path, _ := flipFixture(t)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	m, _ := decodeMeta(orig)
	newer := 0
	if m1, err := decodeMeta(orig[m.pageSize:]); err == nil && m1.txid > m.txid {
		m, newer = m1, 1
	}
	ps := int(m.pageSize)
	var branch uint64
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = bdb.View(func(tx *bolt.Tx) error {
		branch = uint64(tx.Bucket(bucketResults).Root())
		return nil
	})
	bdb.Close()
	leaf := le.Uint64(orig[int(branch)*ps+pageHeaderSize+8:]) // the branch's first child
	at := func(id uint64, off int) int { return int(id)*ps + off }
	tests := []struct {
		name string
		edit func(b []byte)
		want string
	}{
		{"the newer meta page's checksum", func(b []byte) { b[newer*ps+pageHeaderSize+48]++ },
			fmt.Sprintf("meta page %d is damaged (its checksum does not match): bbolt reads meta page %d", newer, 1-newer)},
		{"a child past the high-water mark", func(b []byte) { le.PutUint64(b[at(branch, pageHeaderSize+8):], m.hwm) },
			fmt.Sprintf("element 0 of branch page %d (bucket \"results\") points at page %d, past the file's %d pages", branch, m.hwm, m.hwm)},
		{"a cycle", func(b []byte) { le.PutUint64(b[at(branch, pageHeaderSize+8):], branch) },
			fmt.Sprintf("points at page %d, which is reached another way too: a cycle", branch)},
		{"a page that says it is another", func(b []byte) { le.PutUint64(b[at(leaf, 0):], leaf+1) },
			fmt.Sprintf("page %d (bucket \"results\"), pointed at by element 0 of branch page %d", leaf, branch)},
		{"flags of no page type", func(b []byte) { le.PutUint16(b[at(leaf, 8):], 0x20) },
			fmt.Sprintf("page %d (bucket \"results\") has flags 0x20: not a branch or leaf page", leaf)},
		{"a value past the page", func(b []byte) { le.PutUint32(b[at(leaf, pageHeaderSize+12):], 1<<20) },
			fmt.Sprintf("page %d (bucket \"results\"): element 0's key and value run to byte", leaf)},
		{"a key out of place", func(b []byte) { le.PutUint32(b[at(leaf, pageHeaderSize+elementSize+4):], 1) },
			fmt.Sprintf("page %d (bucket \"results\"): element 1's key starts at byte 33, and bbolt writes it at", leaf)},
		{"more elements than the page holds", func(b []byte) { le.PutUint16(b[at(leaf, 10):], 0xFFFE) },
			fmt.Sprintf("page %d (bucket \"results\") has 65534 elements, more than its %d bytes hold", leaf, ps)},
		{"a page in use and free", func(b []byte) {
			_, _, count, _ := pageHeader(b[at(m.freelist, 0):])
			if count == 0 {
				t.Fatal("the fixture has no free page")
			}
			le.PutUint64(b[at(m.freelist, pageHeaderSize):], leaf)
		}, fmt.Sprintf("page %d (bucket \"results\") is in use and on the freelist", leaf)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			damaged := bytes.Clone(orig)
			tt.edit(damaged)
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			var found []string
			sound, err := walkPages(path, 0, func(format string, args ...any) { found = append(found, fmt.Sprintf(format, args...)) }, nil)
			if err != nil || sound || !strings.Contains(strings.Join(found, "\n"), tt.want) {
				t.Errorf("walk: %v, sound %v, found %q; want %q", err, sound, found, tt.want)
			}
			db, err := Open(path, &Options{ReadOnly: true, CheckPages: true})
			if err == nil {
				db.Close()
			}
			if !errors.Is(err, ErrDamaged) {
				t.Errorf("Open with CheckPages: %v, want it refused as damaged", err)
			}
		})
	}
}
