package crawl

import (
	"encoding/json"
	"time"

	"breakwater/control"
	"breakwater/frontier"
	"breakwater/robots"
	"breakwater/store"
	"breakwater/warc"
)

// Store is what the engine reads and writes of a crawl, whichever store
// keeps it: the CLI opens one (see package backend) and hands it to New.
// The engine asks the store what it can do (Capabilities), never which it
// is; the methods an absent capability names are never called.
type Store interface {
	control.Reader
	// Capabilities says what the store can do beyond what every store does.
	Capabilities() store.Capabilities
	// OpenFrontier opens the frontier the workers lease from.
	OpenFrontier(cfg frontier.Config) (frontier.Queue, error)
	// Archive is where the WARC writer of process keeps its state, and the
	// name its files carry ("" for the writer's default, the host name).
	Archive(process string) (state warc.Store, name string)
	Path() string
	PutSettings(data []byte) error
	Robots(host string) (*robots.Rules, error)
	Seen(h store.Hash) bool
	RunningAt() (time.Time, error)
	ScanResults(failedOnly bool, fn func(r *store.Result) error) error
	// ForEachEdge, Inlinks and ForEachPageLinks need Capabilities.LinkGraph.
	control.LinkReader
	ForEachPageLinks(fn func(p *store.PageLinks) error) error
	// Replaced is the stored result a queued item replaces (its
	// Item.Replaces); store.ErrNotFound when the store has none.
	Replaced(it store.Item) (*store.Result, error)
	// Commit writes b at once, outside the frontier; for a store whose
	// breakers are not shared, before the frontier opens.
	Commit(b *store.Batch) (*store.Committed, error)
	// HostPages needs Capabilities.HostPageCap.
	HostPages(host string) (n int64, stored bool, err error)
	// RequeueFailed needs Capabilities.RetryFailed.
	RequeueFailed() (int, error)
	// RequeueFailedWhere requeues the failures keep chooses; it needs
	// Capabilities.RetryFailed.
	RequeueFailedWhere(keep func(r *store.Result) bool) (int, error)
	// AddSeedHosts, SeedHosts, SeedHostsVersion and MergeSettings need
	// Capabilities.SharedScope.
	AddSeedHosts(hosts []string) error
	SeedHosts() (hosts []string, version int64, err error)
	SeedHostsVersion() (int64, error)
	MergeSettings(settings, read map[string]json.RawMessage, given func(string) bool) ([]store.SettingConflict, error)
	// StageRefreshes needs Capabilities.Refresh.
	StageRefreshes(after uint64, staleBefore time.Time, limit int) (store.RefreshScan, error)
}
