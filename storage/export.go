package storage

import (
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/robots"
)

// This file lets another store (the fleet's, on Redis) apply the same
// batches and keep the same record encodings as the file: a Batch is a
// list of typed operations, and Each hands them over one by one.

// OpKind names a batch operation for Each.
type OpKind uint8

// The operations Each reports. Puts and appends of records name what they
// hold instead of a bucket.
const (
	OpAdd OpKind = iota + 1
	OpRequeue
	OpComplete
	OpDefer
	OpPromote
	OpFailHost
	OpPutRobots
	OpPutBreaker
	OpDeleteBreaker
	OpAppendTransition
	OpAppendCase
	OpResolveCases
	OpPutRunningAt
	OpPutArchiveState
	OpPutCapture
	OpPutHostPages
	OpQueueRefreshes
)

// Op is one batch operation as Each reports it.
type Op struct {
	Kind OpKind
	// Item: Add, Requeue, Complete, Defer.
	Item Item
	// Value is the operation's encoded record: the queue entry (Add; nil
	// if not encoded beforehand), the result (Complete), the robots rules,
	// breaker, transition, case, heartbeat, archive state or capture.
	Value []byte
	// Key is the host (FailHost, puts of robots, breakers, host pages,
	// ResolveCases) or the capture's digest.
	Key string
	// At is the due time (Defer), the time (Promote, ResolveCases).
	At time.Time
	// Template and InFlight are FailHost's; Limit is Promote's.
	Template *Result
	InFlight []uint64
	Limit    int
}

// Each calls fn with every operation of the batch, in order, and stops at
// the first error. A record that could not be encoded is an error.
func (b *Batch) Each(fn func(Op) error) error {
	for i := range b.ops {
		o := &b.ops[i]
		v := Op{Item: o.item, Value: o.value, At: o.due}
		if o.aux != nil {
			if o.aux.err != nil {
				return o.aux.err
			}
			v.Key, v.Template, v.InFlight, v.Limit = o.aux.key, o.aux.result, o.aux.seqs, o.aux.limit
		}
		v.Kind = exportedKinds[o.kind]
		if o.kind == opPut || o.kind == opDelete || o.kind == opAppend {
			v.Kind = recordKind(o)
		}
		if v.Kind == 0 {
			return fmt.Errorf("batch op %d: not known to Each", o.kind)
		}
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}

// exportedKinds names the operations that are not puts of records.
var exportedKinds = map[opKind]OpKind{opAdd: OpAdd, opRequeue: OpRequeue, opComplete: OpComplete,
	opDefer: OpDefer, opPromote: OpPromote, opFailHost: OpFailHost, opResolveCases: OpResolveCases,
	opQueueRefreshes: OpQueueRefreshes}

func recordKind(o *op) OpKind {
	switch bucket := string(o.aux.bucket); {
	case bucket == string(bucketRobots):
		return OpPutRobots
	case bucket == string(bucketBreakers) && o.kind == opDelete:
		return OpDeleteBreaker
	case bucket == string(bucketBreakers):
		return OpPutBreaker
	case bucket == string(bucketTransitions):
		return OpAppendTransition
	case bucket == string(bucketCases):
		return OpAppendCase
	case bucket == string(bucketCaptures):
		return OpPutCapture
	case bucket == string(bucketHostPages):
		return OpPutHostPages
	case bucket == string(bucketMeta) && o.aux.key == string(keyRunningAt):
		return OpPutRunningAt
	case bucket == string(bucketMeta) && o.aux.key == string(keyArchive):
		return OpPutArchiveState
	}
	return 0
}

// DecodeItem decodes a queue entry encoded by EncodeQueued, giving it host and seq.
func DecodeItem(host string, seq uint64, entry []byte) (Item, error) {
	it, err := unmarshalItem(entry)
	if err != nil {
		return it, fmt.Errorf("queue entry %s/%d: %w", host, seq, err)
	}
	it.Host, it.Seq = host, seq
	return it, nil
}

// DecodeResult decodes a result encoded by EncodeResult.
func DecodeResult(rec []byte) (Hash, Result, error) { return decodeResult(rec) }

// ResultHead reads an encoded result's status and error class without
// decoding the rest of it; class is "" for a page.
func ResultHead(rec []byte) (status int, class string, err error) {
	h, err := parseResultHead(rec)
	if err != nil {
		return 0, "", err
	}
	return h.status, h.class, nil
}

// DecodeRobots, DecodeCase and DecodeTransition read the records another
// store keeps in the file's encodings.
func DecodeRobots(host string, data []byte) (*robots.Rules, error) { return decodeRobots(host, data) }
func DecodeCase(data []byte) (Case, error)                         { return decodeCase(0, data) }
func DecodeBreaker(host string, data []byte) (breaker.Breaker, error) {
	return decodeBreaker(host, data)
}
func EncodeCase(c Case) ([]byte, error) { return encodeCase(c) }

// ForItem is a FailHost template filled in for one of the host's URLs.
func (template *Result) ForItem(it Item) Result { return template.forItem(it) }
