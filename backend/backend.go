// Package backend opens the store a crawl is kept in, from the command
// line's --db (a database file) or --store (the URL of a store several
// processes crawl at once, on Redis), and hands back one value: the engine
// runs on it (crawl.Store) and the commands read it; verify opens it
// read-only (OpenReadOnly) to check the view package verify reads. This is
// the one package that knows the stores' concrete types; everything above
// it asks a store what it can do (store.Capabilities), never which it is.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"breakwater/control"
	"breakwater/frontier"
	"breakwater/redisstore"
	"breakwater/robots"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
)

// PasswordEnv is the environment variable a store URL's password may come
// from instead of the URL.
const PasswordEnv = redisstore.PasswordEnv

// Backend is one opened store of a crawl.
type Backend interface {
	control.Reader
	// Capabilities says what the store can do beyond what every store does.
	Capabilities() store.Capabilities
	// OpenFrontier opens the frontier the workers lease from.
	OpenFrontier(cfg frontier.Config) (frontier.Queue, error)
	// Archive is where the WARC writer of process keeps its state, and the
	// name its files carry ("" for the writer's default, the host name).
	Archive(process string) (state warc.Store, name string)
	// Path names the store in messages (a URL without its password).
	Path() string
	PutSettings(data []byte) error
	Robots(host string) (*robots.Rules, error)
	Seen(h store.Hash) bool
	RunningAt() (time.Time, error)
	ScanResults(failedOnly bool, fn func(r *store.Result) error) error
	// ForEachEdge, Inlinks and ForEachPageLinks need Capabilities.LinkGraph.
	control.LinkReader
	ForEachPageLinks(fn func(p *store.PageLinks) error) error
	Replaced(it store.Item) (*store.Result, error)
	Commit(b *store.Batch) (*store.Committed, error)
	HostPages(host string) (n int64, stored bool, err error)
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
	StageRefreshes(after uint64, staleBefore time.Time, limit int) (store.RefreshScan, error)

	// HoldsCrawl reports whether the store held a crawl when it was
	// opened: a crawl of a store that holds none needs seeds.
	HoldsCrawl() bool
	// SocketPath is where a crawl of the store answers the commands, or ""
	// when they read the store itself (every process of a fleet writes it).
	SocketPath() string
	// LogUsage logs what the store counts of its own use, if anything.
	LogUsage(log *slog.Logger)
	// Close releases the store.
	Close() error
	// Discard is Close for a crawl refused before it began: what opening
	// the store created (a new file) is removed.
	Discard() error
}

// ErrTarget marks the errors of a target that names no store a command
// can use: a --store that is no store URL, a --db file that does not
// exist for a command that only reads. They are the user's to fix.
var ErrTarget = errors.New("no such store")

type targetError struct{ msg string }

func (e targetError) Error() string        { return e.msg }
func (e targetError) Is(target error) bool { return target == ErrTarget }

// Target is where a crawl is kept: a database file (DB, from --db) or a
// store several processes crawl at once (Store, from --store), which wins
// when set.
type Target struct {
	DB    string
	Store string
}

// Name is the target as the user gave it.
func (t Target) Name() string {
	if t.Store != "" {
		return t.Store
	}
	return t.DB
}

// Capabilities is what the target's store can do, known before it is
// opened, so that an option it cannot carry out is refused first.
func (t Target) Capabilities() store.Capabilities {
	if t.Store != "" {
		return fleetCapabilities
	}
	return fileCapabilities
}

// Open opens the target's store for a crawl: a file is created if
// missing; a fleet's store is checked (reachable, the password, the
// server's version, this crawl's schema or empty) before anything is
// written to it, and a --store that is no store URL is refused, never
// taken for a file to crawl alone.
func (t Target) Open(ctx context.Context) (Backend, error) {
	if t.Store != "" {
		st, err := redisstore.Open(ctx, t.Store, redisstore.Create)
		if err != nil {
			return nil, err
		}
		return Fleet(st), nil
	}
	_, err := os.Stat(t.DB)
	existed := err == nil
	db, err := storage.Open(t.DB, nil)
	if err != nil {
		return nil, err
	}
	return &file{DB: db, existed: existed}, nil
}

// API returns the commands' view of the target's crawl: the running crawl
// through its control socket, or else the file; or a fleet's store, which
// every process of the fleet reads and writes. closeFn releases what API
// opened. The store must exist: API creates nothing.
func (t Target) API(ctx context.Context) (api control.API, closeFn func() error, err error) {
	if t.Store != "" {
		if err := t.checkStoreURL(); err != nil {
			return nil, nil, err
		}
		st, err := redisstore.Open(ctx, t.Store, redisstore.ReadOnly)
		if err != nil {
			return nil, nil, err
		}
		return redisstore.NewAPI(st), st.Close, nil
	}
	path := t.DB
	return control.Open(path, func() (control.ClosableFile, error) {
		if _, err := os.Stat(path); err != nil {
			return nil, targetError{fmt.Sprintf("--db %s: no such file", path)}
		}
		db, err := storage.Open(path, nil)
		if err != nil {
			return nil, err
		}
		return db, nil
	})
}
