package backend

import (
	"context"
	"fmt"
	"os"

	"breakwater/redisstore"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/verify"
)

// ReadOnly is a crawl's store opened only to be read and checked
// (breakwater verify): nothing is written to it.
type ReadOnly interface {
	// Path names the store in messages (a URL without its password).
	Path() string
	// Verify checks the crawl's invariants (package verify) over the
	// per-host view the store produces, and what only the store's own
	// layout has, into one report. Its error is for a store that could
	// not be read.
	Verify(ctx context.Context, opts verify.Options) (*verify.Report, error)
	// ArchiveState is the crawl's archive state as last committed; ok is
	// false before the first. A store whose processes each keep their own
	// returns store.ErrUnsupported.
	ArchiveState() (state store.ArchiveState, ok bool, err error)
	// Settings are the crawl's stored settings; store.ErrNotFound if none.
	Settings() ([]byte, error)
	Close() error
}

// DamageError is a database file whose page tree is damaged: the problems
// found walking it, before anything of it was read. Nothing else of the
// file can be read.
type DamageError = storage.DamageError

// ErrLocked is a database file a running crawl holds: the crawl's lock
// lets no reader in beside it.
var ErrLocked = storage.ErrLocked

// OpenReadOnly opens the target's store to be read and checked: the store
// must hold a crawl. A --store that is no store URL, or a --db file that
// does not exist, is ErrTarget; a file's pages are walked with plain
// reads before its records are read, and a damaged page tree is a
// *DamageError; a file a crawl is running on is ErrLocked.
func (t Target) OpenReadOnly(ctx context.Context) (ReadOnly, error) {
	if t.Store != "" {
		if err := t.checkStoreURL(); err != nil {
			return nil, err
		}
		st, err := redisstore.Open(ctx, t.Store, redisstore.ReadOnly)
		if err != nil {
			return nil, err
		}
		return readOnlyFleet{st}, nil
	}
	if _, err := os.Stat(t.DB); err != nil {
		return nil, targetError{fmt.Sprintf("--db %s: no such file", t.DB)}
	}
	db, err := storage.Open(t.DB, &storage.Options{ReadOnly: true, CheckPages: true})
	if err != nil {
		return nil, err
	}
	return readOnlyFile{db}, nil
}

// checkStoreURL refuses a --store that is no store URL before anything is
// dialled: it is never taken for a file.
func (t Target) checkStoreURL() error {
	if !redisstore.IsURL(t.Store) {
		return targetError{fmt.Sprintf("--store %q: want redis://HOST:PORT[/DB] or rediss://...; a database file is given with --db", t.Store)}
	}
	return nil
}

// readOnlyFile is a database file opened read-only.
type readOnlyFile struct{ *storage.DB }

// Verify checks the file whole in one read transaction; it needs no
// context.
func (f readOnlyFile) Verify(_ context.Context, opts verify.Options) (*verify.Report, error) {
	return f.DB.Verify(opts)
}

// readOnlyFleet is a fleet's store opened read-only.
type readOnlyFleet struct{ *redisstore.Store }

// ArchiveState is not the store's: each process of a fleet keeps its own
// archive, named after it, and its files are checked with warc-check.
func (f readOnlyFleet) ArchiveState() (store.ArchiveState, bool, error) {
	return store.ArchiveState{}, false, store.Unsupported(f.Path(), "one archive for the crawl (each process keeps its own)")
}
