package store

import (
	"errors"
	"fmt"
)

// Capabilities says what a crawl's store can do beyond what every store
// does (queue, results, robots.txt, cases, settings, archive state). The
// engine asks it instead of asking which store it runs on: an option that
// needs what the store lacks is refused before the crawl starts, and the
// store's methods for it are then never called.
type Capabilities struct {
	// Name is how a refusal names the store: the flag that gives it and,
	// for a URL, its scheme ("--db", "--store redis://").
	Name string
	// Refresh: the store keeps refresh lanes (StageRefreshes and the
	// QueueRefreshes operation), for --recrawl-after.
	Refresh bool
	// RetryFailed: the store can queue its failed URLs again
	// (RequeueFailed), for --retry-failed.
	RetryFailed bool
	// HostPageCap: the store counts the pages requested of each host
	// (HostPages and the PutHostPages operation), for --max-pages-per-host.
	HostPageCap bool
	// SharedBreakers: the hosts' breakers are kept in the store, shared by
	// every process crawling it, and change only through the frontier's
	// Outcome; the engine loads a host's breaker as its frontier takes the
	// host, never writes breakers or transitions in a batch, and a
	// half-open probe must also take the store's probe gate; a manual
	// change (pause, unpause, resolve) is made on the store, not through
	// one process's engine. Without it
	// the breakers are the engine's own, read when the crawl starts and
	// written through batches.
	SharedBreakers bool
	// SoleWriter: one process at a time crawls the store, so its counts
	// change over a run by that run alone. A store several processes crawl
	// at once names each by its process ID (FleetOptions.ID).
	SoleWriter bool
	// LinkGraph: the store keeps each page's links (the PutLinks
	// operation, ForEachEdge and Inlinks), for exports of the link graph
	// and reports of who links to what. Without it the crawl stores none
	// and the commands that read them are refused.
	LinkGraph bool
	// SharedScope: processes that start at any time crawl the store at
	// once, so the seeds' hosts are a set each adds to (AddSeedHosts,
	// SeedHosts, SeedHostsVersion) and the settings are merged setting by
	// setting (MergeSettings), never written whole.
	SharedScope bool
}

// ErrUnsupported is returned by a store's method for what its
// Capabilities say it cannot do.
var ErrUnsupported = errors.New("not supported by this store")

// Unsupported is ErrUnsupported for what, named by the store.
func Unsupported(store, what string) error {
	return fmt.Errorf("%s: %s: %w", store, what, ErrUnsupported)
}

// SettingConflict is a setting another process of a fleet stored while
// this one started: its value, this process's, and whether this one's
// (given by a flag) replaced it.
type SettingConflict struct {
	Name        string
	Other, Ours []byte
	Replaced    bool
}

// PageBudget is one process's part in a --max-pages that the processes
// crawling a store at once share: pages are taken from it a few at a time
// and the unused ones given back when the process stops.
type PageBudget interface {
	// Take takes up to want pages, fewer as the budget runs out; 0 when
	// it has.
	Take(want int) (int, error)
	// Leave gives back unused pages of those taken.
	Leave(unused int) error
}
