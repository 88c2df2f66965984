package frontier

import (
	"breakwater/store"
	"container/heap"
	"slices"
)

// restockLocked asks the writer for a scan of the file when hosts were
// left out of memory and few dormant ones remain in it: the scan runs
// before the last of them is woken, so a worker rarely waits for it.
func (f *Frontier) restockLocked() {
	if f.spilled && !f.scanWanted && f.dormant.Len() <= f.opts.MaxDormant/4 {
		f.scanWanted = true
		f.writer.poke()
	}
}

// scanDormant reads the file's host counts and brings into memory, as
// dormant hosts, the ones with the most queued URLs that are not held
// already, as many as MaxDormant leaves room for. It runs in the writer
// goroutine (or in Open, before it starts), between commits: every
// committed URL has been announced to the hosts in memory, so the file's
// count of a host not in memory is exactly what it has queued, and since
// a host is forgotten only once its writes are in a batch (see
// hostQueue.writes), none of those URLs was leased in this run: the host
// loads them all. A scan that finds room for every such host clears
// spilled.
//
// A scan reads every host the file has counts for; restocking at a
// quarter of MaxDormant keeps scans to one for every three quarters of
// MaxDormant hosts woken.
func (f *Frontier) scanDormant() error {
	// The counts are read first and looked up in memory afterwards, a
	// chunk per lock: a lock per host would queue the scan behind every
	// Next, thousands of times.
	var counted []candidate
	err := f.db.ForEachHost(func(name string, c store.HostCounts) error {
		if c.Queued > 0 {
			counted = append(counted, candidate{name: name, queued: int(c.Queued), seq: len(counted)})
		}
		return nil
	})
	f.mu.Lock()
	defer f.mu.Unlock()
	f.scanWanted = false
	if err != nil {
		return err
	}
	room := f.opts.MaxDormant - f.dormant.Len()
	best := candidates{}
	more := false
	for i, c := range counted {
		if i > 0 && i%scanChunk == 0 {
			f.mu.Unlock()
			f.mu.Lock()
		}
		if h := f.hosts[c.name]; h != nil {
			f.recountLocked(h, c.queued)
			continue
		}
		switch {
		case len(best) < room:
			heap.Push(&best, c)
		default:
			more = true
			if len(best) > 0 && c.queued > best[0].queued {
				best[0] = c
				heap.Fix(&best, 0)
			}
		}
	}
	// In the file's order, which breaks ties between equal backlogs.
	slices.SortFunc(best, func(a, b candidate) int { return a.seq - b.seq })
	for _, c := range best {
		if f.hosts[c.name] != nil {
			more = true // created meanwhile (Hold, FailHost): the next scan recounts it
			continue
		}
		h := f.host(c.name)
		h.loadedSeq = 0
		h.backlog = c.queued
		f.dormantLocked(h)
	}
	f.spilled = more
	f.broadcastLocked()
	return nil
}

// scanChunk is how many hosts a scan looks up per hold of the lock.
const scanChunk = 4096

// recountLocked takes the file's count of queued URLs for a host in memory
// that has loaded none of them: one created while the file held URLs it
// was not told of (a Hold or FailHost of a host left out of memory).
func (f *Frontier) recountLocked(h *hostQueue, queued int) {
	if h.active || h.loading || h.failing || len(h.buf) > 0 || h.inflight > 0 || h.writes.Load() > 0 || h.backlog == queued {
		return
	}
	h.backlog = queued
	h.loadedSeq = 0
	f.dormantLocked(h)
}

// candidate is a host the scan may bring in; candidates is a min-heap by
// queued URLs, so the smallest of the best is the one replaced.
type candidate struct {
	name   string
	queued int
	seq    int // its place in the scan
}

type candidates []candidate

func (c candidates) Len() int           { return len(c) }
func (c candidates) Less(i, j int) bool { return c[i].queued < c[j].queued }
func (c candidates) Swap(i, j int)      { c[i], c[j] = c[j], c[i] }
func (c *candidates) Push(x any)        { *c = append(*c, x.(candidate)) }
func (c *candidates) Pop() any {
	old := *c
	x := old[len(old)-1]
	*c = old[:len(old)-1]
	return x
}
