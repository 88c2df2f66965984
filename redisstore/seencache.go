package redisstore

import (
	"breakwater/store"
	"encoding/binary"
)

// seenCache remembers URL hashes this process's writes put in the hosts'
// seen sets, so that a link found again (a site's navigation repeats on
// every page) is not sent to Redis again: a seen set only grows, and an add
// of a hash it holds changes nothing. Most of a crawl's adds are such
// repeats; each costs the script a command and the link its bytes.
//
// It is direct-mapped and fixed in size: a hash pushed out by another is
// sent again, which is only the cost the cache saves. Only the writer
// goroutine uses it.
type seenCache struct {
	slots []store.Hash
}

// seenCacheSlots bounds the cache at 1 MiB whatever the crawl's size.
const seenCacheSlots = 1 << 16

func newSeenCache(slots int) *seenCache {
	return &seenCache{slots: make([]store.Hash, slots)}
}

func (c *seenCache) slot(h store.Hash) *store.Hash {
	// The hash is a SHA-256 prefix: any 8 of its bytes are uniform.
	return &c.slots[binary.LittleEndian.Uint64(h[8:])&uint64(len(c.slots)-1)]
}

// has reports whether h is known to be in its host's seen set. A nil
// cache knows nothing.
func (c *seenCache) has(h store.Hash) bool {
	return c != nil && h != store.Hash{} && *c.slot(h) == h
}

// add records that h is in its host's seen set: call it only once the
// script that added h has run.
func (c *seenCache) add(h store.Hash) {
	if c != nil {
		*c.slot(h) = h
	}
}

// forget drops everything: after an outage, Redis may have restarted
// without what it held.
func (c *seenCache) forget() {
	if c != nil {
		clear(c.slots)
	}
}
