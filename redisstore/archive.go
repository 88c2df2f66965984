package redisstore

import (
	"breakwater/store"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// ArchiveStore is one process's archive state in the fleet's store (a
// warc.Store): each process writes its own WARC files, in its own
// directory or under its own name, and keeps how far they are accounted
// for under its fleet ID. A process started again with the same --fleet-id
// finishes the file its predecessor left open. Captures, for
// --warc-dedupe, are the fleet's: a payload archived by any process is
// revisited by the others. The writer stores a batch's state before the
// batch's results (see Frontier.write): every done page's placement is
// within what the state accounts for.
type ArchiveStore struct {
	s  *Store
	id string
}

// ArchiveStore returns the archive state of the process named id.
func (s *Store) ArchiveStore(id string) *ArchiveStore { return &ArchiveStore{s: s, id: id} }

// ArchiveState returns the state last stored; ok is false before the first.
func (a *ArchiveStore) ArchiveState() (st store.ArchiveState, ok bool, err error) {
	ctx, cancel := bg()
	defer cancel()
	data, err := a.s.rdb.Get(ctx, keyOfArchive(a.id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return st, false, nil
	}
	if err != nil {
		return st, false, fmt.Errorf("store %s: read the archive state of %s: %w", a.s.display, a.id, err)
	}
	if err := json.Unmarshal(data, &st); err != nil {
		return st, false, fmt.Errorf("store %s: decode the archive state of %s: %w", a.s.display, a.id, err)
	}
	return st, true, nil
}

// PutArchiveState stores st at once (a new file is named before it is created).
func (a *ArchiveStore) PutArchiveState(st store.ArchiveState) error {
	ctx, cancel := bg()
	defer cancel()
	data, _ := json.Marshal(st)
	if err := a.s.rdb.Set(ctx, keyOfArchive(a.id), data, 0).Err(); err != nil {
		return fmt.Errorf("store %s: write the archive state of %s: %w", a.s.display, a.id, err)
	}
	return nil
}

// LookupCapture returns the fleet's first capture of a payload.
func (a *ArchiveStore) LookupCapture(digest string) (c store.Capture, ok bool, err error) {
	ctx, cancel := bg()
	defer cancel()
	data, err := a.s.rdb.HGet(ctx, keyOfCaptures(digest), digest).Bytes()
	if errors.Is(err, redis.Nil) {
		return c, false, nil
	}
	if err != nil {
		return c, false, fmt.Errorf("store %s: read capture %s: %w", a.s.display, digest, err)
	}
	c, err = store.DecodeCapture(digest, data)
	return c, err == nil, err
}
