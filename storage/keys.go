package storage

import (
	"encoding/binary"
	"fmt"

	"breakwater/store"
)

// seqKey orders a host's URLs FIFO within its queue bucket.
func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq) }

func deferredKey(dueUnixNano int64, seq uint64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(dueUnixNano))
	return binary.BigEndian.AppendUint64(k, seq)
}

// decodeQueued decodes an entry of host's queue bucket; its Seq is the key.
func decodeQueued(host string, k, v []byte) (store.Item, error) {
	it, err := store.ParseItem(v)
	if err != nil || len(k) != 8 || it.Host != "" {
		return it, fmt.Errorf("queue entry %s/%x: %w", host, k, store.ErrBadItem)
	}
	it.Host = host
	it.Seq = beUint64(k)
	return it, nil
}

// decodeDeferred decodes a deferred entry; its Seq comes from the key.
func decodeDeferred(k, v []byte) (store.Item, error) {
	it, err := store.ParseItem(v)
	if err != nil || len(k) != 16 || it.Host == "" {
		return it, fmt.Errorf("deferred entry %x: %w", k, store.ErrBadItem)
	}
	it.Seq = beUint64(k[8:])
	return it, nil
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
