package redisstore

import (
	"hash/crc32"
	"strconv"
)

// Key layout. Every key of one host carries the host as its hash tag, so
// that on a Redis Cluster all of a host's state lives on one slot and the
// scripts that change it stay atomic. Cross-host structures are split into
// Shards shards by a hash of the host, each shard with its own tag, so
// that no single key carries the whole fleet's traffic.
//
//	bw:{meta}:schema               string: the store's schema marker (schemaMarker)
//	bw:{meta}:settings             string: the crawl's stored settings (JSON)
//	bw:{meta}:procs                hash: process id -> last heartbeat (JSON; see proc.lua)
//	bw:{meta}:budget               hash: the fleet run's --max-pages (see budget.lua)
//	bw:{meta}:queueing             zset: process ID whose write may be queueing URLs -> Unix ms it is given up at (Frontier.write)
//	bw:{meta}:queued               string: the count of writes that queued URLs and listed their hosts
//	bw:{H}:q                  zset: queued URL hash -> seq (FIFO per host)
//	bw:{H}:d                  zset: deferred URL hash -> due (Unix ms)
//	bw:{H}:u                  hash: URL hash -> encoded store.Item (queued or deferred)
//	bw:{H}:seen               set: URL hashes ever queued for the host
//	bw:{H}:r                  hash: URL hash -> encoded store.Result
//	bw:{H}:f                  zset: URL hash of a stored page -> its fetch time
//	                          (Unix ms), for refreshes; see refresh.lua
//	bw:{H}:w                  hash: URL hash -> "FILE OFFSET": where its WARC records are
//	bw:{H}:c                  hash: counters (seq queued deferred done failed pages)
//	bw:{H}:b                  hash: the circuit breaker (see breakerFields)
//	bw:{H}:probe              string: the half-open probe gate, value = generation (SET NX PX)
//	bw:{H}:t                  list: the host's breaker transitions, oldest first (JSON)
//	bw:{H}:cases              list: the host's cases (JSON)
//	bw:{H}:robots             string: the cached robots.txt rules (JSON)
//	bw:{H}:lease              hash: the host's lease: owner, token (the fence,
//	                          only grows), until (server ms); see lease.lua
//	bw:{sN}:ready             zset: host -> Unix ms it next needs a worker; while a
//	                          process holds the host, its lease's expiry
//	bw:{sN}:owner             hash: host -> id of the process holding it
//	bw:{sN}:touch             hash: host -> count of adds, for the release race (see release)
//	bw:{sN}:hosts             set: every host of the shard ever queued
//	bw:{sN}:stale             zset: host -> at most its oldest page's fetch time
//	                          (Unix ms): where a refresh pass looks; see refresh.lua
//	bw:{cN}:captures          hash: payload digest -> its first capture (--warc-dedupe)
//	bw:{meta}:warc:ID         string: process ID's archive state (JSON)
const (
	// Shards is the number of shards of the cross-host structures.
	Shards = 16
	// schemaMarker names the store's layout; a store holding another value
	// belongs to another program or another version.
	schemaMarker = "breakwater-fleet/2"
)

const (
	keySchema   = "bw:{meta}:schema"
	keySettings = "bw:{meta}:settings"
	keyQueueing = "bw:{meta}:queueing"
	keyQueued   = "bw:{meta}:queued"
	keyProcs    = "bw:{meta}:procs"
)

// hostKeys are the keys of one host.
type hostKeys struct {
	queue, deferred, items, seen, results, warc, counts, breaker, probe, transitions, cases, robots, lease, fetched string
}

func keysOf(host string) hostKeys {
	p := "bw:{" + host + "}:"
	return hostKeys{queue: p + "q", deferred: p + "d", items: p + "u", seen: p + "seen", results: p + "r", warc: p + "w",
		counts: p + "c", breaker: p + "b", probe: p + "probe", transitions: p + "t", cases: p + "cases",
		robots: p + "robots", lease: p + "lease", fetched: p + "f"}
}

// shardKeys are the keys of one shard of the cross-host structures.
type shardKeys struct {
	ready, owner, touch, hosts, stale string
}

func shardOf(host string) int { return int(crc32.ChecksumIEEE([]byte(host)) % Shards) }

func keysOfShard(n int) shardKeys {
	p := "bw:{s" + strconv.Itoa(n) + "}:"
	return shardKeys{ready: p + "ready", owner: p + "owner", touch: p + "touch", hosts: p + "hosts", stale: p + "stale"}
}

func keyOfCaptures(digest string) string {
	return "bw:{c" + strconv.Itoa(int(crc32.ChecksumIEEE([]byte(digest))%Shards)) + "}:captures"
}

func keyOfArchive(id string) string { return "bw:{meta}:warc:" + id }
