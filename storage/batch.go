package storage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/breaker"
	"breakwater/robots"
)

// Batch collects frontier writes to be applied in one transaction, in the
// order they were added. Records are encoded as they are added; one that
// cannot be encoded (a time outside what JSON can hold, robots rules with a
// negative status) makes Commit fail.
// The zero value is an empty batch.
type Batch struct {
	ops      []op
	attached []any
}

type opKind uint8

const (
	opAdd opKind = iota
	opRequeue
	opComplete
	opDefer
	opPromote
	opFailHost
	opPut
	opDelete
	opAppend
	opResolveCases
	opQueueRefreshes
)

// op is one operation. The frequent ones (Add, Complete, Defer) fit in the
// struct itself; the rest carry an opAux, so that a batch of a million
// pending adds stays small.
type op struct {
	kind  opKind
	item  Item
	value []byte
	due   time.Time
	aux   *opAux
}

type opAux struct {
	result *Result
	limit  int
	bucket []byte
	key    string
	seqs   []uint64
	hosts  []string // QueueRefreshes; all: every host with a lane
	all    bool
	err    error // the record could not be encoded: Commit fails
}

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Add enqueues it unless its hash was seen before.
func (b *Batch) Add(it Item) { b.AddEncoded(it, nil) }

// AddEncoded is Add with the queue entry encoded beforehand by EncodeQueued
// (nil: encode it here), so that the caller's goroutine, not the single
// writer, pays for the encoding.
func (b *Batch) AddEncoded(it Item, entry []byte) {
	b.ops = append(b.ops, op{kind: opAdd, item: it, value: entry})
}

// EncodeQueued encodes it as a queue entry, for AddEncoded.
func EncodeQueued(it Item) []byte { return it.marshal(false) }

// Requeue enqueues it again even though it was seen (for retrying failed URLs).
func (b *Batch) Requeue(it Item) { b.ops = append(b.ops, op{kind: opRequeue, item: it}) }

// Complete removes it from the queue and stores its result, atomically. An
// item no longer queued (its host was given up on meanwhile) is ignored:
// its outcome is recorded already.
func (b *Batch) Complete(it Item, r *Result) { b.CompleteRecord(it, EncodeResult(it, r)) }

// CompleteRecord is Complete with the result encoded beforehand, so that a
// worker goroutine, not the single writer, pays for the encoding.
func (b *Batch) CompleteRecord(it Item, rec ResultRecord) {
	b.ops = append(b.ops, op{kind: opComplete, item: it, value: rec})
}

// Reset empties the batch, keeping its memory for the next one.
func (b *Batch) Reset() {
	clear(b.ops)
	b.ops = b.ops[:0]
	clear(b.attached)
	b.attached = b.attached[:0]
}

// Attach carries v with the batch to the code that commits it, which must
// act on it before the commit (an archive writes the records of the pages
// the batch marks done). Commit itself ignores it.
func (b *Batch) Attach(v any) { b.attached = append(b.attached, v) }

// Attached returns what was attached, in order.
func (b *Batch) Attached() []any { return b.attached }

// Defer moves it from the queue to the deferred bucket, due at due.
func (b *Batch) Defer(it Item, due time.Time) {
	b.ops = append(b.ops, op{kind: opDefer, item: it, due: due})
}

// Promote moves up to limit deferred items due at or before now back to the queue.
func (b *Batch) Promote(now time.Time, limit int) {
	b.ops = append(b.ops, op{kind: opPromote, due: now, aux: &opAux{limit: limit}})
}

// FailHost records every queued URL of host as failed with the given
// template (URL, depth and attempts filled per URL) and removes them from the
// queue, except the URLs whose Seq is in inFlight: their own outcome is
// coming.
func (b *Batch) FailHost(host string, template Result, inFlight []uint64) {
	b.ops = append(b.ops, op{kind: opFailHost, aux: &opAux{key: host, result: &template, seqs: inFlight}})
}

// PutRobots caches a host's robots.txt rules.
func (b *Batch) PutRobots(host string, r *robots.Rules) {
	data, err := encodeRobots(host, r)
	b.ops = append(b.ops, op{kind: opPut, aux: &opAux{bucket: bucketRobots, key: host, err: err}, value: data})
}

// PutBreaker stores a host's breaker state.
func (b *Batch) PutBreaker(host string, br breaker.Breaker) {
	data, err := encodeBreaker(host, br)
	b.ops = append(b.ops, op{kind: opPut, aux: &opAux{bucket: bucketBreakers, key: host, err: err}, value: data})
}

// DeleteBreaker drops a host's breaker state (closed and clean again).
func (b *Batch) DeleteBreaker(host string) {
	b.ops = append(b.ops, op{kind: opDelete, aux: &opAux{bucket: bucketBreakers, key: host}})
}

// AppendTransition appends a breaker transition to the log.
func (b *Batch) AppendTransition(t Transition) {
	data, err := encodeTransition(t)
	b.ops = append(b.ops, op{kind: opAppend, aux: &opAux{bucket: bucketTransitions, err: err}, value: data})
}

// AppendCase records a case for a human.
func (b *Batch) AppendCase(c Case) {
	data, err := encodeCase(c)
	b.ops = append(b.ops, op{kind: opAppend, aux: &opAux{bucket: bucketCases, err: err}, value: data})
}

// ResolveCases marks every open case of host resolved at at. Case records
// that do not decode are left as they are (ForEachCase reports them).
func (b *Batch) ResolveCases(host string, at time.Time) {
	b.ops = append(b.ops, op{kind: opResolveCases, aux: &opAux{key: host}, due: at.UTC()})
}

// Committed reports what a Commit changed in the queue, for the scheduler.
type Committed struct {
	Added       []Item              // newly queued items (from Add, Requeue, Promote), with Seq set
	FailedHosts map[string][]uint64 // Seq of each URL recorded as failed, per FailHost
	NextDue     time.Time           // earliest due time left in the deferred bucket; zero if none
}

// Commit applies the batch in one transaction: one pair of fsyncs for the
// whole batch. On error nothing of the batch is applied.
func (db *DB) Commit(b *Batch) (*Committed, error) {
	out := &Committed{}
	// Commits are serialized here, not only by bbolt, so that the in-memory
	// seen set takes a commit's new URLs before the next commit checks it.
	db.commitMu.Lock()
	defer db.commitMu.Unlock()
	var fresh []uint64
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		w := newBatchWriter(tx, out, db.seen, b.adds())
		for i := range b.ops {
			if err := w.apply(&b.ops[i]); err != nil {
				return err
			}
		}
		fresh = w.fresh
		return w.finish()
	})
	if err != nil {
		return nil, fmt.Errorf("commit batch of %d: %w", len(b.ops), err)
	}
	db.seen.addAll(fresh)
	return out, nil
}

type batchWriter struct {
	tx                    *bolt.Tx
	out                   *Committed
	seen, queue, deferred *bolt.Bucket
	results, hosts, meta  *bolt.Bucket
	counts                Counts
	tallies               Tallies // this batch's change
	hostDelta             map[string]*HostCounts
	hostQueues            map[string]*bolt.Bucket // opened in this transaction
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
func newBatchWriter(tx *bolt.Tx, out *Committed, seen *seenSet, adds int) *batchWriter {
	w := &batchWriter{
		tx: tx, out: out, seenSet: seen,
		seen: tx.Bucket(bucketSeen), queue: tx.Bucket(bucketQueue), deferred: tx.Bucket(bucketDeferred),
		results: tx.Bucket(bucketResults), hosts: tx.Bucket(bucketHosts), meta: tx.Bucket(bucketMeta),
		hostDelta: make(map[string]*HostCounts),
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

func (w *batchWriter) delta(host string) *HostCounts {
	d := w.hostDelta[host]
	if d == nil {
		d = &HostCounts{}
		w.hostDelta[host] = d
	}
	return d
}

func (w *batchWriter) apply(o *op) error {
	switch o.kind {
	case opAdd:
		if !w.markSeen(fingerprint(o.item.Hash)) {
			return nil
		}
		w.counts.Seen++
		return w.enqueue(o.item, o.value)
	case opRequeue:
		return w.enqueue(o.item, nil)
	case opComplete:
		return w.complete(o.item, o.value)
	case opDefer:
		return w.deferItem(o.item, o.due)
	case opPromote:
		return w.promote(o.due, o.aux.limit)
	case opFailHost:
		return w.failHost(o.aux.key, o.aux.result, o.aux.seqs)
	case opPut:
		if o.aux.err != nil {
			return o.aux.err
		}
		return w.tx.Bucket(o.aux.bucket).Put([]byte(o.aux.key), o.value)
	case opDelete:
		return w.tx.Bucket(o.aux.bucket).Delete([]byte(o.aux.key))
	case opAppend:
		if o.aux.err != nil {
			return o.aux.err
		}
		bk := w.tx.Bucket(o.aux.bucket)
		seq, err := bk.NextSequence()
		if err != nil {
			return err
		}
		return bk.Put(u64(seq), o.value)
	case opResolveCases:
		return w.resolveCases(o.aux.key, o.due)
	case opQueueRefreshes:
		return w.queueRefreshes(o.aux.hosts, o.aux.all)
	}
	return fmt.Errorf("unknown batch op %d", o.kind)
}

func (w *batchWriter) resolveCases(host string, at time.Time) error {
	bk := w.tx.Bucket(bucketCases)
	var keys, values [][]byte
	err := bk.ForEach(func(k, v []byte) error {
		c, err := decodeCase(beUint64(k), v)
		if err != nil || c.Host != host || !c.Resolved.IsZero() {
			return nil
		}
		c.Resolved = at
		data, err := encodeCase(c)
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
	w.out.Added = make([]Item, 0, n)
}

func (b *Batch) adds() int {
	n := 0
	for i := range b.ops {
		if b.ops[i].kind == opAdd {
			n++
		}
	}
	return n
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
func (w *batchWriter) enqueue(it Item, entry []byte) error {
	seq, err := w.queue.NextSequence()
	if err != nil {
		return err
	}
	it.Seq = seq
	if entry == nil {
		entry = it.marshal(false)
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
func (w *batchWriter) dequeue(it Item) (bool, error) {
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

func (w *batchWriter) complete(it Item, encoded []byte) error {
	if queued, err := w.dequeue(it); err != nil || !queued {
		return err
	}
	w.shrunk(it.Host)
	return w.putResult(it, encoded)
}

// putResult appends the result under the next result sequence number: the
// bucket grows at its end, so a commit dirties a few pages however many
// results it stores. A result replacing an earlier one deletes that one.
func (w *batchWriter) putResult(it Item, encoded []byte) error {
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
	head, err := parseResultHead(record)
	if err != nil {
		return err
	}
	w.tallies.count(head, sign)
	if head.failed {
		w.counts.Failed += sign
		w.delta(host).Failed += sign
	} else {
		w.counts.Fetched += sign
		w.delta(host).Fetched += sign
	}
	return nil
}

func (w *batchWriter) deferItem(it Item, due time.Time) error {
	if ok, err := w.dequeue(it); err != nil || !ok {
		return err
	}
	w.shrunk(it.Host)
	if err := w.deferred.Put(deferredKey(max(due.UnixNano(), 0), it.Seq), it.marshal(true)); err != nil {
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

// forItem is a FailHost template filled in for one of the host's URLs.
func (template *Result) forItem(it Item) Result {
	r := *template
	r.URL, r.FinalURL, r.Host, r.Depth, r.Attempts = it.URL, it.URL, it.Host, it.Depth, it.Attempts
	r.Referrer, r.Lastmod = it.Referrer, it.Lastmod
	return r
}

func (w *batchWriter) failHost(host string, template *Result, inFlight []uint64) error {
	hq, err := w.hostQueue(host, false)
	if err != nil {
		return err
	}
	var items []Item
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
		r := template.forItem(it)
		if err := w.complete(it, EncodeResult(it, &r)); err != nil {
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
		if d.zero() {
			continue
		}
		var hc HostCounts
		if v := w.hosts.Get([]byte(host)); v != nil {
			if err := json.Unmarshal(v, &hc); err != nil {
				return fmt.Errorf("decode counts of host %s: %w", host, err)
			}
		}
		hc.add(*d)
		data, _ := json.Marshal(&hc)
		if err := w.hosts.Put([]byte(host), data); err != nil {
			return err
		}
	}
	if err := w.saveTallies(); err != nil {
		return err
	}
	if w.counts == (Counts{}) {
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
	if w.tallies.empty() {
		return nil
	}
	var total Tallies
	if err := readMeta(w.meta, keyTallies, &total); err != nil {
		return err
	}
	total.merge(w.tallies)
	data, _ := json.Marshal(&total)
	return w.meta.Put(keyTallies, data)
}

func readCounts(meta *bolt.Bucket) (Counts, error) {
	var c Counts
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
