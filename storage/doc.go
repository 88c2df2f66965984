// Package storage owns Breakwater's one bbolt file: opening it, its schema
// version, its named buckets and the byte encodings of everything in them.
// No other package imports bbolt.
//
// Buckets:
//
//	meta         schema version, crawl settings (seeds, scope), counters,
//	             results tallied by status and by error class
//	seen         seq -> the 64-bit fingerprints of the URLs one commit queued
//	             for the first time: the log of the dedupe set, which is held
//	             in memory and read back at Open
//	queue        host -> a bucket of seq -> Item: URLs waiting to be fetched,
//	             FIFO per host (a bucket per host, so queueing a new host's
//	             URLs writes new pages instead of reading another host's)
//	deferred     due-time seq  -> Item: URLs parked until a time (retries, waits)
//	results      seq           -> flag, URL hash, Result: the latest outcome of
//	             each fetched URL, in the order outcomes were stored
//	refresh      host          -> a bucket of result seq -> Item: pages staged
//	             to be fetched again, oldest first, waiting for room in their
//	             host's queue (recrawl.go)
//	hosts        host          -> HostCounts
//	robots       host          -> robots.Rules: the cached robots.txt
//	breakers     host          -> breaker.Breaker: persisted circuit state
//	transitions  seq           -> Transition: one breaker transition, append-only
//	cases        seq           -> Case: a refusal naming the crawler, for a human
//	links        page hash     -> the page's links, one record naming the
//	             targets by hash (the link graph, links.go)
//	urls         hash          -> URL of each page and target the links name
//
// Callers hand over and get back the typed records of package store (Item,
// Result, breaker.Breaker, Transition, Case, robots.Rules) and commit a
// store.Batch; store holds their encodings, which the fleet's Redis store
// keeps too, and this package where each goes in the file.
//
// Invariants: a URL's fingerprint is in seen before its Item is anywhere; an Item is
// in exactly one of refresh, queue or deferred until its Result is stored, and the
// queue entry is deleted in the same transaction that stores the Result, so a
// crash at any moment loses no URL (in-flight ones are fetched again).
//
// Concurrency: a DB is safe for concurrent use. Writes are meant to be
// grouped by the caller into one Commit per batch: each bbolt commit costs
// two fsyncs, so one commit per URL would be far too slow.
package storage
