package storage

// Opening a file that may not be what it claims. Every command opens its
// --db through Open, so a truncated, bit-flipped, empty or foreign file, a
// directory or a file without permission must be refused with an error
// that says so, and must never be modified by the attempt:
//
//   - the path is looked at first: a directory, a device or pipe, and an
//     empty file are refused before bbolt sees them (bbolt would lay out a
//     new database in an empty file, and block on a pipe);
//   - an existing file is opened read-only first: a file that bbolt opens
//     for writing may be written at once (a freelist not kept in the file
//     is rebuilt and committed), so nothing is opened for writing until
//     the read-only look found a Breakwater file of this schema version
//     whose pages all lie inside it;
//   - bbolt reads its pages through a memory map and trusts what it finds
//     there: a damaged page can make it panic, and a page beyond the end
//     of a truncated file faults. Reads while opening run under guard,
//     which turns both into an error. That is not enough inside bolt.Open
//     itself: a panic there leaves its memory map behind, and the map
//     keeps the file's lock, so that every later open in the process finds
//     the file locked. So before bbolt opens a file, inspect reads what
//     bolt.Open will (the meta pages and the freelist) with plain reads,
//     and refuses what would make it panic or fault, a truncated file
//     included.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"runtime/debug"
	"slices"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// checkPath returns what is at path, or nil if nothing is and a new file
// may be created there.
func checkPath(path string, readOnly bool) (fs.FileInfo, error) {
	info, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !readOnly:
		return nil, nil
	case err != nil:
		return nil, err
	case info.IsDir():
		return nil, errors.New("is a directory, not a database file")
	case !info.Mode().IsRegular():
		return nil, fmt.Errorf("is not a regular file (%s), not a database file", info.Mode().Type())
	case info.Size() == 0:
		// bbolt would initialise it, which is right only for a file it has
		// just created itself: an empty file at a crawl's path is more
		// likely a crawl's file lost to a truncation than a new one.
		return nil, fmt.Errorf("%w: the file is empty (0 bytes), not a Breakwater database: "+
			"remove it to start a new crawl at this path", ErrDamaged)
	}
	return info, nil
}

// openChecked opens the existing file at path read-only and checks that
// it is a Breakwater file of this schema version, and that its pages lie
// inside it; with checkPages, that its page tree is sound. A file that a
// write will follow is allowed to hold no buckets yet (see checkVersion).
func openChecked(path string, info fs.FileInfo, timeout time.Duration, readOnly, checkPages bool) (*DB, error) {
	if err := inspect(path, info.Size()); err != nil {
		return nil, err
	}
	bdb, err := openBolt(path, true, timeout, 0)
	if err != nil {
		return nil, err
	}
	db := &DB{bolt: bdb, path: path, readOnly: true, seen: &seenSet{}}
	if checkPages {
		// Under the lock bolt.Open took, so that no crawl writes as the
		// walk reads; bolt.Open itself reads only what inspect checked.
		if err := walkBeforeReading(path); err != nil {
			bdb.Close()
			return nil, err
		}
		db.pagesWalked = readOnly
	} else if err := walkTopBeforeReading(path); err != nil {
		bdb.Close()
		return nil, err
	}
	err = guard(func() error {
		return bdb.View(func(tx *bolt.Tx) error {
			if end := tx.Size(); end > info.Size() {
				return fmt.Errorf("%w: the file is truncated: it is %d bytes, and its pages run to %d", ErrDamaged, info.Size(), end)
			}
			return checkVersion(tx, !readOnly)
		})
	})
	if err != nil {
		bdb.Close()
		return nil, err
	}
	return db, nil
}

// walkBeforeReading walks the pages of the file at path as bbolt will
// read them on opening, and returns a *DamageError if they are damaged.
func walkBeforeReading(path string) error {
	return walkedBeforeReading(path, func(report func(string, ...any)) (bool, error) { return walkPages(path, 0, report, nil) })
}

// walkTopBeforeReading is walkBeforeReading of the pages opening reads
// (walkTop) alone: what every open checks, whatever the file's size.
func walkTopBeforeReading(path string) error {
	return walkedBeforeReading(path, func(report func(string, ...any)) (bool, error) { return walkTop(path, report) })
}

func walkedBeforeReading(path string, walk func(report func(string, ...any)) (bool, error)) error {
	dmg := &DamageError{}
	sound, err := walk(func(format string, args ...any) {
		if len(dmg.Problems) < maxWalkedProblems {
			dmg.Problems = append(dmg.Problems, fmt.Sprintf(format, args...))
		} else {
			dmg.Omitted++
		}
	})
	switch {
	case err != nil:
		return describeOpenError(err, true)
	case !sound:
		return dmg
	}
	return nil
}

// fileMode is a new database file's: its owner's only, whatever the umask
// (which can only take bits away). The file holds the crawl's secret
// headers and proxy passwords in clear; a file that exists keeps its mode.
const fileMode = 0o600

// openBolt opens path with bbolt, turning its errors into ones that say
// what is wrong with the file.
func openBolt(path string, readOnly bool, timeout time.Duration, maxSize int) (*bolt.DB, error) {
	var file *os.File
	var bdb *bolt.DB
	err := guard(func() error {
		var err error
		// The freelist is kept in the file (NoFreelistSync off): rebuilding it at
		// open would read every page and map the whole file into memory. The
		// hashmap freelist keeps allocation cheap as the file grows.
		bdb, err = bolt.Open(path, fileMode, &bolt.Options{Timeout: timeout, ReadOnly: readOnly,
			FreelistType: bolt.FreelistMapType, MaxSize: maxSize,
			OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
				f, err := os.OpenFile(name, flag, perm)
				file = f
				return f, err
			}})
		return err
	})
	if err == nil {
		return bdb, nil
	}
	if bdb == nil && file != nil {
		// bbolt panicked before it could close the file: closing it drops
		// the lock too. Its memory map, if made, stays (a few pages of
		// address space, once).
		file.Close()
	}
	return nil, describeOpenError(err, readOnly)
}

// describeOpenError says what an error of bolt.Open means for the file.
func describeOpenError(err error, readOnly bool) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, bolterrors.ErrTimeout):
		return ErrLocked
	case errors.Is(err, bolterrors.ErrInvalid):
		return fmt.Errorf("%w: no valid bbolt header: another kind of file, or damaged beyond reading", ErrDamaged)
	case errors.Is(err, bolterrors.ErrChecksum):
		return fmt.Errorf("%w: both of its bbolt meta pages fail their checksums: the file is corrupt", ErrDamaged)
	case errors.Is(err, bolterrors.ErrVersionMismatch):
		return fmt.Errorf("%w: a bbolt file of a format version this build cannot read", ErrDamaged)
	case errors.Is(err, ErrDamaged):
		return err
	case errors.As(err, &errno) && (errno == syscall.EACCES || errno == syscall.EPERM || errno == syscall.EROFS):
		if readOnly {
			return fmt.Errorf("cannot open it for reading: %w", errno)
		}
		return fmt.Errorf("cannot open it for reading and writing (every command but verify writes to it): %w", errno)
	}
	return err
}

// guard runs fn with memory faults turned into panics (bbolt reads the
// file through a memory map: a page past the end of a truncated file
// faults), and a panic into an error: bbolt panics on pages it cannot
// make sense of.
func guard(fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: bbolt failed reading it: %v", ErrDamaged, r)
		}
	}()
	return fn()
}

// The parts of bbolt's file format (version 2) that bolt.Open reads: a
// page starts with a header (id, flags, count, overflow), the first two
// pages hold a meta record each, checksummed with FNV-1a, and the newer
// valid one names the freelist page and the high-water mark.
const (
	boltMagic        = 0xED0CDAED
	boltVersion      = 2
	pageHeaderSize   = 16
	metaSize         = 64 // up to and with the checksum
	freelistFlag     = 0x10
	noFreelist       = ^uint64(0)
	maxInspectedSpan = 1 << 30
)

type boltMeta struct {
	pageSize                  int64
	root, freelist, hwm, txid uint64
}

// readBoltMeta decodes the meta record of the page at off, if it is valid.
func readBoltMeta(f *os.File, off int64) (m boltMeta, ok bool) {
	buf := make([]byte, pageHeaderSize+metaSize)
	if n, _ := f.ReadAt(buf, off); n < len(buf) {
		return m, false
	}
	m, err := decodeMeta(buf)
	return m, err == nil
}

// metaChecksum is the checksum of the meta record b: FNV-1a 64 over what
// comes before the checksum.
func metaChecksum(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b[:56])
	return h.Sum64()
}

// inspect reads the meta pages and the freelist of the bbolt file at path,
// size bytes long, as bolt.Open will, and returns an error for anything
// that would make it fail, panic or fault.
func inspect(path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return describeOpenError(err, true)
	}
	defer f.Close()
	// bbolt finds the page size in the first meta page, or failing that
	// the second, which it looks for at every page size it allows.
	m0, ok0 := readBoltMeta(f, 0)
	pageSize := m0.pageSize
	if !ok0 {
		for i := range 15 {
			if m, ok := readBoltMeta(f, 1024<<i); ok {
				pageSize = m.pageSize
				break
			}
		}
	}
	if pageSize < 512 || pageSize > 1<<24 {
		head := make([]byte, pageHeaderSize+8)
		n, _ := f.ReadAt(head, 0)
		switch le := binary.LittleEndian; {
		case n < len(head) || le.Uint32(head[pageHeaderSize:]) != boltMagic:
			return describeOpenError(bolterrors.ErrInvalid, true)
		case le.Uint32(head[pageHeaderSize+4:]) != boltVersion:
			return describeOpenError(bolterrors.ErrVersionMismatch, true)
		}
		return describeOpenError(bolterrors.ErrChecksum, true)
	}
	if size < 2*pageSize {
		return fmt.Errorf("%w: the file is truncated: it is %d bytes, shorter than bbolt's two meta pages of %d", ErrDamaged, size, pageSize)
	}
	if !ok0 {
		m0, ok0 = readBoltMeta(f, 0)
	}
	m1, ok1 := readBoltMeta(f, pageSize)
	m := m0
	switch {
	case ok0 && ok1 && m1.txid > m0.txid, !ok0 && ok1:
		m = m1
	case !ok0 && !ok1:
		return describeOpenError(bolterrors.ErrChecksum, true)
	}
	if m.pageSize != pageSize {
		return fmt.Errorf("%w: its meta pages disagree about the page size (%d, %d)", ErrDamaged, m0.pageSize, m1.pageSize)
	}
	if m.hwm < 4 || m.hwm > uint64(size/pageSize) {
		if m.hwm > uint64(size/pageSize) {
			return fmt.Errorf("%w: the file is truncated: it is %d bytes, and its pages run to %d", ErrDamaged, size, m.hwm*uint64(pageSize))
		}
		return fmt.Errorf("%w: its meta page says it has %d pages", ErrDamaged, m.hwm)
	}
	if m.root < 2 || m.root >= m.hwm {
		return fmt.Errorf("%w: its root page %d lies outside its %d pages", ErrDamaged, m.root, m.hwm)
	}
	if m.freelist == noFreelist {
		return nil
	}
	return inspectFreelist(f, m, pageSize)
}

// inspectFreelist checks the freelist page: what the page says of itself
// fits in the file, and it lists distinct pages that can be free.
func inspectFreelist(f *os.File, m boltMeta, pageSize int64) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: its freelist (page %d) is corrupt: %s", ErrDamaged, m.freelist, fmt.Sprintf(format, args...))
	}
	if m.freelist < 2 || m.freelist >= m.hwm {
		return bad("it lies outside the file's %d pages", m.hwm)
	}
	head := make([]byte, pageHeaderSize+8)
	if _, err := f.ReadAt(head, int64(m.freelist)*pageSize); err != nil {
		return bad("%v", err)
	}
	le := binary.LittleEndian
	flags, count, overflow := le.Uint16(head[8:]), uint64(le.Uint16(head[10:])), uint64(le.Uint32(head[12:]))
	if flags != freelistFlag {
		return bad("the page is not a freelist page (flags %#x)", flags)
	}
	if m.freelist+overflow >= m.hwm {
		return bad("its %d overflow pages run past the file's %d pages", overflow, m.hwm)
	}
	skip := uint64(0)
	if count == 0xFFFF {
		count, skip = le.Uint64(head[pageHeaderSize:]), 1
	}
	span := uint64(pageSize) * (overflow + 1)
	if count > (span-pageHeaderSize)/8-skip || span > maxInspectedSpan {
		return bad("it claims %d free pages, more than its %d bytes hold", count, span)
	}
	buf := make([]byte, 8*(skip+count))
	if _, err := f.ReadAt(buf, int64(m.freelist)*pageSize+pageHeaderSize); err != nil {
		return bad("%v", err)
	}
	ids := make([]uint64, count)
	for i := range ids {
		ids[i] = le.Uint64(buf[8*(skip+uint64(i)):])
	}
	slices.Sort(ids)
	for i, id := range ids {
		if id < 2 || id >= m.hwm {
			return bad("it lists page %d, outside the file's pages 2 to %d", id, m.hwm-1)
		}
		if i > 0 && ids[i-1] == id {
			return bad("it lists page %d twice", id)
		}
	}
	return nil
}
