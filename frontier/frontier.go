package frontier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"breakwater/store"
)

// File is what the frontier keeps its queue in: the crawl's database file
// (*storage.DB). The frontier is its only writer while it is open.
type File interface {
	// NextDue is the due time (Unix ns) of the earliest deferred URL.
	NextDue() (due int64, ok bool, err error)
	// LoadQueued reads up to limit queued URLs of host after afterSeq.
	LoadQueued(host string, afterSeq uint64, limit int) ([]store.Item, error)
	// ForEachHost calls fn with every host's counters.
	ForEachHost(fn func(host string, c store.HostCounts) error) error
	// Commit writes b in one transaction.
	Commit(b *store.Batch) (*store.Committed, error)
	// Path names the file in errors.
	Path() string
}

// ErrExhausted is returned by Next when no URL is queued, deferred or in
// flight, except possibly URLs of held hosts (see HeldWork).
var ErrExhausted = errors.New("frontier exhausted")

// ErrClosed is returned by operations on a closed Frontier.
var ErrClosed = errors.New("frontier closed")

// Options configure a Frontier. Zero fields take the documented defaults.
type Options struct {
	// HostConcurrency caps the leases in flight per host. Default 1.
	HostConcurrency int
	// Buffer is how many queued URLs per host are kept in memory. Default 16.
	Buffer int
	// MaxBatch caps the operations in one commit. Default maxQueued (32k),
	// as many as the writer lets wait: a commit rewrites, for every host it
	// touches, the last page of its queue and the root above it (one
	// pwrite each), so bigger batches spread that cost over more URLs.
	MaxBatch int
	// CommitEvery is the shortest time between two commits while operations
	// keep arriving, a tenth of it while a Next waits with no host to wait
	// for. Default 100ms; negative commits as soon as possible.
	CommitEvery time.Duration
	// PromoteBatch caps the deferred URLs moved back per commit. Default 2048.
	PromoteBatch int
	// MaxDormant caps the dormant hosts (URLs queued, none loaded yet) held
	// in memory. The others stay in the file, counted there, until the
	// held ones run low and a scan of the file's host counts brings in the
	// largest of them. Default 8192.
	MaxDormant int
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger receives commit errors. Default slog.Default().
	Logger *slog.Logger
	// Archive, if set, acts on what each batch carries (Batch.Attached)
	// right before the batch commits: a page is marked done only once its
	// records are in the archive. An error stops the frontier, like a
	// failed commit.
	Archive Archive
}

// Archive is told about every commit of the frontier's writer.
type Archive interface {
	// BeforeCommit is called with each batch about to be committed; it
	// may add operations to it.
	BeforeCommit(b *store.Batch) error
	// AfterCommit follows a commit that succeeded.
	AfterCommit()
}

func (o Options) withDefaults() Options {
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = 1
	}
	if o.Buffer <= 0 {
		o.Buffer = 16
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = maxQueued
	}
	if o.CommitEvery == 0 {
		o.CommitEvery = 100 * time.Millisecond
	}
	if o.PromoteBatch <= 0 {
		o.PromoteBatch = 2048
	}
	if o.MaxDormant <= 0 {
		o.MaxDormant = 8192
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Lease is one URL handed to a worker. Exactly one of Release, Started
// followed by Complete or Defer, or Complete/Defer directly must end it.
type Lease struct {
	Item store.Item
	host *hostQueue
	done bool
}

// Frontier is the crawl's durable, politeness-aware URL queue.
type Frontier struct {
	db   File
	opts Options

	writer *writer

	mu      sync.Mutex
	hosts   map[string]*hostQueue
	ready   hostHeap
	wake    chan struct{} // closed and replaced to wake every waiting Next
	leased  int           // leases in flight, all hosts
	loading int           // buffer refills requested or in progress
	feeding int           // feeds (seed streams) still adding URLs
	// loadQueue holds hosts waiting for the writer to refill their buffers.
	loadQueue []*hostQueue
	// dormant holds hosts with URLs in the file that no worker has needed
	// yet, largest backlog first; activating counts those whose first load
	// is pending.
	dormant    hostHeap
	dormantSeq uint64
	activating int
	// spilled is set while the file may hold queued URLs of hosts not in
	// hosts (MaxDormant was reached); scanWanted asks the writer for a scan
	// of the file's host counts (see scanDormant).
	spilled    bool
	scanWanted bool
	// activeSizes counts active hosts with URLs queued by the size class
	// of their queues (index 0 unused), for wakeLongestLocked.
	activeSizes [bits.UintSize + 1]int
	// announcedSeq is the highest Seq addedLocked has taken. Every queue
	// entry at or below it was known to some hostQueue, so a host created
	// later loads only above it (see host).
	announcedSeq uint64
	closed       bool
	// starving counts the Next calls waiting while no host at all is in
	// the ready heap: only the writer's next commit can give them work.
	starving atomic.Int32
}

// Open loads the scheduler's view of the queue from db and starts the writer.
// URLs that were in flight when a previous run died are simply still queued.
func Open(db File, opts Options) (*Frontier, error) {
	opts = opts.withDefaults()
	f := &Frontier{db: db, opts: opts, hosts: make(map[string]*hostQueue), wake: make(chan struct{}),
		ready:   hostHeap{less: readySooner, place: func(h *hostQueue) *int { return &h.index }},
		dormant: hostHeap{less: dormantFirst, place: func(h *hostQueue) *int { return &h.dormantIdx }}}
	f.writer = newWriter(f)
	if err := f.scanDormant(); err != nil {
		return nil, fmt.Errorf("open frontier: %w", err)
	}
	nextDue, hasDue, err := db.NextDue()
	if err != nil {
		return nil, fmt.Errorf("open frontier: %w", err)
	}
	if hasDue {
		f.writer.nextDue = time.Unix(0, nextDue)
	}
	go f.writer.run()
	return f, nil
}

// Add enqueues items that were never seen before. It returns once the items
// are handed to the writer (waiting while the writer is far behind); they
// become leasable when committed. Large calls are split so that no single
// commit grows past MaxBatch operations.
func (f *Frontier) Add(items ...store.Item) error {
	for len(items) > 0 {
		chunk := items[:min(len(items), f.opts.MaxBatch)]
		items = items[len(chunk):]
		entries := encodeQueued(chunk)
		err := f.writer.submit(len(chunk), func(b *store.Batch) {
			for i, it := range chunk {
				b.AddEncoded(it, entries[i])
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// encodeQueued encodes items in the caller's goroutine: the single writer
// is the frontier's bottleneck, the callers are many.
func encodeQueued(items []store.Item) [][]byte {
	entries := make([][]byte, len(items))
	for i, it := range items {
		entries[i] = store.EncodeQueued(it)
	}
	return entries
}

// Next blocks until a URL of a ready host can be leased, ctx is done, or the
// frontier is exhausted.
func (f *Frontier) Next(ctx context.Context) (*Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		lease, wait, wake, starved, err := f.tryNext()
		if lease != nil || err != nil {
			return lease, err
		}
		if starved && f.starving.Add(1) == 1 {
			f.writer.hurry()
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-wake:
		case <-timer.C:
		}
		if starved {
			f.starving.Add(-1)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// starved reports whether a worker waits with no host to wait for.
func (f *Frontier) starved() bool { return f.starving.Load() > 0 }

const maxWait = time.Minute

// tryNext leases a URL of a ready host, or says how long to wait for one
// and whether no host at all is waited for (starved).
func (f *Frontier) tryNext() (l *Lease, wait time.Duration, wake <-chan struct{}, starved bool, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.writer.failure(); err != nil {
		return nil, 0, nil, false, err
	}
	if f.closed {
		return nil, 0, nil, false, ErrClosed
	}
	now := f.opts.Now()
	if h := f.ready.peek(); h != nil && !h.readyAt.After(now) {
		l := f.leaseLocked(h)
		f.wakeLongestLocked()
		return l, 0, nil, false, nil
	}
	if f.idleLocked() {
		return nil, 0, nil, false, ErrExhausted
	}
	f.activateLocked()
	wait = maxWait
	h := f.ready.peek()
	if h != nil {
		wait = min(wait, h.readyAt.Sub(now))
	}
	return nil, wait, f.wake, h == nil, nil
}

func (f *Frontier) leaseLocked(h *hostQueue) *Lease {
	it := h.buf[0]
	h.buf[0] = store.Item{}
	if h.buf = h.buf[1:]; len(h.buf) == 0 {
		h.buf = nil // a drained host may stay known a while: let its array go
	}
	h.inflight++
	h.leased = append(h.leased, it.Seq)
	h.reserved = true
	f.leased++
	f.refillLocked(h)
	f.updateLocked(h)
	return &Lease{Item: it, host: h}
}

// idleLocked reports whether nothing can ever become ready without outside
// help: no lease in flight, no write pending, nothing deferred, and every
// host with queued URLs is held.
func (f *Frontier) idleLocked() bool {
	if f.leased > 0 || f.loading > 0 || f.feeding > 0 || f.spilled || f.scanWanted || f.writer.busy() {
		return false
	}
	for _, h := range f.hosts {
		if !h.held && h.queued() > 0 {
			return false
		}
	}
	return true
}

// Feed announces a producer that will Add URLs for a while (seeds read from
// a file while the crawl runs): until done is called, Next does not report
// exhaustion.
func (f *Frontier) Feed() (done func()) {
	f.mu.Lock()
	f.feeding++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.feeding--
			f.broadcastLocked()
			f.mu.Unlock()
		})
	}
}

// HeldWork is the number of held hosts with URLs queued: work left that
// only a human can release.
func (f *Frontier) HeldWork() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, h := range f.hosts {
		if h.held && h.queued() > 0 {
			n++
		}
	}
	return n
}

// noLeases reports whether no lease is in flight.
func (f *Frontier) noLeases() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leased == 0
}

// InFlight is the number of leases not yet ended.
func (f *Frontier) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leased
}

// broadcastLocked wakes every goroutine waiting in Next.
func (f *Frontier) broadcastLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}
