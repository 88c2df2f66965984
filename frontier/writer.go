package frontier

import (
	"fmt"
	"sync"
	"time"

	"breakwater/storage"
)

// writer is the single goroutine that turns frontier operations into group
// commits: while one commit runs, the next operations pile up and go into the
// next batch together, so the fsync cost is shared by everything that arrived
// meanwhile.
type writer struct {
	f    *Frontier
	reqs chan func(*storage.Batch)
	load chan struct{} // poked when hosts wait for a refill
	quit chan struct{}
	done chan struct{}

	mu      sync.Mutex
	pending int       // submitted, not yet committed
	nextDue time.Time // earliest deferred due time; zero when none
	err     error     // first commit failure: the frontier stops
	closing bool
}

func newWriter(f *Frontier) *writer {
	return &writer{
		f:    f,
		reqs: make(chan func(*storage.Batch), 8192),
		load: make(chan struct{}, 1),
		quit: make(chan struct{}),
		done: make(chan struct{}),
	}
}

func (w *writer) submit(fn func(*storage.Batch)) error {
	w.mu.Lock()
	if w.err != nil || w.closing {
		err := w.err
		w.mu.Unlock()
		if err == nil {
			err = ErrClosed
		}
		return err
	}
	w.pending++
	w.mu.Unlock()
	w.reqs <- fn
	return nil
}

// poke tells the writer that refills are waiting; it never blocks.
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
	}
	w.mu.Unlock()
}

func (w *writer) run() {
	defer close(w.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	prune := time.NewTicker(5 * time.Second)
	defer prune.Stop()
	for {
		var batch storage.Batch
		taken := 0
		timer.Reset(w.untilDue())
		select {
		case fn := <-w.reqs:
			fn(&batch)
			taken++
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
		taken += w.gather(&batch)
		w.commit(&batch, taken)
		w.f.loadHosts()
	}
}

// gather adds whatever else is already waiting, up to the batch cap.
func (w *writer) gather(b *storage.Batch) int {
	n := 0
	for b.Len() < w.f.opts.MaxBatch {
		select {
		case fn := <-w.reqs:
			fn(b)
			n++
		default:
			return n
		}
	}
	return n
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

func (w *writer) commit(b *storage.Batch, taken int) {
	now := w.f.opts.Now()
	w.mu.Lock()
	due := w.nextDue
	w.mu.Unlock()
	if !due.IsZero() && !due.After(now) {
		b.Promote(now, w.f.opts.PromoteBatch)
	}
	var committed *storage.Committed
	var err error
	if b.Len() > 0 {
		committed, err = w.f.db.Commit(b)
	}
	if err != nil {
		w.f.opts.Logger.Error("frontier commit failed; stopping", "ops", b.Len(), "err", err)
		w.fail(fmt.Errorf("frontier: %w", err))
	}
	w.f.committed(committed)
	w.mu.Lock()
	w.pending -= taken
	if committed != nil {
		w.nextDue = committed.NextDue
	}
	w.mu.Unlock()
	w.f.mu.Lock()
	w.f.broadcastLocked()
	w.f.mu.Unlock()
}

func (w *writer) drain() {
	for {
		var b storage.Batch
		n := w.gather(&b)
		if n == 0 {
			return
		}
		w.commit(&b, n)
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
	w.mu.Unlock()
	close(w.quit)
	<-w.done
	return w.failure()
}

// committed updates the scheduler after a commit.
func (f *Frontier) committed(c *storage.Committed) {
	if c == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Failed hosts first: URLs added after a FailHost in the same batch are
	// queued anew and must survive the clearing.
	for host := range c.FailedHosts {
		if h := f.hosts[host]; h != nil {
			h.failing = false
			for _, it := range h.buf {
				h.loadedSeq = max(h.loadedSeq, it.Seq)
			}
			h.buf, h.backlog = nil, 0
			f.updateLocked(h)
		}
	}
	f.addedLocked(c.Added)
}

// Close commits every submitted operation and stops the writer. Leases still
// out are simply left queued in the file.
func (f *Frontier) Close() error {
	err := f.writer.close()
	f.mu.Lock()
	f.closed = true
	f.broadcastLocked()
	f.mu.Unlock()
	if err != nil {
		return fmt.Errorf("close frontier: %w", err)
	}
	return nil
}

// Submit adds other writes (robots cache, breaker state, logs) to the next
// group commit.
func (f *Frontier) Submit(fn func(*storage.Batch)) error { return f.writer.submit(fn) }
