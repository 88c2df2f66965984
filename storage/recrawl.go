package storage

// The refresh lane: pages queued again once they are old (crawl's
// --recrawl-after).
//
// StageRefreshes walks the results bucket in key order, which is the order
// results were stored and so, give or take the overlap of concurrent
// fetches, the order pages were fetched. Each page fetched before the
// cutoff gets the flag 'R' and an Item replacing its result (see
// Item.Replaces) in its host's lane: refresh/HOST, keyed by the result's
// key, so oldest first. The walk stops at the first page fetched after the
// cutoff, and a caller keeps where it stopped (RefreshScan.After) for the
// next pass: results are never stored before an existing one, so nothing
// behind that point can become stale that the walk has not seen.
//
// The frontier never reads a lane. A host's queue is topped up from its
// lane, oldest first, only when the queue holds no new URL (no Replaces)
// and fewer than RefreshDepth/2 URLs: so a host's new URLs are fetched
// before its refreshes, and what the queue holds of refreshes is bounded by
// hosts x RefreshDepth, not by the number of stale pages. Top-ups happen in
// the commit that shrinks a host's queue (Complete, Defer) and for the
// hosts a Batch.QueueRefreshes names; the URLs moved are in Committed.Added
// like any other. A host given up on (FailHost) has its lane recorded as it
// has its queue.
//
// Invariant: a result flagged 'R' is replaced by exactly one Item, in its
// host's lane, the queue or the deferred bucket; every Item in a lane
// replaces a result flagged 'R'. The flag goes with the result, when the
// refresh stores its own.

import (
	"breakwater/store"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bucketRefresh = []byte("refresh")

// StageRefreshes looks at up to limit results stored after the one keyed
// after (0: from the first), in the order they were stored, and stages
// every page fetched before staleBefore for a refresh: it goes in its
// host's refresh lane. Failures and pages staged already are passed over.
// It stops at the first page fetched at or after staleBefore.
func (db *DB) StageRefreshes(after uint64, staleBefore time.Time, limit int) (store.RefreshScan, error) {
	scan := store.RefreshScan{After: after}
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		scan = store.RefreshScan{After: after}
		results := tx.Bucket(bucketResults)
		var keys, records [][]byte
		var items []store.Item
		c := results.Cursor()
		looked := 0
		for k, v := c.Seek(u64(after + 1)); looked < limit; k, v = c.Next() {
			if k == nil {
				scan.Done = true
				break
			}
			looked++
			key := beUint64(k)
			if len(v) > 0 && v[0] == store.RecordPage {
				h, r, err := store.DecodeResult(v)
				if err != nil {
					return fmt.Errorf("decode result %d: %w", key, err)
				}
				if !r.FetchedAt.Before(staleBefore) {
					scan.After, scan.Done = key-1, true
					break
				}
				rec := append([]byte(nil), v...)
				rec[0] = store.RecordRefreshing
				keys, records = append(keys, append([]byte(nil), k...)), append(records, rec)
				items = append(items, store.Item{Host: r.Host, URL: r.URL, Hash: h, Depth: r.Depth, Replaces: key,
					Referrer: r.Referrer, Lastmod: r.Lastmod, Kind: r.Kind, Hops: r.RequisiteHops()})
			}
			scan.After = key
		}
		hosts := map[string]bool{}
		for i, it := range items {
			if err := results.Put(keys[i], records[i]); err != nil {
				return err
			}
			if err := stage(tx, it); err != nil {
				return err
			}
			if !hosts[it.Host] {
				hosts[it.Host] = true
				scan.Hosts = append(scan.Hosts, it.Host)
			}
		}
		scan.Staged = len(items)
		return nil
	})
	if err != nil {
		return store.RefreshScan{After: after}, fmt.Errorf("stage refreshes: %w", err)
	}
	return scan, nil
}

func stage(tx *bolt.Tx, it store.Item) error {
	lane, err := tx.Bucket(bucketRefresh).CreateBucketIfNotExists([]byte(it.Host))
	if err != nil {
		return fmt.Errorf("refresh lane of %s: %w", it.Host, err)
	}
	lane.FillPercent = appendFill
	return lane.Put(u64(it.Replaces), store.EncodeQueued(it))
}

// decodeStaged decodes an entry of host's lane; its key is what it replaces.
func decodeStaged(host string, k, v []byte) (store.Item, error) {
	it, err := store.ParseItem(v)
	if err != nil || len(k) != 8 || it.Host != "" || it.Replaces != beUint64(k) {
		return it, fmt.Errorf("refresh lane entry %s/%x: %w", host, k, store.ErrBadItem)
	}
	it.Host = host
	return it, nil
}

// Replaced returns the stored page that it's next result replaces (see
// Item.Replaces), or ErrNotFound: also when that result is a failure,
// which is not decoded (a URL --retry-failed queued has nothing to ask
// about).
func (db *DB) Replaced(it store.Item) (*store.Result, error) {
	if it.Replaces == 0 {
		return nil, store.ErrNotFound
	}
	var out *store.Result
	err := db.bolt.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketResults).Get(u64(it.Replaces))
		if len(v) == 0 || v[0] == store.RecordFailed {
			return nil // a failure tried again (--retry-failed): no page to ask about
		}
		h, r, err := store.DecodeResult(v)
		if err != nil {
			return fmt.Errorf("decode result %d: %w", it.Replaces, err)
		}
		if h == it.Hash {
			out = &r
		}
		return nil
	})
	switch {
	case err != nil:
		return nil, err
	case out == nil:
		return nil, store.ErrNotFound
	}
	return out, nil
}

// queueRefreshes marks the hosts of a QueueRefreshes for finish.
func (w *batchWriter) queueRefreshes(hosts []string, all bool) error {
	if !all {
		for _, h := range hosts {
			w.shrunk(h)
		}
		return nil
	}
	return w.tx.Bucket(bucketRefresh).ForEachBucket(func(host []byte) error {
		w.shrunk(string(host))
		return nil
	})
}

// shrunk notes that host's queue may have room for refreshes: finish tops
// it up. Nothing is noted while no lane holds anything.
func (w *batchWriter) shrunk(host string) {
	if w.lanes == lanesUnknown {
		w.lanes = lanesEmpty
		if k, _ := w.tx.Bucket(bucketRefresh).Cursor().First(); k != nil {
			w.lanes = lanesFull
		}
	}
	if w.lanes == lanesEmpty {
		return
	}
	if w.refill == nil {
		w.refill = make(map[string]struct{})
	}
	w.refill[host] = struct{}{}
}

// Whether any refresh lane holds anything, learnt once per batch: nothing
// in a batch adds to a lane.
const (
	lanesUnknown = iota
	lanesEmpty
	lanesFull
)

// topUps tops up the queue of every host noted by shrunk, after the
// batch's own operations: the URLs a Complete discovered are queued first.
func (w *batchWriter) topUps() error {
	hosts := make([]string, 0, len(w.refill))
	for h := range w.refill {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	for _, h := range hosts {
		if err := w.topUp(h); err != nil {
			return fmt.Errorf("queue refreshes of %s: %w", h, err)
		}
	}
	return nil
}

// topUp moves refreshes from host's lane to its queue, oldest first, until
// the queue holds RefreshDepth URLs, if it holds no new URL and fewer than
// half that.
func (w *batchWriter) topUp(host string) error {
	lanes := w.tx.Bucket(bucketRefresh)
	lane := lanes.Bucket([]byte(host))
	if lane == nil {
		return nil
	}
	held, err := w.refreshRoom(host)
	if err != nil || held < 0 {
		return err
	}
	var keys [][]byte
	c := lane.Cursor()
	for k, v := c.First(); k != nil && held+len(keys) < store.RefreshDepth; k, v = c.Next() {
		it, err := decodeStaged(host, k, v)
		if err != nil {
			return err
		}
		keys = append(keys, append([]byte(nil), k...))
		if err := w.enqueue(it, nil); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := lane.Delete(k); err != nil {
			return err
		}
	}
	if k, _ := lane.Cursor().First(); k == nil {
		return lanes.DeleteBucket([]byte(host))
	}
	return nil
}

// refreshRoom returns how many URLs host's queue holds, or -1 when it holds
// a new URL or RefreshDepth/2 URLs or more: no refresh may join them yet.
func (w *batchWriter) refreshRoom(host string) (int, error) {
	hq, err := w.hostQueue(host, false)
	if hq == nil || err != nil {
		return 0, err
	}
	n := 0
	c := hq.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		it, err := decodeQueued(host, k, v)
		if err != nil {
			return 0, err
		}
		if n++; it.Replaces == 0 || n >= store.RefreshDepth/2 {
			return -1, nil
		}
	}
	return n, nil
}

// failLane records every page in host's lane as failed with the template,
// as failHost records its queue, and drops the lane.
func (w *batchWriter) failLane(host string, template *store.Result) error {
	lanes := w.tx.Bucket(bucketRefresh)
	lane := lanes.Bucket([]byte(host))
	if lane == nil {
		return nil
	}
	err := lane.ForEach(func(k, v []byte) error {
		it, err := decodeStaged(host, k, v)
		if err != nil {
			return err
		}
		r := template.ForItem(it)
		return w.putResult(it, store.EncodeResult(it, &r))
	})
	if err != nil {
		return err
	}
	return lanes.DeleteBucket([]byte(host))
}
