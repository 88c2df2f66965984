package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// fileState is what a refused Open must leave as it was.
type fileState struct {
	data  []byte
	mtime time.Time
	mode  os.FileMode
}

// freeze backdates path's mtime, so that any write after it shows, and
// returns its state.
func freeze(t *testing.T, path string) fileState {
	t.Helper()
	old := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	return stateOf(t, path)
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	if info.Mode().IsRegular() && info.Mode().Perm()&0o400 != 0 || os.Geteuid() == 0 && info.Mode().IsRegular() {
		if data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	return fileState{data: data, mtime: info.ModTime(), mode: info.Mode()}
}

func checkUnchanged(t *testing.T, path string, before fileState) {
	t.Helper()
	after := stateOf(t, path)
	if !bytes.Equal(before.data, after.data) {
		t.Errorf("%s: the refused file's bytes changed (%d -> %d bytes)", path, len(before.data), len(after.data))
	}
	if !before.mtime.Equal(after.mtime) || before.mode != after.mode {
		t.Errorf("%s: the refused file's mtime or mode changed: %v %v -> %v %v", path, before.mtime, before.mode, after.mtime, after.mode)
	}
}

// refused opens path in both modes and asserts each is refused with an
// error naming path and every one of want, leaving the file as it was.
func refused(t *testing.T, path string, isDamaged bool, want ...string) {
	t.Helper()
	for _, ro := range []bool{false, true} {
		before := freeze(t, path)
		db, err := Open(path, &Options{ReadOnly: ro, LockTimeout: 100 * time.Millisecond})
		if err == nil {
			db.Close()
			t.Errorf("Open(%s, ReadOnly=%v) succeeded", path, ro)
			continue
		}
		for _, s := range append([]string{"open database " + path + ": "}, want...) {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("Open(ReadOnly=%v) error %q does not say %q", ro, err, s)
			}
		}
		if errors.Is(err, ErrDamaged) != isDamaged {
			t.Errorf("Open(ReadOnly=%v) error %q: errors.Is(ErrDamaged) = %v, want %v", ro, err, !isDamaged, isDamaged)
		}
		checkUnchanged(t, path, before)
	}
}

// crawlFile writes a database with a bit of everything in it, closes it
// and returns its path and bytes.
func crawlFile(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crawl.db")
	db := openAt(t, path, nil)
	fillState(t, db)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, data
}

func TestOpenRefusesEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, path, true, "empty (0 bytes)", "remove it")
}

// A new file is still created, and one that bbolt laid out before any
// bucket was written (a first run killed at once) is taken as new.
func TestOpenCreatesNewFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	checkLayout(t, openAt(t, path, nil))

	bare := filepath.Join(t.TempDir(), "bare.db")
	updateBolt(t, bare, func(*bolt.Tx) error { return nil })
	if _, err := Open(bare, &Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "empty bbolt file") {
		t.Errorf("read-only Open of a bbolt file with no buckets: %v, want refused as empty", err)
	}
	checkLayout(t, openAt(t, bare, nil))
}

func TestOpenRefusesNonFiles(t *testing.T) {
	dir := t.TempDir()
	refused(t, dir, false, "is a directory")

	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// Opening a pipe would block until a writer came: it must be refused
	// before any open.
	done := make(chan struct{})
	go func() {
		defer close(done)
		refused(t, fifo, false, "not a regular file")
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Open of a named pipe hangs")
	}
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, bytes.Repeat([]byte("not a database at all\n"), 1000), 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, text, true, "no valid bbolt header")

	// Another program's bbolt file whose freelist is not kept in the file:
	// bbolt opened for writing commits a rebuilt freelist at once, which
	// must not happen to a file that is then refused.
	foreign := filepath.Join(dir, "other.db")
	bdb, err := bolt.Open(foreign, 0o644, &bolt.Options{NoFreelistSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = bdb.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket([]byte("keys"))
		if err != nil {
			return err
		}
		return bk.Put([]byte("k"), []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	bdb.Close()
	refused(t, foreign, false, "without Breakwater metadata")
}

func TestOpenRefusesOtherSchemaVersions(t *testing.T) {
	for _, tt := range []struct {
		version uint32
		want    []string
	}{
		{1, []string{"schema version 1", "development builds before breakwater 0.1.0", "understands 3 only", "cannot migrate"}},
		{2, []string{"schema version 2", "development builds before breakwater 0.1.0", "understands 3 only", "cannot migrate"}},
		{4, []string{"schema version 4", "newer than this build", "understands 3"}},
	} {
		path := filepath.Join(t.TempDir(), "crawl.db")
		writeBolt(t, path, map[string]map[string][]byte{"meta": {"schema": schemaBytes(tt.version)}, "seen": {"k": {1}}})
		refused(t, path, false, tt.want...)
	}
}

// A file cut short of its last page is refused; one cut only in the room
// bbolt keeps past its last page has lost nothing and opens.
func TestOpenRefusesTruncatedFile(t *testing.T) {
	path, _ := crawlFile(t)
	var page, end int
	updateBolt(t, path, func(tx *bolt.Tx) error {
		page, end = tx.DB().Info().PageSize, int(tx.Size())
		return nil
	})
	data, _ := os.ReadFile(path) // as bbolt last left it
	if end > len(data) || end < 4*page {
		t.Fatalf("the file is %d bytes and its pages run to %d", len(data), end)
	}
	for _, size := range []int{1, 100, page - 1, page, page + 1, 2 * page, end / 2, end - page, end - 1} {
		if err := os.WriteFile(path, data[:size], 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("truncated to %d of %d bytes (pages to %d)", size, len(data), end)
		refused(t, path, true)
	}
	for _, size := range []int{len(data), end} {
		if err := os.WriteFile(path, data[:size], 0o644); err != nil {
			t.Fatal(err)
		}
		db, err := Open(path, &Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("Open of the file cut to %d bytes, past its last page at %d: %v", size, end, err)
		}
		checkInvariants(t, db)
		db.Close()
	}
}

// Bit flips anywhere never make Open panic, fault or hang: it opens the
// file or refuses it naming it; a refused file is left as it was, and so
// is any file opened read-only. Both meta pages flipped is always refused.
func TestOpenBitFlips(t *testing.T) {
	path, data := crawlFile(t)
	var page int
	updateBolt(t, path, func(tx *bolt.Tx) error { page = tx.DB().Info().PageSize; return nil })
	data, _ = os.ReadFile(path)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(16, seed))
	var offsets []int
	for p := 0; p < len(data); p += page {
		for _, off := range []int{0, 8, 10, 12, 16, 20, 24, 32, 48, 64, 100} { // header, first elements
			offsets = append(offsets, p+off)
		}
	}
	for range 300 {
		offsets = append(offsets, rng.IntN(len(data)))
	}
	opened := 0
	for _, off := range offsets {
		flipped := bytes.Clone(data)
		flipped[off] ^= 1 << rng.IntN(8)
		for _, ro := range []bool{true, false} {
			if err := os.WriteFile(path, flipped, 0o644); err != nil {
				t.Fatal(err)
			}
			before := freeze(t, path)
			db, err := Open(path, &Options{ReadOnly: ro})
			if err == nil {
				opened++
				db.Close()
				if ro {
					checkUnchanged(t, path, before)
				}
				continue
			}
			if !strings.HasPrefix(err.Error(), "open database "+path+": ") {
				t.Errorf("flip at %d: error %q does not name the file", off, err)
			}
			checkUnchanged(t, path, before)
		}
	}
	t.Logf("%d flips: %d opens succeeded", len(offsets), opened)

	both := bytes.Clone(data)
	both[16+56] ^= 0x01 // each meta page's checksum
	both[page+16+56] ^= 0x01
	if err := os.WriteFile(path, both, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, path, true, "meta pages fail their checksums")
}

// Without read permission neither mode opens; without write permission
// only a read-only open does. Root ignores permission bits, so there the
// file is made immutable instead, which refuses writing even to root.
func TestOpenPermissions(t *testing.T) {
	path, _ := crawlFile(t)
	before := freeze(t, path)
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
			t.Skipf("running as root, which ignores permission bits, and chattr +i failed (%v: %s): no way to make the file unwritable", err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
	} else if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	before = stateOf(t, path)
	_, err := Open(path, nil)
	if err == nil || !strings.Contains(err.Error(), "open database "+path+": cannot open it for reading and writing") {
		t.Errorf("Open of an unwritable file: %v, want it refused as not writable", err)
	}
	checkUnchanged(t, path, before)
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open of an unwritable file: %v", err)
	}
	db.Close()
	checkUnchanged(t, path, before)

	if os.Geteuid() == 0 {
		t.Skip("running as root, which reads any file: the unreadable case cannot be made")
	}
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	refused(t, path, false, "cannot open it for reading", "permission denied")
}

// A root page whose element count runs past the page (and past the mapped
// file) is refused as damaged before bbolt reads it: bbolt would read
// beyond the mapping, which faults nowhere under the race detector's
// pointer checks and returns garbage without them.
func TestOpenRefusesARootPageCountPastItsEnd(t *testing.T) {
	path, data := crawlFile(t)
	var root, txid uint64
	var page int
	for _, at := range []int{0, 4096} { // the newer meta page names the root bbolt reads
		if m, err := decodeMeta(data[at:]); err == nil && m.txid >= txid {
			root, page, txid = m.root, int(m.pageSize), m.txid
		}
	}
	if page == 0 {
		t.Fatal("no meta page decodes")
	}
	binary.LittleEndian.PutUint16(data[int(root)*page+10:], 0xffff) // the page header's count
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	refused(t, path, true)
}
