package crawl

import (
	"errors"
	"log/slog"
	"testing"

	"breakwater/store"
)

// fakeBudget is a fleet's page budget of left pages, handed out in chunks
// of at most chunk.
type fakeBudget struct {
	left, chunk, takes, gaveBack int
	err                          error
}

func (b *fakeBudget) Take(want int) (int, error) {
	b.takes++
	if b.err != nil {
		return 0, b.err
	}
	n := min(want, b.chunk, b.left)
	b.left -= n
	return n, nil
}

func (b *fakeBudget) Leave(unused int) error { b.gaveBack += unused; return nil }

func hashOf(i int) store.Hash { return store.HashOf("http://a.test/" + string(rune('a'+i))) }

func TestPageCapOnAFleetTakesPlacesInChunks(t *testing.T) {
	b := &fakeBudget{left: 7, chunk: 3}
	c := newPageCap(100)
	c.fleet = b
	for i := range 7 {
		if ok, err := c.reserve(hashOf(i)); !ok || err != nil {
			t.Fatalf("page %d: %v %v, want a place", i, ok, err)
		}
	}
	if b.takes != 3 {
		t.Errorf("7 pages in chunks of 3 took %d trips to the store, want 3", b.takes)
	}
	if ok, _ := c.reserve(hashOf(0)); !ok {
		t.Error("a page already counted was refused")
	}
	if ok, _ := c.reserve(hashOf(8)); ok {
		t.Fatal("a place past the fleet's budget")
	}
	if !c.reached() {
		t.Error("a spent budget is not reached")
	}
	takes := b.takes
	c.unreserve(hashOf(3)) // a page not requested after all
	if c.reached() {
		t.Error("reached with a place given back")
	}
	if ok, _ := c.reserve(hashOf(9)); !ok {
		t.Error("the place given back was not used again")
	}
	if b.takes != takes {
		t.Errorf("asked the spent budget again (%d trips, was %d)", b.takes, takes)
	}
	c.unreserve(hashOf(9))
	c.unreserve(hashOf(9)) // twice: still one place
	e := &Engine{pageCap: c, log: slog.New(slog.DiscardHandler)}
	e.leaveFleetPages()
	if b.gaveBack != 1 {
		t.Errorf("gave back %d places at the stop, want the 1 unused", b.gaveBack)
	}
}

func TestPageCapFleetErrorIsReturned(t *testing.T) {
	boom := errors.New("store down")
	c := newPageCap(10)
	c.fleet = &fakeBudget{err: boom}
	if ok, err := c.reserve(hashOf(1)); ok || !errors.Is(err, boom) {
		t.Errorf("reserve with the store down = %v, %v", ok, err)
	}
	if c.reached() {
		t.Error("a store error is not the limit reached")
	}
}

func TestPageCapAlone(t *testing.T) {
	c := newPageCap(2)
	for i := range 2 {
		if ok, _ := c.reserve(hashOf(i)); !ok {
			t.Fatalf("page %d refused under the limit", i)
		}
	}
	if ok, _ := c.reserve(hashOf(2)); ok || !c.reached() {
		t.Error("a third page under --max-pages 2")
	}
	c.unreserve(hashOf(0))
	if ok, _ := c.reserve(hashOf(2)); !ok {
		t.Error("a place given back was not used again")
	}
}
