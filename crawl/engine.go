package crawl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/store"
	"breakwater/warc"
)

// Engine runs one crawl over one database file.
type Engine struct {
	opts    Options
	db      Store
	caps    store.Capabilities // what db can do (see Store)
	front   frontier.Queue
	fetcher Fetcher
	archive *warc.Writer // nil without --warc
	// closeHost closes one host's connections when its circuit opens; a
	// no-op for a fetcher that has none of its own.
	closeHost    func(host string)
	closeFetcher func()
	breakers     *breaker.Registry
	budget       *RetryBudget
	guard        *faultGuard // nil when --local-fault-hosts is 0
	hosts        *hostTable
	scope        *scope
	token        string // product token: robots.txt group and refusal matching
	log          *slog.Logger

	fetchCtx  context.Context // cancelled StopGrace after a stop: in-flight requests end
	pageCap   *pageCap        // --max-pages (pagecap.go)
	hostPages *hostPages      // with --max-pages-per-host; nil without (hostcap.go)
	givenUp   sync.Map        // host -> time.Time of its last FailHost
	refresh   refresher       // --recrawl-after's walk over the results (recrawl.go)
	widen     widening        // a wider scope's reading of the link graph (widen.go)
	seedsRead seedRefresh     // a fleet's seed hosts as last read (fleetscope.go)
	persistMu sync.Mutex
	holdMu    sync.Mutex // serializes syncHold
	// seedsFetched and seedsFailed count this run's outcomes of seeds and
	// of the redirects they lead to (depth 0): a 2xx, or a failure.
	seedsFetched, seedsFailed atomic.Int64
	// seedsBlocked counts the seeds robots.txt kept out.
	seedsBlocked atomic.Int64
	// fetched and failed count the results this run's leases stored.
	fetched, failed atomic.Int64
	// skipped counts the results of URLs the crawl chose not to fetch
	// (robots.txt, a narrowed scope, a host's page cap) and of missing
	// sitemaps: they are neither.
	skipped  atomic.Int64
	runStart time.Time // when New made the engine (Run follows at once), for Progress
	// archiveFaults and archiveRetries: the pages whose records could not
	// be made, and how often a page was deferred for it (archive.go).
	archiveFaults  archiveFaults
	archiveRetries atomic.Int64
	// halted is closed by halt, which stops the run for a fault that
	// retrying cannot mend (the archive's); haltErr is the first such,
	// which Run returns.
	halted   chan struct{}
	haltOnce sync.Once
	haltErr  error
}

// Summary is how a run ended.
type Summary struct {
	Exhausted bool         // no work left at all
	Counts    store.Counts // the whole crawl's, at the end
	// Fetched and Failed are this run's: results stored as pages (a 304
	// refresh too) and as failures (a host given up on included); URLs
	// robots.txt, a narrowed scope, a host's page cap or a trap rule kept
	// out are neither.
	Fetched, Failed int64
	// SeedsFetched and SeedsFailed count this run's seeds (and the pages
	// they redirect to) fetched with a 2xx, and failed; both zero for a run
	// given no seeds (a resume), whose depth-0 URLs are an earlier run's.
	SeedsFetched, SeedsFailed int64
	// SeedsBlocked counts this run's seeds robots.txt disallows: a crawl
	// whose every seed is blocked did nothing the user asked for.
	SeedsBlocked int64
	// HeldWork counts the hosts held (paused, or with an open case) with
	// URLs left: work that waits for a person.
	HeldWork int
	// ArchiveRetries counts the times this run deferred a page, to be
	// fetched again, because its records could not be made for the archive.
	ArchiveRetries int64
	Duration       time.Duration
	// Why says in a few words why the run ended.
	Why string
}

// idleConnsFor sizes the fetcher's idle pool. Workers that find a loaded
// host busy wake another, so the hosts in rotation grow with the workers:
// 250-360 for 64 workers on the bench's 800-host site, about 5 a worker.
// A pool smaller than the rotation redials every request (a round trip,
// on https a handshake); each idle connection holds about 20 KB, and a
// pool that fills up as more hosts join the rotation shows as memory
// growth over a crawl (16 a worker: +20% over a 100k-page crawl).
func idleConnsFor(workers int) int { return max(fetch.DefaultIdleConns, 8*workers) }

// Fetcher makes one request and never returns nil; *fetch.Fetcher is the
// real one. A fetcher that also has CloseHost(host string) and Close()
// methods has them called when a host's circuit opens and when the crawl
// ends.
type Fetcher interface {
	Fetch(ctx context.Context, req fetch.Request) *fetch.Response
}

// New prepares a crawl over db: it validates opts, loads what the file
// knows (seeds, breaker state) and opens the frontier. Run must follow.
func New(opts Options, db Store) (*Engine, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	caps := db.Capabilities()
	if err := opts.ValidateFor(caps); err != nil {
		return nil, err
	}
	e := &Engine{opts: opts, db: db, caps: caps, token: robots.ProductToken(opts.UserAgent), log: opts.Logger,
		hosts: newHostTable(opts.Delay), pageCap: newPageCap(opts.MaxPages), hostPages: newHostPages(opts.MaxPagesPerHost),
		runStart: opts.Now(), halted: make(chan struct{})}
	e.budget = NewRetryBudget(opts.RetryBudget, time.Minute, 3)
	e.guard = newFaultGuard(opts.LocalFault)
	e.breakers = breaker.NewRegistry(opts.breakerConfig(), e.onTransition)
	if err := e.loadBreakers(); err != nil {
		return nil, err
	}
	if err := e.prepareSeeds(); err != nil {
		return nil, err
	}
	// The fleet ID is taken before anything is written under it, and
	// after the seeds, whose settings mark an empty store as a crawl's.
	if err := e.claimProcess(); err != nil {
		return nil, err
	}
	if err := e.joinFleetPages(); err != nil { // pagecap.go
		return nil, err
	}
	// The frontier opens here, not in Run, so that the control socket can
	// answer for this engine as soon as it exists. Run closes it.
	if err := e.openArchive(); err != nil {
		return nil, err
	}
	front, err := e.openFrontier()
	if err != nil {
		e.closeArchive()
		return nil, err
	}
	e.front = front
	if err := e.useFetcher(opts.Fetcher); err != nil {
		front.Close()
		e.closeArchive()
		return nil, err
	}
	return e, nil
}

// useFetcher installs f, or a fetch.Fetcher built from the options when f
// is nil: their headers, cookies and proxy included.
func (e *Engine) useFetcher(f Fetcher) error {
	o := e.opts
	if f == nil {
		fo := fetch.Options{UserAgent: o.UserAgent, Timeout: o.Timeout,
			ConnectTimeout: o.ConnectTimeout, MaxBody: o.MaxBody, AllowPrivate: o.AllowPrivate,
			MaxConnsPerHost: o.HostConcurrency, IdleConns: idleConnsFor(o.Workers),
			Refuse: e.circuitOpen, Now: o.Now, Record: o.WARC.Dir != "", RecordMax: o.WARC.MaxRecord,
			SpoolDir: o.WARC.Dir}
		var err error
		if fo.Header, err = o.requestHeader(); err != nil {
			return err
		}
		if o.Cookies != "" {
			// The file's cookies as given, beside the jar servers update:
			// a request to a host that is not to get them leaves them out.
			if fo.Jar, fo.UserCookies, err = fetch.LoadUserCookiesFile(o.Cookies); err != nil {
				return fmt.Errorf("--cookies: %w", err)
			}
		}
		if o.Proxy != "" {
			if fo.Proxy, err = fetch.ParseProxy(o.Proxy); err != nil {
				return err
			}
		}
		f = fetch.New(fo)
	}
	e.fetcher, e.closeHost, e.closeFetcher = f, func(string) {}, func() {}
	if c, ok := f.(interface{ CloseHost(string) }); ok {
		e.closeHost = c.CloseHost
	}
	if c, ok := f.(interface{ Close() }); ok {
		e.closeFetcher = c.Close
	}
	return nil
}

// circuitOpen reports whether host's circuit is open. The fetcher closes a
// connection that completes for such a host: requests cut short when the
// circuit opened may still be dialling, or redialling as net/http retries
// a GET whose connection was closed under it, and their connections would
// otherwise wait idle in the pool, open to a host known to be down.
//
// With the breaker off (--breaker=false), a circuit left open by an earlier
// run admits every request, so only a held host is refused here.
func (e *Engine) circuitOpen(host string) bool {
	b, ok := e.breakers.Get(host)
	if !ok || b.State != breaker.Open || e.guard.probes(host) {
		return false
	}
	return e.opts.BreakerEnabled || b.Hold != breaker.NoHold
}

// Run crawls until the frontier is exhausted, ctx is cancelled, or
// MaxDuration or MaxPages is reached.
func (e *Engine) Run(ctx context.Context) (Summary, error) {
	defer applyMemoryLimit(e.opts.MemoryLimit)()
	defer holdHeapFloor(heapFloorUnder(e.opts.MemoryLimit))()
	start := e.opts.Now()
	before, err := e.db.Counts()
	if err != nil {
		return Summary{}, err
	}
	go e.feedSeeds(e.front.Feed())
	e.startRefresh()

	stopCtx, stop := context.WithCancel(ctx)
	defer stop()
	if e.opts.MaxDuration > 0 {
		stopCtx, stop = context.WithTimeout(stopCtx, e.opts.MaxDuration)
		defer stop()
	}
	fetchCtx, cancelFetches := context.WithCancel(context.Background())
	defer cancelFetches()
	e.fetchCtx = fetchCtx
	e.guard.start(fetchCtx)
	if e.widen.pending {
		go e.feedWidened(stopCtx, e.front.Feed()) // widen.go
	}
	if e.caps.SharedScope {
		go e.watchSeeds(stopCtx.Done()) // fleetscope.go
	}
	go func() {
		select {
		case <-stopCtx.Done():
			time.AfterFunc(e.opts.StopGrace, cancelFetches)
		case <-e.front.Failed():
			// Nothing more can be stored (a full or read-only disk): a
			// fetch under way is wasted, and waiting --timeout for it
			// would only delay the exit that reports the failure.
			stop()
			cancelFetches()
		case <-e.halted:
			// Nothing more can be archived: the same.
			stop()
			cancelFetches()
		}
	}()

	exhausted := e.runWorkers(stopCtx)
	stop()
	e.leaveFleetPages()
	e.guard.stop()
	e.heartbeat(e.opts.Now())
	e.persistBreakers()
	closeErr := errors.Join(e.front.Close(), e.closeArchive())
	if closeErr == nil {
		closeErr = e.storeLinkScope()
	}
	e.closeFetcher()
	counts, cerr := e.db.Counts()
	sum := Summary{Exhausted: exhausted, Counts: counts, HeldWork: e.front.HeldWork(),
		Duration: e.opts.Now().Sub(start), SeedsFetched: e.seedsFetched.Load(), SeedsFailed: e.seedsFailed.Load(),
		SeedsBlocked: e.seedsBlocked.Load(),
		// URLs failed when their host was given up on have no lease: the
		// file's count tells them (it can also fall, as --retry-failed and
		// refreshes replace results).
		Fetched: e.fetched.Load(), Failed: e.failed.Load(), ArchiveRetries: e.archiveRetries.Load()}
	if e.caps.SoleWriter {
		// Only this process writes the store: its count is this run's.
		sum.Failed = max(sum.Failed, counts.Failed-before.Failed-e.skipped.Load())
	}
	if len(e.opts.Seeds) == 0 && e.opts.SeedsFile == "" {
		// A resume: URLs of depth 0 left over are not this run's seeds.
		sum.SeedsFetched, sum.SeedsFailed, sum.SeedsBlocked = 0, 0, 0
	}
	if sum.HeldWork > 0 {
		sum.Exhausted = false
	}
	sum.Why = e.why(ctx, sum, exhausted)
	return sum, errors.Join(e.haltError(), closeErr, cerr)
}

// halt stops the run with err: Run ends as for a failed commit, and
// returns it.
func (e *Engine) halt(err error) {
	e.haltOnce.Do(func() {
		e.haltErr = err
		close(e.halted)
	})
}

// haltError is the error halt was given, if it was called.
func (e *Engine) haltError() error {
	select {
	case <-e.halted:
		return e.haltErr
	default:
		return nil
	}
}

// why names the reason a run ended, for its last line; ranDry says the
// frontier had nothing left to lease (held hosts aside).
func (e *Engine) why(ctx context.Context, sum Summary, ranDry bool) string {
	switch {
	case sum.Exhausted:
		return "no URL left to fetch"
	case ctx.Err() != nil:
		return "stopped by a signal"
	case e.pageCap.reached():
		return e.pageCap.why()
	case e.opts.MaxDuration > 0 && sum.Duration >= e.opts.MaxDuration:
		return fmt.Sprintf("--max-duration %s reached", e.opts.MaxDuration)
	case ranDry && sum.HeldWork > 0:
		return fmt.Sprintf("only URLs of held hosts are left (hosts held, paused or with a case: %d): they wait for a person", sum.HeldWork)
	}
	return "stopped with work left"
}

// runWorkers runs the worker pool and the housekeeping loop; it reports
// whether the frontier ran dry (as opposed to being stopped).
func (e *Engine) runWorkers(ctx context.Context) bool {
	var exhausted atomic.Bool
	var wg sync.WaitGroup
	workCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	for range e.opts.Workers {
		wg.Go(func() {
			if e.work(workCtx) {
				exhausted.Store(true)
				cancel()
			}
		})
	}
	housekeeping := make(chan struct{})
	go func() {
		defer close(housekeeping)
		e.housekeep(workCtx)
	}()
	wg.Wait()
	cancel()
	<-housekeeping
	return exhausted.Load()
}

// work takes leases until there are none; it returns true when the frontier
// is exhausted.
func (e *Engine) work(ctx context.Context) bool {
	for ctx.Err() == nil {
		if e.pageCap.reached() {
			return false
		}
		if e.guard.wait(ctx) != nil {
			return false
		}
		lease, err := e.front.Next(ctx)
		switch {
		case errors.Is(err, frontier.ErrExhausted):
			return true
		case err != nil:
			if ctx.Err() == nil {
				e.log.Error("frontier failed", "err", err)
			}
			return false
		}
		e.handle(lease)
	}
	return false
}

func (e *Engine) housekeep(ctx context.Context) {
	every := e.opts.housekeepEvery
	if every <= 0 {
		every = 500 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var report <-chan time.Time // nil: never
	if every := e.opts.ProgressEvery; every >= 0 {
		if every == 0 {
			every = 30 * time.Second
		}
		t := time.NewTicker(every)
		defer t.Stop()
		report = t.C
	}
	var beat time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			now := e.opts.Now()
			if now.Sub(beat) >= heartbeatEvery {
				beat = now
				e.heartbeat(now)
			}
			e.persistBreakers()
			e.watchLocalFault(now)
			e.giveUpHosts(now)
			e.refreshTick(now)
			e.hosts.prune(now, time.Minute)
			e.budget.Prune(now)
		case <-report:
			e.logProgress()
		}
	}
}

// heartbeatEvery is how often a running crawl records that it runs: the
// next run counts a host's down time only up to the last heartbeat.
const heartbeatEvery = 5 * time.Second

func (e *Engine) heartbeat(now time.Time) {
	e.submit(func(b *store.Batch) { b.PutRunningAt(now) })
}

// prepareSeeds checks every seed, records the seeds' hosts in the file (so
// a resumed crawl keeps its scope without its seed list) and, with
// RetryFailed, requeues failed URLs. The seeds themselves are enqueued by
// feedSeeds once the crawl runs.
func (e *Engine) prepareSeeds() error {
	stored := map[string]json.RawMessage{}
	if data, err := e.db.Settings(); err == nil {
		if err := json.Unmarshal(data, &stored); err != nil {
			return fmt.Errorf("read stored crawl settings: %w", err)
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	var seedHosts []string
	if raw, ok := stored["seed_hosts"]; ok {
		if err := json.Unmarshal(raw, &seedHosts); err != nil {
			return fmt.Errorf("read stored seed hosts: %w", err)
		}
	}
	storedHosts := len(seedHosts)
	hosts := map[string]bool{}
	for _, h := range seedHosts {
		hosts[h] = true
	}
	var blocked seedsBlocked
	err := e.eachSeed(e.log, func(it store.Item) error {
		blocked.check(it, e.opts.AllowPrivate)
		if !hosts[it.Host] {
			// A copy: the host is a slice of the seed's line, which the
			// scope would otherwise keep whole for every seed host.
			host := strings.Clone(it.Host)
			hosts[host] = true
			seedHosts = append(seedHosts, host)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := blocked.verdict(e.log); err != nil {
		return err
	}
	e.scope = newScope(&e.opts, seedHosts)
	if e.caps.SharedScope {
		if err := e.shareScope(seedHosts[storedHosts:]); err != nil { // fleetscope.go
			return err
		}
		return e.requeueFailed()
	}
	if err := e.planWidening(stored, seedHosts); err != nil { // widen.go
		return err
	}
	// The seed hosts and, when ResolveSettings merged them, the crawl's
	// other settings, in one write; without them the stored ones stay.
	if s := e.opts.settings; s != nil {
		merged, _ := json.Marshal(s)
		json.Unmarshal(merged, &stored)
	}
	stored["seed_hosts"], _ = json.Marshal(seedHosts)
	data, _ := json.Marshal(stored)
	if err := e.db.PutSettings(data); err != nil {
		return fmt.Errorf("store crawl settings: %w", err)
	}
	return e.requeueFailed()
}

// requeueFailed queues the stored failures again for --retry-failed.
func (e *Engine) requeueFailed() error {
	if !e.opts.RetryFailed {
		return nil
	}
	n, err := e.db.RequeueFailed()
	if err != nil {
		return err
	}
	e.log.Info("requeued failed URLs", "count", n)
	return nil
}

// eachSeed calls fn with every seed, from Seeds and then SeedsFile, read as
// a stream so a million seeds never sit in memory at once. Seeds read as
// http:// for want of a scheme are logged to log, if not nil.
func (e *Engine) eachSeed(log *slog.Logger, fn func(store.Item) error) error {
	each := func(url string) error {
		it, err := frontier.NewItem(url, 0, 0)
		if err != nil {
			return fmt.Errorf("seed %q: %w", url, err)
		}
		return fn(it)
	}
	for _, raw := range e.opts.Seeds {
		url, schemeless, err := NormalizeSeed(raw)
		if err != nil {
			return err
		}
		if schemeless && log != nil {
			log.Info("seed without a scheme read as http://", "seed", raw, "url", url)
		}
		if err := each(url); err != nil {
			return err
		}
	}
	if e.opts.SeedsFile == "" {
		return nil
	}
	f, err := os.Open(e.opts.SeedsFile)
	if err != nil {
		return fmt.Errorf("seeds: %w", err)
	}
	defer f.Close()
	return ForEachSeed(f, e.opts.SeedsFile, log, each)
}

// feedSeeds enqueues the seeds in chunks while the workers already crawl.
// The frontier counts the feed as pending work, so the crawl cannot end
// before the last seed is in.
func (e *Engine) feedSeeds(done func()) {
	defer done()
	const chunk = 4096
	batch := make([]store.Item, 0, chunk)
	flush := func() error {
		err := e.front.Add(batch...)
		batch = make([]store.Item, 0, chunk)
		return err
	}
	err := e.eachSeed(nil, func(it store.Item) error {
		batch = append(batch, it)
		if len(batch) == chunk {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		e.log.Error("enqueue seeds", "err", err)
	}
}
