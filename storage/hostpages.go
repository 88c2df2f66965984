package storage

import (
	"breakwater/store"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// bucketHostPages counts the pages of each host a crawl has requested,
// for its --max-pages-per-host: host -> uvarint. Only a crawl with the cap
// keeps it, so a host without an entry may still have pages in the file.
var bucketHostPages = []byte("host_pages")

// HostPages returns the pages of host the crawl has requested, as
// PutHostPages stored them (stored true). A host without an entry (the
// cap was set on a crawl that had run without it) gets the number of its
// results, fetched and failed: every page it was asked for is among them,
// and so are a few it was not (robots.txt refusals, a host given up on).
func (db *DB) HostPages(host string) (n int64, stored bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketHostPages); b != nil { // a read-only file older than the bucket has none
			if v := b.Get([]byte(host)); v != nil {
				u, size := binary.Uvarint(v)
				if size <= 0 {
					return fmt.Errorf("decode the page count of host %s: malformed %x", host, v)
				}
				n, stored = int64(u), true
				return nil
			}
		}
		v := tx.Bucket(bucketHosts).Get([]byte(host))
		if v == nil {
			return nil
		}
		var c store.HostCounts
		if err := json.Unmarshal(v, &c); err != nil {
			return fmt.Errorf("decode counts of host %s: %w", host, err)
		}
		n = c.Fetched + c.Failed
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("%s: read the page count of host %s: %w", db.path, host, err)
	}
	return n, stored, nil
}
