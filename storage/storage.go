package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout version this build writes and understands.
const SchemaVersion = 3

// Sentinel errors callers branch on.
var (
	// ErrLocked means another process (usually a running crawl) holds the file.
	ErrLocked = errors.New("database is locked by another process (is a crawl running?)")
	// ErrSchema means the file was written by a newer or unknown version.
	ErrSchema = errors.New("unsupported database schema")
	// ErrNotFound means the requested record does not exist.
	ErrNotFound = errors.New("not found")
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
		bucketHosts, bucketRobots, bucketBreakers, bucketTransitions, bucketCases, bucketRefresh, bucketCaptures}

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
}

// DB is an open Breakwater database file.
type DB struct {
	bolt     *bolt.DB
	path     string
	commitMu sync.Mutex
	seen     *seenSet // empty when read-only
	readOnly bool
}

// Open opens (creating if needed) the database file at path, checks its
// schema version and creates any missing buckets.
func Open(path string, opts *Options) (*DB, error) {
	if opts == nil {
		opts = &Options{}
	}
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	if opts.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("open database %s: %w", path, err)
		}
	}
	// The freelist is kept in the file (NoFreelistSync off): rebuilding it at
	// open would read every page and map the whole file into memory. The
	// hashmap freelist keeps allocation cheap as the file grows.
	bdb, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: timeout, ReadOnly: opts.ReadOnly,
		FreelistType: bolt.FreelistMapType, MaxSize: opts.MaxSize})
	if err != nil {
		switch {
		case errors.Is(err, bolterrors.ErrTimeout):
			return nil, fmt.Errorf("open database %s: %w", path, ErrLocked)
		case errors.Is(err, bolterrors.ErrInvalid), errors.Is(err, bolterrors.ErrChecksum), errors.Is(err, bolterrors.ErrVersionMismatch):
			return nil, fmt.Errorf("open database %s: not a valid Breakwater/bbolt file or damaged: %w", path, err)
		}
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	db := &DB{bolt: bdb, path: path, readOnly: opts.ReadOnly, seen: &seenSet{}}
	if err := db.checkSchema(opts.ReadOnly); err != nil {
		db.seen.release()
		bdb.Close()
		return nil, fmt.Errorf("open database %s: %w", path, err)
	}
	return db, nil
}

func (db *DB) checkSchema(readOnly bool) error {
	check := func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			if readOnly {
				return fmt.Errorf("%w: file has no Breakwater metadata", ErrSchema)
			}
			return nil
		}
		v := meta.Get(keySchema)
		if len(v) != 4 {
			return fmt.Errorf("%w: schema version record missing or malformed", ErrSchema)
		}
		if got := binary.BigEndian.Uint32(v); got != SchemaVersion {
			return fmt.Errorf("%w: file has schema version %d, this build understands %d", ErrSchema, got, SchemaVersion)
		}
		return nil
	}
	if readOnly {
		return db.bolt.View(check)
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketMeta) == nil && isNonEmpty(tx) {
			return fmt.Errorf("%w: bbolt file without Breakwater metadata", ErrSchema)
		}
		if err := check(tx); err != nil {
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
func (db *DB) Seen(h Hash) bool { return db.seen.has(fingerprint(h)) }

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
