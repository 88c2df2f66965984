package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Hash identifies a URL: the first 16 bytes of the SHA-256 of its canonical
// form. The seen set keeps a 64-bit fingerprint of it (see seenSet).
type Hash [16]byte

// HashOf returns the Hash of a canonical URL.
func HashOf(canonical string) Hash {
	sum := sha256.Sum256([]byte(canonical))
	return Hash(sum[:16])
}

// Item is one URL in the frontier.
type Item struct {
	Host      string // politeness/breaker key, e.g. "127.0.0.1:8080"
	Seq       uint64 // position in the host's FIFO; assigned by Commit
	URL       string // as discovered: this is what gets fetched
	Hash      Hash   // of the canonical form: the dedupe key
	Depth     int    // link hops from a seed
	Attempts  int    // fetch attempts already made
	Redirects int    // redirect hops that led to this URL
	// Replaces is the key of the URL's earlier result that its next result
	// replaces (a failed URL queued again by RequeueFailed); 0 for none.
	Replaces uint64
}

const itemFormat = 2

var errBadItem = errors.New("malformed frontier item")

func (it *Item) marshal() []byte {
	b := make([]byte, 0, 1+16+8+5*binary.MaxVarintLen64+len(it.Host)+len(it.URL)+4)
	b = append(b, itemFormat)
	b = append(b, it.Hash[:]...)
	b = binary.BigEndian.AppendUint64(b, it.Seq)
	b = binary.AppendUvarint(b, uint64(it.Depth))
	b = binary.AppendUvarint(b, uint64(it.Attempts))
	b = binary.AppendUvarint(b, uint64(it.Redirects))
	b = binary.AppendUvarint(b, it.Replaces)
	b = binary.AppendUvarint(b, uint64(len(it.Host)))
	b = append(b, it.Host...)
	return append(b, it.URL...)
}

func unmarshalItem(b []byte) (Item, error) {
	var it Item
	if len(b) < 1+16+8 || b[0] != itemFormat {
		return it, errBadItem
	}
	copy(it.Hash[:], b[1:17])
	it.Seq = binary.BigEndian.Uint64(b[17:25])
	rest := b[25:]
	var fields [5]uint64
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return it, errBadItem
		}
		fields[i], rest = v, rest[n:]
	}
	if fields[4] > uint64(len(rest)) {
		return it, errBadItem
	}
	it.Depth, it.Attempts, it.Redirects = int(fields[0]), int(fields[1]), int(fields[2])
	it.Replaces = fields[3]
	it.Host = string(rest[:fields[4]])
	it.URL = string(rest[fields[4]:])
	return it, nil
}

// queueKey orders a host's URLs FIFO and keeps each host's URLs adjacent,
// so one cursor seek loads the next few URLs of a host.
func queueKey(host string, seq uint64) []byte {
	k := make([]byte, 0, len(host)+1+8)
	k = append(k, host...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

func deferredKey(dueUnixNano int64, seq uint64) []byte {
	k := binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(dueUnixNano))
	return binary.BigEndian.AppendUint64(k, seq)
}

func decodeItem(where string, k, v []byte) (Item, error) {
	it, err := unmarshalItem(v)
	if err != nil {
		return it, fmt.Errorf("%s entry %x: %w", where, k, err)
	}
	return it, nil
}

func beUint64(b []byte) uint64 { return binary.BigEndian.Uint64(b) }
