package verify

import (
	"breakwater/breaker"
	"breakwater/store"
)

// Source is a crawl's store as verify reads it.
type Source interface {
	// Crawl returns what the store keeps for the crawl as a whole. It is
	// called once, before Hosts.
	Crawl() (*Crawl, error)
	// Hosts calls fn with each host's view, one host at a time, and stops
	// at fn's first error. A record that does not decode is reported by
	// the store (Report.Addf) and left out of the view.
	Hosts(fn func(*Host) error) error
}

// Parts says which parts of the view a store keeps.
type Parts uint

const (
	// HostSeen: each host has its own seen set (Host.Seen) and counts it
	// (Host.SeenCount).
	HostSeen Parts = 1 << iota
	// CrawlSeen: the crawl has one seen set of fingerprints, without
	// hosts (Crawl.Seen).
	CrawlSeen
	// HostTallies: each host counts its results by status and error class
	// (Host.Tallies).
	HostTallies
	// CrawlCounts: the crawl keeps counters of its own (Crawl.Counts).
	CrawlCounts
	// CrawlTallies: the crawl counts its results by status and error
	// class (Crawl.Tallies).
	CrawlTallies
	// ResultKeys: results have keys, and a URL queued again names the
	// result it replaces by its key (store.Item.Replaces). Without it a
	// store files results by URL hash, and a waiting URL replaces its
	// result when it is done.
	ResultKeys
	// Captures: the crawl keeps the first capture of each payload
	// (Crawl.Captures), for revisit records.
	Captures
)

// Crawl is what a store keeps for the crawl as a whole.
type Crawl struct {
	Parts Parts
	// Counts are the stored counters (CrawlCounts).
	Counts store.Counts
	// Tallies are the stored tallies (CrawlTallies).
	Tallies store.Tallies
	// Seen is the seen set (CrawlSeen): the fingerprints, sorted, each
	// once; Fingerprint maps a URL hash to its fingerprint.
	Seen        []uint64
	Fingerprint func(store.Hash) uint64
	// Captures calls fn with each payload's first capture (Captures).
	Captures func(fn func(digest string, c store.Capture)) error
	// ForgetsClosedBreakers says a closed breaker's record is dropped,
	// so a later run's breaker of the host counts its generations afresh.
	ForgetsClosedBreakers bool
}

// Place is where a URL waits.
type Place string

const (
	Queued   Place = "queued"
	Deferred Place = "deferred"
	// Staged is a page waiting, outside its host's queue, to be fetched
	// again (store.Item.Replaces names its result).
	Staged Place = "staged for a refresh"
)

// Waiting is a URL waiting to be fetched.
type Waiting struct {
	Place Place
	Item  store.Item
}

// Done is a URL's stored result.
type Done struct {
	// Key is the result's key where results have keys (ResultKeys).
	Key    uint64
	Hash   store.Hash
	Result store.Result
	// Refreshing says the result is flagged to be fetched again, by the
	// one waiting URL that replaces it.
	Refreshing bool
	// Placement is where the page's records are in the archive, "FILE
	// OFFSET", where the store keeps it (see Options.Placed).
	Placement string
}

// Transition is one logged breaker transition and its place in the log.
type Transition struct {
	Seq uint64
	store.Transition
}

// Case is one case and its place in the log.
type Case struct {
	Seq uint64
	store.Case
}

// Host is everything a store holds about one host.
type Host struct {
	Name    string
	Waiting []Waiting
	Results []Done
	// Seen is the host's seen set and SeenCount its stored count of it
	// (HostSeen).
	Seen      []store.Hash
	SeenCount int64
	// Counts are the host's stored counters; nil if it has none, or they
	// did not decode (CountsUnreadable, reported by the store).
	Counts           *store.HostCounts
	CountsUnreadable bool
	// Tallies are the host's stored tallies (HostTallies).
	Tallies store.Tallies
	// Breaker is the stored breaker; nil if none is.
	Breaker *breaker.Breaker
	// Transitions and Cases are the host's, in the order they were logged.
	Transitions []Transition
	Cases       []Case
}
