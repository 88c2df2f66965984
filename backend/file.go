package backend

import (
	"encoding/json"
	"errors"
	"log/slog"
	"os"

	"breakwater/control"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
)

// fileCapabilities: one process crawls a file and keeps everything in it.
var fileCapabilities = store.Capabilities{Name: "--db", Refresh: true, RetryFailed: true, HostPageCap: true,
	SoleWriter: true, LinkGraph: true}

// file is a crawl's database file.
type file struct {
	*storage.DB
	existed bool // the file was there before it was opened
}

// File is the backend of a database file already open, which stays the
// caller's: Discard closes it and removes nothing.
func File(db *storage.DB) Backend { return &file{DB: db, existed: true} }

func (f *file) Capabilities() store.Capabilities { return fileCapabilities }

func (f *file) OpenFrontier(cfg frontier.Config) (frontier.Queue, error) {
	return frontier.Open(f.DB, frontier.Options{HostConcurrency: cfg.HostConcurrency, Archive: cfg.Archive,
		Now: cfg.Now, Logger: cfg.Logger})
}

// Archive keeps the archive's state in the file; the files are named after
// the host.
func (f *file) Archive(string) (warc.Store, string) { return f.DB, "" }

func (f *file) HoldsCrawl() bool { return f.existed }

func (f *file) SocketPath() string { return control.SocketPath(f.Path()) }

func (f *file) LogUsage(*slog.Logger) {}

func (f *file) Discard() error {
	err := f.Close()
	if !f.existed {
		err = errors.Join(err, os.Remove(f.Path()))
	}
	return err
}

// The seed hosts and settings of a file are written whole, by the one
// process crawling it: it has no SharedScope.

func (f *file) AddSeedHosts([]string) error {
	return store.Unsupported(f.Path(), "a shared set of seed hosts")
}

func (f *file) SeedHosts() ([]string, int64, error) {
	return nil, 0, store.Unsupported(f.Path(), "a shared set of seed hosts")
}

func (f *file) SeedHostsVersion() (int64, error) {
	return 0, store.Unsupported(f.Path(), "a shared set of seed hosts")
}

func (f *file) MergeSettings(map[string]json.RawMessage, map[string]json.RawMessage, func(string) bool) ([]store.SettingConflict, error) {
	return nil, store.Unsupported(f.Path(), "settings merged by name")
}
