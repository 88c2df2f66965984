package store

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
	// Referrer is the URL of the page (or sitemap) the URL was first found
	// on; "" for a seed.
	Referrer string
	// Kind says how the fetched body is read: a page (links followed), a
	// sitemap (its URLs queued) or a requisite (what a page needs to be
	// shown: only its own requisites are taken, and its links only when
	// it is in the crawl's scope).
	Kind ItemKind
	// Hops counts the requisite links from the nearest page to this
	// requisite (a page's stylesheet is 1, the stylesheet's @import 2,
	// its font 3); 0 for a page or sitemap.
	Hops int
	// Lastmod is the sitemap's lastmod for the URL, as written; "" if none.
	Lastmod string
}

// ItemKind is what a queued URL is expected to hold.
type ItemKind uint8

const (
	KindPage ItemKind = iota
	KindSitemap
	KindRequisite
)

var itemKindNames = [...]string{KindPage: "page", KindSitemap: "sitemap", KindRequisite: "requisite"}

func (k ItemKind) String() string {
	if int(k) < len(itemKindNames) {
		return itemKindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// MarshalText writes the kind's name, as exports show it.
func (k ItemKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name; "" is a page (exports made before
// kinds were kept).
func (k *ItemKind) UnmarshalText(b []byte) error {
	if len(b) == 0 {
		*k = KindPage
		return nil
	}
	for i, name := range itemKindNames {
		if string(b) == name {
			*k = ItemKind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown kind %q", b)
}

// Item formats: 2 has no Referrer, Kind or Lastmod (files written before
// they were kept); 3 adds them. Both are read.
const (
	itemFormatV2 = 2
	itemFormat   = 3
)

// ErrBadItem is the error of an entry that does not decode as an Item.
var ErrBadItem = errors.New("malformed frontier item")

// marshal encodes it for the queue or deferred bucket. The Seq is in both
// keys and the host in the queue's, so they are left out of the value where
// the key has them: a million queued URLs take a fifth fewer pages.
func (it *Item) marshal(withHost bool) []byte {
	host := ""
	if withHost {
		host = it.Host
	}
	flags := byte(it.Kind) & itemKindMask
	size := 1 + 16 + uvarintLen(uint64(it.Depth)) + uvarintLen(uint64(it.Attempts)) +
		uvarintLen(uint64(it.Redirects)) + uvarintLen(it.Replaces) + 1 +
		uvarintLen(uint64(len(host))) + len(host) + len(it.URL)
	if it.Referrer != "" {
		flags |= itemHasReferrer
		size += uvarintLen(uint64(len(it.Referrer))) + len(it.Referrer)
	}
	if it.Lastmod != "" {
		flags |= itemHasLastmod
		size += uvarintLen(uint64(len(it.Lastmod))) + len(it.Lastmod)
	}
	if it.Hops > 0 {
		flags |= itemHasHops
		size += uvarintLen(uint64(it.Hops))
	}
	b := make([]byte, 0, size) // exact: a million queued URLs are a million of these
	b = append(b, itemFormat)
	b = append(b, it.Hash[:]...)
	b = binary.AppendUvarint(b, uint64(it.Depth))
	b = binary.AppendUvarint(b, uint64(it.Attempts))
	b = binary.AppendUvarint(b, uint64(it.Redirects))
	b = binary.AppendUvarint(b, it.Replaces)
	b = append(b, flags)
	if it.Referrer != "" {
		b = binary.AppendUvarint(b, uint64(len(it.Referrer)))
		b = append(b, it.Referrer...)
	}
	if it.Lastmod != "" {
		b = binary.AppendUvarint(b, uint64(len(it.Lastmod)))
		b = append(b, it.Lastmod...)
	}
	if it.Hops > 0 {
		b = binary.AppendUvarint(b, uint64(it.Hops))
	}
	b = binary.AppendUvarint(b, uint64(len(host)))
	b = append(b, host...)
	return append(b, it.URL...)
}

// The flags byte of format 3: the kind in its low bits, then which of the
// optional fields follow (a seed has none: one byte more than format 2).
const (
	itemKindMask    = 0x03
	itemHasReferrer = 0x04
	itemHasLastmod  = 0x08
	itemHasHops     = 0x10
)

func uvarintLen(x uint64) int {
	n := 1
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// ParseItem decodes an entry written by EncodeQueued or EncodeDeferred.
func ParseItem(b []byte) (Item, error) {
	var it Item
	if len(b) < 1+16 || (b[0] != itemFormat && b[0] != itemFormatV2) {
		return it, ErrBadItem
	}
	format := b[0]
	copy(it.Hash[:], b[1:17])
	rest := b[17:]
	var fields [4]uint64
	for i := range fields {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return it, ErrBadItem
		}
		fields[i], rest = v, rest[n:]
	}
	it.Depth, it.Attempts, it.Redirects = int(fields[0]), int(fields[1]), int(fields[2])
	it.Replaces = fields[3]
	var ok bool
	if format == itemFormat {
		if len(rest) < 1 || rest[0]&^(itemKindMask|itemHasReferrer|itemHasLastmod|itemHasHops) != 0 {
			return it, ErrBadItem
		}
		flags := rest[0]
		it.Kind, rest = ItemKind(flags&itemKindMask), rest[1:]
		if flags&itemHasReferrer != 0 {
			if it.Referrer, rest, ok = cutString(rest); !ok {
				return it, ErrBadItem
			}
		}
		if flags&itemHasLastmod != 0 {
			if it.Lastmod, rest, ok = cutString(rest); !ok {
				return it, ErrBadItem
			}
		}
		if flags&itemHasHops != 0 {
			hops, n := binary.Uvarint(rest)
			if n <= 0 || hops == 0 || hops > 255 {
				return it, ErrBadItem
			}
			it.Hops, rest = int(hops), rest[n:]
		}
	}
	if it.Host, rest, ok = cutString(rest); !ok {
		return it, ErrBadItem
	}
	it.URL = string(rest)
	return it, nil
}

// cutString takes a uvarint length and that many bytes off the front of b.
func cutString(b []byte) (s string, rest []byte, ok bool) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", b, false
	}
	return string(b[k : k+int(n)]), b[k+int(n):], true
}

// EncodeQueued encodes it as a queue entry: its host and Seq are in the
// entry's key, not in the value.
func EncodeQueued(it Item) []byte { return it.marshal(false) }

// EncodeDeferred encodes it for the time-ordered bucket of deferred
// URLs, whose key holds the Seq but not the host.
func EncodeDeferred(it Item) []byte { return it.marshal(true) }
