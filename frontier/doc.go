// Package frontier decides which URL is fetched next and keeps every
// discovered URL durable in the storage file until its result is stored.
//
// It owns three things: the seen set and queue (through storage, written in
// group commits by one writer goroutine), the deferred bucket (URLs due at a
// time; a timer promotes them back when due), and the in-memory scheduler
// that hands a worker a URL of a host that is ready now.
//
// Commits: the writer commits as soon as it is idle, and under a steady load
// at most every Options.CommitEvery (100ms) or MaxBatch operations, or a
// tenth of CommitEvery while a worker starves (no host to wait for: the
// batch holds its next URLs, the crawl's start and end among them). Every
// bbolt commit copies each page it touches to a new place in the file, so
// fewer, bigger commits mean fewer fsyncs, fewer page copies and fewer file
// pages mapped into the process.
//
// Memory: per active host, a small buffer of its next URLs (Options.Buffer)
// and a count of the rest, which stay in the file; per dormant host, only
// the count; at most 32k operations waiting for the writer (producers wait
// beyond that); and storage's seen set, 8 to 16 bytes per URL ever seen.
//
// Dormant hosts: a host's URLs are read from the file only once a worker
// finds no loaded host ready (all busy, or waiting out their delays); the
// host with the most URLs queued is loaded first, a few at a time. One with
// more than twice the URLs of every loaded host is loaded at once, busy
// workers or not: it is the crawl's longest job. A loaded host stays loaded
// until it has nothing left at the periodic prune. So the hosts
// loaded, and the file pages read for them, grow with what keeps the workers
// busy, not with the hosts queued: a million URLs over a thousand hosts,
// crawled without delays by 64 workers, loads a few dozen hosts at a time.
// Every page bbolt reads maps a window of the file into the process, so
// reading the head of every host's queue would alone map most of a large
// file.
//
// Leases: a URL handed out by Next stays in the file's queue until Complete
// or Defer commits, in the same transaction as its result or its new due
// time. A crash loses nothing: the next run finds in-flight URLs still queued
// and fetches them again.
//
// Readiness: the frontier knows nothing of robots, breakers or rate limits.
// The crawl engine tells it when a host may next start a request (Started,
// Park), or that a host is held until released (Hold, Unhold). A host with a
// lease being prepared is "reserved" and not offered to another worker until
// its rate token is taken or the lease is released, so one host's URLs are
// never handed out faster than its politeness allows.
//
// Concurrency: all methods are safe for concurrent use. The scheduler's mutex
// is never held across I/O.
package frontier
