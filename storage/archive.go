package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

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

// ArchiveState is where the archive stood at a commit.
type ArchiveState struct {
	// File is the name (in the archive's directory, without ".open") of
	// the file being written, "" before the first.
	File string `json:"file"`
	// Committed is how many bytes of File hold records of committed
	// pages: a crash leaves anything after it unaccounted for.
	Committed int64 `json:"committed"`
	// Serial numbers the files, one more for each new file.
	Serial int `json:"serial"`
	// Dir is the directory File was begun in ("" in states written
	// before it was kept): a run given another --warc finds it there.
	Dir string `json:"dir,omitempty"`
}

// PutArchiveState records s in the batch's commit.
func (b *Batch) PutArchiveState(s ArchiveState) {
	data, err := json.Marshal(s)
	b.ops = append(b.ops, op{kind: opPut, aux: &opAux{bucket: bucketMeta, key: string(keyArchive), err: err}, value: data})
}

// PutArchiveState records s at once, in its own commit: a new file is
// named in the database before it is created, so that after a crash the
// file is known to be this crawl's.
func (db *DB) PutArchiveState(s ArchiveState) error {
	var b Batch
	b.PutArchiveState(s)
	_, err := db.Commit(&b)
	return err
}

// ArchiveState returns the archive's state at the last commit; ok is false
// if the crawl never archived.
func (db *DB) ArchiveState() (s ArchiveState, ok bool, err error) {
	data, err := db.get(bucketMeta, string(keyArchive))
	if errors.Is(err, ErrNotFound) {
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

// Capture is the first archived copy of a payload.
type Capture struct {
	URI  string
	Date time.Time
}

// PutCapture records the first capture of the payload whose digest is key.
func (b *Batch) PutCapture(digest string, c Capture) {
	data := binary.AppendVarint(nil, c.Date.UnixNano())
	data = append(data, c.URI...)
	b.ops = append(b.ops, op{kind: opPut, aux: &opAux{bucket: bucketCaptures, key: digest}, value: data})
}

// LookupCapture returns the first capture of the payload with this digest.
func (db *DB) LookupCapture(digest string) (c Capture, ok bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketCaptures)
		if bk == nil {
			return nil
		}
		v := bk.Get([]byte(digest))
		if v == nil {
			return nil
		}
		c, err = DecodeCapture(digest, v)
		ok = err == nil
		return err
	})
	return c, ok, err
}

// DecodeCapture decodes a capture recorded by PutCapture.
func DecodeCapture(digest string, v []byte) (Capture, error) {
	nanos, n := binary.Varint(v)
	if n <= 0 {
		return Capture{}, fmt.Errorf("capture %q: malformed record", digest)
	}
	return Capture{URI: string(v[n:]), Date: time.Unix(0, nanos).UTC()}, nil
}
