package crawl

import (
	"context"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/backend"
	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/redisstore"
	"breakwater/redisstore/redistest"
	"breakwater/storage"
	"breakwater/store"
)

// opLog counts the batch operations the engine submits, by kind.
type opLog struct {
	mu    sync.Mutex
	kinds map[store.OpKind]int
}

func (l *opLog) add(k store.OpKind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kinds == nil {
		l.kinds = map[store.OpKind]int{}
	}
	l.kinds[k]++
}

func (l *opLog) counts() map[store.OpKind]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return maps.Clone(l.kinds)
}

// loggedStore is a store with the capabilities caps (the store's own if
// zero), whose frontier logs every operation the engine submits.
type loggedStore struct {
	Store
	caps *store.Capabilities
	log  *opLog
}

func (s loggedStore) Capabilities() store.Capabilities {
	if s.caps != nil {
		return *s.caps
	}
	return s.Store.Capabilities()
}

func (s loggedStore) OpenFrontier(cfg frontier.Config) (frontier.Queue, error) {
	q, err := s.Store.OpenFrontier(cfg)
	if err != nil {
		return nil, err
	}
	return loggedQueue{Queue: q, log: s.log}, nil
}

type loggedQueue struct {
	frontier.Queue
	log *opLog
}

// CompleteWith logs the operations also adds to the completing batch.
func (q loggedQueue) CompleteWith(l *frontier.Lease, r *store.Result, found []store.Item, attach any, also ...func(*store.Batch)) error {
	for _, add := range also {
		var b store.Batch
		add(&b)
		_ = b.Each(func(op store.Op) error { q.log.add(op.Kind); return nil })
	}
	return q.Queue.CompleteWith(l, r, found, attach, also...)
}

// Submit logs the operations fn adds, not those already in the batch
// (another submit's, or the frontier's own).
func (q loggedQueue) Submit(fn func(*store.Batch)) error {
	return q.Queue.Submit(func(b *store.Batch) {
		before := b.Len()
		fn(b)
		i := 0
		b.Each(func(op store.Op) error {
			if i >= before {
				q.log.add(op.Kind)
			}
			i++
			return nil
		})
	})
}

// unsharedOps are the operations a store with shared breakers and no
// refresh lanes does not apply: the engine must not build
// them for it.
var unsharedOps = []store.OpKind{store.OpPutBreaker, store.OpDeleteBreaker, store.OpAppendTransition,
	store.OpPromote, store.OpQueueRefreshes, store.OpPutLinks}

// A crawl on a store whose breakers are shared and which keeps no refresh
// lanes submits no breaker, transition, promotion or refresh operation,
// though its breakers open and close; the same crawl on the file
// submits them. A manual change through the engine is refused.
func TestCrawlSendsNoOpTheStoreLacks(t *testing.T) {
	fleetLike := store.Capabilities{Name: "--store redis://", SharedBreakers: true}
	for _, tc := range []struct {
		name   string
		caps   *store.Capabilities
		shared bool
	}{
		{"file", nil, false},
		{"shared breakers, no refresh lanes", &fleetLike, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db, err := storage.Open(filepath.Join(t.TempDir(), "crawl.db"), nil)
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				log := &opLog{}
				opts := deadHostOptions()
				opts.Seeds = []string{aRoot}
				f := deadHost(linkedToDead(6), "dead.test", opts.Timeout)
				opts.Fetcher, opts.Now, opts.Logger = f, time.Now, rigLogger(t)
				e, err := New(opts, loggedStore{Store: backend.File(db), caps: tc.caps, log: log})
				if err != nil {
					t.Fatal(err)
				}
				f.refuse = e.circuitOpen
				if err := e.Control().Pause("elsewhere.test", "look"); tc.shared != errors.Is(err, store.ErrUnsupported) {
					t.Errorf("pause through the engine: %v (shared breakers: %v)", err, tc.shared)
				} else if !tc.shared {
					e.Control().Unpause("elsewhere.test")
				}
				if _, err := e.Run(t.Context()); err != nil {
					t.Fatal(err)
				}
				checkSubmitted(t, log.counts(), tc.shared, hostDown(t, e.db))
			})
		})
	}
}

// The same on a fleet's store (a real redis-server), in real time.
func TestFleetCrawlSendsNoOpTheStoreLacks(t *testing.T) {
	srv := redistest.Start(t)
	st, err := redisstore.Open(t.Context(), srv.URL(), redisstore.Create)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := &opLog{}
	s := site{}.chain("a.test", 6)
	for i := range 6 {
		s[chainURL("dead.test", i)] = page{status: 503}
		u := chainURL("a.test", i)
		s[u] = htmlPage(u, chainURL("a.test", (i+1)%6), chainURL("dead.test", i))
	}
	opts := rigOptions(aRoot)
	opts.Scope = ScopeAny
	opts.Fleet = FleetOptions{ID: "p1", Lease: time.Second}
	opts.Breaker = breaker.Config{Threshold: 3, Rest: 100 * time.Millisecond, Probes: 1}
	opts.GiveUpAfter = 500 * time.Millisecond
	opts.RetryBase, opts.RetryMax, opts.RetryBudget = 10*time.Millisecond, 50*time.Millisecond, 1
	f := siteFetcher(s)
	opts.Fetcher, opts.Now, opts.Logger = f, time.Now, rigLogger(t)
	e, err := New(opts, loggedStore{Store: backend.Fleet(st), log: log})
	if err != nil {
		t.Fatal(err)
	}
	f.refuse = e.circuitOpen
	if err := e.Control().Pause("elsewhere.test", "look"); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("pause through one process of a fleet: %v, want ErrUnsupported", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if _, err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got := log.counts()
	if !backend.Fleet(st).Capabilities().Refresh {
		t.Fatal("the fleet keeps no refreshes: QueueRefreshes would be refused")
	}
	delete(got, store.OpQueueRefreshes) // the fleet refreshes: it takes the top-up a run starts with
	checkSubmitted(t, got, true, hostDown(t, e.db))
}

// hostDown counts the URLs failed as their host was given up on: its
// breaker opened, and stayed open.
func hostDown(t *testing.T, db Store) int {
	t.Helper()
	n := 0
	err := db.ScanResults(true, func(r *store.Result) error {
		if r.ErrorClass == "host-down" {
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// checkSubmitted fails if a store with shared breakers was sent an
// operation of unsharedOps, or the file was not sent the breaker's own
// writes and the refresh lanes' top-up; either way a host must have been
// given up on (its breaker opened), or the test tested nothing.
func checkSubmitted(t *testing.T, got map[store.OpKind]int, shared bool, hostDown int) {
	t.Helper()
	if hostDown == 0 {
		t.Fatal("no host was given up on: no breaker opened, so there were no breaker writes to leave out")
	}
	fileSends := []store.OpKind{store.OpPutBreaker, store.OpAppendTransition, store.OpQueueRefreshes, store.OpPutLinks}
	for _, k := range unsharedOps {
		switch {
		case shared && got[k] > 0:
			t.Errorf("%d %s operations submitted to a store that does not apply them", got[k], k)
		case !shared && slices.Contains(fileSends, k) && got[k] == 0:
			t.Errorf("no %s operation submitted to the file (submitted: %v)", k, got)
		}
	}
}

// How a run ended reads the same whichever store it ran on: held work
// counts hosts in every store, and only a frontier that ran dry ends with
// nothing but held hosts left.
func TestWhyIsTheSameOnEveryStore(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	held := Summary{HeldWork: 2, Counts: store.Counts{Queued: 9, Deferred: 1}}
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		sum    Summary
		ranDry bool
		want   string
	}{
		{"nothing left", context.Background(), Summary{Exhausted: true}, true, "no URL left to fetch"},
		{"only held hosts left", context.Background(), held, true,
			"only URLs of held hosts are left (hosts held, paused or with a case: 2): they wait for a person"},
		{"stopped before it ran dry", context.Background(), held, false, "stopped with work left"},
		{"a signal", cancelled, held, false, "stopped by a signal"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, target := range []backend.Target{{DB: "crawl.db"}, {Store: "redis://127.0.0.1:6379/0"}} {
				caps := target.Capabilities()
				e := &Engine{opts: DefaultOptions(), caps: caps, pageCap: newPageCap(0)}
				if got := e.why(tc.ctx, tc.sum, tc.ranDry); got != tc.want {
					t.Errorf("%s: why = %q, want %q", caps.Name, got, tc.want)
				}
			}
		})
	}
}
