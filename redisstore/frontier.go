package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/store"
)

// The fleet's frontier shares the crawl among processes by host: a
// process takes a host's lease from its shard's ready set, is then the only
// one to fetch that host's URLs (so --host-concurrency and --delay hold for
// the fleet, not per process), renews the lease while it works, and gives
// the host back when it runs dry, rests or is held. A process that dies
// stops renewing: its hosts fall due at their lease's expiry and another
// process takes them, with the URLs the dead one had in flight still
// queued (a URL leaves a host's queue only in the write that stores its
// result), so nothing is lost; they are fetched again.
//
// Writes (results, discovered URLs, deferrals, cases, breaker outcomes)
// are batched by one writer goroutine: one script call per host touched
// by a batch, pipelined, then one call per shard for the hosts given new
// URLs. While Redis cannot be reached no new lease is handed out, the
// writes wait in memory, one error is logged, and the crawl resumes when
// Redis answers again.

// FrontierOptions configure a fleet Frontier.
type FrontierOptions struct {
	// ID names this process in the owner hashes; unique in the fleet
	// (Start refuses an ID a live process holds).
	ID string
	// Instance names this run of the process in its heartbeats; default a
	// random name (NewInstance).
	Instance string
	// HostConcurrency caps the leases in flight per host, fleet-wide.
	HostConcurrency int
	// Hosts is how many hosts with work the process tries to hold.
	Hosts int
	// Lease is how long a host's lease lasts unrenewed. Default 10s, and
	// never less than MinLease(RequestTimeout).
	Lease time.Duration
	// RequestTimeout bounds a request: none is started on a host whose
	// lease could run out before it ends (zero: no such check).
	RequestTimeout time.Duration
	// Buffer is how many queued URLs per host are loaded at a time. Default 16.
	Buffer int
	// Breakers reads the shared breakers of hosts as they are taken.
	Breakers *Breakers
	// OnClaim is called with the shared breaker of every host taken, and
	// OnBreaker when a held host's breaker was changed by someone else (an
	// operator's pause); neither under a lock of the frontier.
	OnClaim, OnBreaker func(host string, b breaker.Breaker)
	// Archive, if set, writes the records of the pages a batch completes
	// before the batch is stored (see frontier.Options.Archive); its state
	// is kept under ID.
	Archive frontier.Archive
	Now     func() time.Time
	Logger  *slog.Logger
}

// HostsFor is how many hosts with work a process of workers, each host
// taking up to hostConcurrency of them, holds (FrontierOptions.Hosts):
// enough to keep its workers busy twice over, and no more, so that the
// hosts of a crawl are spread over the fleet instead of held by the first
// process.
func HostsFor(workers, hostConcurrency int) int {
	hostConcurrency = max(hostConcurrency, 1)
	return max(8, 2*((workers+hostConcurrency-1)/hostConcurrency))
}

func (o FrontierOptions) withDefaults() FrontierOptions {
	if o.HostConcurrency <= 0 {
		o.HostConcurrency = 1
	}
	if o.Hosts <= 0 {
		o.Hosts = 16
	}
	o.Lease = EffectiveLease(o.Lease, o.RequestTimeout)
	if o.Buffer <= 0 {
		o.Buffer = 16
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Instance == "" {
		o.Instance = NewInstance()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnClaim == nil {
		o.OnClaim = func(string, breaker.Breaker) {}
	}
	if o.OnBreaker == nil {
		o.OnBreaker = func(string, breaker.Breaker) {}
	}
	return o
}

// EffectiveLease is the lease a process given lease (0: 10s) holds with
// requests of up to timeout: at least MinLease(timeout).
func EffectiveLease(lease, timeout time.Duration) time.Duration {
	if lease <= 0 {
		lease = 10 * time.Second
	}
	return max(lease, MinLease(timeout))
}

// MinLease is the shortest lease a process whose requests take up to
// timeout may hold: renewed every fifth of a lease (renewEvery), a lease
// keeps about four fifths, and three quarters must outlast a request
// started just before a renewal, with a margin for the round trip.
func MinLease(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 0
	}
	return (timeout + leaseMargin) * 4 / 3
}

// leaseMargin is what a lease keeps beyond a request's timeout for the
// renewal's round trip and the manager's tick.
const leaseMargin = 250 * time.Millisecond

// heldScore is the ready score of a host held for a person: never due.
const heldScore = int64(1) << 50

// Frontier is the fleet's frontier for one process.
type Frontier struct {
	s *Store
	o FrontierOptions
	// skew is the server's clock less this process's, in ms (noteClock).
	skew atomic.Int64
	// afterArchiveState, set by tests only, runs in a write between the
	// archive's state and the hosts' scripts; an error ends the write
	// there, as an outage or a kill would.
	afterArchiveState func() error
	// afterHostScripts, set by tests only, runs in a write after the
	// hosts' scripts, before what follows them.
	afterHostScripts func() error
	// duringLook, set by tests only, runs in a look at the fleet after
	// its reads, before it tells whether the fleet is idle.
	duringLook func()

	seen *seenCache // the writer's

	mu       sync.Mutex
	hosts    map[string]*ownedHost
	leases   map[*frontier.Lease]leaseRef
	wake     chan struct{}
	inflight int
	feeding  int
	closed   bool
	// fleetIdle is set by the last look at the shards when no host of the
	// fleet had work, held hosts aside; heldHosts counts those.
	fleetIdle bool
	fleetHeld int
	// markLeft is set when a write failed with its queueing mark in the
	// fleet: the next write clears it (write; only the writer uses it).
	markLeft bool
	// queuedGen counts the writes that queued URLs on hosts: a look at
	// the fleet that saw it change meanwhile may have missed them.
	queuedGen  uint64
	jobs       []job
	writing    int // jobs the writer has taken and not finished
	down       bool
	downSince  time.Time
	fatal      error
	failed     chan struct{}
	kickWriter chan struct{}
	kickMgr    chan struct{}
	stop       chan struct{}
	done       sync.WaitGroup
	nextShard  int
	// listedNew is set by the writer when it listed hosts given new URLs.
	listedNew atomic.Bool
	// refused counts the writes the store refused because this process no
	// longer held the host's lease (fenced out).
	refused atomic.Int64
	// news holds what the work channel said since the manager last looked:
	// shards with hosts ready now, and the earliest time each has one ready
	// later (see listen).
	newsMu sync.Mutex
	news   map[int]time.Time
}

// leaseRef is a lease in flight: its host, and the host's lease token
// when it was handed out, which fences the lease's writes.
type leaseRef struct {
	h     *ownedHost
	token int64
}

// ownedHost is a host this process holds the lease of.
type ownedHost struct {
	name string
	buf  []store.Item
	// pending holds the URLs leased and not yet confirmed gone from the
	// host's queue in Redis: a reload must not offer them again.
	pending map[store.Hash]struct{}
	// settled holds the URLs whose writes were confirmed since the last
	// load began: that load may have read them still queued.
	settled  map[store.Hash]struct{}
	inflight int
	writes   int // jobs of this host not yet written
	readyAt  time.Time
	parked   time.Time
	held     bool
	queued   int64 // the queue's length at the last load
	nextDue  int64 // the earliest deferred URL's due time (ms), -1 for none
	stale    bool  // new URLs were queued since the last load
	loaded   bool
	gen      uint64 // the shared breaker's generation last seen
	// token is the host's lease token (lease.lua): every write for the
	// host carries it, and the store refuses it once another process has
	// taken the host. leaseEnd is when the lease runs out by this
	// process's clock, measured from before the call that set it.
	token    int64
	leaseEnd time.Time
}

func (h *ownedHost) hasWork() bool {
	return len(h.buf) > 0 || h.inflight > 0 || h.writes > 0 || h.queued > int64(len(h.pending)) || h.stale || !h.loaded
}

// job is one write for the writer.
type job struct {
	batch   *store.Batch
	host    string // the owned host whose pending URL the job settles, if any
	hash    store.Hash
	settles bool
	counted bool // counted in its host's writes
	outcome *outcome
	// reprieve, with outcome nil, is a local fault's end for host's shared
	// breaker, applied in order with the outcomes.
	reprieve *reprieve
	failAll  *store.Result // FailHost's template
	// token fences the job's writes for host (see ownedHost.token); 0: none.
	token int64
	// placement is where the archive wrote the completed page's records.
	placement string
}

type outcome struct {
	t      breaker.Ticket
	c      breaker.Class
	detail string
	at     time.Time
}

type reprieve struct {
	opened    uint64
	since, at time.Time
}

// Start claims the process's fleet ID (see ClaimID: refused with an
// *IDInUseError while a live process holds it, taken after a wait of up
// to half a lease from a process that died) and starts its frontier.
func Start(ctx context.Context, s *Store, o FrontierOptions) (*Frontier, error) {
	o = o.withDefaults()
	if err := s.ClaimID(ctx, o.ID, o.Instance, o.Lease/2, o.Now()); err != nil {
		return nil, err
	}
	return OpenFrontier(s, o), nil
}

// OpenFrontier starts the fleet frontier of one process, without claiming
// its ID (Start does).
func OpenFrontier(s *Store, o FrontierOptions) *Frontier {
	o = o.withDefaults()
	f := &Frontier{s: s, o: o, hosts: map[string]*ownedHost{}, leases: map[*frontier.Lease]leaseRef{},
		wake: make(chan struct{}), failed: make(chan struct{}), kickWriter: make(chan struct{}, 1),
		seen:    newSeenCache(seenCacheSlots),
		kickMgr: make(chan struct{}, 1), stop: make(chan struct{}), news: map[int]time.Time{}}
	f.done.Add(3)
	go f.writer()
	go f.manager()
	go f.listen()
	return f
}

func kick(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

func (f *Frontier) broadcastLocked() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// Add queues items never seen before, fleet-wide.
func (f *Frontier) Add(items ...store.Item) error {
	if len(items) == 0 {
		return nil
	}
	var b store.Batch
	for _, it := range items {
		b.AddEncoded(it, store.EncodeQueued(it))
	}
	return f.push(job{batch: &b})
}

func (f *Frontier) push(jobs ...job) error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return frontier.ErrClosed
	}
	if f.fatal != nil {
		f.mu.Unlock()
		return f.fatal
	}
	for i := range jobs {
		if h := f.hosts[jobs[i].host]; h != nil && jobs[i].host != "" {
			h.writes++
			jobs[i].counted = true
		}
	}
	f.jobs = append(f.jobs, jobs...)
	f.mu.Unlock()
	kick(f.kickWriter)
	return nil
}

// Next blocks until a URL of a held, ready host can be leased, ctx is done,
// or the whole fleet has nothing left to do.
func (f *Frontier) Next(ctx context.Context) (*frontier.Lease, error) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		l, wait, wake, err := f.tryNext()
		if l != nil || err != nil {
			return l, err
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
	}
}

func (f *Frontier) tryNext() (*frontier.Lease, time.Duration, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal != nil {
		return nil, 0, nil, f.fatal
	}
	if f.closed {
		return nil, 0, nil, frontier.ErrClosed
	}
	now := f.o.Now()
	wait := 200 * time.Millisecond
	if !f.down {
		var best *ownedHost
		for _, h := range f.hosts {
			if len(h.buf) == 0 || h.held || h.inflight >= f.o.HostConcurrency {
				continue
			}
			if left := h.leaseEnd.Sub(now); left < f.o.RequestTimeout {
				// The request could outlive the lease: wait for the renewal.
				wait = min(wait, 50*time.Millisecond)
				kick(f.kickMgr)
				continue
			}
			at := h.readyAt
			if h.parked.After(at) {
				at = h.parked
			}
			if at.After(now) {
				wait = min(wait, at.Sub(now))
				continue
			}
			if best == nil || h.readyAt.Before(best.readyAt) {
				best = h
			}
		}
		if best != nil {
			return f.leaseLocked(best), 0, nil, nil
		}
	}
	if f.idleLocked() {
		return nil, 0, nil, frontier.ErrExhausted
	}
	kick(f.kickMgr)
	return nil, wait, f.wake, nil
}

func (f *Frontier) leaseLocked(h *ownedHost) *frontier.Lease {
	it := h.buf[0]
	h.buf = h.buf[1:]
	h.pending[it.Hash] = struct{}{}
	h.inflight++
	f.inflight++
	l := &frontier.Lease{Item: it}
	f.leases[l] = leaseRef{h: h, token: h.token}
	if len(h.buf) < f.o.Buffer/2 {
		kick(f.kickMgr)
	}
	return l
}

// idleLocked: nothing here and nothing anywhere in the fleet, as the last
// look at the shards found, but held hosts.
func (f *Frontier) idleLocked() bool {
	if f.inflight > 0 || f.feeding > 0 || len(f.jobs) > 0 || f.writing > 0 || f.down || !f.fleetIdle {
		return false
	}
	for _, h := range f.hosts {
		if h.hasWork() && !h.held {
			return false
		}
	}
	return true
}

func (f *Frontier) end(l *frontier.Lease) *ownedHost {
	h := f.leases[l].h
	if h == nil {
		return nil
	}
	delete(f.leases, l)
	h.inflight--
	f.inflight--
	return h
}

// Release ends a lease unattempted: the URL goes back to its host's front.
func (f *Frontier) Release(l *frontier.Lease) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.end(l)
	if h == nil {
		return
	}
	delete(h.pending, l.Item.Hash)
	h.buf = append([]store.Item{l.Item}, h.buf...)
	f.broadcastLocked()
}

// Started records that the lease's request starts: its host may start
// another no earlier than next.
func (f *Frontier) Started(l *frontier.Lease, next time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.leases[l].h; h != nil && next.After(h.readyAt) {
		h.readyAt = next
	}
	f.broadcastLocked()
}

// CompleteWith ends a lease with its result and the URLs it found; attach,
// if not nil, goes to the archive with the write that stores the result,
// and also adds its operations to that write.
func (f *Frontier) CompleteWith(l *frontier.Lease, r *store.Result, found []store.Item, attach any, also ...func(*store.Batch)) error {
	var b store.Batch
	if attach != nil {
		b.Attach(attach)
	}
	b.CompleteRecord(l.Item, store.EncodeResult(l.Item, r))
	for _, it := range found {
		b.AddEncoded(it, store.EncodeQueued(it))
	}
	for _, add := range also {
		add(&b)
	}
	err := f.push(job{batch: &b, host: l.Item.Host, hash: l.Item.Hash, settles: true, token: f.tokenOf(l)})
	f.mu.Lock()
	f.end(l)
	f.broadcastLocked()
	f.mu.Unlock()
	return err
}

// tokenOf is the lease token l was handed out under.
func (f *Frontier) tokenOf(l *frontier.Lease) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leases[l].token
}

// Complete is CompleteWith without an attachment.
func (f *Frontier) Complete(l *frontier.Lease, r *store.Result, found []store.Item) error {
	return f.CompleteWith(l, r, found, nil)
}

// Defer ends a lease by parking its URL until due.
func (f *Frontier) Defer(l *frontier.Lease, it store.Item, due time.Time) error {
	var b store.Batch
	b.Defer(it, due)
	err := f.push(job{batch: &b, host: it.Host, hash: it.Hash, settles: true, token: f.tokenOf(l)})
	f.mu.Lock()
	f.end(l)
	f.broadcastLocked()
	f.mu.Unlock()
	return err
}

// Park keeps host from being offered before until; a long park gives the
// host back to the fleet until then.
func (f *Frontier) Park(host string, until time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil && until.After(h.parked) {
		h.parked = until
	}
}

// Unpark makes host ready at once.
func (f *Frontier) Unpark(host string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil {
		h.parked = time.Time{}
		f.broadcastLocked()
	}
}

// Hold keeps host from being offered until Unhold; it goes back to the
// fleet as held once its leases end.
func (f *Frontier) Hold(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil {
		h.held = true
	}
}

// Unhold releases a Hold.
func (f *Frontier) Unhold(host string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil && h.held {
		h.held = false
		f.broadcastLocked()
	}
}

// FailHost records every queued URL of host but those in flight as failed
// with template.
func (f *Frontier) FailHost(host string, template store.Result) error {
	f.mu.Lock()
	h := f.hosts[host]
	var token int64
	if h != nil {
		h.buf = nil
		token = h.token
	}
	f.mu.Unlock()
	if h == nil {
		return nil // another process holds it, and gives it up itself
	}
	return f.push(job{host: host, failAll: &template, token: token})
}

// Feed announces a producer of URLs: until done, the crawl cannot end.
func (f *Frontier) Feed() (done func()) {
	f.mu.Lock()
	f.feeding++
	f.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			f.feeding--
			f.broadcastLocked()
			f.mu.Unlock()
		})
	}
}

// HeldWork is the number of held hosts of the fleet with work: those
// listed as held in the shards' ready sets at the last look at the fleet,
// and this process's own not yet given back.
func (f *Frontier) HeldWork() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.fleetHeld
	for _, h := range f.hosts {
		if h.held && h.hasWork() {
			n++
		}
	}
	return n
}

// InFlight is the number of leases not yet ended.
func (f *Frontier) InFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.inflight
}

// Failed is closed when the frontier can no longer store anything.
func (f *Frontier) Failed() <-chan struct{} { return f.failed }

// Submit queues the operations fn adds to a batch. A batch with an
// operation the store cannot apply (see supportsOp) is refused whole, and
// nothing of it is queued.
func (f *Frontier) Submit(fn func(*store.Batch)) error {
	var b store.Batch
	fn(&b)
	err := b.Each(func(op store.Op) error {
		if !supportsOp(op.Kind) {
			return f.s.unsupportedOp(op.Kind)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return f.push(job{batch: &b})
}

// supportsOp reports whether the fleet's writer applies operations of
// kind. It does not apply what the store keeps by other means, or not at
// all: the shared breakers and their log change only through the
// frontier's Outcome (store.Capabilities.SharedBreakers); deferred URLs
// are promoted as a host's queue is loaded; and the store keeps no
// refresh lanes, and fails a host's URLs through the frontier's FailHost.
func supportsOp(kind store.OpKind) bool {
	switch kind {
	case store.OpAdd, store.OpRequeue, store.OpComplete, store.OpDefer, store.OpPutRobots, store.OpAppendCase,
		store.OpResolveCases, store.OpPutArchiveState, store.OpPutCapture, store.OpPutRunningAt, store.OpQueueRefreshes,
		store.OpPutHostPages:
		return true
	}
	return false
}

// Outcome queues one breaker outcome for the host's shared breaker.
func (f *Frontier) Outcome(t breaker.Ticket, c breaker.Class, detail string, at time.Time) {
	f.push(job{host: t.Host, outcome: &outcome{t: t, c: c, detail: detail, at: at}, token: f.hostToken(t.Host)})
}

// Reprieve queues the end of a local fault for each host's shared
// breaker (Breakers.Reprieve), after the outcomes queued before it: the
// outcome that opened a circuit reaches the store before its reprieve.
func (f *Frontier) Reprieve(hosts []breaker.Reprieved, since, at time.Time) {
	for _, h := range hosts {
		f.push(job{host: h.Host, reprieve: &reprieve{opened: h.Opened, since: since, at: at}})
	}
}

// hostToken is the token of a lease of host in flight (the request the
// outcome is of was sent under it), else of the host held; 0 when
// neither, for an outcome of a host this process never held.
func (f *Frontier) hostToken(host string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	for l, ref := range f.leases {
		if l.Item.Host == host {
			return ref.token
		}
	}
	if h := f.hosts[host]; h != nil {
		return h.token
	}
	return 0
}

// Refused is the number of writes the store refused because another
// process had taken their host's lease meanwhile.
func (f *Frontier) Refused() int64 { return f.refused.Load() }

// TryProbe takes the fleet's probe gate of a half-open host.
func (f *Frontier) TryProbe(ctx context.Context, host string, generation uint64) (bool, error) {
	return f.o.Breakers.TryProbe(ctx, host, generation)
}

// ForeignBreaker reads host's shared breaker unless this process holds
// the host (its engine's copy is then the current one, and outcomes not
// yet written would be lost from it); a host with none stored reads as a
// clean closed breaker.
func (f *Frontier) ForeignBreaker(ctx context.Context, host string) (breaker.Breaker, bool, error) {
	f.mu.Lock()
	_, held := f.hosts[host]
	f.mu.Unlock()
	if held {
		return breaker.Breaker{}, false, nil
	}
	b, _, err := f.o.Breakers.Get(ctx, host)
	if err != nil {
		return breaker.Breaker{}, false, err
	}
	return b, true, nil
}

// Deferred URLs fall due on the server's clock, as leases run out on it:
// a process whose clock runs ahead would otherwise make its own deferrals
// due late for the others and everyone's due early for itself. The times
// the queue scripts keep are this process's plus skew, the server's clock
// less this process's, measured at every renewal.

// noteClock measures skew from the server's time read by a round trip
// sent at sent and answered at got (this process's clock); a slow round
// trip says too little and is skipped.
func (f *Frontier) noteClock(sent, got, server time.Time) {
	rtt := got.Sub(sent)
	if server.IsZero() || rtt < 0 || rtt > 200*time.Millisecond {
		return
	}
	f.skew.Store(server.UnixMilli() - sent.Add(rtt/2).UnixMilli())
}

// serverMS is t, of this process's clock, on the server's (Unix ms).
func (f *Frontier) serverMS(t time.Time) int64 { return t.UnixMilli() + f.skew.Load() }

// localMS is a server's Unix ms on this process's clock; negative values
// (none) are kept.
func (f *Frontier) localMS(ms int64) int64 {
	if ms < 0 {
		return ms
	}
	return ms - f.skew.Load()
}

// Down reports whether Redis is unreachable right now.
func (f *Frontier) Down() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.down
}

// Close stores what is still waiting (for as long as Redis takes to come
// back, up to flushLimit), gives every host back to the fleet and stops.
func (f *Frontier) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	deadline := time.Now().Add(flushLimit)
	for {
		f.mu.Lock()
		left := len(f.jobs) + f.writing
		fatal := f.fatal
		f.mu.Unlock()
		if left == 0 || fatal != nil {
			break
		}
		if time.Now().After(deadline) {
			f.mu.Lock()
			f.closed = true
			f.mu.Unlock()
			close(f.stop)
			f.done.Wait()
			return fmt.Errorf("store %s: %d writes not stored after %s (their URLs stay queued and will be fetched again)", f.s.display, left, flushLimit)
		}
		kick(f.kickWriter)
		time.Sleep(10 * time.Millisecond)
	}
	f.mu.Lock()
	f.closed = true
	f.broadcastLocked()
	f.mu.Unlock()
	close(f.stop)
	f.done.Wait()
	f.releaseAll()
	if n := f.refused.Load(); n > 0 {
		f.o.Logger.Warn("writes refused this run: this process lost those hosts' leases to another, which fetched their URLs again",
			"store", f.s.display, "refused", n)
	}
	return f.fatal
}

// flushLimit is how long Close waits for Redis to take the last writes.
const flushLimit = 30 * time.Second

// releaseAll gives every held host back, ready now.
func (f *Frontier) releaseAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := f.o.Now().UnixMilli()
	// The host leases first: a host listed ready while its lease still
	// names this process could not be taken by another.
	leases := f.s.rdb.Pipeline()
	pipe := f.s.rdb.Pipeline()
	for name, h := range f.hosts {
		wait := politeWait(h, f.o.Now())
		var delay any = wait
		if h.held {
			delay = "held"
		} else if !h.hasWork() && h.nextDue >= 0 {
			delay = max(wait, h.nextDue-now)
		}
		f.leaseCall(ctx, leases, name, "release", f.o.ID, h.token, wait, "")
		f.shardCall(ctx, pipe, shardOf(name), "release", f.o.ID, name, "", delay)
	}
	f.s.endBeat(ctx, pipe, f.o.ID, f.o.Instance)
	_, err := leases.Exec(ctx)
	if err == nil || errors.Is(err, redis.Nil) {
		_, err = pipe.Exec(ctx)
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		f.o.Logger.Warn("give hosts back to the fleet", "store", f.s.display, "err", err,
			"note", "they fall due when their leases expire")
	}
}

func (f *Frontier) shardCall(ctx context.Context, pipe redis.Pipeliner, shard int, args ...any) *redis.Cmd {
	k := keysOfShard(shard)
	return shardScript.EvalSha(ctx, pipe, []string{k.ready, k.owner, k.touch, k.hosts}, args...)
}

func (f *Frontier) leaseCall(ctx context.Context, pipe redis.Pipeliner, host string, args ...any) *redis.Cmd {
	return leaseScript.EvalSha(ctx, pipe, []string{keysOf(host).lease}, args...)
}

func hashKey(h store.Hash) string { return hex.EncodeToString(h[:]) }

func parseHash(s string) (store.Hash, error) {
	var h store.Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("bad URL hash %q", s)
	}
	copy(h[:], b)
	return h, nil
}

func unixMS(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
