package frontier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/storage"
	"breakwater/store"

	"go.uber.org/goleak"
	"pgregory.net/rapid"
)

// TestMain fails the package if a writer or refill goroutine outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tb is the part of testing.TB that *rapid.T also has, so the helpers serve
// plain tests, benchmarks and property tests.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
}

// harness owns one database file and the frontier open on it, and can close
// and reopen both the way a restarted crawl would.
type harness struct {
	t    tb
	path string
	opts Options
	db   *storage.DB
	f    *Frontier
}

// newHarness opens a fresh database in dir (t.TempDir() for plain tests) and a
// frontier on it. Cleanup closes whatever is still open.
func newHarness(t tb, dir string, opts Options) *harness {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CommitEvery == 0 {
		// Tests observe each commit at synctest.Wait; a lingering writer
		// sleeps instead. TestCommitsLinger covers lingering.
		opts.CommitEvery = -1
	}
	h := &harness{t: t, path: filepath.Join(dir, "crawl.db"), opts: opts}
	h.open()
	t.Cleanup(func() {
		if h.f != nil {
			h.close()
		}
	})
	return h
}

func (h *harness) open() {
	h.t.Helper()
	db, err := storage.Open(h.path, nil)
	if err != nil {
		h.t.Fatalf("storage.Open: %v", err)
	}
	f, err := Open(db, h.opts)
	if err != nil {
		db.Close()
		h.t.Fatalf("frontier.Open: %v", err)
	}
	h.db, h.f = db, f
}

// close shuts down cleanly: every submitted operation is committed, leases
// still out stay queued in the file.
func (h *harness) close() {
	h.t.Helper()
	f, db := h.f, h.db
	h.f, h.db = nil, nil
	if err := f.Close(); err != nil {
		h.t.Errorf("Frontier.Close: %v", err)
	}
	if err := db.Close(); err != nil {
		h.t.Errorf("DB.Close: %v", err)
	}
}

// crash loses whatever the writer had not committed yet: the file is closed
// under the frontier, whose Close then only reaps its goroutine. ungate, if
// not nil, lets a writer blocked by gate go on and fail.
func (h *harness) crash(ungate func()) {
	h.t.Helper()
	f, db := h.f, h.db
	h.f, h.db = nil, nil
	if err := db.Close(); err != nil {
		h.t.Errorf("DB.Close: %v", err)
	}
	if ungate != nil {
		ungate()
	}
	_ = f.Close() // reports the failed commit of the lost operations
}

func (h *harness) reopen() {
	h.t.Helper()
	h.close()
	h.open()
}

func (h *harness) add(raws ...string) {
	h.t.Helper()
	items := make([]store.Item, len(raws))
	for i, raw := range raws {
		items[i] = item(h.t, raw)
	}
	if err := h.f.Add(items...); err != nil {
		h.t.Fatalf("Add: %v", err)
	}
}

func (h *harness) counts() store.Counts {
	h.t.Helper()
	c, err := h.db.Counts()
	if err != nil {
		h.t.Fatalf("Counts: %v", err)
	}
	return c
}

// queued lists the URLs of host still in the file's queue, in FIFO order.
func (h *harness) queued(host string) []string {
	h.t.Helper()
	items, err := h.db.LoadQueued(host, 0, 1<<30)
	if err != nil {
		h.t.Fatalf("LoadQueued(%s): %v", host, err)
	}
	urls := make([]string, len(items))
	for i, it := range items {
		urls[i] = it.URL
	}
	return urls
}

// results maps each stored result's URL to it.
func (h *harness) results() map[string]*store.Result {
	h.t.Helper()
	out := make(map[string]*store.Result)
	err := h.db.ForEachResult(func(r *store.Result) error {
		out[r.URL] = r
		return nil
	})
	if err != nil {
		h.t.Fatalf("ForEachResult: %v", err)
	}
	return out
}

func item(t tb, raw string) store.Item {
	t.Helper()
	it, err := NewItem(raw, 0, 0)
	if err != nil {
		t.Fatalf("NewItem(%q): %v", raw, err)
	}
	return it
}

func pageURL(host string, i int) string { return fmt.Sprintf("http://%s/p%d", host, i) }

func pages(host string, n int) []string {
	urls := make([]string, n)
	for i := range urls {
		urls[i] = pageURL(host, i)
	}
	return urls
}

func okResult(it store.Item) *store.Result {
	return &store.Result{URL: it.URL, FinalURL: it.URL, Host: it.Host, Status: 200, Depth: it.Depth}
}

// poll is a Next that waits for nothing but the frontier's own loads (a host
// activated because nothing else was ready): it returns a lease,
// ErrExhausted, or context.Canceled when Next would wait for time to pass
// or for another call.
func poll(f *Frontier) (*Lease, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for {
		f.mu.Lock()
		dormant, wake := f.dormant.Len(), f.wake
		f.mu.Unlock()
		l, err := f.Next(ctx)
		if !errors.Is(err, context.Canceled) {
			return l, err
		}
		f.mu.Lock()
		// A host activated by this call may have been loaded already, and
		// a scan it asked for may have brought in another meanwhile: each
		// load and scan wakes waiting Next calls, so a new wake channel
		// tells of the writer's work even when the counts look unchanged.
		progress := f.dormant.Len() != dormant || f.wake != wake || f.loading > 0 || f.scanWanted
		f.mu.Unlock()
		if !progress || !waitLoads(f) {
			return l, err
		}
	}
}

// waitLoads waits until the writer has served every pending load and scan; it
// reports whether they were all served. A writer stopped by a gate leaves
// them pending: after a minute (of fake time, in a bubble) it gives up.
func waitLoads(f *Frontier) bool {
	for {
		f.mu.Lock()
		pending, wake := f.loading > 0 || f.scanWanted, f.wake
		f.mu.Unlock()
		if !pending {
			return true
		}
		select {
		case <-wake: // each load, like each commit, wakes waiting Next calls
		case <-time.After(time.Minute):
			return false
		}
	}
}

func mustLease(t tb, f *Frontier) *Lease {
	t.Helper()
	l, err := poll(f)
	if err != nil {
		t.Fatalf("Next: %v, want a lease", err)
	}
	return l
}

func wantBlocked(t tb, f *Frontier) {
	t.Helper()
	l, err := poll(f)
	if l != nil {
		t.Fatalf("Next leased %s, want it to wait", l.Item.URL)
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Next: %v, want it to wait (context.Canceled from the poll)", err)
	}
}

func wantExhausted(t tb, f *Frontier) {
	t.Helper()
	l, err := poll(f)
	if l != nil {
		t.Fatalf("Next leased %s, want ErrExhausted", l.Item.URL)
	}
	if !errors.Is(err, ErrExhausted) {
		t.Fatalf("Next: %v, want ErrExhausted", err)
	}
}

func complete(t tb, f *Frontier, l *Lease, found ...store.Item) {
	t.Helper()
	if err := f.Complete(l, okResult(l.Item), found); err != nil {
		t.Fatalf("Complete(%s): %v", l.Item.URL, err)
	}
}

// gate blocks the writer inside a batch until the returned func is called,
// so a test can line up operations that must land in one commit.
func gate(t tb, f *Frontier) (open func()) {
	t.Helper()
	ch := make(chan struct{})
	if err := f.Submit(func(*store.Batch) { <-ch }); err != nil {
		t.Fatalf("Submit: %v", err)
	}
	var once sync.Once
	open = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(open)
	return open
}

// asyncNext runs Next in a goroutine; the channel yields its outcome.
type nextResult struct {
	lease *Lease
	err   error
	at    time.Time
}

// Inside a bubble its wait is capped at a day of fake time, so a Next that
// would wait forever fails the test instead of spinning through fake time.
func asyncNext(ctx context.Context, f *Frontier) <-chan nextResult {
	ch := make(chan nextResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(ctx, 24*time.Hour)
		defer cancel()
		l, err := f.Next(ctx)
		ch <- nextResult{l, err, time.Now()}
	}()
	return ch
}

// fakeClock is a manual clock for Options.Now outside synctest bubbles.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// poolURL is one spelling of a URL the property test may add; several
// spellings share a canonical form.
type poolURL struct{ raw, canon, host string }

// urlPool spells each of hosts x n pages three ways: as is, with a fragment,
// and with an upper-case host.
func urlPool(t tb, hosts []string, n int) []poolURL {
	t.Helper()
	var pool []poolURL
	for _, host := range hosts {
		for i := range n {
			canon := pageURL(host, i)
			for _, raw := range []string{canon, canon + "#frag", pageURL(strings.ToUpper(host), i)} {
				if c, err := Canonicalize(raw); err != nil || c != canon {
					t.Fatalf("Canonicalize(%q) = %q, %v; want %q", raw, c, err, canon)
				}
				pool = append(pool, poolURL{raw, canon, host})
			}
		}
	}
	return pool
}

// crawlModel is what the file and the scheduler should hold, keyed by
// canonical URL.
type crawlModel struct {
	hostOf    map[string]string
	seen      map[string]bool
	results   map[string]bool
	deferred  map[string]time.Time // due time
	leases    map[string]*modelLease
	notBefore map[string]time.Time // per host: latest Park or Started time
}

type modelLease struct {
	l *Lease
}

func newCrawlModel(pool []poolURL) *crawlModel {
	m := &crawlModel{hostOf: map[string]string{}, seen: map[string]bool{}, results: map[string]bool{},
		deferred: map[string]time.Time{}, leases: map[string]*modelLease{}, notBefore: map[string]time.Time{}}
	for _, p := range pool {
		m.hostOf[p.canon] = p.host
	}
	return m
}

// promote moves deferred URLs due by now back to the queue, as the writer
// has done once every goroutine has settled.
func (m *crawlModel) promote(now time.Time) {
	for u, due := range m.deferred {
		if !due.After(now) {
			delete(m.deferred, u)
		}
	}
}

// queued is every URL in the file's queue: seen, without a result, not
// deferred. Leased URLs are queued too.
func (m *crawlModel) queued() map[string]bool {
	q := map[string]bool{}
	for u := range m.seen {
		if _, deferred := m.deferred[u]; !deferred && !m.results[u] {
			q[u] = true
		}
	}
	return q
}

// offerable reports whether some queued URL belongs to a host with no lease
// out (HostConcurrency 1) and no Park or Started time still ahead: Next must
// not wait then.
func (m *crawlModel) offerable(now time.Time) bool {
	busy := map[string]bool{}
	for u := range m.leases {
		busy[m.hostOf[u]] = true
	}
	for u := range m.queued() {
		if host := m.hostOf[u]; !busy[host] && !m.notBefore[host].After(now) {
			return true
		}
	}
	return false
}

func (m *crawlModel) later(host string, at time.Time) {
	if at.After(m.notBefore[host]) {
		m.notBefore[host] = at
	}
}

// forgetLeases is what a restart does: leases and readiness live in memory only.
func (m *crawlModel) forgetLeases() {
	clear(m.leases)
	clear(m.notBefore)
}

// fileState reads the queue and results of hosts from the file by canonical
// URL, failing on any URL held twice.
func (h *harness) fileState(hosts []string) (queued, results map[string]bool) {
	h.t.Helper()
	queued, results = map[string]bool{}, map[string]bool{}
	for _, host := range hosts {
		for _, raw := range h.queued(host) {
			c, err := Canonicalize(raw)
			if err != nil || queued[c] {
				h.t.Fatalf("queue holds %q twice or unparsable (%v)", raw, err)
			}
			queued[c] = true
		}
	}
	for raw := range h.results() {
		c, err := Canonicalize(raw)
		if err != nil || results[c] || queued[c] {
			h.t.Fatalf("result %q duplicated, unparsable or still queued (%v)", raw, err)
		}
		results[c] = true
	}
	return queued, results
}

// leaseLog records the leases of concurrent workers: a URL leased while it
// is out, or any lease after some Next reported exhaustion, is an error.
type leaseLog struct {
	mu        sync.Mutex
	out       map[string]bool
	count     map[string]int
	exhausted bool
	errs      []error
}

func newLeaseLog() *leaseLog { return &leaseLog{out: map[string]bool{}, count: map[string]int{}} }

func (g *leaseLog) leased(u string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.out[u] {
		g.errs = append(g.errs, fmt.Errorf("%s leased while already leased", u))
	}
	if g.exhausted {
		g.errs = append(g.errs, fmt.Errorf("%s leased after a Next reported ErrExhausted", u))
	}
	g.out[u] = true
	g.count[u]++
}

func (g *leaseLog) ended(u string) {
	g.mu.Lock()
	delete(g.out, u)
	g.mu.Unlock()
}

func (g *leaseLog) sawExhausted() {
	g.mu.Lock()
	g.exhausted = true
	g.mu.Unlock()
}

func (g *leaseLog) fail(err error) {
	if err != nil {
		g.mu.Lock()
		g.errs = append(g.errs, err)
		g.mu.Unlock()
	}
}

// property drives TestNothingLost: one harness, its model, and the actions.
type property struct {
	h     *harness
	m     *crawlModel
	pool  []poolURL
	hosts []string
}

func (p *property) actions() map[string]func(*rapid.T) {
	return map[string]func(*rapid.T){
		"add": p.add,
		"next": func(rt *rapid.T) {
			synctest.Wait()
			p.next(rt)
		},
		"complete": p.complete,
		"defer":    p.deferLease,
		"release": func(rt *rapid.T) {
			u := p.pickLease(rt)
			p.h.f.Release(p.m.leases[u].l)
			delete(p.m.leases, u)
		},
		"started": func(rt *rapid.T) {
			u := p.pickLease(rt)
			next := time.Now().Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "pace")) * time.Second)
			p.h.f.Started(p.m.leases[u].l, next)
			p.m.later(p.m.hostOf[u], next)
		},
		"park": func(rt *rapid.T) {
			host := rapid.SampledFrom(p.hosts).Draw(rt, "host")
			until := time.Now().Add(time.Duration(rapid.IntRange(1, 3).Draw(rt, "park")) * time.Second)
			p.h.f.Park(host, until)
			p.m.later(host, until)
		},
		"sleep": func(rt *rapid.T) {
			time.Sleep(time.Duration(rapid.IntRange(1, 4).Draw(rt, "sleep")) * time.Second)
		},
		"reopen": func(*rapid.T) {
			p.h.reopen()
			p.m.forgetLeases()
		},
		"crash": func(*rapid.T) {
			synctest.Wait() // what was committed is all the model knows
			p.h.crash(nil)
			p.h.open()
			p.m.forgetLeases()
		},
	}
}

// run is rapid's Repeat with a step count of its own: each step commits to
// a real file, and rapid's default of 30 steps a case is too slow here.
func (p *property) run(rt *rapid.T, steps int) {
	actions := p.actions()
	names := slices.Sorted(maps.Keys(actions))
	needsLease := map[string]bool{"complete": true, "defer": true, "release": true, "started": true}
	p.check(rt)
	for range steps {
		name := rapid.SampledFrom(names).Draw(rt, "action")
		if needsLease[name] && len(p.m.leases) == 0 {
			name = "next"
		}
		actions[name](rt)
		p.check(rt)
	}
}

func (p *property) add(rt *rapid.T) {
	urls := rapid.SliceOfN(rapid.SampledFrom(p.pool), 1, 3).Draw(rt, "add")
	raws := make([]string, len(urls))
	for i, u := range urls {
		raws[i] = u.raw
		p.m.seen[u.canon] = true
	}
	p.h.add(raws...)
}

func (p *property) next(rt *rapid.T) {
	now := time.Now()
	p.m.promote(now)
	l, err := poll(p.h.f)
	switch {
	case errors.Is(err, ErrExhausted):
		if len(p.m.leases) > 0 || len(p.m.deferred) > 0 || len(p.m.queued()) > 0 {
			rt.Fatalf("ErrExhausted with %d leases, %d deferred, %d queued", len(p.m.leases), len(p.m.deferred), len(p.m.queued()))
		}
	case errors.Is(err, context.Canceled):
		if p.m.offerable(now) {
			rt.Fatalf("Next waits though a URL may be offered (queued %v, leases %d)", p.m.queued(), len(p.m.leases))
		}
	case err != nil:
		rt.Fatalf("Next: %v", err)
	default:
		c := mustCanon(rt, l.Item.URL)
		if !p.m.queued()[c] || p.m.leases[c] != nil {
			rt.Fatalf("leased %s, which is not queued or already leased", l.Item.URL)
		}
		p.m.leases[c] = &modelLease{l: l}
	}
}

func (p *property) pickLease(rt *rapid.T) string {
	keys := slices.Sorted(maps.Keys(p.m.leases))
	return rapid.SampledFrom(keys).Draw(rt, "lease")
}

func (p *property) complete(rt *rapid.T) {
	u := p.pickLease(rt)
	found := rapid.SliceOfN(rapid.SampledFrom(p.pool), 0, 2).Draw(rt, "found")
	items := make([]store.Item, len(found))
	for i, f := range found {
		items[i] = item(rt, f.raw)
		p.m.seen[f.canon] = true
	}
	complete(rt, p.h.f, p.m.leases[u].l, items...)
	p.m.results[u] = true
	delete(p.m.leases, u)
}

func (p *property) deferLease(rt *rapid.T) {
	u := p.pickLease(rt)
	l := p.m.leases[u].l
	it := l.Item
	it.Attempts++
	due := time.Now().Add(time.Duration(rapid.IntRange(0, 3).Draw(rt, "due")) * time.Second)
	if err := p.h.f.Defer(l, it, due); err != nil {
		rt.Fatalf("Defer: %v", err)
	}
	p.m.deferred[u] = due
	delete(p.m.leases, u)
}

func (p *property) check(rt *rapid.T) {
	synctest.Wait()
	p.m.promote(time.Now())
	queued, results := p.h.fileState(p.hosts)
	if want := p.m.queued(); !maps.Equal(queued, want) {
		rt.Fatalf("file queue %v, want %v", slices.Sorted(maps.Keys(queued)), slices.Sorted(maps.Keys(want)))
	}
	if !maps.Equal(results, p.m.results) {
		rt.Fatalf("file results %v, want %v", slices.Sorted(maps.Keys(results)), slices.Sorted(maps.Keys(p.m.results)))
	}
	want := store.Counts{Seen: int64(len(p.m.seen)), Queued: int64(len(queued)),
		Deferred: int64(len(p.m.deferred)), Fetched: int64(len(results))}
	if c := p.h.counts(); c != want {
		rt.Fatalf("counts %+v, want %+v", c, want)
	}
	if got := p.h.f.InFlight(); got != len(p.m.leases) {
		rt.Fatalf("InFlight = %d, want %d", got, len(p.m.leases))
	}
	if got, want := activeSizesCounted(p.h.f); got != want {
		rt.Fatalf("activeSizes %v, want %v recounted from the hosts", got, want)
	}
}

// activeSizesCounted returns the frontier's running count of active hosts by
// size class, and the same count recomputed from its hosts.
func activeSizesCounted(f *Frontier) (got, want [len(Frontier{}.activeSizes)]int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hosts {
		if c := sizeClass(h.queued()); h.active && c > 0 {
			want[c]++
		}
	}
	return f.activeSizes, want
}

// drain ends the leases still out and fetches everything left.
func (p *property) drain(rt *rapid.T) {
	for _, u := range slices.Sorted(maps.Keys(p.m.leases)) {
		complete(rt, p.h.f, p.m.leases[u].l)
		p.m.results[u] = true
		delete(p.m.leases, u)
	}
	for range 1000 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // of fake time
		l, err := p.h.f.Next(ctx)
		cancel()
		if errors.Is(err, ErrExhausted) {
			break
		}
		if err != nil {
			rt.Fatalf("drain: Next: %v", err)
		}
		c := mustCanon(rt, l.Item.URL)
		if p.m.results[c] {
			rt.Fatalf("drain leased %s again", l.Item.URL)
		}
		p.h.f.Started(l, time.Now())
		complete(rt, p.h.f, l)
		p.m.results[c] = true
		delete(p.m.deferred, c)
	}
	p.check(rt)
	if len(p.m.results) != len(p.m.seen) {
		rt.Fatalf("after drain %d results for %d URLs", len(p.m.results), len(p.m.seen))
	}
}

func mustCanon(t tb, raw string) string {
	t.Helper()
	c, err := Canonicalize(raw)
	if err != nil {
		t.Fatalf("Canonicalize(%q): %v", raw, err)
	}
	return c
}
