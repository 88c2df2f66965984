package crawl

import (
	"context"
	"math"
	"sync"
	"time"

	"breakwater/robots"
)

// hostState is what the engine knows of one host beyond its breaker: its
// pace (politeness and AIMD), its robots.txt rules and any Retry-After wait.
// Its mutex guards every field.
type hostState struct {
	mu             sync.Mutex
	pace           *Pace
	rules          *robots.Rules
	robotsChecked  bool // the file's cached copy was looked at
	robotsFetching int  // robots.txt attempts in flight
	robotsFailed   bool // the last attempt got no rules (unreachable, 5xx, timeout)
	// requests is the context of the host's requests in flight; opening its
	// circuit cancels it (abort), so no worker keeps waiting on a host
	// already known to be down.
	requests      context.Context
	abortRequests context.CancelFunc
	inFlight      int       // requests started with beginRequest, not yet done
	notBefore     time.Time // Retry-After: no request to the host before this
	throttles     int       // 429 responses seen
	lastUsed      time.Time
	floor         time.Duration // politeness gap: max of --delay and Crawl-delay
	signal        hostSignal    // what the local-fault guard reads (localfault.go)
}

// wait is how long until the host may start a request.
func (h *hostState) wait(now time.Time) time.Duration {
	w := h.pace.Wait(now)
	if d := h.notBefore.Sub(now); d > w {
		w = d
	}
	return w
}

// hostTable holds hostStates for hosts in use; idle ones are pruned so
// memory follows the hosts being crawled now, not every host ever seen.
// A host idle for fadeIdle, its waits over and its pace at its floor, is
// kept as a fadedHost until the table's idle time, and comes back whole
// when it is asked for.
type hostTable struct {
	mu    sync.Mutex
	m     map[string]*hostState
	faded map[string]fadedHost
	delay time.Duration
}

// fadedHost is an idle host's state reduced to what a fresh hostState
// lacks: the guard's reading of it, its count of 429s, whether its last
// robots.txt attempt failed, its politeness floor for display, and when it
// was last used. Its times are Unix nanoseconds (0 for none), so that it
// fits in the map's slot: under 100 bytes, where the whole state with its
// pace takes about 500.
type fadedHost struct {
	lastUsed, answeredAt, failingSince, failedAt int64
	floor                                        time.Duration
	failures, throttles                          int32
	robotsFailed                                 bool
	answeredURL, failKind                        string
}

func fade(h *hostState) fadedHost {
	s := h.signal
	return fadedHost{lastUsed: unixNanos(h.lastUsed), answeredAt: unixNanos(s.answeredAt),
		failingSince: unixNanos(s.failingSince), failedAt: unixNanos(s.failedAt), floor: h.floor,
		failures: clamp32(s.failures), throttles: clamp32(h.throttles), robotsFailed: h.robotsFailed,
		answeredURL: s.answeredURL, failKind: s.failKind}
}

func (f fadedHost) signal() hostSignal {
	return hostSignal{answeredAt: fromUnixNanos(f.answeredAt), answeredURL: f.answeredURL,
		failingSince: fromUnixNanos(f.failingSince), failures: int(f.failures),
		failedAt: fromUnixNanos(f.failedAt), failKind: f.failKind}
}

func clamp32(n int) int32 { return int32(min(n, math.MaxInt32)) }

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// fadeIdle is how long an idle host keeps its whole state. Its waits are
// over, its pace back at its floor and its rules dropped (rulesIdle), so
// what a fresh state would not know is the guard's reading alone.
const fadeIdle = rulesIdle

func newHostTable(delay time.Duration) *hostTable {
	return &hostTable{m: make(map[string]*hostState), faded: make(map[string]fadedHost), delay: delay}
}

func (t *hostTable) get(host string, now time.Time) *hostState {
	t.mu.Lock()
	defer t.mu.Unlock()
	h := t.stateLocked(host, now)
	h.lastUsed = now
	return h
}

// stateLocked returns host's state, made anew (from its faded self, if it
// has one) when the table has none.
func (t *hostTable) stateLocked(host string, now time.Time) *hostState {
	if h := t.m[host]; h != nil {
		return h
	}
	h := &hostState{pace: NewPace(t.delay, now), floor: t.delay}
	if f, ok := t.faded[host]; ok {
		delete(t.faded, host)
		h.lastUsed, h.signal = fromUnixNanos(f.lastUsed), f.signal()
		h.throttles, h.robotsFailed = int(f.throttles), f.robotsFailed
	}
	t.m[host] = h
	return h
}

// beginRequest returns the context for a request to the host, derived from
// parent; the request counts as in flight until done is called.
func (h *hostState) beginRequest(parent context.Context) (ctx context.Context, done func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.requests == nil {
		h.requests, h.abortRequests = context.WithCancel(parent)
	}
	h.inFlight++
	return h.requests, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.inFlight--; h.inFlight == 0 && h.abortRequests != nil {
			// Nothing is in flight, so this only releases the context: kept,
			// it and its registration with the parent would stay as long as
			// the host is tracked (a minute after its last request), a few
			// hundred bytes for every host of the last minute. The next
			// request makes a new one.
			h.abortRequests()
			h.requests, h.abortRequests = nil, nil
		}
	}
}

// abort cancels the host's requests in flight; later ones get a new context.
func (h *hostState) abort() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.abortRequests != nil {
		h.abortRequests()
		h.requests, h.abortRequests = nil, nil
	}
}

// lookup returns the host's state, or nil when it has none (a faded host
// has one: it is made whole again).
func (t *hostTable) lookup(host string, now time.Time) *hostState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.faded[host]; !ok {
		return t.m[host]
	}
	return t.stateLocked(host, now)
}

// rulesIdle is how long a host keeps its parsed robots.txt rules once idle.
// They are in the file (PutRobots) and read back at the host's next request
// (robotsChecked), while a crawl of many hosts would otherwise hold the
// rules of every host of the last minute: the table keeps hosts that long.
const rulesIdle = 10 * time.Second

// prune forgets hosts idle for longer than idle whose waits have passed and
// whose pace is back at its floor: forgetting them loses nothing. Hosts
// idle for rulesIdle let go of their rules, and those idle for fadeIdle
// that would be forgotten but for the guard's reading of them fade.
func (t *hostTable) prune(now time.Time, idle time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for name, h := range t.m {
		if !h.mu.TryLock() {
			continue
		}
		if h.rules != nil && h.robotsFetching == 0 && h.inFlight == 0 && now.Sub(h.lastUsed) > rulesIdle {
			h.rules, h.robotsChecked = nil, false
		}
		settled := !h.notBefore.After(now) && h.robotsFetching == 0 && h.inFlight == 0 &&
			h.pace.Wait(now) == 0 && h.pace.Interval() <= h.floor
		forget := settled && now.Sub(h.lastUsed) > idle
		// With its rules dropped, a fresh state would differ from this one
		// only in what fadedHost keeps, and in reading its rules from the
		// file again, as a host whose rules were dropped does.
		fades := settled && !forget && now.Sub(h.lastUsed) > fadeIdle && h.rules == nil
		if (forget || fades) && h.abortRequests != nil {
			h.abortRequests() // nothing is in flight: this only releases the context
		}
		if fades {
			t.faded[name] = fade(h)
		}
		h.mu.Unlock()
		if forget || fades {
			delete(t.m, name)
		}
	}
	for name, f := range t.faded {
		if now.Sub(fromUnixNanos(f.lastUsed)) > idle {
			delete(t.faded, name)
		}
	}
}

// snapshot returns a copy of the display fields of every tracked host.
func (t *hostTable) snapshot(now time.Time) map[string]HostPace {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]HostPace, len(t.m)+len(t.faded))
	for name, h := range t.m {
		h.mu.Lock()
		out[name] = HostPace{Interval: h.pace.Interval(), Throttles: h.throttles, WaitUntil: h.notBefore}
		h.mu.Unlock()
	}
	for name, f := range t.faded {
		out[name] = HostPace{Interval: f.floor, Throttles: int(f.throttles)} // at its floor, no wait: or it would not fade
	}
	return out
}

// HostPace is the pace part of a host's display.
type HostPace struct {
	Interval  time.Duration // current minimum gap between request starts
	Throttles int           // 429s seen this run
	WaitUntil time.Time     // Retry-After wait, zero when none
}

// signals copies the local-fault guard's reading of every tracked host.
func (t *hostTable) signals() []hostReading {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]hostReading, 0, len(t.m)+len(t.faded))
	for name, h := range t.m {
		h.mu.Lock()
		out = append(out, hostReading{host: name, hostSignal: h.signal})
		h.mu.Unlock()
	}
	for name, f := range t.faded {
		out = append(out, hostReading{host: name, hostSignal: f.signal()})
	}
	return out
}

// abortAll cancels the requests in flight to every host.
func (t *hostTable) abortAll() {
	t.mu.Lock()
	hosts := make([]*hostState, 0, len(t.m))
	for _, h := range t.m {
		hosts = append(hosts, h)
	}
	t.mu.Unlock()
	for _, h := range hosts {
		h.abort()
	}
}
