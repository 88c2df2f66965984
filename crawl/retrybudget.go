package crawl

// Per-host retry budget in the style of Finagle and gRPC: retries to a host
// are limited by what the host has shown it can take, so a failing host
// cannot turn the crawl into a retry storm while a host that answers well
// gets its retries at its own pace, even when they are all it has left.
// Counts live in a small ring of time buckets per host, so memory is fixed
// per host however busy it is.

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

// HealthyAnswerCredit is the retries one healthy answer earns in the window;
// each failed answer takes one back. A host at least half of whose answers
// are healthy earns more retries than it spends (3h - (1-h) >= 1), so its
// retries are bounded by its pace alone; one whose answers are healthy less
// than a quarter of the time earns nothing and keeps only its share of
// first attempts and the floor.
const HealthyAnswerCredit = 3

// retryRecheckBuckets: a retry refused while the host has answers still to
// come is tried again after its pace interval, and at least a hundredth of
// a bucket later (100 ms for the default minute) when it has no pace.
const retryRecheckBuckets = 100

// RetryBudget limits retries per host. Within a sliding window a host may
// have
//
//	earned    = max(0, HealthyAnswerCredit*healthy answers - failed answers)
//	allowance = MinPerWindow + floor(Ratio*first attempts) + earned
//
// retries, and never more than its pace could serve in the window
// (Window/pace, or MinPerWindow if that is more). Every request's answer
// counts, retries' too, so a host left with nothing but retries earns its
// next ones from the answers of the last: a healthy-enough host retries at
// its pace, while one whose failures rise earns less and less, down to the
// Ratio share of its first attempts plus the floor. The floor is added
// rather than being a minimum, so a deferred retry always finds room
// eventually.
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

// RetryWindow is what one host did within the budget's window.
type RetryWindow struct {
	FirstAttempts, Retries int
	// Healthy and Failed count the answers to its requests, first attempts
	// and retries alike: healthy ones are those the host served as asked
	// (including a 404), failed ones errors, 5xx, throttling and refusals.
	Healthy, Failed int
}

// pending is how many of the window's requests have no answer yet, as far
// as the counts can tell.
func (w RetryWindow) pending() int {
	return w.FirstAttempts + w.Retries - w.Healthy - w.Failed
}

// retryBucket counts the events of one bucket-wide slice of time. The
// counts are 32-bit: a host has a ring for every minute it is asked, so a
// crawl of many hosts holds one per host of the last minute, and a slice
// of seconds never sees two billion requests to one host.
type retryBucket struct {
	idx                              int64 // which slice: UnixNano / width
	firsts, retries, healthy, failed int32
}

// retryRing holds a host's buckets, slot idx mod retryBuckets; a slot whose
// idx is stale is reused.
type retryRing [retryBuckets]retryBucket

// NewRetryBudget returns a budget allowing ratio retries per first attempt
// plus minPerWindow retries per window, plus what the host's answers earn.
// A ratio of zero allows only the floor and the earned retries; a negative
// or non-finite ratio means DefaultRetryRatio. A window of zero or less
// means DefaultRetryWindow, and a minPerWindow of zero or less means
// DefaultRetryMinPerWindow.
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

// Allowance returns how many retries a window of w allows a host whose
// requests are pace apart (zero: no pace).
func (b *RetryBudget) Allowance(w RetryWindow, pace time.Duration) int {
	const most = math.MaxInt32 // counts are 32-bit: more is never reached
	// The epsilon keeps 0.29*100 at 29 despite float rounding.
	share := b.ratio*float64(max(w.FirstAttempts, 0)) + 1e-9
	earned := float64(HealthyAnswerCredit)*float64(max(w.Healthy, 0)) - float64(max(w.Failed, 0))
	total := float64(b.minPerWindow) + math.Floor(share) + max(earned, 0)
	if pace > 0 {
		paced := float64(b.width*retryBuckets) / float64(pace)
		total = min(total, max(math.Floor(paced), float64(b.minPerWindow)))
	}
	return int(min(total, most))
}

// RecordFirstAttempt counts a first (non-retry) request to host at now,
// which earns the host Ratio more retries.
func (b *RetryBudget) RecordFirstAttempt(host string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ring(host).bucket(b.index(now)).firsts++
}

// RecordAnswer counts the answer to one of host's requests at now, a first
// attempt or a retry: a healthy one earns the host HealthyAnswerCredit
// retries, a failed one takes one back.
func (b *RetryBudget) RecordAnswer(host string, healthy bool, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	bk := b.ring(host).bucket(b.index(now))
	if healthy {
		bk.healthy++
	} else {
		bk.failed++
	}
}

// TryRetry is TryRetryPaced for a host without a pace.
func (b *RetryBudget) TryRetry(host string, now time.Time) (ok bool, retryAt time.Time) {
	return b.TryRetryPaced(host, 0, now)
}

// TryRetryPaced reports whether host, whose requests go pace apart, may
// have a retry at now, and consumes one if so. When it may not, retryAt is
// when to ask again: if answers to the host's requests are still to come
// and could earn room, after one pace interval; otherwise the earliest
// time the window will have room assuming nothing new happens. The caller
// should defer the retry until then, never drop it. When ok, retryAt is
// now.
func (b *RetryBudget) TryRetryPaced(host string, pace time.Duration, now time.Time) (ok bool, retryAt time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.ring(host)
	cur := b.index(now)
	w := r.sum(cur)
	if w.Retries < b.Allowance(w, pace) {
		r.bucket(cur).retries++
		return true, now
	}
	// Sliding forward a bucket at a time drops old retries, and old first
	// attempts and answers with them; find the first step where the
	// balance turns.
	retryAt = now.Add(b.width * retryBuckets) // unreachable: the floor is >= 1
	for k := int64(1); k <= retryBuckets; k++ {
		if w := r.sum(cur + k); w.Retries < b.Allowance(w, pace) {
			retryAt = time.Unix(0, (cur+k)*int64(b.width)).In(now.Location())
			break
		}
	}
	if b.couldEarn(w, pace) {
		if soon := now.Add(max(pace, b.width/retryRecheckBuckets, 1)); soon.Before(retryAt) {
			retryAt = soon
		}
	}
	return false, retryAt
}

// couldEarn reports whether the answers still to come to the window's
// requests could make room, were they all healthy: only then is a refused
// retry worth asking about again before the window slides. A host whose
// failures already outweigh what its answers could earn waits for the
// slide, so its deferred retries are not churned every pace interval.
func (b *RetryBudget) couldEarn(w RetryWindow, pace time.Duration) bool {
	p := w.pending()
	if p <= 0 {
		return false
	}
	best := w
	best.Healthy += p
	return w.Retries < b.Allowance(best, pace)
}

// Window returns what host did in the window ending at now.
func (b *RetryBudget) Window(host string, now time.Time) RetryWindow {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.hosts[host]
	if r == nil {
		return RetryWindow{}
	}
	return r.sum(b.index(now))
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
	w := r.sum(b.index(now))
	return w.Retries, w.FirstAttempts
}

// Prune forgets hosts with nothing in the window ending at now; they would
// start from an empty window anyway.
func (b *RetryBudget) Prune(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	cur := b.index(now)
	for host, r := range b.hosts {
		if r.sum(cur) == (RetryWindow{}) {
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
func (r *retryRing) sum(cur int64) RetryWindow {
	var w RetryWindow
	for _, bk := range r {
		if bk.idx <= cur && bk.idx > cur-retryBuckets {
			w.FirstAttempts += int(bk.firsts)
			w.Retries += int(bk.retries)
			w.Healthy += int(bk.healthy)
			w.Failed += int(bk.failed)
		}
	}
	return w
}
