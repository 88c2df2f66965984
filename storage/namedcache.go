package storage

import (
	"encoding/binary"

	"breakwater/store"
)

// namedCache remembers hashes the link graph's URL table holds, across
// commits: the pages of a site link to the same URLs (its navigation) in
// every batch, and each of those costs a B-tree lookup in the table that
// finds it there. The table only grows, so a hash once committed there
// stays. It is direct-mapped and fixed in size (a hash pushed out by
// another is looked up again, which is only the cost it saves), and only
// the committer uses it, under commitMu.
type namedCache struct {
	slots []store.Hash
}

// namedCacheSlots bounds the cache at 1 MiB whatever the crawl's size.
const namedCacheSlots = 1 << 16

func (c *namedCache) slot(h *store.Hash) *store.Hash {
	if c.slots == nil {
		c.slots = make([]store.Hash, namedCacheSlots)
	}
	// The hash is a SHA-256 prefix: any 8 of its bytes are uniform.
	return &c.slots[binary.LittleEndian.Uint64(h[8:])&(namedCacheSlots-1)]
}

// has reports whether h is known to be in the URL table. A nil cache
// knows nothing.
func (c *namedCache) has(h *store.Hash) bool {
	return c != nil && *h != (store.Hash{}) && *c.slot(h) == *h
}

// addAll records hashes a commit made durable in the URL table.
func (c *namedCache) addAll(named map[store.Hash]struct{}) {
	if c == nil {
		return
	}
	for h := range named {
		*c.slot(&h) = h
	}
}
