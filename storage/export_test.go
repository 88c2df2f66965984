package storage

import (
	"slices"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/robots"
	"breakwater/store"
)

// TestBatchEach: another store sees every operation of a batch, in order,
// with what it needs of each, and a record that could not be encoded
// stops it.
func TestBatchEach(t *testing.T) {
	it := store.Item{Host: "a.test", URL: "http://a.test/", Hash: store.HashOf("http://a.test/")}
	at := time.Unix(1700000000, 0).UTC()
	var b store.Batch
	b.Add(it)
	b.Requeue(it)
	b.Complete(it, &store.Result{URL: it.URL, Status: 200})
	b.Defer(it, at)
	b.Promote(at, 7)
	b.FailHost("a.test", store.Result{ErrorClass: "host-down"}, []uint64{3})
	b.PutRobots("a.test", &robots.Rules{})
	b.PutBreaker("a.test", breaker.Breaker{})
	b.DeleteBreaker("a.test")
	b.AppendTransition(store.Transition{Host: "a.test"})
	b.AppendCase(store.Case{Host: "a.test"})
	b.ResolveCases("a.test", at)
	b.PutRunningAt(at)
	b.PutArchiveState(store.ArchiveState{File: "f"})
	b.PutCapture("sha1:X", store.Capture{URI: "u", Date: at})
	b.PutHostPages("a.test", 4)
	b.QueueRefreshes(nil)
	var kinds []store.OpKind
	var ops []store.Op
	if err := b.Each(func(o store.Op) error { kinds, ops = append(kinds, o.Kind), append(ops, o); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []store.OpKind{store.OpAdd, store.OpRequeue, store.OpComplete, store.OpDefer, store.OpPromote, store.OpFailHost, store.OpPutRobots, store.OpPutBreaker,
		store.OpDeleteBreaker, store.OpAppendTransition, store.OpAppendCase, store.OpResolveCases, store.OpPutRunningAt, store.OpPutArchiveState,
		store.OpPutCapture, store.OpPutHostPages, store.OpQueueRefreshes}
	if !slices.Equal(kinds, want) {
		t.Fatalf("kinds %v, want %v", kinds, want)
	}
	if st, class, err := store.ResultHead(ops[2].Value); err != nil || st != 200 || class != "" {
		t.Fatalf("complete's record: status %d class %q err %v", st, class, err)
	}
	if !ops[3].At.Equal(at) || ops[4].Limit != 7 || ops[5].Key != "a.test" || !slices.Equal(ops[5].InFlight, []uint64{3}) ||
		ops[5].Template.ErrorClass != "host-down" || ops[14].Key != "sha1:X" {
		t.Fatalf("fields lost: %+v", ops)
	}
	if c, err := store.DecodeCapture("sha1:X", ops[14].Value); err != nil || c.URI != "u" || !c.Date.Equal(at) {
		t.Fatalf("capture %+v, %v", c, err)
	}
	var bad store.Batch
	bad.PutRobots("a.test", &robots.Rules{Status: -1})
	if err := bad.Each(func(store.Op) error { return nil }); err == nil {
		t.Fatal("a record that could not be encoded went through")
	}
}
