package storage

import (
	"breakwater/store"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// SchemaVersion is the layout version this build writes and understands.
const SchemaVersion = 3

// Sentinel errors callers branch on.
var (
	// ErrLocked means another process (usually a running crawl) holds the file.
	ErrLocked = errors.New("database is locked by another process (is a crawl running?)")
	// ErrSchema means the file was written by another version, or is a
	// bbolt file that is not Breakwater's.
	ErrSchema = errors.New("unsupported database schema")
	// ErrDamaged means the file is not a readable bbolt file: empty,
	// truncated, corrupt, or something else altogether.
	ErrDamaged = errors.New("damaged or not a database file")
)

var (
	bucketMeta        = []byte("meta")
	bucketSeen        = []byte("seen")
	bucketQueue       = []byte("queue")
	bucketDeferred    = []byte("deferred")
	bucketResults     = []byte("results")
	bucketHosts       = []byte("hosts")
	bucketRobots      = []byte("robots")
	bucketBreakers    = []byte("breakers")
	bucketTransitions = []byte("transitions")
	bucketCases       = []byte("cases")

	allBuckets = [][]byte{bucketMeta, bucketSeen, bucketQueue, bucketDeferred, bucketResults,
		bucketHosts, bucketRobots, bucketBreakers, bucketTransitions, bucketCases, bucketRefresh, bucketCaptures,
		bucketHostPages, bucketLinks, bucketLinkKeys, bucketLinkURLs}

	keySchema   = []byte("schema")
	keySettings = []byte("settings")
	keyCounts   = []byte("counts")
	keyTallies  = []byte("tallies")
)

// Options tune Open. A nil *Options means the defaults.
type Options struct {
	// LockTimeout is how long Open waits for another process's lock.
	// Zero means one second; a crawl must never hang on a locked file.
	LockTimeout time.Duration
	// ReadOnly opens without creating or migrating anything.
	ReadOnly bool
	// MaxSize, if positive, is the size in bytes the file may not grow
	// past: a commit that would grow it further fails, as on a full disk
	// (bbolt's Options.MaxSize). Tests use it to fill a disk anywhere.
	MaxSize int
	// CheckPages walks every page of an existing file, with plain reads,
	// before bbolt reads anything past its meta pages and freelist (see
	// pagewalk.go): a file whose pages are damaged is refused with a
	// *DamageError naming each thing found. It reads the whole file;
	// verify asks for it, so that a damaged page is a finding, never a
	// fault.
	CheckPages bool
}

// DB is an open Breakwater database file.
type DB struct {
	bolt     *bolt.DB
	path     string
	commitMu sync.Mutex
	commits  int      // under commitMu
	seen     *seenSet // empty when read-only
	readOnly bool
	// pagesWalked is set when the file was opened read-only with
	// CheckPages and its pages found sound: as the lock keeps writers out,
	// Verify need not walk them again.
	pagesWalked bool
	// hashKeyedLinks: the file may hold link records keyed by page hash,
	// written before they were keyed in order (see links.go).
	hashKeyedLinks bool
}

// Open opens (creating if needed) the database file at path, checks its
// schema version and creates any missing buckets.
//
// A file that is not a Breakwater database of this schema version (empty,
// truncated, damaged, a foreign bbolt file, another version, a directory)
// is refused with an error naming the path and what is wrong, and is left
// exactly as it was: an existing file is first looked at read-only, and
// opened for writing only once it has passed (see openfile.go).
func Open(path string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	info, err := checkPath(path, opts.ReadOnly)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	if info != nil {
		db, err := openChecked(path, info, timeout, opts.ReadOnly, opts.CheckPages)
		if err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
		if opts.ReadOnly {
			return db, nil
		}
		if err := db.Close(); err != nil {
			return nil, err
		}
	}
	bdb, err := openBolt(path, false, timeout, opts.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, seen: &seenSet{}}
	if err := guard(func() error { return db.prepare() }); err != nil {
		db.seen.release()
		bdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

// checkVersion checks the schema version record. A file without a meta
// bucket is refused unless empty is allowed and the file holds nothing at
// all (a new file: bbolt has laid out its pages, no crawl has written yet).
func checkVersion(tx *bolt.Tx, empty bool) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		switch {
		case isNonEmpty(tx):
			return fmt.Errorf("%w: a bbolt file without Breakwater metadata (another program's database?)", ErrSchema)
		case !empty:
			return fmt.Errorf("%w: an empty bbolt file: no crawl has written to it", ErrSchema)
		}
		return nil
	}
	v := meta.Get(keySchema)
	if len(v) != 4 {
		return fmt.Errorf("%w: schema version record missing or malformed", ErrSchema)
	}
	got := binary.BigEndian.Uint32(v)
	switch {
	case got == SchemaVersion:
		return nil
	case got < SchemaVersion:
		// Versions 1 and 2 were written only by development builds on the
		// way to the first release, 0.1.0, which already wrote version 3:
		// no released build reads them, so there is nothing to migrate with.
		return fmt.Errorf("%w: file has schema version %d, written only by development builds before breakwater 0.1.0; "+
			"this build understands %d only and cannot migrate it: crawl again into a new file", ErrSchema, got, SchemaVersion)
	}
	return fmt.Errorf("%w: file has schema version %d, newer than this build, which understands %d: "+
		"use the breakwater that wrote it, or a newer one", ErrSchema, got, SchemaVersion)
}

// prepare readies a file opened for writing: the buckets, the schema
// version of a new file, and the seen set.
func (db *DB) prepare() error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := checkVersion(tx, true); err != nil {
			return err
		}
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keySchema) == nil {
			if err := meta.Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion)); err != nil {
				return err
			}
		}
		hashKeyed, err := linksKeyedInOrder(tx)
		if err != nil {
			return err
		}
		db.hashKeyedLinks = hashKeyed
		// Loaded in this transaction so that a damaged log rolls it back and
		// leaves the refused file as it was. A read-only DB adds nothing
		// and skips the set.
		counts, err := readCounts(meta)
		if err != nil {
			return err
		}
		set, err := loadSeen(tx, counts.Seen)
		if err != nil {
			return err
		}
		db.seen = set
		return nil
	})
}

func isNonEmpty(tx *bolt.Tx) bool {
	k, _ := tx.Cursor().First()
	return k != nil
}

// Seen reports whether the URL with hash h was ever queued, as of the last
// commit. It is cheap and safe to call from any goroutine: workers use it to
// drop known links before they reach the writer.
func (db *DB) Seen(h store.Hash) bool { return db.seen.has(fingerprint(h)) }

// Path is the file's path.
func (db *DB) Path() string { return db.path }

// Close releases the file and its lock.
func (db *DB) Close() error {
	db.seen.release()
	if err := db.bolt.Close(); err != nil {
		return fmt.Errorf("close database %s: %w", db.path, err)
	}
	return nil
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
