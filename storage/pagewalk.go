package storage

// The walk of a bbolt file's page tree that verify makes before bbolt
// reads it. bbolt reads its pages through a memory map and trusts every
// page id, count and offset it finds: a damaged one sends it past a page,
// or past the end of the file, and a read there faults. Under guard a
// fault is only an error, but bbolt's own check (tx.Check) reads every
// page in a goroutine of its own, where nothing can catch one, and the
// process dies. So the walk reads the pages bbolt's reading would reach,
// from the meta page it would pick, with plain reads and every offset
// checked, and only a tree found sound is handed to bbolt.
//
// The layout is bbolt's file format version 2 (go.etcd.io/bbolt v1.x,
// internal/common): every page starts with a 16-byte header {id uint64,
// flags uint16, count uint16, overflow uint32}; a page and its overflow
// pages are one span. Pages 0 and 1 hold a meta record each after the
// header: {magic, version, page size, flags uint32; root bucket {root
// pgid, sequence uint64}; freelist, high-water pgid, txid, checksum
// uint64}, the checksum FNV-1a 64 over what comes before it. A branch
// page's count elements {pos, ksize uint32, child pgid uint64} and a leaf
// page's {flags, pos, ksize, vsize uint32} follow the header, each pos
// counted from the element itself, and bbolt writes the keys and values
// packed in element order right after them. A leaf element with flag 0x01
// is a bucket: its value starts {root pgid, sequence uint64}, and a root
// of 0 means an inline bucket, whose leaf page is the rest of the value.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	bolterrors "go.etcd.io/bbolt/errors"
)

const (
	branchPageFlag    = 0x01
	leafPageFlag      = 0x02
	metaPageFlag      = 0x04
	elementSize       = 16 // a branch element and a leaf element alike
	bucketLeafFlag    = 0x01
	bucketHeaderSize  = 16
	maxWalkedProblems = 1000
)

// DamageError is a file refused because the walk of its pages (see
// Options.CheckPages) found them damaged: bbolt's reading of it would go
// wrong, or past the file. Problems name each thing found, Omitted counts
// those beyond the first maxWalkedProblems.
type DamageError struct {
	Problems []string
	Omitted  int
}

func (e *DamageError) Error() string {
	msg := ErrDamaged.Error() + ": its pages are damaged: " + e.Problems[0]
	if more := len(e.Problems) - 1 + e.Omitted; more > 0 {
		msg += fmt.Sprintf(" (and %d more problems)", more)
	}
	return msg
}

func (e *DamageError) Unwrap() error { return ErrDamaged }

// pageWalk is one walk of a file's pages.
type pageWalk struct {
	f        *os.File
	size     int64
	pageSize int64
	hwm      uint64   // the meta's high-water mark: pages 0 to hwm-1 are the file's
	used     []uint64 // bitmap of the pages reached so far
	free     []uint64 // bitmap of the pages the freelist lists
	problems int
	report   func(format string, args ...any)
	// ends, if not nil, is told where the bytes each page holds end
	// (its header, elements, keys and values; the rest is slack): tests
	// aim bit flips with it.
	ends map[uint64]int
}

func (w *pageWalk) addf(format string, args ...any) {
	w.problems++
	w.report(format, args...)
}

func hasBit(bits []uint64, i uint64) bool { return bits[i/64]&(1<<(i%64)) != 0 }
func setBit(bits []uint64, i uint64)      { bits[i/64] |= 1 << (i % 64) }

// walkPages walks the page tree of the bbolt file at path and reports
// each thing damaged in it; sound says none was. With txid not zero the
// walk starts from the meta page of that transaction, which a read
// transaction of a file open for writing keeps (a later commit may have
// written the other); otherwise from the one bbolt picks on opening. The
// error is for a file that cannot be read at all. ends, if not nil, is
// told where each page's contents end (see pageWalk.ends).
func walkPages(path string, txid uint64, report func(format string, args ...any), ends map[uint64]int) (sound bool, err error) {
	return walkFile(path, txid, report, ends, func(w *pageWalk, root uint64) { w.tree(root) })
}

// walkFile opens path for a walk, reads its meta pages (those of txid, as
// walkPages) and, when they are sound, hands the walk and the root page
// to walk; sound says no problem was reported.
func walkFile(path string, txid uint64, report func(format string, args ...any), ends map[uint64]int, walk func(w *pageWalk, root uint64)) (sound bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, err
	}
	w := &pageWalk{f: f, size: info.Size(), report: report, ends: ends}
	if root, ok := w.readMetas(txid); ok {
		walk(w, root)
	}
	return w.problems == 0, nil
}

// walkTop is walkPages over the root page and the root pages of the
// buckets it holds, no deeper: the pages opening a file reads (the schema
// version in the meta bucket). A damaged element count there makes bbolt
// read past the page, past the mapped file even, before any fault it
// could turn into an error.
func walkTop(path string, report func(format string, args ...any)) (sound bool, err error) {
	return walkFile(path, 0, report, nil, func(w *pageWalk, root uint64) {
		level := []pageRef{{id: root, bucket: rootBucket, from: "the meta page"}}
		for range 2 {
			var next []pageRef
			for _, ref := range level {
				next = w.page(ref, next)
			}
			level = next
		}
	})
}

// read reads n bytes at page id's start, or reports why it cannot.
func (w *pageWalk) read(id uint64, n int64, what string) ([]byte, bool) {
	buf := make([]byte, n)
	off := int64(id) * w.pageSize
	if _, err := w.f.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			w.addf("%s runs past the end of the file (%d bytes)", what, w.size)
		} else {
			w.addf("%s cannot be read: %v", what, err)
		}
		return nil, false
	}
	return buf, true
}

// decodeMeta decodes the meta record of the page buf starts with.
func decodeMeta(buf []byte) (boltMeta, error) {
	b := buf[pageHeaderSize:]
	le := binary.LittleEndian
	switch {
	case le.Uint32(b[0:]) != boltMagic:
		return boltMeta{}, bolterrors.ErrInvalid
	case le.Uint32(b[4:]) != boltVersion:
		return boltMeta{}, bolterrors.ErrVersionMismatch
	case le.Uint64(b[56:]) != metaChecksum(b):
		return boltMeta{}, bolterrors.ErrChecksum
	}
	return boltMeta{pageSize: int64(le.Uint32(b[8:])), root: le.Uint64(b[16:]), freelist: le.Uint64(b[32:]),
		hwm: le.Uint64(b[40:]), txid: le.Uint64(b[48:])}, nil
}

// readMetas reads both meta pages, reports what is wrong with either,
// checks the one the walk starts from and the freelist it names, and
// returns its root bucket's page.
func (w *pageWalk) readMetas(txid uint64) (root uint64, ok bool) {
	// bbolt takes the page size from the first meta page, or, failing
	// that, the second, looked for at each page size it allows.
	head := make([]byte, pageHeaderSize+metaSize)
	if n, _ := w.f.ReadAt(head, 0); n < len(head) {
		w.addf("the file (%d bytes) is too short to hold a bbolt meta page", w.size)
		return 0, false
	}
	if m, err := decodeMeta(head); err == nil {
		w.pageSize = m.pageSize
	} else {
		for i := range 15 {
			if n, _ := w.f.ReadAt(head, 1024<<i); n == len(head) {
				if m, err := decodeMeta(head); err == nil {
					w.pageSize = m.pageSize
					break
				}
			}
		}
	}
	if w.pageSize < 1024 || w.pageSize > 1<<24 {
		w.addf("neither meta page holds a valid bbolt meta record with a page size of 1 KiB to 16 MiB")
		return 0, false
	}
	var metas [2]boltMeta
	var errs [2]error
	for i := range 2 {
		buf, ok := w.read(uint64(i), pageHeaderSize+metaSize, fmt.Sprintf("meta page %d", i))
		if !ok {
			return 0, false
		}
		// bbolt's check asks both pages to be what they are, valid or not.
		id, flags, count, overflow := pageHeader(buf)
		if id != uint64(i) || flags != metaPageFlag || count != 0 || overflow != 0 {
			w.addf("meta page %d has the header of another page: id %d, flags %#x, count %d, overflow %d", i, id, flags, count, overflow)
		}
		metas[i], errs[i] = decodeMeta(buf)
	}
	// As bbolt does: the meta of the later transaction if it is valid, else
	// the other; or, for a transaction under way, its own.
	pick := 0
	if metas[1].txid > metas[0].txid {
		pick = 1
	}
	if errs[pick] != nil {
		pick = 1 - pick
	}
	if txid != 0 {
		pick = -1
		for i := range 2 {
			if errs[i] == nil && metas[i].txid == txid {
				pick = i
			}
		}
		if pick < 0 {
			w.addf("neither meta page is of transaction %d, which the check reads: the file changed under it", txid)
			return 0, false
		}
	}
	for i := range 2 {
		if errs[i] != nil {
			other := ""
			if errs[1-i] == nil {
				other = fmt.Sprintf(": bbolt reads meta page %d (transaction %d) instead", 1-i, metas[1-i].txid)
			}
			w.addf("meta page %d is damaged (%s)%s", i, metaFailure(errs[i]), other)
		}
	}
	if errs[pick] != nil {
		return 0, false
	}
	m := metas[pick]
	pages := uint64(w.size / w.pageSize)
	switch {
	case m.pageSize != w.pageSize:
		w.addf("meta page %d says the page size is %d, and bbolt reads the file in pages of %d", pick, m.pageSize, w.pageSize)
	case m.hwm > pages:
		w.addf("meta page %d says the file has %d pages, and it is %d bytes: %d pages", pick, m.hwm, w.size, pages)
	case m.hwm < 4:
		w.addf("meta page %d says the file has %d pages, fewer than bbolt's smallest file", pick, m.hwm)
	case m.root < 2 || m.root >= m.hwm:
		w.addf("meta page %d names page %d as the root bucket's, outside pages 2 to %d", pick, m.root, m.hwm-1)
	case m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.hwm):
		w.addf("meta page %d names page %d as the freelist, outside pages 2 to %d", pick, m.freelist, m.hwm-1)
	default:
		w.hwm = m.hwm
		w.used = make([]uint64, (m.hwm+63)/64)
		w.free = make([]uint64, (m.hwm+63)/64)
		setBit(w.used, 0)
		setBit(w.used, 1)
		w.readFreelist(m.freelist)
		return m.root, true
	}
	return 0, false
}

func metaFailure(err error) string {
	switch {
	case errors.Is(err, bolterrors.ErrInvalid):
		return "no bbolt magic number"
	case errors.Is(err, bolterrors.ErrVersionMismatch):
		return "another format version"
	}
	return "its checksum does not match"
}

func pageHeader(buf []byte) (id uint64, flags, count uint16, overflow uint32) {
	le := binary.LittleEndian
	return le.Uint64(buf), le.Uint16(buf[8:]), le.Uint16(buf[10:]), le.Uint32(buf[12:])
}

// readFreelist checks the freelist page id and marks the pages it lists
// free.
func (w *pageWalk) readFreelist(id uint64) {
	if id == noFreelist {
		return
	}
	what := fmt.Sprintf("the freelist (page %d)", id)
	head, ok := w.read(id, pageHeaderSize, what)
	if !ok {
		return
	}
	hid, flags, count, overflow := pageHeader(head)
	switch {
	case hid != id:
		w.addf("%s says it is page %d", what, hid)
		return
	case flags != freelistFlag:
		w.addf("%s has flags %#x, not a freelist page's", what, flags)
		return
	case id+uint64(overflow) >= w.hwm:
		w.addf("%s runs over %d more pages, past the file's %d", what, overflow, w.hwm)
		return
	}
	for p := id; p <= id+uint64(overflow); p++ {
		setBit(w.used, p)
	}
	buf, ok := w.read(id, int64(overflow+1)*w.pageSize, what)
	if !ok {
		return
	}
	le := binary.LittleEndian
	n, at := uint64(count), uint64(pageHeaderSize)
	if count == 0xFFFF { // the count did not fit: it is the first entry
		n, at = le.Uint64(buf[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > (uint64(len(buf))-at)/8 {
		w.addf("%s lists %d pages, more than its %d bytes hold", what, n, len(buf))
		return
	}
	if w.ends != nil {
		w.ends[id] = int(at + 8*n)
	}
	for i := range n {
		p := le.Uint64(buf[at+8*i:])
		switch {
		case p < 2 || p >= w.hwm:
			w.addf("%s lists page %d, outside pages 2 to %d", what, p, w.hwm-1)
		case hasBit(w.free, p):
			w.addf("%s lists page %d twice", what, p)
		case hasBit(w.used, p):
			w.addf("%s lists page %d, which is the freelist's own", what, p)
		default:
			setBit(w.free, p)
		}
	}
}

// pageRef is a page the walk is to read, and what points at it.
type pageRef struct {
	id     uint64
	bucket string // the bucket the page belongs to, for messages
	from   string // what points at it, for messages
}

// rootBucket names the bucket of the top-level buckets in messages.
const rootBucket = "the root bucket"

// tree walks every page reachable from the root bucket's page.
func (w *pageWalk) tree(root uint64) {
	stack := []pageRef{{id: root, bucket: rootBucket, from: "the meta page"}}
	for len(stack) > 0 {
		ref := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		stack = w.page(ref, stack)
	}
}

// page reads one page of the tree and pushes the pages it points at.
func (w *pageWalk) page(ref pageRef, stack []pageRef) []pageRef {
	id := ref.id
	where := fmt.Sprintf("page %d (%s)", id, ref.bucket)
	switch {
	case id < 2:
		w.addf("%s points at page %d, a meta page, as a page of %s", ref.from, id, ref.bucket)
		return stack
	case id >= w.hwm:
		w.addf("%s points at page %d, past the file's %d pages, as a page of %s", ref.from, id, w.hwm, ref.bucket)
		return stack
	case hasBit(w.used, id):
		w.addf("%s points at page %d, which is reached another way too: a cycle, or a page with two parents", ref.from, id)
		return stack
	}
	head, ok := w.read(id, pageHeaderSize, where)
	if !ok {
		return stack
	}
	hid, flags, _, overflow := pageHeader(head)
	switch {
	case hid != id:
		w.addf("%s, pointed at by %s, says it is page %d", where, ref.from, hid)
		return stack
	case flags != branchPageFlag && flags != leafPageFlag:
		w.addf("%s has flags %#x: not a branch or leaf page", where, flags)
		return stack
	case id+uint64(overflow) >= w.hwm:
		w.addf("%s runs over %d more pages, past the file's %d", where, overflow, w.hwm)
		return stack
	}
	for p := id; p <= id+uint64(overflow); p++ {
		switch {
		case p > id && hasBit(w.used, p):
			w.addf("%s runs over page %d, which is in use by another", where, p)
		case hasBit(w.free, p):
			w.addf("%s is in use and on the freelist (page %d)", where, p)
		}
		setBit(w.used, p)
	}
	buf, ok := w.read(id, int64(overflow+1)*w.pageSize, where)
	if !ok {
		return stack
	}
	var end int
	if flags == branchPageFlag {
		stack, end = w.branch(buf, where, ref.bucket, stack)
	} else {
		stack, end = w.leaf(buf, where, ref.bucket, false, stack)
	}
	if need := (int64(end) + w.pageSize - 1) / w.pageSize; need != int64(overflow)+1 && end <= len(buf) {
		// bbolt gives a page just as many overflow pages as its contents need.
		w.addf("%s runs over %d more pages, and its contents need %d", where, overflow, need-1)
	}
	if w.ends != nil {
		w.ends[id] = end
	}
	return stack
}

// elements checks that the count elements of the page in buf and their
// keys and values lie inside it, packed after the elements in order, as
// bbolt writes them, and returns where they end. each is called with
// every element's fields and its key and value; it is not called after a
// problem with the layout.
func (w *pageWalk) elements(buf []byte, where string, leaf bool, each func(i int, flags uint32, key, value []byte, child uint64)) int {
	_, _, count, _ := pageHeader(buf)
	if !leaf && count == 0 {
		w.addf("%s is a branch page without elements", where)
		return pageHeaderSize
	}
	next := uint64(pageHeaderSize) + uint64(count)*elementSize
	if next > uint64(len(buf)) {
		w.addf("%s has %d elements, more than its %d bytes hold", where, count, len(buf))
		return len(buf)
	}
	le := binary.LittleEndian
	for i := range int(count) {
		e := pageHeaderSize + i*elementSize
		var flags, pos, ksize, vsize uint32
		var child uint64
		if leaf {
			flags, pos, ksize, vsize = le.Uint32(buf[e:]), le.Uint32(buf[e+4:]), le.Uint32(buf[e+8:]), le.Uint32(buf[e+12:])
		} else {
			pos, ksize, child = le.Uint32(buf[e:]), le.Uint32(buf[e+4:]), le.Uint64(buf[e+8:])
		}
		start := uint64(e) + uint64(pos)
		end := start + uint64(ksize) + uint64(vsize)
		switch {
		case end > uint64(len(buf)):
			w.addf("%s: element %d's key and value run to byte %d, past its %d", where, i, end, len(buf))
			return len(buf)
		case start != next:
			w.addf("%s: element %d's key starts at byte %d, and bbolt writes it at %d, after what comes before", where, i, start, next)
			return int(next)
		case ksize == 0:
			w.addf("%s: element %d has an empty key, which bbolt never writes", where, i)
			return int(next)
		case flags&^bucketLeafFlag != 0:
			w.addf("%s: element %d has unknown flags %#x", where, i, flags)
			return int(next)
		}
		next = end
		each(i, flags, buf[start:start+uint64(ksize)], buf[start+uint64(ksize):end], child)
	}
	return int(next)
}

func (w *pageWalk) branch(buf []byte, where, bucket string, stack []pageRef) ([]pageRef, int) {
	end := w.elements(buf, where, false, func(i int, _ uint32, _, _ []byte, child uint64) {
		stack = append(stack, pageRef{id: child, bucket: bucket, from: fmt.Sprintf("element %d of branch %s", i, where)})
	})
	return stack, end
}

// leaf checks a leaf page, in the file or inline in a bucket's value, and
// pushes the root pages of the buckets it holds.
func (w *pageWalk) leaf(buf []byte, where, bucket string, inline bool, stack []pageRef) ([]pageRef, int) {
	end := w.elements(buf, where, true, func(i int, flags uint32, key, value []byte, _ uint64) {
		if flags&bucketLeafFlag == 0 {
			if bucket == rootBucket {
				// bbolt's API puts only buckets at the top.
				w.addf("%s: element %d, %q, is a value, not a bucket", where, i, key)
			}
			return
		}
		name := bucketName(bucket, key)
		root := uint64(0)
		if len(value) >= bucketHeaderSize {
			root = binary.LittleEndian.Uint64(value)
		}
		switch {
		case inline:
			// bbolt keeps a bucket inline only while it holds no bucket.
			w.addf("%s: element %d makes %s a bucket inside an inline bucket, which bbolt never writes", where, i, name)
		case len(value) < bucketHeaderSize:
			w.addf("%s: the value of %s is %d bytes, too short for a bucket", where, name, len(value))
		case root != 0:
			stack = append(stack, pageRef{id: root, bucket: name, from: fmt.Sprintf("%s in %s", name, where)})
		default:
			stack = w.inlineBucket(value[bucketHeaderSize:], name, where, stack)
		}
	})
	return stack, end
}

// inlineBucket checks the leaf page of a bucket kept in its parent's value.
func (w *pageWalk) inlineBucket(page []byte, name, parent string, stack []pageRef) []pageRef {
	where := fmt.Sprintf("the inline page of %s in %s", name, parent)
	if len(page) < pageHeaderSize {
		w.addf("%s is %d bytes, too short for a page", where, len(page))
		return stack
	}
	// bbolt writes an inline page into a zeroed value: no id, no overflow.
	if id, flags, _, overflow := pageHeader(page); flags != leafPageFlag || id != 0 || overflow != 0 {
		w.addf("%s has the header of no inline page: id %d, flags %#x, overflow %d", where, id, flags, overflow)
		return stack
	}
	stack, end := w.leaf(page, where, name, true, stack)
	if end != len(page) {
		// bbolt sizes the value to the page it writes into it exactly.
		w.addf("%s holds %d bytes, and its elements end at byte %d", where, len(page), end)
	}
	return stack
}

// bucketName names the bucket key inside parent for messages.
func bucketName(parent string, key []byte) string {
	name := fmt.Sprintf("bucket %q", key)
	if strings.HasPrefix(parent, "bucket ") {
		name = parent + " / " + fmt.Sprintf("%q", key)
	}
	return name
}
