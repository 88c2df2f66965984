package frontier

import (
	"breakwater/store"
	"container/heap"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// writer is the single goroutine that turns frontier operations into group
// commits: while one commit runs, the next operations pile up and go into the
// next batch together, so the fsync cost is shared by everything that arrived
// meanwhile.
type writer struct {
	f    *Frontier
	reqs chan request
	load chan struct{} // poked when hosts wait for a refill
	// hungry is poked when a worker starts to starve (see Frontier.starved):
	// a lingering batch is committed sooner.
	hungry chan struct{}
	quit   chan struct{}
	done   chan struct{}

	mu      sync.Mutex
	room    *sync.Cond    // signalled when queued weight drops
	pending int           // submitted, not yet committed
	queued  int           // weight (operations) submitted, not yet committed
	nextDue time.Time     // earliest deferred due time; zero when none
	err     error         // first commit failure: the frontier stops
	failed  chan struct{} // closed with err set
	closing bool
}

// request is one submitted write and the number of operations it adds.
type request struct {
	fn     func(*store.Batch)
	weight int
}

// maxQueued bounds the operations waiting for the writer: a fast producer
// (a million seeds) waits for commits instead of piling up in memory.
const maxQueued = 1 << 15

func newWriter(f *Frontier) *writer {
	w := &writer{
		f:      f,
		reqs:   make(chan request, 8192),
		load:   make(chan struct{}, 1),
		hungry: make(chan struct{}, 1),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
		failed: make(chan struct{}),
	}
	w.room = sync.NewCond(&w.mu)
	return w
}

func (w *writer) submit(weight int, fn func(*store.Batch)) error {
	w.mu.Lock()
	for w.queued > 0 && w.queued+weight > maxQueued && w.err == nil && !w.closing {
		w.room.Wait()
	}
	if w.err != nil || w.closing {
		err := w.err
		w.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	w.pending++
	w.queued += weight
	w.mu.Unlock()
	w.reqs <- request{fn: fn, weight: weight}
	return nil
}

// poke tells the writer that refills are waiting; it never blocks.
// hurry tells a lingering writer that a worker starves.
func (w *writer) hurry() {
	select {
	case w.hungry <- struct{}{}:
	default:
	}
}

func (w *writer) poke() {
	select {
	case w.load <- struct{}{}:
	default:
	}
}

func (w *writer) busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pending > 0 || !w.nextDue.IsZero()
}

func (w *writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *writer) fail(err error) {
	w.mu.Lock()
	if w.err == nil {
		w.err = err
		close(w.failed)
		w.room.Broadcast() // producers waiting for room get the error instead
	}
	w.mu.Unlock()
}

func (w *writer) run() {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	prune := time.NewTicker(5 * time.Second)
	defer prune.Stop()
	linger := time.NewTimer(time.Hour)
	defer linger.Stop()
	var batch store.Batch
	var lastCommit time.Time
	for {
		batch.Reset()
		var taken taken
		timer.Reset(w.untilDue())
		select {
		case r := <-w.reqs:
			taken.add(r, &batch)
		case <-w.load:
			w.f.loadHosts()
			continue
		case <-prune.C:
			w.f.mu.Lock()
			w.f.pruneLocked(w.f.opts.Now())
			w.f.mu.Unlock()
			continue
		case <-timer.C:
		case <-w.quit:
			w.drain()
			return
		}
		quit := w.linger(&batch, &taken, linger, lastCommit)
		w.gather(&batch, &taken)
		w.commit(&batch, taken)
		lastCommit = time.Now()
		w.f.loadHosts()
		if quit {
			w.drain()
			return
		}
	}
}

// linger keeps gathering operations for up to wait, so that under a steady
// load commits come at most every CommitEvery: each commit rewrites every
// page it touches at a new place in the file, so fewer, bigger commits
// cost fewer fsyncs, fewer page copies and fewer pages mapped into memory.
// An idle writer (wait already over) commits at once. While a worker
// starves, with no host to wait for, the batch is what it waits for: the
// writer lingers only a tenth as long, and not at all once no lease is in
// flight, as nothing else will join the batch (the end of a crawl, or of
// each round of its start). Refills keep being served meanwhile. It
// reports whether the frontier is closing.
func (w *writer) linger(b *store.Batch, t *taken, timer *time.Timer, lastCommit time.Time) bool {
	every := w.f.opts.CommitEvery
	hurried := lastCommit.Add(every / starvedLinger)
	wait := time.Until(lastCommit.Add(every))
	if wait <= 0 {
		return false
	}
	timer.Reset(wait)
	defer timer.Stop()
	for b.Len() < w.f.opts.MaxBatch && !w.full() {
		if w.f.starved() {
			if left := time.Until(hurried); left <= 0 || w.f.noLeases() {
				return false
			} else if left < wait {
				wait = left
				timer.Reset(wait)
			}
		}
		select {
		case r := <-w.reqs:
			t.add(r, b)
		case <-w.load:
			w.f.loadHosts()
		case <-w.hungry:
		case <-timer.C:
			return false
		case <-w.quit:
			return true
		}
	}
	return false
}

// starvedLinger divides CommitEvery while a worker starves.
const starvedLinger = 10

// full reports whether producers are waiting for room: lingering would
// only stall them.
func (w *writer) full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.queued >= maxQueued/2
}

// taken counts the requests and their weight in one batch.
type taken struct{ requests, weight int }

func (t *taken) add(r request, b *store.Batch) {
	r.fn(b)
	t.requests++
	t.weight += r.weight
}

// gather adds whatever else is already waiting, up to the batch cap.
func (w *writer) gather(b *store.Batch, t *taken) {
	for b.Len() < w.f.opts.MaxBatch {
		select {
		case r := <-w.reqs:
			t.add(r, b)
		default:
			return
		}
	}
}

func (w *writer) untilDue() time.Duration {
	w.mu.Lock()
	due := w.nextDue
	w.mu.Unlock()
	if due.IsZero() {
		return time.Hour
	}
	return max(due.Sub(w.f.opts.Now()), 0)
}

func (w *writer) commit(b *store.Batch, t taken) {
	var committed *store.Committed
	// After a failed write nothing more is committed: a later batch may
	// fit where the failed one did not (free pages in the file, a record
	// shorter than the one the disk refused), and committing it would make
	// the file and the archive disagree: the archive would account for
	// the failed batch's records, of pages the database never marked done.
	// The failed batch and those after it are dropped whole (a page's
	// result with the links it found), so their pages are simply still
	// queued for the next run.
	if err := w.failure(); err == nil {
		committed, err = w.write(b)
		if err != nil {
			w.f.opts.Logger.Error("frontier commit failed; stopping", "ops", b.Len(), "err", err)
			w.fail(fmt.Errorf("frontier: %w", err))
		}
	}
	w.f.committed(committed)
	w.mu.Lock()
	w.pending -= t.requests
	w.queued -= t.weight
	w.room.Broadcast()
	if committed != nil {
		w.nextDue = committed.NextDue
	}
	w.mu.Unlock()
	w.f.mu.Lock()
	w.f.broadcastLocked()
	w.f.mu.Unlock()
}

// write hands b to the archive, commits it and tells the archive.
func (w *writer) write(b *store.Batch) (*store.Committed, error) {
	now := w.f.opts.Now()
	w.mu.Lock()
	due := w.nextDue
	w.mu.Unlock()
	if !due.IsZero() && !due.After(now) {
		b.Promote(now, w.f.opts.PromoteBatch)
	}
	a := w.f.opts.Archive
	if a != nil && len(b.Attached()) > 0 {
		if err := a.BeforeCommit(b); err != nil {
			return nil, err
		}
	}
	if b.Len() == 0 {
		return nil, nil
	}
	committed, err := w.f.db.Commit(b)
	if err != nil {
		// The user must learn which file could not be written; bbolt's
		// own errors (a size limit, a failed mmap) do not say.
		if path := w.f.db.Path(); !strings.Contains(err.Error(), path) {
			err = fmt.Errorf("%s: %w", path, err)
		}
		return nil, err
	}
	if a != nil {
		a.AfterCommit()
	}
	return committed, nil
}

func (w *writer) drain() {
	for {
		var b store.Batch
		var t taken
		w.gather(&b, &t)
		if t.requests == 0 {
			return
		}
		w.commit(&b, t)
	}
}

// close stops accepting operations, commits what was submitted and waits.
func (w *writer) close() error {
	w.mu.Lock()
	if w.closing {
		w.mu.Unlock()
		<-w.done
		return w.failure()
	}
	w.closing = true
	w.room.Broadcast()
	w.mu.Unlock()
	close(w.quit)
	<-w.done
	return w.failure()
}

// committed updates the scheduler after a commit.
func (f *Frontier) committed(c *store.Committed) {
	if c == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Failed hosts first: URLs added after a FailHost in the same batch are
	// queued anew and must survive the clearing. A lease in flight during
	// the FailHost and released since is back in the buffer, still queued in
	// the file, and stays.
	for host, failed := range c.FailedHosts {
		if h := f.hosts[host]; h != nil {
			h.failing = false
			for _, it := range h.buf {
				h.loadedSeq = max(h.loadedSeq, it.Seq)
			}
			h.buf = slices.DeleteFunc(h.buf, func(it store.Item) bool { return slices.Contains(failed, it.Seq) })
			h.backlog, h.early = 0, nil
			if h.dormantIdx >= 0 {
				heap.Remove(&f.dormant, h.dormantIdx)
			}
			f.updateLocked(h)
		}
	}
	f.addedLocked(c.Added)
}

// Close commits every submitted operation and stops the writer. Leases still
// out are simply left queued in the file. After a failed write it returns
// that failure, as it is: the write, not the close, failed.
func (f *Frontier) Close() error {
	err := f.writer.close()
	f.mu.Lock()
	f.closed = true
	f.broadcastLocked()
	f.mu.Unlock()
	return err
}

// Failed is closed when a write fails (the disk is full or read-only, the
// archive cannot be written): from then on the frontier writes nothing,
// and Next, every write and Close return the failure. The crawl stops at
// once rather than fetch what it cannot store.
func (f *Frontier) Failed() <-chan struct{} { return f.writer.failed }

// Submit adds other writes (robots cache, breaker state, logs) to the next
// group commit.
func (f *Frontier) Submit(fn func(*store.Batch)) error { return f.writer.submit(1, fn) }
