package storage

import (
	"breakwater/store"
	"errors"
	"fmt"
	"time"
)

// keyRunningAt holds the crawl's heartbeat: the last time a run was known
// to be running. A resumed crawl subtracts the time since then from the
// down time of the hosts it finds open: the crawler's own downtime is not
// the host's.
var keyRunningAt = []byte("running_at")

// RunningAt returns the last heartbeat a crawl stored, or the zero time
// when none was (a file written before heartbeats, or never run).
func (db *DB) RunningAt() (time.Time, error) {
	data, err := db.get(bucketMeta, string(keyRunningAt))
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	var t time.Time
	if err := t.UnmarshalBinary(data); err != nil {
		return time.Time{}, fmt.Errorf("%s: decode the crawl's heartbeat (meta %q): %w", db.path, keyRunningAt, err)
	}
	return t, nil
}
