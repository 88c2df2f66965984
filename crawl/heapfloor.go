package crawl

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultHeapFloor is the heap growth the collector waits for between two
// cycles, at the least: 32 MiB.
//
// With GOGC 100 a heap grows to twice what is live before the next cycle.
// A crawl's live heap is small (10-20 MB crawling 200 hosts) while it
// allocates a page's worth of buffers, links and records every few
// microseconds, so the collector ran 40 times a second and took a tenth of
// the crawl's CPU. Below the floor the heap may grow by the floor instead;
// above it nothing changes, and the memory limit (DefaultMemoryLimit)
// still bounds it all.
const DefaultHeapFloor = 32 << 20

// maxFloorPercent caps the GOGC the floor sets, for a heap almost empty.
const maxFloorPercent = 1000

// gcPercentFor returns the GOGC that lets a heap of live bytes grow by
// floor before its next cycle, and never less than GOGC 100.
func gcPercentFor(live, floor uint64) int {
	if live == 0 {
		return maxFloorPercent
	}
	p := floor * 100 / live
	return int(min(max(p, 100), maxFloorPercent))
}

// heapFloor is process-wide, as the collector is: the first engine running
// starts it, the last one stops it and puts GOGC back.
var heapFloor struct {
	mu      sync.Mutex
	users   int
	run     uint64 // the current chain of sentinels; an older one stops
	floor   uint64
	percent int // what the floor set last
	before  int // GOGC before the first user
}

// holdHeapFloor keeps the heap floor at floor bytes until the returned
// release is called. It does nothing when floor is 0 or when the
// environment sets GOGC: the user chose the collector's pace.
func holdHeapFloor(floor uint64) (release func()) {
	if floor == 0 || os.Getenv("GOGC") != "" {
		return func() {}
	}
	h := &heapFloor
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users++
	if h.users == 1 {
		h.run++
		h.floor = floor
		h.percent = gcPercentFor(liveHeap(), floor)
		h.before = debug.SetGCPercent(h.percent)
		armHeapFloor(h.run)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.users--
			if h.users == 0 {
				h.run++ // the sentinels' chain ends at its next cycle
				debug.SetGCPercent(h.before)
			}
		})
	}
}

// floorSentinel is garbage as soon as it is made: its finalizer runs once
// the cycle after, to set the collector's pace for the next one. It holds
// a pointer so that the tiny allocator does not batch it with other
// objects, whose finalizers would then wait for all of them.
type floorSentinel struct {
	run  uint64
	self *floorSentinel
}

func armHeapFloor(run uint64) {
	s := &floorSentinel{run: run}
	runtime.SetFinalizer(s, func(s *floorSentinel) {
		h := &heapFloor
		h.mu.Lock()
		defer h.mu.Unlock()
		if s.run != h.run {
			return
		}
		if p := gcPercentFor(liveHeap(), h.floor); p != h.percent {
			h.percent = p
			debug.SetGCPercent(p)
		}
		armHeapFloor(run)
	})
}

// liveHeap returns the bytes the last cycle marked live.
func liveHeap() uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return sample[0].Value.Uint64()
}
