package crawl

import (
	"os"
	"runtime/debug"
)

// DefaultMemoryLimit is Options.MemoryLimit's default: 128 MiB.
//
// A Go heap grows to twice what is live before the collector runs (GOGC
// 100), so a crawl holding 80 MB would otherwise be seen at 160 MB and
// more. Below the limit nothing changes; near it the collector runs
// earlier, which a crawl of many hosts, mostly waiting on them, can well
// afford. It is a complement to keeping per-host state small, not a cap:
// a crawl whose live heap is larger still runs, at some GC cost.
const DefaultMemoryLimit = 128 << 20

// applyMemoryLimit sets the runtime's soft memory limit to limit bytes
// unless limit is 0 or the environment sets GOMEMLIMIT, and returns what
// puts back the limit it found.
func applyMemoryLimit(limit int64) (restore func()) {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(limit)
	return func() {
		// Only if it is still ours: another engine in the process, or its
		// owner, may have set one since.
		if debug.SetMemoryLimit(-1) == limit {
			debug.SetMemoryLimit(prev)
		}
	}
}

// heapFloorUnder returns the heap floor a crawl keeps under its memory
// limit: DefaultHeapFloor, none without a limit of the crawl's own (the
// limit is what bounds what the floor adds), and at most a quarter of it.
func heapFloorUnder(limit int64) uint64 {
	if limit <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	return uint64(min(DefaultHeapFloor, limit/4))
}
