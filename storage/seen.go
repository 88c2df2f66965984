package storage

import (
	"breakwater/store"
	"encoding/binary"
	"fmt"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// seenSet is the dedupe set: a 64-bit fingerprint of every URL ever queued,
// in memory, in an open-addressing table with linear probing.
//
// It lives in memory because a set keyed by random hashes is the worst case
// for a copy-on-write B+tree: every commit of new URLs dirtied a page per
// URL all over the file, which capped enqueue near 30k URLs/s at a million
// URLs. On disk the set is only an append-only log of the fingerprints each
// commit added, read back at Open. The price is 8 to 16 bytes of memory per
// URL ever seen (16 MB at a million), and a 64-bit fingerprint: two distinct
// URLs collide with odds of about n²/2⁶⁵, 3 in 100 million at a million URLs,
// and the second would be skipped as seen.
type seenSet struct {
	mu    sync.RWMutex
	slots []uint64 // 0 marks an empty slot; fingerprints are never 0
	n     int
}

const minSeenSlots = 1 << 12

// fingerprint maps a Hash to the set's non-zero 64-bit key.
func fingerprint(h store.Hash) uint64 {
	fp := binary.LittleEndian.Uint64(h[:8])
	if fp == 0 {
		fp = 1
	}
	return fp
}

func (s *seenSet) has(fp uint64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.hasLocked(fp)
}

func (s *seenSet) hasLocked(fp uint64) bool {
	if len(s.slots) == 0 {
		return false
	}
	mask := uint64(len(s.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case fp:
			return true
		case 0:
			return false
		}
	}
}

// addAll inserts fingerprints, growing the table first so it stays at most
// three quarters full.
func (s *seenSet) addAll(fps []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reserveLocked(s.n + len(fps))
	for _, fp := range fps {
		s.insertLocked(fp)
	}
}

func (s *seenSet) reserveLocked(n int) {
	size := max(len(s.slots), minSeenSlots)
	for n > size/4*3 {
		size *= 2
	}
	if size == len(s.slots) {
		return
	}
	old := s.slots
	s.slots, s.n = allocSlots(size), 0
	for _, fp := range old {
		if fp != 0 {
			s.insertLocked(fp)
		}
	}
	freeSlots(old)
}

// release frees the table; the set is empty afterwards.
func (s *seenSet) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	freeSlots(s.slots)
	s.slots, s.n = nil, 0
}

func (s *seenSet) insertLocked(fp uint64) {
	mask := uint64(len(s.slots) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch s.slots[i] {
		case fp:
			return
		case 0:
			s.slots[i] = fp
			s.n++
			return
		}
	}
}

func (s *seenSet) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.n
}

// loadSeen reads the seen log into a fresh set sized for expect entries.
func loadSeen(tx *bolt.Tx, expect int64) (*seenSet, error) {
	s := &seenSet{}
	s.reserveLocked(int(max(expect, 0)))
	err := tx.Bucket(bucketSeen).ForEach(func(k, v []byte) error {
		if len(v)%8 != 0 {
			return fmt.Errorf("seen log entry %x: %d bytes, not a multiple of 8", k, len(v))
		}
		s.reserveLocked(s.n + len(v)/8)
		for i := 0; i < len(v); i += 8 {
			fp := binary.LittleEndian.Uint64(v[i:])
			if fp == 0 {
				return fmt.Errorf("seen log entry %x: zero fingerprint", k)
			}
			s.insertLocked(fp)
		}
		return nil
	})
	if err != nil {
		s.release()
		return nil, fmt.Errorf("load seen set: %w", err)
	}
	return s, nil
}

// appendSeenLog stores the fingerprints one commit added as one log entry.
func appendSeenLog(bk *bolt.Bucket, fps []uint64) error {
	if len(fps) == 0 {
		return nil
	}
	seq, err := bk.NextSequence()
	if err != nil {
		return err
	}
	v := make([]byte, 0, 8*len(fps))
	for _, fp := range fps {
		v = binary.LittleEndian.AppendUint64(v, fp)
	}
	return bk.Put(u64(seq), v)
}
