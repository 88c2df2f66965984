// Package redisstore keeps a fleet crawl's state in Redis (or a Redis
// Cluster), so that several breakwater processes, on one machine or many,
// are one crawler: one frontier, one seen set, one breaker per host.
//
// The layout (keys.go) gives every key of one host the host as its hash
// tag, so a host's state is on one Cluster slot and the scripts that change
// it are atomic; the cross-host structures (the ready sets that share the
// hosts out, their leases) are split into Shards shards.
//
// The pieces:
//
//	store.go     Open: the URL, the password, the server's version, the
//	             schema marker; nothing is written until the crawl's
//	             settings are
//	apply.lua    one batch of queue operations on one host (add if unseen,
//	             complete, defer, promote) with its counters and tallies
//	load.lua     a host's queue head, due deferred URLs promoted first
//	shard.lua    a shard's ready set: touch, claim, renew, release, drop,
//	             wake, restore; it announces ready hosts on the work channel
//	lease.lua    a host's lease and its fence token, on the host's slot
//	proc.lua     the processes' heartbeats: one live process per fleet ID
//	budget.lua   the fleet's --max-pages, taken in chunks (budget.go)
//	breaker.lua  one outcome applied to a host's shared breaker, with its
//	hold.lua     transitions logged; pauses and case releases;
//	reprieve.lua a local fault's end; the three begin with
//	             breaker_common.lua (reading, logging, writing a breaker)
//	breaker.go   the Go side of them, and the fleet's probe gate (SET NX PX)
//	frontier.go  the fleet frontier of one process: the hosts it holds and
//	manager.go   their leases (manager.go) and the batching writer
//	writer.go    (writer.go), behind the engine's frontier interface
//	query.go     the reads behind the commands; api.go answers the control
//	api.go       API from the store; verify.go checks its invariants
//	archive.go   a process's WARC state in the store
//
// Leases and heartbeats run on the server's clock (TIME): a process's
// clock never decides whose lease ran out. Each host lease carries a
// token that grows at every claim; the writes for a host (apply.lua's
// settling operations, breaker.lua's outcomes) carry the token they were
// leased under and are refused once it is no longer the host's. The
// queue and breaker scripts are passed the time by the caller (Unix
// milliseconds); the queue's (deferred URLs' due times, the promotions)
// on the server's clock, the caller's plus the skew it measures at each
// renewal (Frontier.serverMS).
//
// With an archive, a batch's archive state (how far its process's open
// WARC file is accounted for) and first captures are stored before the
// hosts' scripts store its results and their placements, in a round trip
// of their own: a stored result's records are always accounted for, so
// the cut a restart makes (warc.Open) keeps them. A write stopped between
// the two leaves records no result names, which are archived again.
package redisstore
