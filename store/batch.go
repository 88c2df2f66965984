package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/robots"
)

// Batch collects a crawl's writes to be applied in one transaction, in the
// order they were added: the file applies it in one bbolt transaction, the
// fleet's store in one script per shard. Records are encoded as they are
// added; one that cannot be encoded (a time outside what JSON can hold,
// robots rules with a negative status) makes the commit fail.
// The zero value is an empty batch.
type Batch struct {
	ops      []op
	attached []any
}

// op is one operation. The frequent ones (Add, Complete, Defer) fit in the
// struct itself; the rest carry an opAux, so that a batch of a million
// pending adds stays small.
type op struct {
	kind  OpKind
	item  Item
	value []byte
	due   time.Time
	aux   *opAux
}

type opAux struct {
	result *Result
	limit  int
	key    string
	seqs   []uint64
	hosts  []string // QueueRefreshes; nil: every host with a lane
	err    error    // the record could not be encoded: the commit fails
}

// Len is the number of operations in the batch.
func (b *Batch) Len() int { return len(b.ops) }

// Add enqueues it unless its hash was seen before.
func (b *Batch) Add(it Item) { b.AddEncoded(it, nil) }

// AddEncoded is Add with the queue entry encoded beforehand by EncodeQueued
// (nil: encode it at commit), so that the caller's goroutine, not the
// single writer, pays for the encoding.
func (b *Batch) AddEncoded(it Item, entry []byte) {
	b.ops = append(b.ops, op{kind: OpAdd, item: it, value: entry})
}

// Adds is the number of Add operations in the batch, for a store that
// sizes its seen set before applying them.
func (b *Batch) Adds() int {
	n := 0
	for i := range b.ops {
		if b.ops[i].kind == OpAdd {
			n++
		}
	}
	return n
}

// Requeue enqueues it again even though it was seen (for retrying failed URLs).
func (b *Batch) Requeue(it Item) { b.ops = append(b.ops, op{kind: OpRequeue, item: it}) }

// Complete removes it from the queue and stores its result, atomically. An
// item no longer queued (its host was given up on meanwhile) is ignored:
// its outcome is recorded already.
func (b *Batch) Complete(it Item, r *Result) { b.CompleteRecord(it, EncodeResult(it, r)) }

// CompleteRecord is Complete with the result encoded beforehand, so that a
// worker goroutine, not the single writer, pays for the encoding.
func (b *Batch) CompleteRecord(it Item, rec ResultRecord) {
	b.ops = append(b.ops, op{kind: OpComplete, item: it, value: rec})
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
// the batch marks done). A commit itself ignores it.
func (b *Batch) Attach(v any) { b.attached = append(b.attached, v) }

// Attached returns what was attached, in order.
func (b *Batch) Attached() []any { return b.attached }

// Defer moves it from the queue to the deferred bucket, due at due.
func (b *Batch) Defer(it Item, due time.Time) {
	b.ops = append(b.ops, op{kind: OpDefer, item: it, due: due})
}

// Promote moves up to limit deferred items due at or before now back to the queue.
func (b *Batch) Promote(now time.Time, limit int) {
	b.ops = append(b.ops, op{kind: OpPromote, due: now, aux: &opAux{limit: limit}})
}

// FailHost records every queued URL of host as failed with the given
// template (URL, depth and attempts filled per URL) and removes them from the
// queue, except the URLs whose Seq is in inFlight: their own outcome is
// coming.
func (b *Batch) FailHost(host string, template Result, inFlight []uint64) {
	b.ops = append(b.ops, op{kind: OpFailHost, aux: &opAux{key: host, result: &template, seqs: inFlight}})
}

func (b *Batch) putRecord(kind OpKind, key string, data []byte, err error) {
	b.ops = append(b.ops, op{kind: kind, aux: &opAux{key: key, err: err}, value: data})
}

// PutRobots caches a host's robots.txt rules.
func (b *Batch) PutRobots(host string, r *robots.Rules) {
	data, err := EncodeRobots(host, r)
	b.putRecord(OpPutRobots, host, data, err)
}

// PutBreaker stores a host's breaker state.
func (b *Batch) PutBreaker(host string, br breaker.Breaker) {
	data, err := EncodeBreaker(host, br)
	b.putRecord(OpPutBreaker, host, data, err)
}

// DeleteBreaker drops a host's breaker state (closed and clean again).
func (b *Batch) DeleteBreaker(host string) { b.putRecord(OpDeleteBreaker, host, nil, nil) }

// AppendTransition appends a breaker transition to the log.
func (b *Batch) AppendTransition(t Transition) {
	data, err := EncodeTransition(t)
	b.putRecord(OpAppendTransition, "", data, err)
}

// AppendCase records a case for a human.
func (b *Batch) AppendCase(c Case) {
	data, err := EncodeCase(c)
	b.putRecord(OpAppendCase, "", data, err)
}

// ResolveCases marks every open case of host resolved at at. Case records
// that do not decode are left as they are.
func (b *Batch) ResolveCases(host string, at time.Time) {
	b.ops = append(b.ops, op{kind: OpResolveCases, aux: &opAux{key: host}, due: at.UTC()})
}

// PutRunningAt records that a crawl was running at t: its heartbeat. A
// resumed crawl subtracts the time since then from the down time of the
// hosts it finds open: the crawler's own downtime is not the host's.
func (b *Batch) PutRunningAt(t time.Time) {
	data, _ := t.UTC().MarshalBinary() // fails only for years beyond 9999
	b.putRecord(OpPutRunningAt, "", data, nil)
}

// PutArchiveState records s in the batch's commit.
func (b *Batch) PutArchiveState(s ArchiveState) {
	data, err := json.Marshal(s)
	b.putRecord(OpPutArchiveState, "", data, err)
}

// PutCapture records the first capture of the payload whose digest is key.
func (b *Batch) PutCapture(digest string, c Capture) {
	data := binary.AppendVarint(nil, c.Date.UnixNano())
	data = append(data, c.URI...)
	b.putRecord(OpPutCapture, digest, data, nil)
}

// PutHostPages records that the crawl has requested n pages of host, for
// its --max-pages-per-host.
func (b *Batch) PutHostPages(host string, n int64) {
	b.putRecord(OpPutHostPages, host, binary.AppendUvarint(nil, uint64(max(n, 0))), nil)
}

// PutLinks stores the links of page (its URL and Hash) as the link graph
// holds them, replacing those stored before: a page with no links keeps
// none. rec is EncodeLinks of them, encoded beforehand so that the
// caller's goroutine, not the single writer, pays for it; nil: encode it
// here, with no directives.
func (b *Batch) PutLinks(page Item, links []Outlink, rec []byte) {
	if rec == nil {
		rec = EncodeLinks(LinksPageOf(page, 0), links)
	}
	page = Item{URL: page.URL, Hash: page.Hash, Host: page.Host}
	b.ops = append(b.ops, op{kind: OpPutLinks, item: page, value: rec})
}

// QueueRefreshes tops up, from their refresh lanes, the queues of hosts
// (nil: of every host with a lane) that hold no new URL and fewer than
// RefreshDepth/2 URLs.
func (b *Batch) QueueRefreshes(hosts []string) {
	b.ops = append(b.ops, op{kind: OpQueueRefreshes, aux: &opAux{hosts: hosts}})
}

// Each calls fn with every operation of the batch, in order, and stops at
// the first error. A record that could not be encoded is an error.
func (b *Batch) Each(fn func(Op) error) error {
	for i := range b.ops {
		o := &b.ops[i]
		v := Op{Kind: o.kind, Item: o.item, Value: o.value, At: o.due}
		if o.aux != nil {
			if o.aux.err != nil {
				return o.aux.err
			}
			v.Key, v.Template, v.InFlight, v.Limit = o.aux.key, o.aux.result, o.aux.seqs, o.aux.limit
			v.Hosts, v.AllHosts = o.aux.hosts, o.kind == OpQueueRefreshes && o.aux.hosts == nil
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

// ErrNotFound means the requested record does not exist.
var ErrNotFound = errors.New("not found")

// ArchiveState is where the archive stood at a commit: it changes in the
// commits that mark pages done, so the store and the archive never
// disagree about which pages are in it.
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

// Capture is the first archived copy of a payload, for revisit records.
type Capture struct {
	URI  string
	Date time.Time
}

// DecodeCapture decodes a capture recorded by PutCapture.
func DecodeCapture(digest string, v []byte) (Capture, error) {
	nanos, n := binary.Varint(v)
	if n <= 0 {
		return Capture{}, fmt.Errorf("capture %q: malformed record", digest)
	}
	return Capture{URI: string(v[n:]), Date: time.Unix(0, nanos).UTC()}, nil
}

// Committed reports what a commit changed in the queue, for the scheduler.
type Committed struct {
	Added       []Item              // newly queued items (from Add, Requeue, Promote), with Seq set
	FailedHosts map[string][]uint64 // Seq of each URL recorded as failed, per FailHost
	NextDue     time.Time           // earliest due time left in the deferred bucket; zero if none
}

// RefreshScan is how far one StageRefreshes call went.
type RefreshScan struct {
	// After is the key of the last result looked at and passed: the next
	// call starts after it.
	After uint64
	// Staged is the number of pages put in their hosts' lanes; Hosts are
	// those hosts, in order, each once.
	Staged int
	Hosts  []string
	// Done: the walk reached a page fetched at or after the cutoff, or
	// the end of the results. Until a later cutoff, there is no more.
	Done bool
}

// RefreshDepth is how many refreshes a host's queue is topped up to: the
// frontier keeps 16 URLs of a host in memory.
const RefreshDepth = 16
