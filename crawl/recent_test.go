package crawl

import (
	"testing"

	"breakwater/storage"
)

func TestRecentSetRemembersAndStaysBounded(t *testing.T) {
	var r recentSet
	h := func(i int) storage.Hash { return storage.HashOf("h", string(rune(i))+"x") }
	if r.seenBefore(h(1)) {
		t.Fatal("a new hash was reported as seen")
	}
	if !r.seenBefore(h(1)) {
		t.Fatal("a hash just recorded was not remembered")
	}
	total := 0
	for i := range 2_000_000 {
		r.seenBefore(storage.HashOf("h", string(rune(i%0x10FFFF))+string(rune(i/0x10FFFF))+"y"))
	}
	for i := range r.shards {
		total += len(r.shards[i].cur) + len(r.shards[i].prev)
	}
	if max := 16 * 2 * recentGenSize; total > max {
		t.Fatalf("set holds %d hashes, more than its bound %d", total, max)
	}
}
