package crawl

import (
	"sync"

	"breakwater/storage"
)

// recentSet remembers the hashes of URLs recently handed to the frontier,
// so that the links every page repeats (menus, footers) are dropped before
// they cost the writer a seen-set lookup. It is bounded: each shard keeps
// two generations of at most genSize hashes and forgets the older one when
// the newer fills. Forgetting is safe: the frontier's seen set still
// dedupes anything this set no longer remembers.
//
// Dropping a remembered hash is safe because it was submitted earlier in
// the same run, and commits keep submission order: if the later page's
// result is durable, so is the earlier page's link.
type recentSet struct {
	shards [16]recentShard
}

type recentShard struct {
	mu        sync.Mutex
	cur, prev map[storage.Hash]struct{}
}

const recentGenSize = 1 << 14 // per shard: 16 shards x 2 generations x 16k = 512k hashes, ~25 MB at most

// seenBefore records h and reports whether it was already remembered.
func (r *recentSet) seenBefore(h storage.Hash) bool {
	s := &r.shards[h[0]&15]
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.cur[h]; ok {
		return true
	}
	if _, ok := s.prev[h]; ok {
		return true
	}
	if s.cur == nil || len(s.cur) >= recentGenSize {
		s.prev, s.cur = s.cur, make(map[storage.Hash]struct{}, 1024)
	}
	s.cur[h] = struct{}{}
	return false
}
