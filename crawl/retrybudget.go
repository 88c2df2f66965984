package crawl

// Per-host retry budget in the style of Finagle and gRPC: retries to a host
// are limited to a fraction of its fresh traffic, so a failing host cannot
// turn the crawl into a retry storm. Counts live in a small ring of time
// buckets per host, so memory is fixed per host however busy it is.

import (
	"math"
	"sync"
	"time"
)

// Retry budget defaults, used by NewRetryBudget for out-of-range arguments.
const (
	DefaultRetryRatio        = 0.2
	DefaultRetryWindow       = time.Minute
	DefaultRetryMinPerWindow = 3
)

// retryBuckets is how many slices the window is cut into: the window slides
// in steps of Window/retryBuckets (10 s for the default minute).
const retryBuckets = 6

// RetryBudget limits retries per host. Within a sliding window a host may
// have
//
//	allowance = MinPerWindow + floor(Ratio * first attempts)
//
// retries. The floor is added to the ratio allowance rather than being a
// minimum of it, so a host with fresh URLs always keeps a few retries in
// hand on top of its share, and a host with no fresh URLs left can still
// finish its retries a few per window. Because the floor is at least one, a
// deferred retry always finds room eventually.
//
// The window slides in whole buckets of Window/6, so an event counts for
// between five sixths of the window and the whole window. RetryBudget is
// safe for concurrent use.
type RetryBudget struct {
	ratio        float64
	width        time.Duration // one bucket's span
	minPerWindow int

	mu    sync.Mutex
	hosts map[string]*retryRing
}

// retryBucket counts the events of one bucket-wide slice of time. The
// counts are 32-bit: a host has a ring for every minute it is asked, so a
// crawl of many hosts holds one per host of the last minute, and a slice
// of seconds never sees two billion requests to one host.
type retryBucket struct {
	idx             int64 // which slice: UnixNano / width
	firsts, retries int32
}

// retryRing holds a host's buckets, slot idx mod retryBuckets; a slot whose
// idx is stale is reused.
type retryRing [retryBuckets]retryBucket

// NewRetryBudget returns a budget allowing ratio retries per first attempt
// plus minPerWindow retries per window. A ratio of zero allows only the
// floor; a negative or non-finite ratio means DefaultRetryRatio. A window
// of zero or less means DefaultRetryWindow, and a minPerWindow of zero or
// less means DefaultRetryMinPerWindow.
func NewRetryBudget(ratio float64, window time.Duration, minPerWindow int) *RetryBudget {
	if ratio < 0 || math.IsNaN(ratio) || math.IsInf(ratio, 0) {
		ratio = DefaultRetryRatio
	}
	if window <= 0 {
		window = DefaultRetryWindow
	}
	if minPerWindow <= 0 {
		minPerWindow = DefaultRetryMinPerWindow
	}
	return &RetryBudget{
		ratio:        ratio,
		width:        max(window/retryBuckets, 1),
		minPerWindow: minPerWindow,
		hosts:        make(map[string]*retryRing),
	}
}

// Allowance returns how many retries a window with firstAttempts first
// attempts allows.
func (b *RetryBudget) Allowance(firstAttempts int) int {
	// The epsilon keeps 0.29*100 at 29 despite float rounding.
	share := b.ratio*float64(max(firstAttempts, 0)) + 1e-9
	if share >= float64(math.MaxInt/2) {
		return math.MaxInt / 2
	}
	return b.minPerWindow + int(share)
}

// RecordFirstAttempt counts a first (non-retry) request to host at now,
// which earns the host Ratio more retries.
func (b *RetryBudget) RecordFirstAttempt(host string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ring(host).bucket(b.index(now)).firsts++
}

// TryRetry reports whether host may have a retry at now, and consumes one
// if so. When it may not, retryAt is the earliest time the window will have
// room assuming no new first attempts; the caller should defer the retry
// until then, never drop it. When ok, retryAt is now.
func (b *RetryBudget) TryRetry(host string, now time.Time) (ok bool, retryAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ring(host)
	cur := b.index(now)
	if firsts, retries := r.sum(cur); retries < b.Allowance(firsts) {
		r.bucket(cur).retries++
		return true, now
	}
	// Sliding forward a bucket at a time drops old retries, and old first
	// attempts with them; find the first step where the balance turns.
	for k := int64(1); k <= retryBuckets; k++ {
		if firsts, retries := r.sum(cur + k); retries < b.Allowance(firsts) {
			return false, time.Unix(0, (cur+k)*int64(b.width)).In(now.Location())
		}
	}
	return false, now.Add(b.width * retryBuckets) // unreachable: the floor is >= 1
}

// Usage returns host's retries and first attempts in the window ending at
// now, for display.
func (b *RetryBudget) Usage(host string, now time.Time) (retries, firstAttempts int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.hosts[host]
	if r == nil {
		return 0, 0
	}
	firstAttempts, retries = r.sum(b.index(now))
	return retries, firstAttempts
}

// Prune forgets hosts with nothing in the window ending at now; they would
// start from an empty window anyway.
func (b *RetryBudget) Prune(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.index(now)
	for host, r := range b.hosts {
		if firsts, retries := r.sum(cur); firsts == 0 && retries == 0 {
			delete(b.hosts, host)
		}
	}
}

func (b *RetryBudget) ring(host string) *retryRing {
	r := b.hosts[host]
	if r == nil {
		r = new(retryRing)
		for i := range r {
			r[i].idx = math.MinInt64 // older than any real slice
		}
		b.hosts[host] = r
	}
	return r
}

// index returns the bucket slice holding now, rounding down for times
// before 1970 too. Times outside UnixNano's range (years 1678 to 2262) are
// not supported.
func (b *RetryBudget) index(now time.Time) int64 {
	ns, w := now.UnixNano(), int64(b.width)
	idx := ns / w
	if ns%w < 0 {
		idx--
	}
	return idx
}

// bucket returns the bucket for slice idx, clearing a stale one in its slot.
// A time so far in the past that its slot already holds a newer slice is
// counted in that newer slice rather than wiping it.
func (r *retryRing) bucket(idx int64) *retryBucket {
	bk := &r[((idx%retryBuckets)+retryBuckets)%retryBuckets]
	if bk.idx < idx {
		*bk = retryBucket{idx: idx}
	}
	return bk
}

// sum totals the buckets in the window ending with slice cur.
func (r *retryRing) sum(cur int64) (firsts, retries int) {
	for _, bk := range r {
		if bk.idx <= cur && bk.idx > cur-retryBuckets {
			firsts += int(bk.firsts)
			retries += int(bk.retries)
		}
	}
	return firsts, retries
}
