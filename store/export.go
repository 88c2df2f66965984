package store

import (
	"fmt"
	"time"
)

// Both stores apply the same batches and keep the same record encodings:
// a Batch is a list of typed operations, and Each hands them over one by
// one.

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
	OpPutLinks
)

var opNames = [...]string{OpAdd: "Add", OpRequeue: "Requeue", OpComplete: "Complete", OpDefer: "Defer",
	OpPromote: "Promote", OpFailHost: "FailHost", OpPutRobots: "PutRobots", OpPutBreaker: "PutBreaker",
	OpDeleteBreaker: "DeleteBreaker", OpAppendTransition: "AppendTransition", OpAppendCase: "AppendCase",
	OpResolveCases: "ResolveCases", OpPutRunningAt: "PutRunningAt", OpPutArchiveState: "PutArchiveState",
	OpPutCapture: "PutCapture", OpPutHostPages: "PutHostPages", OpQueueRefreshes: "QueueRefreshes",
	OpPutLinks: "PutLinks"}

// String is the operation's name, as the Batch method that adds it is
// named.
func (k OpKind) String() string {
	if int(k) < len(opNames) && opNames[k] != "" {
		return opNames[k]
	}
	return fmt.Sprintf("OpKind(%d)", k)
}

// Op is one batch operation as Each reports it.
type Op struct {
	Kind OpKind
	// Item: Add, Requeue, Complete, Defer; the page (its URL and Hash)
	// whose links PutLinks stores.
	Item Item
	// Value is the operation's encoded record: the queue entry (Add; nil
	// if not encoded beforehand), the result (Complete), the robots rules,
	// breaker, transition, case, heartbeat, archive state or capture, the
	// page's links (PutLinks, by EncodeLinks).
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
	// Hosts are QueueRefreshes's; AllHosts: every host with a lane.
	Hosts    []string
	AllHosts bool
}

// DecodeItem decodes a queue entry encoded by EncodeQueued, giving it host and seq.
func DecodeItem(host string, seq uint64, entry []byte) (Item, error) {
	it, err := ParseItem(entry)
	if err != nil {
		return it, fmt.Errorf("queue entry %s/%d: %w", host, seq, err)
	}
	it.Host, it.Seq = host, seq
	return it, nil
}

// ResultHead reads an encoded result's status and error class without
// decoding the rest of it; class is "" for a page.
func ResultHead(rec []byte) (status int, class string, err error) {
	h, err := ParseRecordHead(rec)
	if err != nil {
		return 0, "", err
	}
	return h.Status, h.Class, nil
}
