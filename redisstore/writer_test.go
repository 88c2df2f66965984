package redisstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/redisstore/redistest"
	"breakwater/robots"
	"breakwater/store"
)

// opsByKind adds one operation of each kind to a batch, on host a.test.
var opsByKind = map[store.OpKind]func(b *store.Batch, now time.Time){
	store.OpAdd:     func(b *store.Batch, _ time.Time) { b.Add(ftItem("a.test", "/add")) },
	store.OpRequeue: func(b *store.Batch, _ time.Time) { b.Requeue(ftItem("a.test", "/requeue")) },
	store.OpComplete: func(b *store.Batch, now time.Time) {
		it := ftItem("a.test", "/done")
		b.Complete(it, &store.Result{URL: it.URL, Host: it.Host, Status: 200, FetchedAt: now})
	},
	store.OpDefer:   func(b *store.Batch, now time.Time) { b.Defer(ftItem("a.test", "/later"), now.Add(time.Hour)) },
	store.OpPromote: func(b *store.Batch, now time.Time) { b.Promote(now, 10) },
	store.OpFailHost: func(b *store.Batch, _ time.Time) {
		b.FailHost("a.test", store.Result{ErrorClass: "host-down"}, nil)
	},
	store.OpPutRobots: func(b *store.Batch, now time.Time) {
		rules, err := robots.FromResponse(200, []byte("User-agent: *\nDisallow: /private\n"), now)
		if err != nil {
			panic(err)
		}
		b.PutRobots("a.test", rules)
	},
	store.OpPutBreaker:    func(b *store.Batch, _ time.Time) { b.PutBreaker("a.test", breaker.Breaker{State: breaker.Open}) },
	store.OpDeleteBreaker: func(b *store.Batch, _ time.Time) { b.DeleteBreaker("a.test") },
	store.OpAppendTransition: func(b *store.Batch, now time.Time) {
		b.AppendTransition(store.Transition{At: now, Host: "a.test", From: "closed", To: "open"})
	},
	store.OpAppendCase:      func(b *store.Batch, now time.Time) { b.AppendCase(store.Case{Host: "a.test", At: now, Status: 403}) },
	store.OpResolveCases:    func(b *store.Batch, now time.Time) { b.ResolveCases("a.test", now) },
	store.OpPutRunningAt:    func(b *store.Batch, now time.Time) { b.PutRunningAt(now) },
	store.OpPutArchiveState: func(b *store.Batch, _ time.Time) { b.PutArchiveState(store.ArchiveState{File: "p1-00000.warc.gz"}) },
	store.OpPutCapture: func(b *store.Batch, now time.Time) {
		b.PutCapture("sha1:AAAA", store.Capture{URI: "http://a.test/", Date: now})
	},
	store.OpPutHostPages:   func(b *store.Batch, _ time.Time) { b.PutHostPages("a.test", 3) },
	store.OpQueueRefreshes: func(b *store.Batch, _ time.Time) { b.QueueRefreshes(nil) },
	store.OpPutLinks: func(b *store.Batch, _ time.Time) {
		b.PutLinks(ftItem("a.test", "/"), []store.Outlink{{Edge: store.Edge{To: "http://a.test/x"}}}, nil)
	},
}

// unsupported are the operations the fleet's store keeps by other means
// or not at all.
var unsupported = map[store.OpKind]bool{store.OpPromote: true, store.OpFailHost: true, store.OpPutBreaker: true,
	store.OpDeleteBreaker: true, store.OpAppendTransition: true,
	store.OpPutLinks: true}

// allKinds are every operation kind the store package names.
func allKinds() []store.OpKind {
	var kinds []store.OpKind
	for k := store.OpKind(1); !strings.HasPrefix(k.String(), "OpKind("); k++ {
		kinds = append(kinds, k)
	}
	return kinds
}

// A batch with an operation the fleet's store does not apply is refused
// whole when submitted, naming the operation and the store; the batches
// it does apply are stored, and the frontier goes on.
func TestSubmitRefusesUnsupportedOps(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	f := OpenFrontier(s, ftOptions(s, "p1", 0, 3))
	now := time.Now()
	for _, kind := range allKinds() {
		add := opsByKind[kind]
		if add == nil {
			t.Fatalf("no operation of kind %s in the test's table", kind)
		}
		t.Run(kind.String(), func(t *testing.T) {
			err := f.Submit(func(b *store.Batch) {
				b.Add(ftItem("a.test", "/with-"+kind.String()))
				add(b, now)
			})
			switch {
			case !unsupported[kind] && err != nil:
				t.Errorf("Submit: %v, want it stored", err)
			case unsupported[kind] && !errors.Is(err, store.ErrUnsupported):
				t.Errorf("Submit: %v, want ErrUnsupported", err)
			case unsupported[kind] && (!strings.Contains(err.Error(), kind.String()) || !strings.Contains(err.Error(), s.Path())):
				t.Errorf("the refusal %q names neither the operation %s nor the store %s", err, kind, s.Path())
			}
		})
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-f.Failed():
		t.Fatal("the frontier failed")
	default:
	}
	c, err := s.Counts()
	if err != nil {
		t.Fatal(err)
	}
	// Each stored batch queued its URL, and Add's and Requeue's operations
	// one more each; Complete and Defer name URLs never queued, which stay
	// unqueued.
	want := int64(len(allKinds()) - len(unsupported) + 2)
	if c.Queued != want {
		t.Errorf("%d URLs queued (%+v), want %d: one of each batch stored (and Requeue's), none of those refused", c.Queued, c, want)
	}
}

// The writer itself refuses what it does not apply, before it writes
// anything of the jobs it was given: a batch that reaches it some other
// way than Submit is not dropped in part.
func TestWriterRefusesUnsupportedOps(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	f := OpenFrontier(s, ftOptions(s, "p1", 0, 3))
	defer f.Close()
	now := time.Now()
	for kind := range unsupported {
		t.Run(kind.String(), func(t *testing.T) {
			var good, bad store.Batch
			good.Add(ftItem("a.test", "/before-"+kind.String()))
			opsByKind[kind](&bad, now)
			err := f.write([]job{{batch: &good}, {batch: &bad}})
			if !errors.Is(err, store.ErrUnsupported) || !isFatal(err) || !strings.Contains(err.Error(), kind.String()) {
				t.Errorf("write: %v, want a fatal ErrUnsupported naming %s", err, kind)
			}
			c, err := s.Counts()
			if err != nil {
				t.Fatal(err)
			}
			if c.Queued != 0 || c.Seen != 0 {
				t.Errorf("counts %+v after a refused write, want nothing of it stored", c)
			}
		})
	}
}
