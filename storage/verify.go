package storage

// Verify: the file read in one transaction and checked, for `breakwater
// verify` after a crash and for the tests that crash crawls on purpose.
// The crawl's invariants are package verify's, over the view this file
// produces (verifySource); what is checked here is the file's format: its
// pages, bbolt's own check, its buckets and the encodings of its keys and
// records.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/store"
	// Named apart from the tests' verify helper of this package.
	verifier "breakwater/verify"
)

// DefaultMaxProblems is how many problems a VerifyReport keeps by default.
const DefaultMaxProblems = verifier.DefaultMaxProblems

// VerifyOptions tune Verify (see verifier.Options).
type VerifyOptions = verifier.Options

// VerifyReport is what Verify found (see verifier.Report).
type VerifyReport = verifier.Report

// Verify checks the file: its page tree walked with plain reads (see
// pagewalk.go), and only if that is sound, the file's format (every
// bucket known and present, every key and record decodes, sequence keys
// within their bucket's sequence, the meta bucket holds no unknown key),
// the crawl's invariants (package verify) and bbolt's own consistency
// check (tx.Check). With opts.Archive it checks the archive against the
// results too.
//
// It only reads. A damaged page tree is reported as found, and neither
// bbolt's check nor the invariants run: bbolt's reading of it could fault
// in tx.Check's goroutine, where nothing can catch it. A page that still
// makes bbolt panic or fault on this goroutine ends the check with that
// as its last problem. The error is for a file that cannot be read at all.
func (db *DB) Verify(opts VerifyOptions) (*VerifyReport, error) {
	rep := verifier.NewReport(opts.MaxProblems)
	err := guard(func() error {
		return db.bolt.View(func(tx *bolt.Tx) error {
			if !db.pagesWalked {
				sound, err := walkPages(db.path, uint64(tx.ID()), func(format string, args ...any) {
					rep.Addf("bbolt pages: "+format, args...)
				}, nil)
				if err != nil {
					return fmt.Errorf("walk the pages of %s: %w", db.path, err)
				}
				if !sound {
					rep.PagesDamaged = true
					return nil // bbolt's reading of them would go wrong, or fault
				}
			}
			src := &verifySource{tx: tx, rep: rep}
			if src.checkBuckets() {
				if err := verifier.Run(rep, src, opts); err != nil {
					return err
				}
			}
			// Only once every page has been read under guard: tx.Check reads
			// them again in a goroutine of its own, where a fault could not
			// be caught.
			for err := range tx.Check() {
				rep.Addf("bbolt consistency check: %v", err)
			}
			return nil
		})
	})
	if err != nil {
		rep.Addf("reading the file stopped: %v", err)
	}
	return rep, nil
}

// verifySource is the file as package verify reads it, in one read
// transaction. The file keeps results, deferred URLs, transitions and
// cases in buckets of their own, not by host: Crawl reads them once to
// index their keys by host (eight bytes a record; transitions and cases,
// a few per host in trouble, whole), and Hosts reads each host's records
// by those keys.
type verifySource struct {
	tx  *bolt.Tx
	rep *verifier.Report

	results     map[string][]uint64 // host -> result keys
	deferred    map[string][][]byte // host -> deferred keys
	transitions map[string][]verifier.Transition
	cases       map[string][]verifier.Case
}

// optionalBuckets came later in schema 3: a file opened only read-only
// since may lack them, and reads them as empty.
var optionalBuckets = [][]byte{bucketRefresh, bucketCaptures, bucketHostPages, bucketLinks, bucketLinkKeys, bucketLinkURLs}

func (s *verifySource) checkBuckets() bool {
	ok := true
	for _, name := range allBuckets {
		if s.tx.Bucket(name) == nil && !slices.ContainsFunc(optionalBuckets, func(o []byte) bool { return bytes.Equal(o, name) }) {
			s.rep.Addf("bucket %q is missing", name)
			ok = false
		}
	}
	_ = s.tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !slices.ContainsFunc(allBuckets, func(b []byte) bool { return bytes.Equal(b, name) }) {
			s.rep.Addf("unknown bucket %q", name)
		}
		return nil
	})
	return ok
}

// each calls fn for every key and value of the top-level bucket name, if
// it exists.
func (s *verifySource) each(name []byte, fn func(bk *bolt.Bucket, k, val []byte)) {
	bk := s.tx.Bucket(name)
	if bk == nil {
		return
	}
	_ = bk.ForEach(func(k, val []byte) error {
		fn(bk, k, val)
		return nil
	})
}

// seqOf decodes a sequence-number key of bucket bk, checking it is one the
// bucket handed out: a key beyond its sequence would be overwritten.
func (s *verifySource) seqOf(what string, bk *bolt.Bucket, k []byte) (uint64, bool) {
	if len(k) != 8 {
		s.rep.Addf("%s key %x: %d bytes, want an 8-byte sequence number", what, k, len(k))
		return 0, false
	}
	seq := beUint64(k)
	if seq == 0 || seq > bk.Sequence() {
		s.rep.Addf("%s %d: beyond the bucket's sequence %d, so a later record would overwrite it", what, seq, bk.Sequence())
	}
	return seq, true
}

// Crawl reads the meta bucket and the seen log, checks the records that
// are no host's (robots.txt rules, captures, page counts), and indexes the
// records kept by sequence by their host.
func (s *verifySource) Crawl() (*verifier.Crawl, error) {
	c := &verifier.Crawl{
		Parts:                 verifier.CrawlSeen | verifier.CrawlCounts | verifier.CrawlTallies | verifier.ResultKeys | verifier.Captures,
		Fingerprint:           fingerprint,
		ForgetsClosedBreakers: true,
		Captures:              s.captures,
	}
	s.readMeta(c)
	c.Seen = s.readSeen()
	s.indexResults()
	s.indexDeferred()
	s.readTransitions()
	s.readCases()
	s.each(bucketRobots, func(_ *bolt.Bucket, k, val []byte) {
		if _, err := store.DecodeRobots(string(k), val); err != nil {
			s.rep.Addf("%v", err)
		}
	})
	s.each(bucketCaptures, func(_ *bolt.Bucket, k, val []byte) {
		if _, err := store.DecodeCapture(string(k), val); err != nil {
			s.rep.Addf("%v", err)
		}
	})
	s.each(bucketHostPages, func(_ *bolt.Bucket, k, val []byte) {
		if _, n := binary.Uvarint(val); n <= 0 || n != len(val) {
			s.rep.Addf("page count of host %q: malformed record %x", k, val)
		}
	})
	s.checkLinkKeys()
	return c, nil
}

// checkLinkKeys checks that the link graph's records and their keys agree:
// each record keyed in order has one page's key pointing at it, each key
// points at a record, and a file keyed in order since it began holds no
// record keyed by hash.
func (s *verifySource) checkLinkKeys() {
	links, keys := s.tx.Bucket(bucketLinks), s.tx.Bucket(bucketLinkKeys)
	if links == nil || keys == nil {
		return
	}
	inOrder := s.tx.Bucket(bucketMeta).Get(keyLinksInOrder) != nil
	owner := map[uint64]store.Hash{}
	_ = keys.ForEach(func(k, v []byte) error {
		if len(k) != len(store.Hash{}) || len(v) != 8 {
			s.rep.Addf("link_keys: malformed entry %x -> %x", k, v)
			return nil
		}
		if links.Get(v) == nil {
			s.rep.Addf("link_keys: the page hashed %x has its links at %x, where there is no record", k, v)
		} else if other, dup := owner[beUint64(v)]; dup {
			s.rep.Addf("link_keys: the pages hashed %x and %x share the links record %x", other, k, v)
		} else {
			owner[beUint64(v)] = store.Hash(k)
		}
		return nil
	})
	_ = links.ForEach(func(k, _ []byte) error {
		switch {
		case len(k) == 8:
			if _, ok := owner[beUint64(k)]; !ok {
				s.rep.Addf("links: record %x is no page's (no link_keys entry)", k)
			}
		case len(k) != len(store.Hash{}):
			s.rep.Addf("links: malformed key %x", k)
		case inOrder:
			s.rep.Addf("links: record keyed by the hash %x in a file keyed in order since it began", k)
		}
		return nil
	})
}

func (s *verifySource) captures(fn func(digest string, c store.Capture)) error {
	s.each(bucketCaptures, func(_ *bolt.Bucket, k, val []byte) {
		if c, err := store.DecodeCapture(string(k), val); err == nil {
			fn(string(k), c)
		}
	})
	return nil
}

// metaKeys are the keys the meta bucket may hold.
var metaKeys = []string{string(keySchema), string(keySettings), string(keyCounts), string(keyTallies),
	string(keyRunningAt), string(keyArchive), string(keyLinksInOrder)}

func (s *verifySource) readMeta(c *verifier.Crawl) {
	meta := s.tx.Bucket(bucketMeta)
	_ = meta.ForEach(func(k, _ []byte) error {
		if !slices.Contains(metaKeys, string(k)) {
			s.rep.Addf("meta: unknown key %q", k)
		}
		return nil
	})
	if err := readMeta(meta, keyCounts, &c.Counts); err != nil {
		s.rep.Addf("meta: %v", err)
	}
	if err := readMeta(meta, keyTallies, &c.Tallies); err != nil {
		s.rep.Addf("meta: %v", err)
	}
	if data := meta.Get(keySettings); data != nil && !json.Valid(data) {
		s.rep.Addf("meta: the crawl's settings are not valid JSON")
	}
	if data := meta.Get(keyRunningAt); data != nil {
		var t time.Time
		if err := t.UnmarshalBinary(data); err != nil {
			s.rep.Addf("meta: decode the crawl's heartbeat: %v", err)
		}
	}
	if data := meta.Get(keyArchive); data != nil {
		var st store.ArchiveState
		if err := json.Unmarshal(data, &st); err != nil {
			s.rep.Addf("meta: decode the archive's state: %v", err)
		} else if st.Committed < 0 || st.Serial < 0 || strings.ContainsAny(st.File, `/\`) {
			s.rep.Addf("meta: the archive's state %+v is malformed", st)
		}
	}
}

// readSeen returns the seen log's fingerprints, sorted, each once.
func (s *verifySource) readSeen() []uint64 {
	var seen []uint64
	s.each(bucketSeen, func(bk *bolt.Bucket, k, val []byte) {
		if _, ok := s.seqOf("seen log entry", bk, k); !ok {
			return
		}
		if len(val)%8 != 0 {
			s.rep.Addf("seen log entry %x: %d bytes, not a multiple of 8", k, len(val))
			return
		}
		for i := 0; i < len(val); i += 8 {
			fp := binary.LittleEndian.Uint64(val[i:])
			if fp == 0 {
				s.rep.Addf("seen log entry %x: zero fingerprint", k)
				continue
			}
			seen = append(seen, fp)
		}
	})
	slices.Sort(seen)
	for i := 1; i < len(seen); i++ {
		if seen[i] == seen[i-1] {
			s.rep.Addf("fingerprint %016x is logged twice in the seen set: a URL was queued twice", seen[i])
		}
	}
	return slices.Compact(seen)
}

// indexResults checks each result's key and record and indexes it by host.
func (s *verifySource) indexResults() {
	s.results = map[string][]uint64{}
	s.each(bucketResults, func(bk *bolt.Bucket, k, val []byte) {
		key, ok := s.seqOf("result", bk, k)
		if !ok {
			return
		}
		_, r, err := store.DecodeResult(val)
		if err != nil {
			s.rep.Addf("result %d: %v", key, err)
			return
		}
		if (val[0] == store.RecordFailed) != r.Failed() {
			s.rep.Addf("result %d of %s: flag %q disagrees with error class %q", key, r.URL, val[0], r.ErrorClass)
		}
		s.results[r.Host] = append(s.results[r.Host], key)
	})
}

func (s *verifySource) indexDeferred() {
	s.deferred = map[string][][]byte{}
	queue := s.tx.Bucket(bucketQueue)
	s.each(bucketDeferred, func(_ *bolt.Bucket, k, val []byte) {
		it, err := decodeDeferred(k, val)
		if err != nil {
			s.rep.Addf("%v", err)
			return
		}
		if it.Seq == 0 || it.Seq > queue.Sequence() {
			s.rep.Addf("deferred URL %s has seq %d, beyond the queue's sequence %d", it.URL, it.Seq, queue.Sequence())
		}
		s.deferred[it.Host] = append(s.deferred[it.Host], bytes.Clone(k))
	})
}

func (s *verifySource) readTransitions() {
	s.transitions = map[string][]verifier.Transition{}
	s.each(bucketTransitions, func(bk *bolt.Bucket, k, val []byte) {
		seq, ok := s.seqOf("transition", bk, k)
		if !ok {
			return
		}
		t, err := store.DecodeTransition(seq, val)
		if err != nil {
			s.rep.Addf("%v", err)
			return
		}
		s.transitions[t.Host] = append(s.transitions[t.Host], verifier.Transition{Seq: seq, Transition: t})
	})
}

func (s *verifySource) readCases() {
	s.cases = map[string][]verifier.Case{}
	s.each(bucketCases, func(bk *bolt.Bucket, k, val []byte) {
		seq, ok := s.seqOf("case", bk, k)
		if !ok {
			return
		}
		c, err := store.DecodeCase(seq, val)
		if err != nil {
			s.rep.Addf("%v", err)
			return
		}
		s.cases[c.Host] = append(s.cases[c.Host], verifier.Case{Seq: seq, Case: c})
	})
}

// hostNames are every host the file holds a record of, sorted.
func (s *verifySource) hostNames() []string {
	names := map[string]bool{}
	for _, bucket := range [][]byte{bucketQueue, bucketRefresh, bucketHosts, bucketBreakers} {
		s.each(bucket, func(_ *bolt.Bucket, k, _ []byte) { names[string(k)] = true })
	}
	for _, m := range []map[string]bool{keysOf(s.results), keysOf(s.deferred), keysOf(s.transitions), keysOf(s.cases)} {
		maps.Copy(names, m)
	}
	return slices.Sorted(maps.Keys(names))
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// Hosts calls fn with each host's records.
func (s *verifySource) Hosts(fn func(*verifier.Host) error) error {
	for _, name := range s.hostNames() {
		h := &verifier.Host{Name: name, Transitions: s.transitions[name], Cases: s.cases[name]}
		s.readQueue(h)
		s.readDeferred(h)
		s.readLane(h)
		s.readResults(h)
		s.readHostCounts(h)
		s.readBreaker(h)
		if err := fn(h); err != nil {
			return err
		}
	}
	return nil
}

func (s *verifySource) readQueue(h *verifier.Host) {
	queue := s.tx.Bucket(bucketQueue)
	switch bk := queue.Bucket([]byte(h.Name)); {
	case bk != nil:
		_ = bk.ForEach(func(k, val []byte) error {
			it, err := decodeQueued(h.Name, k, val)
			if err != nil {
				s.rep.Addf("%v", err)
				return nil
			}
			if it.Seq == 0 || it.Seq > queue.Sequence() {
				s.rep.Addf("queued URL %s has seq %d, beyond the queue's sequence %d", it.URL, it.Seq, queue.Sequence())
			}
			h.Waiting = append(h.Waiting, verifier.Waiting{Place: verifier.Queued, Item: it})
			return nil
		})
	case queue.Get([]byte(h.Name)) != nil:
		s.rep.Addf("queue holds a value under %q, want only host buckets", h.Name)
	}
}

func (s *verifySource) readDeferred(h *verifier.Host) {
	deferred := s.tx.Bucket(bucketDeferred)
	for _, k := range s.deferred[h.Name] {
		it, _ := decodeDeferred(k, deferred.Get(k)) // decoded by indexDeferred
		h.Waiting = append(h.Waiting, verifier.Waiting{Place: verifier.Deferred, Item: it})
	}
}

func (s *verifySource) readLane(h *verifier.Host) {
	lanes := s.tx.Bucket(bucketRefresh)
	if lanes == nil {
		return
	}
	lane := lanes.Bucket([]byte(h.Name))
	if lane == nil {
		if lanes.Get([]byte(h.Name)) != nil {
			s.rep.Addf("refresh holds a value under %q, want only host buckets", h.Name)
		}
		return
	}
	if k, _ := lane.Cursor().First(); k == nil {
		s.rep.Addf("the refresh lane of %q is empty, want it dropped", h.Name)
	}
	_ = lane.ForEach(func(k, val []byte) error {
		it, err := decodeStaged(h.Name, k, val)
		if err != nil {
			s.rep.Addf("%v", err)
			return nil
		}
		h.Waiting = append(h.Waiting, verifier.Waiting{Place: verifier.Staged, Item: it})
		return nil
	})
}

func (s *verifySource) readResults(h *verifier.Host) {
	results := s.tx.Bucket(bucketResults)
	for _, key := range s.results[h.Name] {
		val := results.Get(u64(key))
		hash, r, _ := store.DecodeResult(val) // decoded by indexResults
		h.Results = append(h.Results, verifier.Done{Key: key, Hash: hash, Result: r, Refreshing: val[0] == store.RecordRefreshing})
	}
}

func (s *verifySource) readHostCounts(h *verifier.Host) {
	val := s.tx.Bucket(bucketHosts).Get([]byte(h.Name))
	if val == nil {
		return
	}
	var hc store.HostCounts
	if err := json.Unmarshal(val, &hc); err != nil {
		s.rep.Addf("decode counts of host %s: %v", h.Name, err)
		h.CountsUnreadable = true
		return
	}
	h.Counts = &hc
}

func (s *verifySource) readBreaker(h *verifier.Host) {
	val := s.tx.Bucket(bucketBreakers).Get([]byte(h.Name))
	if val == nil {
		return
	}
	b, err := store.DecodeBreaker(h.Name, val)
	if err != nil {
		s.rep.Addf("%v", err)
		return
	}
	h.Breaker = &b
}
