package crawl

import (
	"context"
	"time"

	"breakwater/breaker"
	"breakwater/control"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/storage"
	"breakwater/store"
)

// Store is what the engine reads and writes of a crawl outside its
// frontier: the bbolt file (*storage.DB), or the fleet's Redis store
// (*redisstore.Store), which New recognises and runs a fleet frontier on.
type Store interface {
	control.Reader
	Path() string
	PutSettings(data []byte) error
	Robots(host string) (*robots.Rules, error)
	Seen(h store.Hash) bool
	RunningAt() (time.Time, error)
	ScanResults(failedOnly bool, fn func(r *store.Result) error) error
}

// fileStore is what only the file offers: a fleet crawl refuses the
// options that need it (see Options.ValidateFleet).
type fileStore interface {
	Store
	HostPages(host string) (n int64, stored bool, err error)
	Replaced(it store.Item) (*store.Result, error)
	RequeueFailed() (int, error)
	StageRefreshes(after uint64, staleBefore time.Time, limit int) (store.RefreshScan, error)
	Commit(b *store.Batch) (*store.Committed, error)
}

// crawlFrontier is the frontier the workers lease from: the file's
// (*frontier.Frontier) or the fleet's (*redisstore.Frontier).
type crawlFrontier interface {
	Add(items ...store.Item) error
	Next(ctx context.Context) (*frontier.Lease, error)
	Release(l *frontier.Lease)
	Started(l *frontier.Lease, next time.Time)
	CompleteWith(l *frontier.Lease, r *store.Result, discovered []store.Item, attach any) error
	Defer(l *frontier.Lease, it store.Item, due time.Time) error
	Park(host string, until time.Time)
	Unpark(host string, now time.Time)
	Hold(host string)
	Unhold(host string)
	FailHost(host string, template store.Result) error
	Feed() (done func())
	HeldWork() int
	InFlight() int
	Failed() <-chan struct{}
	Submit(fn func(*store.Batch)) error
	Close() error
}

// fleetFrontier is what a fleet frontier adds: the shared breakers.
type fleetFrontier interface {
	crawlFrontier
	// Outcome hands one outcome to the host's shared breaker.
	Outcome(t breaker.Ticket, c breaker.Class, detail string, at time.Time)
	// TryProbe takes the fleet's probe gate of a half-open host.
	TryProbe(host string, generation uint64) (bool, error)
}

var (
	_ crawlFrontier = (*frontier.Frontier)(nil)
	_ fileStore     = (*storage.DB)(nil)
)
