package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"

	"breakwater/breaker"
	"breakwater/robots"
	"breakwater/store"
)

// LoadQueued returns up to limit queued items of host with Seq > afterSeq, in FIFO order.
func (db *DB) LoadQueued(host string, afterSeq uint64, limit int) ([]store.Item, error) {
	items := make([]store.Item, 0, min(limit, 256)) // callers refill a few at a time; tests ask for all
	err := db.bolt.View(func(tx *bolt.Tx) error {
		hq := tx.Bucket(bucketQueue).Bucket([]byte(host))
		if hq == nil {
			return nil
		}
		c := hq.Cursor()
		for k, v := c.Seek(seqKey(afterSeq + 1)); k != nil && len(items) < limit; k, v = c.Next() {
			it, err := decodeQueued(host, k, v)
			if err != nil {
				return err
			}
			items = append(items, it)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load queue of %s: %w", host, err)
	}
	return items, nil
}

// ForEachHost calls fn with each host's counters, in host order.
func (db *DB) ForEachHost(fn func(host string, c store.HostCounts) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHosts).ForEach(func(k, v []byte) error {
			var c store.HostCounts
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("decode counts of host %s: %w", k, err)
			}
			return fn(string(k), c)
		})
	})
}

// Counts returns the crawl-wide counters.
func (db *DB) Counts() (store.Counts, error) {
	var c store.Counts
	err := db.viewMeta(keyCounts, &c)
	return c, err
}

// Tallies returns the stored results counted by HTTP status and the failed
// ones by error class.
func (db *DB) Tallies() (store.Tallies, error) {
	var t store.Tallies
	err := db.viewMeta(keyTallies, &t)
	return t, err
}

func (db *DB) viewMeta(key []byte, v any) error {
	return db.bolt.View(func(tx *bolt.Tx) error { return readMeta(tx.Bucket(bucketMeta), key, v) })
}

// NextDue returns the earliest due time in the deferred bucket, zero when empty.
func (db *DB) NextDue() (due int64, ok bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		if k, _ := tx.Bucket(bucketDeferred).Cursor().First(); len(k) >= 8 {
			due, ok = int64(beUint64(k[:8])), true
		}
		return nil
	})
	return due, ok, err
}

// ForEachResult calls fn with every stored result. The Result is decoded
// fresh for each call and may be kept.
func (db *DB) ForEachResult(fn func(r *store.Result) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketResults).ForEach(func(k, v []byte) error {
			_, r, err := store.DecodeResult(v)
			if err != nil {
				return fmt.Errorf("decode result %x: %w", k, err)
			}
			return fn(&r)
		})
	})
}

// scanChunk is how many results ScanResults reads in one transaction.
const scanChunk = 256

// ScanResults calls fn with every result stored when it is called (only
// the failures, if failedOnly), each URL once, like ForEachResult, but fn
// is called outside any transaction: the results are read in short read
// transactions of scanChunk each. So a slow fn (a reader at the far end
// of a socket) never holds a transaction open while a crawl writes the
// file: a bbolt commit that grows the file waits for every open read.
//
// The crawl may write meanwhile. A URL whose result is replaced during the
// scan (a refresh or a retry stores the new one at the end of the bucket)
// is given once, in the form the scan reaches first; URLs first stored
// after the call are left out. To know which URLs it owes, the scan first
// reads the hashes of the stored results (one transaction that reads only
// record headers, never waiting for fn) and keeps them, 16 bytes a result.
func (db *DB) ScanResults(failedOnly bool, fn func(r *store.Result) error) error {
	owed, err := db.resultHashes(failedOnly)
	if err != nil {
		return err
	}
	left := len(owed)
	given := make([]bool, len(owed))
	var after []byte
	for left > 0 {
		chunk, last, err := db.readResults(after)
		if err != nil {
			return err
		}
		for _, c := range chunk {
			i, ok := slices.BinarySearchFunc(owed, c.hash, compareHash)
			if !ok || given[i] {
				continue
			}
			given[i], left = true, left-1
			if failedOnly && !c.r.Failed() {
				continue // retried since, and fetched
			}
			if err := fn(&c.r); err != nil {
				return err
			}
		}
		if len(chunk) < scanChunk {
			return nil // the end of the bucket: what is still owed was replaced by a result not failed
		}
		after = last
	}
	return nil
}

func compareHash(a, b store.Hash) int { return bytes.Compare(a[:], b[:]) }

// resultHashes returns the sorted hashes of the stored results (only the
// failures, if failedOnly).
func (db *DB) resultHashes(failedOnly bool) ([]store.Hash, error) {
	var out []store.Hash
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketResults).ForEach(func(k, v []byte) error {
			h, err := store.ParseRecordHead(v)
			if err != nil {
				return fmt.Errorf("decode result %x: %w", k, err)
			}
			if !failedOnly || h.Failed {
				out = append(out, h.Hash)
			}
			return nil
		})
	})
	slices.SortFunc(out, compareHash)
	return out, err
}

type scanned struct {
	hash store.Hash
	r    store.Result
}

// readResults decodes up to scanChunk results stored after the key after
// (from the first, if nil) and returns them with the last one's key.
func (db *DB) readResults(after []byte) (chunk []scanned, last []byte, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketResults).Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for ; k != nil && len(chunk) < scanChunk; k, v = c.Next() {
			h, r, err := store.DecodeResult(v)
			if err != nil {
				return fmt.Errorf("decode result %x: %w", k, err)
			}
			chunk, last = append(chunk, scanned{h, r}), append(last[:0], k...)
		}
		return nil
	})
	return chunk, last, err
}

// RequeueFailed puts every URL whose result is a failure back in the queue,
// keeping its result until it is fetched again. A URL already queued or
// deferred (say, by an interrupted earlier --retry-failed run) is left as
// it is. It returns how many URLs were requeued.
func (db *DB) RequeueFailed() (int, error) { return db.RequeueFailedWhere(nil) }

// RequeueFailedWhere is RequeueFailed for the failures keep (nil: all)
// chooses, asked in the transaction that requeues them.
func (db *DB) RequeueFailedWhere(keep func(r *store.Result) bool) (int, error) {
	n := 0
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		pending, err := pendingHashes(tx)
		if err != nil {
			return err
		}
		var failed []store.Item
		err = tx.Bucket(bucketResults).ForEach(func(k, v []byte) error {
			if len(v) > 0 && v[0] != store.RecordFailed {
				return nil
			}
			h, r, err := store.DecodeResult(v)
			if err != nil {
				return fmt.Errorf("decode result %x: %w", k, err)
			}
			if r.Failed() && !pending[h] && (keep == nil || keep(&r)) {
				failed = append(failed, store.Item{Host: r.Host, URL: r.URL, Hash: h, Depth: r.Depth,
					Replaces: beUint64(k), Referrer: r.Referrer, Lastmod: r.Lastmod, Kind: r.Kind, Hops: r.RequisiteHops()})
			}
			return nil
		})
		if err != nil {
			return err
		}
		w := newBatchWriter(tx, &store.Committed{}, db.seen, 0)
		for _, it := range failed {
			if err := w.enqueue(it, nil); err != nil {
				return err
			}
		}
		n = len(failed)
		return w.finish()
	})
	if err != nil {
		return 0, fmt.Errorf("requeue failed: %w", err)
	}
	return n, nil
}

// pendingHashes is the set of URL hashes queued or deferred now.
func pendingHashes(tx *bolt.Tx) (map[store.Hash]bool, error) {
	set := make(map[store.Hash]bool)
	err := forEachQueued(tx, func(it store.Item) error {
		set[it.Hash] = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = tx.Bucket(bucketDeferred).ForEach(func(k, v []byte) error {
		it, err := decodeDeferred(k, v)
		if err == nil {
			set[it.Hash] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return set, nil
}

// forEachQueued calls fn with every queued item, host by host.
func forEachQueued(tx *bolt.Tx, fn func(store.Item) error) error {
	queue := tx.Bucket(bucketQueue)
	return queue.ForEachBucket(func(host []byte) error {
		name := string(host)
		return queue.Bucket(host).ForEach(func(k, v []byte) error {
			it, err := decodeQueued(name, k, v)
			if err != nil {
				return err
			}
			return fn(it)
		})
	})
}

// get returns a copy of the value stored under key in one of the small
// keyed buckets ("robots", "breakers", "meta").
func (db *DB) get(bucket []byte, key string) ([]byte, error) {
	var out []byte
	err := db.bolt.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket(bucket).Get([]byte(key)); v != nil {
			out = append([]byte(nil), v...)
		}
		return nil
	})
	if err == nil && out == nil {
		err = store.ErrNotFound
	}
	return out, err
}

// Robots returns the cached robots.txt rules of host, or ErrNotFound.
func (db *DB) Robots(host string) (*robots.Rules, error) {
	data, err := db.get(bucketRobots, host)
	if err != nil {
		return nil, err
	}
	return store.DecodeRobots(host, data)
}

// Settings returns the stored crawl settings blob, or ErrNotFound.
func (db *DB) Settings() ([]byte, error) { return db.get(bucketMeta, string(keySettings)) }

// PutSettings stores the crawl settings blob (seeds, scope) for resumed runs.
func (db *DB) PutSettings(data []byte) error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySettings, data)
	})
}

// Breaker returns the stored breaker of host, or ErrNotFound.
func (db *DB) Breaker(host string) (breaker.Breaker, error) {
	data, err := db.get(bucketBreakers, host)
	if err != nil {
		return breaker.Breaker{}, err
	}
	return store.DecodeBreaker(host, data)
}

// ForEachBreaker calls fn with each host's stored breaker, in host order.
func (db *DB) ForEachBreaker(fn func(host string, b breaker.Breaker) error) error {
	return db.forEach(bucketBreakers, func(k, v []byte) error {
		b, err := store.DecodeBreaker(string(k), v)
		if err != nil {
			return err
		}
		return fn(string(k), b)
	})
}

// ForEachTransition calls fn with each logged transition, oldest first.
func (db *DB) ForEachTransition(fn func(store.Transition) error) error {
	return db.forEach(bucketTransitions, func(k, v []byte) error {
		t, err := store.DecodeTransition(beUint64(k), v)
		if err != nil {
			return err
		}
		return fn(t)
	})
}

// ForEachCase calls fn with each recorded case, oldest first.
func (db *DB) ForEachCase(fn func(store.Case) error) error {
	return db.forEach(bucketCases, func(k, v []byte) error {
		c, err := store.DecodeCase(beUint64(k), v)
		if err != nil {
			return err
		}
		return fn(c)
	})
}

// forEach calls fn with each key and value of bucket. They are valid only
// during the call: decode them, or copy them.
func (db *DB) forEach(bucket []byte, fn func(k, v []byte) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error { return tx.Bucket(bucket).ForEach(fn) })
}
