package frontier

import (
	"container/heap"
	"time"

	"breakwater/storage"
)

// hostQueue is the scheduler's view of one host: a few URLs in memory, a
// count of the rest in the file, and when the host may next be offered.
type hostQueue struct {
	name      string
	buf       []storage.Item // next URLs in FIFO order
	backlog   int            // committed URLs in the file not in buf
	loadedSeq uint64         // highest Seq ever put in buf
	loading   bool
	inflight  int
	leased    []uint64 // Seq of each lease in flight
	reserved  bool     // a lease is between Next and Started/Release
	held      bool
	failing   bool // a FailHost is submitted, not yet committed: offer nothing
	readyAt   time.Time
	index     int // in the ready heap; -1 when absent
}

func (h *hostQueue) queued() int { return len(h.buf) + max(h.backlog, 0) }

// forgettable reports whether the scheduler may drop h: nothing queued,
// leased, loading, held or pending, and its politeness wait over.
func (h *hostQueue) forgettable(now time.Time) bool {
	return h.queued() == 0 && h.inflight == 0 && !h.loading && !h.held && !h.failing && !h.readyAt.After(now)
}

func (f *Frontier) host(name string) *hostQueue {
	h := f.hosts[name]
	if h == nil {
		h = &hostQueue{name: name, index: -1}
		f.hosts[name] = h
	}
	return h
}

func (f *Frontier) eligible(h *hostQueue) bool {
	return len(h.buf) > 0 && !h.held && !h.reserved && !h.failing && h.inflight < f.opts.HostConcurrency
}

// updateLocked puts h in, moves it within, or takes it out of the ready heap,
// and forgets a host with nothing left.
func (f *Frontier) updateLocked(h *hostQueue) {
	switch {
	case f.eligible(h) && h.index < 0:
		heap.Push(&f.ready, h)
	case f.eligible(h):
		heap.Fix(&f.ready, h.index)
	case h.index >= 0:
		heap.Remove(&f.ready, h.index)
	}
	if h.forgettable(f.opts.Now()) {
		delete(f.hosts, h.name)
	}
}

// refillLocked asks the writer to load the host's next URLs from the file
// when its buffer runs low. Loads run in the writer goroutine, between
// commits, so every URL a load can see has already been announced to the
// scheduler by addedLocked: the backlog count is exact and never races.
func (f *Frontier) refillLocked(h *hostQueue) {
	if h.loading || h.backlog <= 0 || len(h.buf) > f.opts.Buffer/2 {
		return
	}
	h.loading = true
	f.loading++
	f.loadQueue = append(f.loadQueue, h)
	f.writer.poke()
}

// takeLoadsLocked hands the pending refills to the writer.
func (f *Frontier) takeLoadsLocked() []*hostQueue {
	q := f.loadQueue
	f.loadQueue = nil
	return q
}

// loadHosts performs pending refills; only the writer goroutine calls it.
func (f *Frontier) loadHosts() {
	f.mu.Lock()
	hosts := f.takeLoadsLocked()
	f.mu.Unlock()
	for _, h := range hosts {
		f.mu.Lock()
		after, want := h.loadedSeq, f.opts.Buffer-len(h.buf)
		f.mu.Unlock()
		items, err := f.db.LoadQueued(h.name, after, max(want, 1))
		f.mu.Lock()
		h.loading = false
		f.loading--
		if err != nil {
			f.opts.Logger.Error("load queue", "host", h.name, "err", err)
			f.writer.fail(err)
		}
		f.appendLoadedLocked(h, items)
		if err == nil && len(items) < want {
			h.backlog = 0 // the file holds nothing more for this host
		}
		f.refillLocked(h)
		f.updateLocked(h)
		f.broadcastLocked()
		f.mu.Unlock()
	}
}

func (f *Frontier) appendLoadedLocked(h *hostQueue, items []storage.Item) {
	for _, it := range items {
		if it.Seq <= h.loadedSeq {
			continue
		}
		h.buf = append(h.buf, it)
		h.loadedSeq = it.Seq
		h.backlog--
	}
}

// addedLocked takes the items a commit queued. An item goes straight into
// the host's buffer when the buffer holds everything the file has for the
// host; otherwise it is counted and loaded from the file later.
func (f *Frontier) addedLocked(items []storage.Item) {
	for _, it := range items {
		h := f.host(it.Host)
		if h.backlog <= 0 && !h.loading && len(h.buf) < f.opts.Buffer {
			h.backlog = 0
			h.buf = append(h.buf, it)
			h.loadedSeq = it.Seq
		} else {
			h.backlog++
		}
		f.refillLocked(h)
		f.updateLocked(h)
	}
}

// pruneLocked forgets hosts with nothing queued whose politeness wait has
// passed; until then an empty host keeps its readyAt so a URL found later
// still waits for it.
func (f *Frontier) pruneLocked(now time.Time) {
	for name, h := range f.hosts {
		if h.forgettable(now) {
			delete(f.hosts, name)
		}
	}
}

// hostHeap orders eligible hosts by the time they may next be offered.
type hostHeap []*hostQueue

func (q hostHeap) Len() int           { return len(q) }
func (q hostHeap) Less(i, j int) bool { return q[i].readyAt.Before(q[j].readyAt) }
func (q hostHeap) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *hostHeap) Push(x any) {
	h := x.(*hostQueue)
	h.index = len(*q)
	*q = append(*q, h)
}
func (q *hostHeap) Pop() any {
	old := *q
	h := old[len(old)-1]
	old[len(old)-1] = nil
	h.index = -1
	*q = old[:len(old)-1]
	return h
}
func (q hostHeap) peek() *hostQueue {
	if len(q) == 0 {
		return nil
	}
	return q[0]
}
