package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"breakwater/redisstore/redistest"
	"breakwater/store"
)

func TestSeenCacheHoldsWhatItWasGiven(t *testing.T) {
	c := newSeenCache(4)
	a, b := store.HashOf("http://a.test/1"), store.HashOf("http://a.test/2")
	if c.has(a) || c.has(store.Hash{}) {
		t.Fatal("an empty cache holds a hash")
	}
	c.add(a)
	if !c.has(a) {
		t.Fatal("an added hash is not held")
	}
	// Fill every slot with others: a is pushed out, never confused with one.
	for i := range 64 {
		h := store.HashOf("http://b.test/" + strconv.Itoa(i))
		c.add(h)
		if !c.has(h) {
			t.Fatalf("hash %d not held right after its add", i)
		}
	}
	if c.has(a) && *c.slot(a) != a {
		t.Fatal("has(a) with another hash in its slot")
	}
	c.add(b)
	c.forget()
	if c.has(b) {
		t.Fatal("forget kept a hash")
	}
}

// serverCommands is the number of commands Redis has run, the INFO that
// reads it not counted.
func serverCommands(t *testing.T, s *Store) int64 {
	t.Helper()
	info, err := s.Client().Info(context.Background(), "stats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_commands_processed:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO stats: %q: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("INFO stats has no total_commands_processed: %q", info)
	return 0
}

// A link found again is not sent again: the second batch of the same adds
// runs no script (the writer has nothing to send for the host); a batch
// that did not reach Redis leaves its adds unknown, so they are sent
// again and queued.
func TestRepeatedLinksAreSentOnce(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	// The writer alone, without the goroutines that look at the fleet:
	// the server's command count is then the writes'.
	f := &Frontier{s: s, o: ftOptions(s, "p1", 0, 3).withDefaults(), hosts: map[string]*ownedHost{},
		kickMgr: make(chan struct{}, 1), seen: newSeenCache(seenCacheSlots)}
	links := func() *store.Batch {
		var b store.Batch
		for i := range 20 {
			b.Add(ftItem("a.test", "/p/"+strconv.Itoa(i%10))) // each link twice in the batch
		}
		return &b
	}
	queued := func() int64 {
		n, err := s.Client().ZCard(context.Background(), keysOf("a.test").queue).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// A first write that fails after its adds were read, before any script.
	var fail store.Batch
	fail.PutArchiveState(store.ArchiveState{File: "p1-00001.warc.gz", Serial: 1})
	f.afterArchiveState = func() error { return errors.New("cut") }
	if err := f.write([]job{{batch: links()}, {batch: &fail}}); err == nil {
		t.Fatal("the cut write succeeded")
	}
	f.afterArchiveState = nil
	if n := queued(); n != 0 {
		t.Fatalf("%d queued by a write cut before its scripts", n)
	}

	// cost is the commands one write ran: the INFO before it and the
	// INFO that reads the count are not counted.
	cost := func(jobs ...job) int64 {
		t.Helper()
		before := serverCommands(t, s)
		if err := f.write(jobs); err != nil {
			t.Fatal(err)
		}
		return serverCommands(t, s) - before - 1
	}
	first := cost(job{batch: links()})
	if n := queued(); n != 10 {
		t.Fatalf("%d queued after the write that followed the cut one, want 10", n)
	}
	if again := cost(job{batch: links()}); again != 0 {
		t.Errorf("the same links sent again cost %d commands, want 0 (the first time %d)", again, first)
	}
	// Within a batch too: ten links given twice cost what ten given once do.
	var once store.Batch
	for i := range 10 {
		once.Add(ftItem("b.test", "/p/"+strconv.Itoa(i)))
	}
	if distinct := cost(job{batch: &once}); first != distinct {
		t.Errorf("ten links twice in a batch ran %d commands, ten once %d", first, distinct)
	}
	if n := queued(); n != 10 {
		t.Fatalf("%d queued, want 10", n)
	}
}
