package frontier

import (
	"breakwater/store"
	"container/heap"
	"math/bits"
	"slices"
	"sync/atomic"
	"time"
)

// hostQueue is the scheduler's view of one host: a few URLs in memory, a
// count of the rest in the file, and when the host may next be offered.
//
// A host is dormant until a worker finds no other host ready (see
// activateLocked): only then are its URLs read from the file. So what the
// scheduler holds in memory, and what it reads of the file, grows with the
// hosts the workers need to stay busy, not with every host in the queue.
// The dormant host with the most URLs is woken first: a host's URLs are
// fetched at its own polite pace, so the biggest ones bound the crawl's
// length and should start early (longest job first). For the same reason a
// dormant host with more than twice the URLs of every active host is woken
// at once, even while workers are busy (see wakeLongestLocked). A host that
// can only fail, linked from many pages, is among them and is found out early.
type hostQueue struct {
	name      string
	buf       []store.Item // next URLs: requisites first, each kind in FIFO order
	backlog   int          // committed URLs in the file not in buf
	loadedSeq uint64       // highest Seq put in buf in file order
	// early holds the Seq of requisites put in buf ahead of the file's
	// order (see addedLocked): a load that meets them again skips them.
	early      map[uint64]struct{}
	active     bool   // its URLs are loaded into buf as it drains
	dormantIdx int    // in Frontier.dormant; -1 when absent
	dormantSeq uint64 // when it was put there: ties wake oldest first
	activating bool   // its first load since activation is pending
	sizeClass  int    // its count in Frontier.activeSizes; 0: none
	loading    bool
	inflight   int
	leased     []uint64 // Seq of each lease in flight
	// writes counts the leases ended with a write (Complete, Defer) that
	// the writer has not put in a batch yet. A host is forgotten only at
	// zero: then every entry the file still queues for it is really queued,
	// and a scan of the file may bring it back with all of them.
	writes   atomic.Int32
	reserved bool // a lease is between Next and Started/Release
	held     bool
	failing  bool // a FailHost is submitted, not yet committed: offer nothing
	readyAt  time.Time
	index    int // in the ready heap; -1 when absent
}

func (h *hostQueue) queued() int { return len(h.buf) + max(h.backlog, 0) }

// forgettable reports whether the scheduler may drop h: nothing queued,
// leased, loading, held or pending, and its politeness wait over.
func (h *hostQueue) forgettable(now time.Time) bool {
	return h.queued() == 0 && h.inflight == 0 && !h.loading && !h.held && !h.failing && !h.readyAt.After(now) &&
		h.writes.Load() == 0
}

// host returns the scheduler's entry for name, creating it if needed. A
// host forgotten and created again must not load the entries its former
// self leased: their completions may still be on their way to the file.
func (f *Frontier) host(name string) *hostQueue {
	h := f.hosts[name]
	if h == nil {
		h = &hostQueue{name: name, index: -1, dormantIdx: -1, loadedSeq: f.announcedSeq}
		f.hosts[name] = h
	}
	return h
}

func (f *Frontier) eligible(h *hostQueue) bool {
	return len(h.buf) > 0 && !h.held && !h.reserved && !h.failing && h.inflight < f.opts.HostConcurrency
}

// updateLocked puts h in, moves it within, or takes it out of the ready heap.
// A host with nothing left stays known, and active, until the periodic
// prune: its next URLs are often in a commit on its way, and they go
// straight into the buffer of an active host, where a forgotten one would
// come back dormant and wait to be loaded from the file.
func (f *Frontier) updateLocked(h *hostQueue) {
	f.resizeLocked(h)
	switch {
	case f.eligible(h) && h.index < 0:
		heap.Push(&f.ready, h)
	case f.eligible(h):
		heap.Fix(&f.ready, h.index)
	case h.index >= 0:
		heap.Remove(&f.ready, h.index)
	}
}

// refillLocked asks the writer to load the host's next URLs from the file
// when its buffer runs low. Loads run in the writer goroutine, between
// commits, so every URL a load can see has already been announced to the
// scheduler by addedLocked: the backlog count is exact and never races.
func (f *Frontier) refillLocked(h *hostQueue) {
	if !h.active {
		f.dormantLocked(h)
		return
	}
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
	scan := f.scanWanted
	f.mu.Unlock()
	if scan {
		if err := f.scanDormant(); err != nil {
			f.opts.Logger.Error("scan host counts", "err", err)
			f.writer.fail(err)
		}
	}
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
		if h.activating {
			h.activating = false
			f.activating--
		}
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

func (f *Frontier) appendLoadedLocked(h *hostQueue, items []store.Item) {
	for _, it := range items {
		if it.Seq <= h.loadedSeq {
			continue
		}
		h.loadedSeq = it.Seq
		if _, ok := h.early[it.Seq]; ok {
			delete(h.early, it.Seq)
			continue // in buf already, or leased: never counted in backlog
		}
		h.push(it)
		h.backlog--
	}
	for seq := range h.early {
		if seq <= h.loadedSeq {
			delete(h.early, seq) // done before a load came by
		}
	}
	if len(h.early) == 0 {
		h.early = nil
	}
}

// push puts it in the buffer: a page at the end, a requisite after the
// requisites already there, ahead of every page, so that the pages being
// fetched get their images and stylesheets before new pages are begun
// and a crawl that stops leaves whole pages.
func (h *hostQueue) push(it store.Item) {
	if it.Kind != store.KindRequisite {
		h.buf = append(h.buf, it)
		return
	}
	i := 0
	for i < len(h.buf) && h.buf[i].Kind == store.KindRequisite {
		i++
	}
	h.buf = slices.Insert(h.buf, i, it)
}

// maxEarlyFactor bounds the buffer of an active host taking requisites
// ahead of its file (Buffer times this): a page of 500 images does not
// hold them all in memory.
const maxEarlyFactor = 4

// addedLocked takes the items a commit queued. An item goes straight into
// the host's buffer when the buffer holds everything the file has for the
// host; otherwise it is counted and loaded from the file later.
func (f *Frontier) addedLocked(items []store.Item) {
	for _, it := range items {
		h := f.hosts[it.Host]
		if h == nil && (f.spilled || f.dormant.Len() >= f.opts.MaxDormant) {
			// The file counts it; a scan brings the host in when its turn
			// comes. Until a scan finds every such host room, a new host
			// could be one of them, with more URLs in the file than here.
			f.spilled = true
			f.announcedSeq = max(f.announcedSeq, it.Seq)
			continue
		}
		h = f.host(it.Host)
		switch {
		case h.active && h.backlog <= 0 && !h.loading && len(h.buf) < f.opts.Buffer:
			h.backlog = 0
			h.push(it)
			h.loadedSeq = it.Seq
		case h.active && it.Kind == store.KindRequisite && len(h.buf) < maxEarlyFactor*f.opts.Buffer:
			// Ahead of the pages still in the file, which a load brings in
			// later and which must then skip it.
			if h.early == nil {
				h.early = map[uint64]struct{}{}
			}
			h.early[it.Seq] = struct{}{}
			h.push(it)
		default:
			h.backlog++
		}
		f.announcedSeq = max(f.announcedSeq, it.Seq)
		f.refillLocked(h)
		f.updateLocked(h)
	}
}

// dormantLocked puts a host with URLs only in the file in line for
// activation, or updates its place after its backlog changed.
func (f *Frontier) dormantLocked(h *hostQueue) {
	if h.dormantIdx >= 0 {
		heap.Fix(&f.dormant, h.dormantIdx)
		return
	}
	if h.active || h.held || h.backlog <= 0 {
		return
	}
	f.dormantSeq++
	h.dormantSeq = f.dormantSeq
	heap.Push(&f.dormant, h)
}

// maxActivating bounds the hosts whose first load is pending: each worker
// that finds nothing ready activates one more host, and a burst of them
// should not load every dormant host at once.
const maxActivating = 4

// activateLocked starts loading the URLs of the dormant host with the
// largest backlog, if one waits and few loads of newly activated
// hosts are pending. Called when a worker finds no host ready, it grows
// the set of active hosts just enough to keep the workers busy.
func (f *Frontier) activateLocked() {
	defer f.restockLocked()
	for f.dormant.Len() > 0 && f.activating < maxActivating {
		h := heap.Pop(&f.dormant).(*hostQueue)
		if f.hosts[h.name] != h || h.active || h.held || h.backlog <= 0 {
			continue // forgotten, failed or held since it was put in line
		}
		h.active = true
		f.resizeLocked(h)
		f.refillLocked(h)
		if h.loading {
			h.activating = true
			f.activating++
		}
		return
	}
}

// sizeClass is n's power-of-two class: 0 for 0, then 1, 2-3, 4-7, ...
func sizeClass(n int) int { return bits.Len(uint(max(n, 0))) }

// resizeLocked keeps h counted in activeSizes under its current class.
func (f *Frontier) resizeLocked(h *hostQueue) {
	c := 0
	if h.active {
		c = sizeClass(h.queued())
	}
	if c == h.sizeClass {
		return
	}
	if h.sizeClass > 0 {
		f.activeSizes[h.sizeClass]--
	}
	if c > 0 {
		f.activeSizes[c]++
	}
	h.sizeClass = c
}

// wakeLongestLocked wakes the dormant host with the most URLs when it has
// more than twice as many as any active host, by size class: it is the
// crawl's longest job, and waiting until a worker finds nothing else ready
// would start it last. Active hosts are rarely that much smaller than a
// dormant one (they were woken biggest first), so this wakes few hosts: a
// host that many pages link to, or the next one as the active ones drain.
func (f *Frontier) wakeLongestLocked() {
	top := f.dormant.peek()
	if top == nil {
		return
	}
	for c := max(sizeClass(top.backlog)-1, 1); c < len(f.activeSizes); c++ {
		if f.activeSizes[c] > 0 {
			return
		}
	}
	f.activateLocked()
}

// pruneLocked forgets hosts with nothing queued whose politeness wait has
// passed; until then an empty host keeps its readyAt so a URL found later
// still waits for it.
func (f *Frontier) pruneLocked(now time.Time) {
	for name, h := range f.hosts {
		if h.forgettable(now) {
			delete(f.hosts, name) // nothing queued: not in activeSizes
		}
	}
}

// hostHeap is a heap of hosts that keeps each host's place in it in a
// field of the host, so that a host can be fixed or removed where it is.
// The scheduler has two: the ready heap (readySooner) and the dormant one
// (dormantFirst).
type hostHeap struct {
	hosts []*hostQueue
	less  func(a, b *hostQueue) bool
	place func(h *hostQueue) *int // the host's index field; -1 when absent
}

func (q *hostHeap) Len() int           { return len(q.hosts) }
func (q *hostHeap) Less(i, j int) bool { return q.less(q.hosts[i], q.hosts[j]) }
func (q *hostHeap) Swap(i, j int) {
	q.hosts[i], q.hosts[j] = q.hosts[j], q.hosts[i]
	*q.place(q.hosts[i]), *q.place(q.hosts[j]) = i, j
}
func (q *hostHeap) Push(x any) {
	h := x.(*hostQueue)
	*q.place(h) = len(q.hosts)
	q.hosts = append(q.hosts, h)
}
func (q *hostHeap) Pop() any {
	last := len(q.hosts) - 1
	h := q.hosts[last]
	q.hosts[last] = nil
	*q.place(h) = -1
	q.hosts = q.hosts[:last]
	return h
}
func (q *hostHeap) peek() *hostQueue {
	if len(q.hosts) == 0 {
		return nil
	}
	return q.hosts[0]
}

// readySooner orders eligible hosts by the time they may next be offered.
func readySooner(a, b *hostQueue) bool { return a.readyAt.Before(b.readyAt) }

// dormantFirst orders dormant hosts by backlog, largest first, then by how
// long they have waited.
func dormantFirst(a, b *hostQueue) bool {
	if a.backlog != b.backlog {
		return a.backlog > b.backlog
	}
	return a.dormantSeq < b.dormantSeq
}
