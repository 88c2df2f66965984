package storage

import (
	"breakwater/store"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// The archive's part of the file: where the WARC file being written was
// cut at the last commit, and the first capture of every payload, for
// revisit records. Both change in the commits that mark pages done, so
// the file and the archive never disagree about which pages are in it.
var (
	keyArchive     = []byte("archive")
	bucketCaptures = []byte("captures")
)

// PutArchiveState records s at once, in its own commit: a new file is
// named in the database before it is created, so that after a crash the
// file is known to be this crawl's.
func (db *DB) PutArchiveState(s store.ArchiveState) error {
	var b store.Batch
	b.PutArchiveState(s)
	_, err := db.Commit(&b)
	return err
}

// ArchiveState returns the archive's state at the last commit; ok is false
// if the crawl never archived.
func (db *DB) ArchiveState() (s store.ArchiveState, ok bool, err error) {
	data, err := db.get(bucketMeta, string(keyArchive))
	if errors.Is(err, store.ErrNotFound) {
		return s, false, nil
	}
	if err != nil {
		return s, false, err
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return s, false, fmt.Errorf("%s: decode the archive's state (meta %q): %w", db.path, keyArchive, err)
	}
	return s, true, nil
}

// LookupCapture returns the first capture of the payload with this digest.
func (db *DB) LookupCapture(digest string) (c store.Capture, ok bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketCaptures)
		if bk == nil {
			return nil
		}
		v := bk.Get([]byte(digest))
		if v == nil {
			return nil
		}
		c, err = store.DecodeCapture(digest, v)
		ok = err == nil
		return err
	})
	return c, ok, err
}
