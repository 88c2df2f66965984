package storage

import (
	"breakwater/store"
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Commit applies the batch in one transaction: one pair of fsyncs for the
// whole batch. On error nothing of the batch is applied.
func (db *DB) Commit(b *store.Batch) (*store.Committed, error) {
	out := &store.Committed{}
	// Commits are serialized here, not only by bbolt, so that the in-memory
	// seen set takes a commit's new URLs before the next commit checks it.
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	var fresh []uint64
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		w := newBatchWriter(tx, out, db.seen, b.Adds())
		w.hashKeyedLinks = db.hashKeyedLinks
		if err := b.Each(w.apply); err != nil {
			return err
		}
		fresh = w.fresh
		return w.finish()
	})
	if err != nil {
		return nil, fmt.Errorf("commit batch of %d: %w", b.Len(), err)
	}
	db.seen.addAll(fresh)
	if db.commits++; db.commits%dropMappedEvery == 0 {
		// The pages only count in the process's RSS: nothing is lost if
		// the kernel refuses, and the commit stands.
		_ = dropMapped(db.bolt)
	}
	return out, nil
}

// dropMappedEvery is how many commits go by between two releases of the
// file's resident pages (dropMapped). Without them, every page a crawl
// has read or written since the file was last remapped counts in its RSS:
// a crawl of 100,000 hosts shows a few hundred MB of its file there,
// clean and reclaimable, yet read as the crawler's own. A commit every
// 100 ms under load releases them every few seconds; the pages a crawl
// keeps reading come back from the page cache at a minor fault each.
const dropMappedEvery = 32

type batchWriter struct {
	tx                    *bolt.Tx
	out                   *store.Committed
	seen, queue, deferred *bolt.Bucket
	results, hosts, meta  *bolt.Bucket
	counts                store.Counts
	tallies               store.Tallies // this batch's change
	hostDelta             map[string]*store.HostCounts
	hostQueues            map[string]*bolt.Bucket // opened in this transaction
	hashKeyedLinks        bool                    // see DB.hashKeyedLinks
	// The seen set as committed, and what this batch adds to it: the set
	// itself changes only once the transaction is durable.
	seenSet    *seenSet
	fresh      []uint64
	freshIndex map[uint64]struct{}
	// Hosts whose queues may take refreshes from their lanes (recrawl.go),
	// and whether any lane holds anything.
	refill map[string]struct{}
	lanes  int
}

// newBatchWriter prepares to apply a batch with the given number of Adds.
func newBatchWriter(tx *bolt.Tx, out *store.Committed, seen *seenSet, adds int) *batchWriter {
	w := &batchWriter{
		tx: tx, out: out, seenSet: seen,
		seen: tx.Bucket(bucketSeen), queue: tx.Bucket(bucketQueue), deferred: tx.Bucket(bucketDeferred),
		results: tx.Bucket(bucketResults), hosts: tx.Bucket(bucketHosts), meta: tx.Bucket(bucketMeta),
		hostDelta: make(map[string]*store.HostCounts),
	}
	// These buckets, and each host's queue (see hostQueue), only grow at
	// their end: full pages on a split, instead of bbolt's default
	// half-full ones, halve the pages they take.
	w.seen.FillPercent, w.results.FillPercent = appendFill, appendFill
	w.expectAdds(adds)
	return w
}

// hostQueue returns host's bucket in the queue, creating it if create is
// set; nil if it does not exist. Each host's URLs live in a bucket of their
// own so that queueing a URL of a new host appends pages instead of
// splitting a page of whichever host sorts next to it: that page would have
// to be read, and every page read maps a window of the file into memory.
func (w *batchWriter) hostQueue(host string, create bool) (*bolt.Bucket, error) {
	if b := w.hostQueues[host]; b != nil {
		return b, nil
	}
	var b *bolt.Bucket
	if create {
		var err error
		if b, err = w.queue.CreateBucketIfNotExists([]byte(host)); err != nil {
			return nil, fmt.Errorf("queue of %s: %w", host, err)
		}
	} else if b = w.queue.Bucket([]byte(host)); b == nil {
		return nil, nil
	}
	b.FillPercent = appendFill
	if w.hostQueues == nil {
		w.hostQueues = make(map[string]*bolt.Bucket)
	}
	w.hostQueues[host] = b
	return b, nil
}

const appendFill = 0.95

func (w *batchWriter) delta(host string) *store.HostCounts {
	d := w.hostDelta[host]
	if d == nil {
		d = &store.HostCounts{}
		w.hostDelta[host] = d
	}
	return d
}

func (w *batchWriter) apply(o store.Op) error {
	switch o.Kind {
	case store.OpAdd:
		if !w.markSeen(fingerprint(o.Item.Hash)) {
			return nil
		}
		w.counts.Seen++
		return w.enqueue(o.Item, o.Value)
	case store.OpRequeue:
		return w.enqueue(o.Item, nil)
	case store.OpComplete:
		return w.complete(o.Item, o.Value)
	case store.OpDefer:
		return w.deferItem(o.Item, o.At)
	case store.OpPromote:
		return w.promote(o.At, o.Limit)
	case store.OpFailHost:
		return w.failHost(o.Key, o.Template, o.InFlight)
	case store.OpPutRobots:
		return w.tx.Bucket(bucketRobots).Put([]byte(o.Key), o.Value)
	case store.OpPutBreaker:
		return w.tx.Bucket(bucketBreakers).Put([]byte(o.Key), o.Value)
	case store.OpDeleteBreaker:
		return w.tx.Bucket(bucketBreakers).Delete([]byte(o.Key))
	case store.OpPutCapture:
		return w.tx.Bucket(bucketCaptures).Put([]byte(o.Key), o.Value)
	case store.OpPutHostPages:
		return w.tx.Bucket(bucketHostPages).Put([]byte(o.Key), o.Value)
	case store.OpPutRunningAt:
		return w.meta.Put(keyRunningAt, o.Value)
	case store.OpPutArchiveState:
		return w.meta.Put(keyArchive, o.Value)
	case store.OpAppendTransition:
		return appendRecord(w.tx.Bucket(bucketTransitions), o.Value)
	case store.OpAppendCase:
		return appendRecord(w.tx.Bucket(bucketCases), o.Value)
	case store.OpResolveCases:
		return w.resolveCases(o.Key, o.At)
	case store.OpQueueRefreshes:
		return w.queueRefreshes(o.Hosts, o.AllHosts)
	case store.OpPutLinks:
		return w.putLinks(o.Item, o.Value)
	}
	return fmt.Errorf("unknown batch op %d", o.Kind)
}

// appendRecord appends value to a log bucket under its next sequence number.
func appendRecord(bk *bolt.Bucket, value []byte) error {
	seq, err := bk.NextSequence()
	if err != nil {
		return err
	}
	return bk.Put(u64(seq), value)
}

func (w *batchWriter) resolveCases(host string, at time.Time) error {
	bk := w.tx.Bucket(bucketCases)
	var keys, values [][]byte
	err := bk.ForEach(func(k, v []byte) error {
		c, err := store.DecodeCase(beUint64(k), v)
		if err != nil || c.Host != host || !c.Resolved.IsZero() {
			return nil
		}
		c.Resolved = at
		data, err := store.EncodeCase(c)
		if err != nil {
			return err
		}
		keys, values = append(keys, append([]byte(nil), k...)), append(values, data)
		return nil
	})
	for i := 0; err == nil && i < len(keys); i++ {
		err = bk.Put(keys[i], values[i])
	}
	return err
}

// expectAdds sizes the batch's bookkeeping for n Adds up front: growing
// it add by add showed up in enqueue profiles.
func (w *batchWriter) expectAdds(n int) {
	w.freshIndex = make(map[uint64]struct{}, n)
	w.fresh = make([]uint64, 0, n)
	w.out.Added = make([]store.Item, 0, n)
}

// markSeen adds fp to the batch's new fingerprints, reporting false when
// it was seen before.
func (w *batchWriter) markSeen(fp uint64) bool {
	if w.seenSet.has(fp) {
		return false
	}
	if _, dup := w.freshIndex[fp]; dup {
		return false
	}
	w.freshIndex[fp] = struct{}{}
	w.fresh = append(w.fresh, fp)
	return true
}

// enqueue puts it at the end of its host's queue; entry is its encoding,
// or nil to encode it here.
func (w *batchWriter) enqueue(it store.Item, entry []byte) error {
	seq, err := w.queue.NextSequence()
	if err != nil {
		return err
	}
	it.Seq = seq
	if entry == nil {
		entry = store.EncodeQueued(it)
	}
	hq, err := w.hostQueue(it.Host, true)
	if err != nil {
		return err
	}
	if err := hq.Put(seqKey(seq), entry); err != nil {
		return err
	}
	w.counts.Queued++
	w.delta(it.Host).Queued++
	w.out.Added = append(w.out.Added, it)
	return nil
}

// dequeue deletes the queue entry of it, reporting whether it was there.
func (w *batchWriter) dequeue(it store.Item) (bool, error) {
	hq, err := w.hostQueue(it.Host, false)
	if hq == nil || err != nil {
		return false, err
	}
	k := seqKey(it.Seq)
	c := hq.Cursor()
	if found, _ := c.Seek(k); !bytes.Equal(found, k) {
		return false, nil
	}
	if err := c.Delete(); err != nil {
		return false, err
	}
	w.counts.Queued--
	w.delta(it.Host).Queued--
	return true, nil
}

func (w *batchWriter) complete(it store.Item, encoded []byte) error {
	if queued, err := w.dequeue(it); err != nil || !queued {
		return err
	}
	w.shrunk(it.Host)
	return w.putResult(it, encoded)
}

// putResult appends the result under the next result sequence number: the
// bucket grows at its end, so a commit dirties a few pages however many
// results it stores. A result replacing an earlier one deletes that one.
func (w *batchWriter) putResult(it store.Item, encoded []byte) error {
	if it.Replaces != 0 {
		key := u64(it.Replaces)
		if old := w.results.Get(key); old != nil {
			if err := w.countResult(it.Host, old, -1); err != nil {
				return fmt.Errorf("result %d replaced by %s: %w", it.Replaces, it.URL, err)
			}
			if err := w.results.Delete(key); err != nil {
				return err
			}
		}
	}
	if err := w.countResult(it.Host, encoded, 1); err != nil {
		return fmt.Errorf("result of %s: %w", it.URL, err)
	}
	seq, err := w.results.NextSequence()
	if err != nil {
		return err
	}
	return w.results.Put(u64(seq), encoded)
}

// countResult adds sign times the result record to the counters and tallies.
func (w *batchWriter) countResult(host string, record []byte, sign int64) error {
	head, err := store.ParseRecordHead(record)
	if err != nil {
		return err
	}
	w.tallies.Count(head, sign)
	if head.Failed {
		w.counts.Failed += sign
		w.delta(host).Failed += sign
	} else {
		w.counts.Fetched += sign
		w.delta(host).Fetched += sign
	}
	return nil
}

func (w *batchWriter) deferItem(it store.Item, due time.Time) error {
	if ok, err := w.dequeue(it); err != nil || !ok {
		return err
	}
	w.shrunk(it.Host)
	if err := w.deferred.Put(deferredKey(max(due.UnixNano(), 0), it.Seq), store.EncodeDeferred(it)); err != nil {
		return err
	}
	w.counts.Deferred++
	w.delta(it.Host).Deferred++
	return nil
}

func (w *batchWriter) promote(now time.Time, limit int) error {
	c := w.deferred.Cursor()
	end := deferredKey(now.UnixNano(), ^uint64(0))
	var keys [][]byte
	for k, v := c.First(); k != nil && bytes.Compare(k, end) <= 0 && len(keys) < limit; k, v = c.Next() {
		it, err := decodeDeferred(k, v)
		if err != nil {
			return err
		}
		keys = append(keys, append([]byte(nil), k...))
		w.counts.Deferred--
		w.delta(it.Host).Deferred--
		if err := w.enqueue(it, nil); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := w.deferred.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func (w *batchWriter) failHost(host string, template *store.Result, inFlight []uint64) error {
	hq, err := w.hostQueue(host, false)
	if err != nil {
		return err
	}
	var items []store.Item
	if hq != nil {
		err = hq.ForEach(func(k, v []byte) error {
			it, err := decodeQueued(host, k, v)
			if err == nil && !slices.Contains(inFlight, it.Seq) {
				items = append(items, it)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	failed := make(map[uint64]bool, len(items))
	for _, it := range items {
		failed[it.Seq] = true
		r := template.ForItem(it)
		if err := w.complete(it, store.EncodeResult(it, &r)); err != nil {
			return err
		}
	}
	if err := w.failLane(host, template); err != nil {
		return err
	}
	// URLs queued earlier in this batch and failed here are not news.
	added := w.out.Added[:0]
	for _, it := range w.out.Added {
		if it.Host != host || !failed[it.Seq] {
			added = append(added, it)
		}
	}
	w.out.Added = added
	if w.out.FailedHosts == nil {
		w.out.FailedHosts = make(map[string][]uint64)
	}
	seqs := w.out.FailedHosts[host]
	if seqs == nil {
		seqs = []uint64{} // a host with nothing queued is still reported
	}
	for _, it := range items {
		seqs = append(seqs, it.Seq)
	}
	w.out.FailedHosts[host] = seqs
	return nil
}

func (w *batchWriter) finish() error {
	if err := w.topUps(); err != nil {
		return err
	}
	if err := appendSeenLog(w.seen, w.fresh); err != nil {
		return err
	}
	if k, _ := w.deferred.Cursor().First(); len(k) >= 8 {
		w.out.NextDue = time.Unix(0, int64(beUint64(k[:8])))
	}
	for host, d := range w.hostDelta {
		if d.Zero() {
			continue
		}
		var hc store.HostCounts
		if v := w.hosts.Get([]byte(host)); v != nil {
			if err := json.Unmarshal(v, &hc); err != nil {
				return fmt.Errorf("decode counts of host %s: %w", host, err)
			}
		}
		hc.Add(*d)
		data, _ := json.Marshal(&hc)
		if err := w.hosts.Put([]byte(host), data); err != nil {
			return err
		}
	}
	if err := w.saveTallies(); err != nil {
		return err
	}
	if w.counts == (store.Counts{}) {
		return nil
	}
	total, err := readCounts(w.meta)
	if err != nil {
		return err
	}
	total.Seen += w.counts.Seen
	total.Queued += w.counts.Queued
	total.Deferred += w.counts.Deferred
	total.Fetched += w.counts.Fetched
	total.Failed += w.counts.Failed
	data, _ := json.Marshal(&total)
	return w.meta.Put(keyCounts, data)
}

func (w *batchWriter) saveTallies() error {
	if w.tallies.Empty() {
		return nil
	}
	var total store.Tallies
	if err := readMeta(w.meta, keyTallies, &total); err != nil {
		return err
	}
	total.Merge(w.tallies)
	data, _ := json.Marshal(&total)
	return w.meta.Put(keyTallies, data)
}

func readCounts(meta *bolt.Bucket) (store.Counts, error) {
	var c store.Counts
	err := readMeta(meta, keyCounts, &c)
	return c, err
}

// readMeta decodes the JSON record under key in the meta bucket into v; a
// missing record leaves v as it is (zero).
func readMeta(meta *bolt.Bucket, key []byte, v any) error {
	if data := meta.Get(key); data != nil {
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("decode %s: %w", key, err)
		}
	}
	return nil
}
