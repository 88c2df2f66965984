package storage

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"breakwater/store"
)

// The link graph: links holds each page's links, one record
// (store.EncodeLinks) naming the page and its targets, keyed in the order
// they were stored (a sequence number, 8 bytes); linkKeys maps a page's
// Hash to its record's key, for the refresh that replaces it. Keyed by page
// hash, the records were random inserts: each commit rewrote pages across
// the whole bucket, and a crawl waited twice as long on its commits for
// the graph. Files written before hold records keyed by the page's Hash
// (16 bytes), read as they are until a refresh replaces them. urls is the
// URL table of files written before records named their URLs, Hash -> URL:
// their records are read by it.
var (
	bucketLinks    = []byte("links")
	bucketLinkKeys = []byte("link_keys")
	bucketLinkURLs = []byte("urls")
	// keyLinksInOrder, in meta, says that every record in links is keyed
	// in order: set on a file whose links bucket was empty when this
	// build first opened it.
	keyLinksInOrder = []byte("links_in_order")
)

// putLinks replaces the page's links: its record appended, the one it had
// deleted. The record names every URL it needs, so that a new target
// costs no write of its own.
func (w *batchWriter) putLinks(page store.Item, rec []byte) error {
	bk, keys := w.tx.Bucket(bucketLinks), w.tx.Bucket(bucketLinkKeys)
	bk.FillPercent = appendFill
	hash := page.Hash[:]
	var err error
	if old := keys.Get(hash); old != nil {
		err = bk.Delete(old)
	} else if w.hashKeyedLinks {
		err = bk.Delete(hash) // its record from before links were keyed in order, if any
	}
	if err != nil {
		return fmt.Errorf("links of %s: %w", page.URL, err)
	}
	if store.LinksEmpty(rec) {
		return keys.Delete(hash)
	}
	seq, err := bk.NextSequence()
	if err == nil {
		key := u64(seq)
		if err = bk.Put(key, rec); err == nil {
			err = keys.Put(hash, key)
		}
	}
	if err != nil {
		return fmt.Errorf("links of %s: %w", page.URL, err)
	}
	return nil
}

// linksKeyedInOrder readies a file opened for writing for records keyed
// in order, and reports whether records keyed by hash may remain in it.
func linksKeyedInOrder(tx *bolt.Tx) (hashKeyed bool, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta.Get(keyLinksInOrder) != nil {
		return false, nil
	}
	if k, _ := tx.Bucket(bucketLinks).Cursor().First(); k != nil {
		return true, nil // written before: its records may be keyed by hash
	}
	return false, meta.Put(keyLinksInOrder, []byte{1})
}

// edgeChunk is how many pages' links ForEachEdge and Inlinks read in one
// transaction: fn is called outside it, so a slow reader at the far end
// of a socket never holds one open while a crawl writes the file.
const edgeChunk = 128

// ForEachEdge calls fn with every link of the graph, page by page in the
// order their records were stored (a file's records from before links were
// keyed in order first, by hash), From and To named by their URLs. It reads the
// pages in short read transactions (edgeChunk pages each) and calls fn
// outside them: a page whose links a running crawl replaces meanwhile is
// given in one form or the other, never both.
func (db *DB) ForEachEdge(fn func(store.Edge) error) error {
	return db.scanLinks(nil, fn)
}

// Inlinks calls fn with every link to the URL whose hash is target, as
// ForEachEdge gives them. There is no index by target: it reads every
// page's record (the whole links bucket, about 20 bytes and the anchor
// text per link), decoding only the links to target.
func (db *DB) Inlinks(target store.Hash, fn func(store.Edge) error) error {
	return db.scanLinks(&target, fn)
}

func (db *DB) scanLinks(target *store.Hash, fn func(store.Edge) error) error {
	var after []byte
	for {
		chunk, last, err := db.readLinks(after, target)
		if err != nil {
			return fmt.Errorf("%s: read the link graph: %w", db.path, err)
		}
		for _, e := range chunk {
			if err := fn(e); err != nil {
				return err
			}
		}
		if last == nil {
			return nil
		}
		after = last
	}
}

// ForEachPageLinks calls fn with every page of the graph and its links,
// in ForEachEdge's order, read as ForEachEdge reads them: in short
// transactions, fn called outside them. p is fn's only until it returns.
func (db *DB) ForEachPageLinks(fn func(p *store.PageLinks) error) error {
	var after []byte
	for {
		var chunk []store.PageLinks
		err := db.bolt.View(func(tx *bolt.Tx) error {
			bk, urls := tx.Bucket(bucketLinks), tx.Bucket(bucketLinkURLs)
			if bk == nil || urls == nil {
				after = nil
				return nil
			}
			c := bk.Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(chunk) < edgeChunk; k, v = c.Next() {
				p, err := pageLinks(urls, k, v)
				if err != nil {
					return err
				}
				chunk = append(chunk, p)
				after = append(after[:0], k...)
			}
			if k == nil {
				after = nil
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: read the link graph: %w", db.path, err)
		}
		for i := range chunk {
			if err := fn(&chunk[i]); err != nil {
				return err
			}
		}
		if after == nil {
			return nil
		}
	}
}

func pageLinks(urls *bolt.Bucket, k, rec []byte) (store.PageLinks, error) {
	var p store.PageLinks
	var err error
	if p.Page, err = store.DecodeLinksPage(rec); err != nil {
		return p, fmt.Errorf("links record %x: %w", k, err)
	}
	if p.URL, err = pageURL(urls, k, p.Page); err != nil {
		return p, err
	}
	err = store.DecodeLinks(rec, func(l store.Outlink) error {
		if !p.Page.Named {
			if l.Edge.To, err = urlOf(urls, l.To[:]); err != nil {
				return err
			}
		}
		l.Edge.From = ""
		p.Links = append(p.Links, l)
		return nil
	})
	if err != nil {
		return p, fmt.Errorf("links of %s: %w", p.URL, err)
	}
	return p, nil
}

// readLinks decodes the links of up to edgeChunk pages after the key
// after (from the first, if nil), only those to target if it is set, and
// returns them with the last page's key; nil at the end of the bucket.
func (db *DB) readLinks(after []byte, target *store.Hash) (edges []store.Edge, last []byte, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		bk, urls := tx.Bucket(bucketLinks), tx.Bucket(bucketLinkURLs)
		if bk == nil || urls == nil {
			return nil // a file written before the graph was kept, opened read-only
		}
		c := bk.Cursor()
		k, v := c.First()
		if after != nil {
			if k, v = c.Seek(after); k != nil && bytes.Equal(k, after) {
				k, v = c.Next()
			}
		}
		for pages := 0; k != nil && pages < edgeChunk; k, v = c.Next() {
			pages++
			if edges, err = pageEdges(urls, k, v, target, edges); err != nil {
				return err
			}
			last = append(last[:0], k...)
		}
		if k == nil {
			last = nil
		}
		return nil
	})
	return edges, last, err
}

// pageEdges appends the links of the page keyed k (only those to target,
// if set) to edges, naming pages and targets from the URL table.
func pageEdges(urls *bolt.Bucket, k, rec []byte, target *store.Hash, edges []store.Edge) ([]store.Edge, error) {
	if target != nil && !linksTo(rec, *target) {
		return edges, nil
	}
	page, err := store.DecodeLinksPage(rec)
	if err != nil {
		return edges, fmt.Errorf("links record %x: %w", k, err)
	}
	from, err := pageURL(urls, k, page)
	if err != nil {
		return edges, err
	}
	err = store.DecodeLinks(rec, func(l store.Outlink) error {
		if target != nil && l.To != *target {
			return nil
		}
		e := l.Edge
		e.From = from
		if !page.Named {
			if e.To, err = urlOf(urls, l.To[:]); err != nil {
				return err
			}
		}
		edges = append(edges, e)
		return nil
	})
	if err != nil {
		return edges, fmt.Errorf("links of %s: %w", from, err)
	}
	return edges, nil
}

// linksTo reports whether a page's record holds a link to target; a
// record that does not decode reports true, so that decoding names it.
func linksTo(rec []byte, target store.Hash) bool {
	found := false
	err := store.LinkTargets(rec, func(_ int, to store.Hash) bool {
		found = to == target
		return !found
	})
	return found || err != nil
}

// pageURL is the URL of the page whose record, keyed k, says page: its
// own, or the URL table's for a record that names none.
func pageURL(urls *bolt.Bucket, k []byte, page store.LinksPage) (string, error) {
	if page.Named {
		return page.URL, nil
	}
	return urlOf(urls, k)
}

func urlOf(urls *bolt.Bucket, h []byte) (string, error) {
	if urls == nil {
		return "", fmt.Errorf("URL table: none for hash %x (no URL table in the file)", h)
	}
	v := urls.Get(h)
	if v == nil {
		return "", fmt.Errorf("URL table: no URL for hash %x", h)
	}
	return string(v), nil
}

// GraphSize is what the link graph takes in the file.
type GraphSize struct {
	// URLs counts the distinct URLs the graph names: its pages and their
	// targets.
	Pages, Edges, URLs int64
	// Bytes are the bytes of the file's pages the graph's two buckets
	// take (their leaf and branch pages, allocated).
	Bytes int64
}

// GraphSize counts the link graph's pages, links and URLs and the bytes
// it takes in the file. It reads the whole graph and holds every hash it
// names: for the bench and tests, not for a running crawl's every commit.
func (db *DB) GraphSize() (GraphSize, error) {
	var s GraphSize
	err := db.bolt.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketLinks, bucketLinkKeys, bucketLinkURLs} {
			if bk := tx.Bucket(name); bk != nil {
				st := bk.Stats()
				s.Bytes += int64(st.LeafAlloc + st.BranchAlloc + st.InlineBucketInuse)
			}
		}
		bk := tx.Bucket(bucketLinks)
		if bk == nil {
			return nil
		}
		named := map[store.Hash]struct{}{}
		if keys := tx.Bucket(bucketLinkKeys); keys != nil {
			_ = keys.ForEach(func(k, _ []byte) error {
				if len(k) == len(store.Hash{}) { // a damaged key is no page's hash
					named[store.Hash(k)] = struct{}{}
				}
				return nil
			})
		}
		err := bk.ForEach(func(k, v []byte) error {
			s.Pages++
			if len(k) == len(store.Hash{}) { // a record keyed by its page's hash, from before
				named[store.Hash(k)] = struct{}{}
			}
			return store.LinkTargets(v, func(_ int, to store.Hash) bool {
				s.Edges++
				named[to] = struct{}{}
				return true
			})
		})
		s.URLs = int64(len(named))
		return err
	})
	if err != nil {
		return s, fmt.Errorf("%s: measure the link graph: %w", db.path, err)
	}
	return s, nil
}
