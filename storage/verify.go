package storage

// Verify: the whole file checked against what doc.go and recrawl.go
// promise, read in one transaction, for `breakwater verify` after a crash
// and for the tests that crash crawls on purpose.

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

	"breakwater/breaker"
	"breakwater/robots"
	"breakwater/store"
)

// DefaultMaxProblems is how many problems a VerifyReport keeps by default.
const DefaultMaxProblems = 50

// VerifyOptions tune Verify.
type VerifyOptions struct {
	// Archive, if not nil, maps every URL the crawl's WARC files hold a
	// response or revisit record of to the number of such records: every
	// page done must be among them, and every URL among them done.
	Archive map[string]int
	// ArchiveRedirects maps each URL of a 3xx response or revisit record
	// in the archive to where each such record redirects (warc.Report's
	// Redirects). A robots.txt fetch follows redirects, and archives each
	// hop: through these, verify counts the hops of a robots.txt redirect
	// as robots.txt fetches, not as pages without a result.
	ArchiveRedirects map[string][]string
	// ArchiveRepeats allows a URL in more than one record: the crawl
	// refreshes pages (--recrawl-after), and each refresh archives its
	// answer. Without it only robots.txt, fetched again by every run, and
	// a page answered 304 (a refresh, so fetched before) may repeat.
	ArchiveRepeats bool
	// MaxProblems caps the problems kept; the rest are only counted.
	// Zero means DefaultMaxProblems.
	MaxProblems int
}

// VerifyReport is what Verify found.
type VerifyReport struct {
	// Problems name each thing wrong, one a line, up to MaxProblems;
	// Omitted counts those found beyond.
	Problems []string
	Omitted  int
	// What the file holds, as read.
	Seen, Queued, Deferred, Staged int64
	Pages, Failed                  int64
	Hosts, Breakers, Transitions   int
	Cases                          int
	// PagesDamaged says the walk of the file's pages found them damaged:
	// the problems name what, and no record was read.
	PagesDamaged bool
}

// OK reports whether Verify found nothing wrong.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 && r.Omitted == 0 }

// Verify checks the file: its page tree walked with plain reads (see
// pagewalk.go), and only if that is sound, bbolt's own consistency check
// (tx.Check) and the crawl's invariants. Every record decodes, and the
// meta bucket holds no unknown key; the stored counters equal
// what the buckets hold, in total and per host, and so do the tallies;
// every queued, deferred or staged URL is in the seen set, in one place
// only, and not done unless it is queued again to replace its result
// (which then exists, for the same URL); every URL in the seen set is
// queued, deferred, staged or done (none lost), so that seen = fetched +
// failed + queued + deferred - the URLs queued again over their result;
// each result staged for a refresh has exactly one URL replacing it;
// breaker states are well formed; each host's breaker transitions are in
// order of time and generation; cases are well formed and every host held
// by a case has an open one. With opts.Archive it checks the archive
// against the results too.
//
// It only reads. A damaged page tree is reported as found, and neither
// bbolt's check nor the invariants run: bbolt's reading of it could fault
// in tx.Check's goroutine, where nothing can catch it. A page that still
// makes bbolt panic or fault on this goroutine ends the check with that
// as its last problem. The error is for a file that cannot be read at all.
func (db *DB) Verify(opts VerifyOptions) (*VerifyReport, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = DefaultMaxProblems
	}
	v := &verifier{opts: opts, rep: &VerifyReport{}}
	err := guard(func() error {
		return db.bolt.View(func(tx *bolt.Tx) error {
			if !db.pagesWalked {
				sound, err := walkPages(db.path, uint64(tx.ID()), func(format string, args ...any) {
					v.addf("bbolt pages: "+format, args...)
				}, nil)
				if err != nil {
					return fmt.Errorf("walk the pages of %s: %w", db.path, err)
				}
				if !sound {
					v.rep.PagesDamaged = true
					return nil // bbolt's reading of them would go wrong, or fault
				}
			}
			v.tx = tx
			v.run()
			// Only once every page has been read under guard: tx.Check reads
			// them again in a goroutine of its own, where a fault could not
			// be caught.
			for err := range tx.Check() {
				v.addf("bbolt consistency check: %v", err)
			}
			return nil
		})
	})
	if err != nil {
		v.addf("reading the file stopped: %v", err)
	}
	return v.rep, nil
}

type pending struct {
	where    string // "queued", "deferred", "staged for a refresh"
	url      string
	replaces uint64
}

type doneResult struct {
	hash store.Hash
	key  uint64
}

type verifier struct {
	opts VerifyOptions
	rep  *VerifyReport
	tx   *bolt.Tx

	counts     store.Counts
	tallies    store.Tallies
	seen       []uint64 // sorted fingerprints
	pending    map[store.Hash]pending
	results    []doneResult
	staged     map[uint64]string // result key -> URL, flagged for a refresh
	hosts      map[string]*store.HostCounts
	done       map[string]bool // URLs with a result, for the archive check
	robotsHops map[string]int  // records of each URL that are hops of a robots.txt redirect
	caseHolds  []string        // hosts whose breaker a case holds
	openCases  map[string]bool
	requeued   int64 // queued or deferred URLs whose earlier result is still stored
	computed   store.Counts
	computedTl store.Tallies
}

func (v *verifier) addf(format string, args ...any) {
	if len(v.rep.Problems) >= v.opts.MaxProblems {
		v.rep.Omitted++
		return
	}
	v.rep.Problems = append(v.rep.Problems, fmt.Sprintf(format, args...))
}

func (v *verifier) host(name string) *store.HostCounts {
	hc := v.hosts[name]
	if hc == nil {
		hc = &store.HostCounts{}
		v.hosts[name] = hc
	}
	return hc
}

func (v *verifier) run() {
	v.pending = map[store.Hash]pending{}
	v.staged = map[uint64]string{}
	v.hosts = map[string]*store.HostCounts{}
	v.openCases = map[string]bool{}
	if v.opts.Archive != nil {
		v.done = map[string]bool{}
		v.robotsHops = robotsHops(v.opts.Archive, v.opts.ArchiveRedirects)
	}
	if !v.checkBuckets() {
		return
	}
	v.readMeta()
	v.readSeen()
	v.readQueue()
	v.readDeferred()
	v.readLanes()
	v.readResults()
	v.checkReplacing()
	v.checkNoneLost()
	v.checkCounters()
	v.readBreakers()
	v.readTransitions()
	v.readCases()
	v.readRobots()
	v.readCaptures()
	v.readHostPages()
	v.checkArchive()
}

// optionalBuckets came later in schema 3: a file opened only read-only
// since may lack them, and reads them as empty.
var optionalBuckets = [][]byte{bucketRefresh, bucketCaptures, bucketHostPages}

func (v *verifier) checkBuckets() bool {
	ok := true
	for _, name := range allBuckets {
		if v.tx.Bucket(name) == nil && !slices.ContainsFunc(optionalBuckets, func(o []byte) bool { return bytes.Equal(o, name) }) {
			v.addf("bucket %q is missing", name)
			ok = false
		}
	}
	_ = v.tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		if !slices.ContainsFunc(allBuckets, func(b []byte) bool { return bytes.Equal(b, name) }) {
			v.addf("unknown bucket %q", name)
		}
		return nil
	})
	return ok
}

// each calls fn for every key and value of the top-level bucket name, if
// it exists.
func (v *verifier) each(name []byte, fn func(bk *bolt.Bucket, k, val []byte)) {
	bk := v.tx.Bucket(name)
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
func (v *verifier) seqOf(what string, bk *bolt.Bucket, k []byte) (uint64, bool) {
	if len(k) != 8 {
		v.addf("%s key %x: %d bytes, want an 8-byte sequence number", what, k, len(k))
		return 0, false
	}
	seq := beUint64(k)
	if seq == 0 || seq > bk.Sequence() {
		v.addf("%s %d: beyond the bucket's sequence %d, so a later record would overwrite it", what, seq, bk.Sequence())
	}
	return seq, true
}

// metaKeys are the keys the meta bucket may hold.
var metaKeys = []string{string(keySchema), string(keySettings), string(keyCounts), string(keyTallies),
	string(keyRunningAt), string(keyArchive)}

func (v *verifier) readMeta() {
	meta := v.tx.Bucket(bucketMeta)
	_ = meta.ForEach(func(k, _ []byte) error {
		if !slices.Contains(metaKeys, string(k)) {
			v.addf("meta: unknown key %q", k)
		}
		return nil
	})
	if err := readMeta(meta, keyCounts, &v.counts); err != nil {
		v.addf("meta: %v", err)
	}
	if err := readMeta(meta, keyTallies, &v.tallies); err != nil {
		v.addf("meta: %v", err)
	}
	if data := meta.Get(keySettings); data != nil && !json.Valid(data) {
		v.addf("meta: the crawl's settings are not valid JSON")
	}
	if data := meta.Get(keyRunningAt); data != nil {
		var t time.Time
		if err := t.UnmarshalBinary(data); err != nil {
			v.addf("meta: decode the crawl's heartbeat: %v", err)
		}
	}
	if data := meta.Get(keyArchive); data != nil {
		var s store.ArchiveState
		if err := json.Unmarshal(data, &s); err != nil {
			v.addf("meta: decode the archive's state: %v", err)
		} else if s.Committed < 0 || s.Serial < 0 || strings.ContainsAny(s.File, `/\`) {
			v.addf("meta: the archive's state %+v is malformed", s)
		}
	}
}

func (v *verifier) readSeen() {
	v.each(bucketSeen, func(bk *bolt.Bucket, k, val []byte) {
		if _, ok := v.seqOf("seen log entry", bk, k); !ok {
			return
		}
		if len(val)%8 != 0 {
			v.addf("seen log entry %x: %d bytes, not a multiple of 8", k, len(val))
			return
		}
		for i := 0; i < len(val); i += 8 {
			fp := binary.LittleEndian.Uint64(val[i:])
			if fp == 0 {
				v.addf("seen log entry %x: zero fingerprint", k)
				continue
			}
			v.seen = append(v.seen, fp)
		}
	})
	slices.Sort(v.seen)
	for i := 1; i < len(v.seen); i++ {
		if v.seen[i] == v.seen[i-1] {
			v.addf("fingerprint %016x is logged twice in the seen set: a URL was queued twice", v.seen[i])
		}
	}
	v.seen = slices.Compact(v.seen)
	v.rep.Seen = int64(len(v.seen))
}

func (v *verifier) isSeen(h store.Hash) bool {
	_, ok := slices.BinarySearch(v.seen, fingerprint(h))
	return ok
}

// place books a URL found waiting in where.
func (v *verifier) place(it store.Item, where string) {
	if !v.isSeen(it.Hash) {
		v.addf("%s URL %s (hash %x) is not in the seen set", where, it.URL, it.Hash)
	}
	if prev, dup := v.pending[it.Hash]; dup {
		v.addf("%s URL %s (hash %x) is also %s%s", where, it.URL, it.Hash, prev.where, as(prev.url, it.URL))
		return
	}
	v.pending[it.Hash] = pending{where: where, url: it.URL, replaces: it.Replaces}
}

func (v *verifier) readQueue() {
	queue := v.tx.Bucket(bucketQueue)
	_ = queue.ForEach(func(host, val []byte) error {
		if val != nil {
			v.addf("queue holds a value under %q, want only host buckets", host)
			return nil
		}
		name := string(host)
		return queue.Bucket(host).ForEach(func(k, val []byte) error {
			it, err := decodeQueued(name, k, val)
			if err != nil {
				v.addf("%v", err)
				return nil
			}
			if it.Seq == 0 || it.Seq > queue.Sequence() {
				v.addf("queued URL %s has seq %d, beyond the queue's sequence %d", it.URL, it.Seq, queue.Sequence())
			}
			v.place(it, "queued")
			v.host(name).Queued++
			v.computed.Queued++
			return nil
		})
	})
	v.rep.Queued = v.computed.Queued
}

func (v *verifier) readDeferred() {
	queue := v.tx.Bucket(bucketQueue)
	v.each(bucketDeferred, func(bk *bolt.Bucket, k, val []byte) {
		it, err := decodeDeferred(k, val)
		if err != nil {
			v.addf("%v", err)
			return
		}
		if it.Seq == 0 || it.Seq > queue.Sequence() {
			v.addf("deferred URL %s has seq %d, beyond the queue's sequence %d", it.URL, it.Seq, queue.Sequence())
		}
		v.place(it, "deferred")
		v.host(it.Host).Deferred++
		v.computed.Deferred++
	})
	v.rep.Deferred = v.computed.Deferred
}

func (v *verifier) readLanes() {
	lanes := v.tx.Bucket(bucketRefresh)
	if lanes == nil {
		return
	}
	_ = lanes.ForEach(func(host, val []byte) error {
		if val != nil {
			v.addf("refresh holds a value under %q, want only host buckets", host)
			return nil
		}
		lane := lanes.Bucket(host)
		if k, _ := lane.Cursor().First(); k == nil {
			v.addf("the refresh lane of %q is empty, want it dropped", host)
		}
		return lane.ForEach(func(k, val []byte) error {
			it, err := decodeStaged(string(host), k, val)
			if err != nil {
				v.addf("%v", err)
				return nil
			}
			v.place(it, "staged for a refresh")
			v.rep.Staged++
			return nil
		})
	})
}

func (v *verifier) readResults() {
	v.each(bucketResults, func(bk *bolt.Bucket, k, val []byte) {
		key, ok := v.seqOf("result", bk, k)
		if !ok {
			return
		}
		h, r, err := store.DecodeResult(val)
		if err != nil {
			v.addf("result %d: %v", key, err)
			return
		}
		if (val[0] == store.RecordFailed) != r.Failed() {
			v.addf("result %d of %s: flag %q disagrees with error class %q", key, r.URL, val[0], r.ErrorClass)
		}
		if r.Host == "" || r.URL == "" {
			v.addf("result %d: no URL or host (%q, %q)", key, r.URL, r.Host)
		}
		if !v.isSeen(h) {
			v.addf("done URL %s (hash %x, result %d) is not in the seen set", r.URL, h, key)
		}
		if p, ok := v.pending[h]; ok && p.replaces != key {
			v.addf("%s URL %s (hash %x) is also done (result %d%s)", p.where, p.url, h, key, as(r.URL, p.url))
		}
		if val[0] == store.RecordRefreshing {
			v.staged[key] = r.URL
		}
		v.results = append(v.results, doneResult{hash: h, key: key})
		v.computedTl.AddStatus(r.Status, 1)
		hc := v.host(r.Host)
		if r.Failed() {
			v.computedTl.AddFailed(r.ErrorClass, 1)
			hc.Failed++
			v.computed.Failed++
		} else {
			hc.Fetched++
			v.computed.Fetched++
		}
		if v.done != nil {
			v.done[r.URL] = true
			v.checkArchived(key, &r)
		}
	})
	v.rep.Pages, v.rep.Failed = v.computed.Fetched, v.computed.Failed
	slices.SortFunc(v.results, func(a, b doneResult) int { return compareHash(a.hash, b.hash) })
	for i := 1; i < len(v.results); i++ {
		if a, b := v.results[i-1], v.results[i]; a.hash == b.hash {
			v.addf("URL hash %x has two results (%d and %d)", a.hash, a.key, b.key)
		}
	}
}

// as names the URL other under which a hash was found elsewhere, if it is
// not u: two URLs of one hash are a damaged record (or a collision).
func as(other, u string) string {
	if other == u {
		return ""
	}
	return ", as " + other
}

// checkReplacing checks the URLs queued again over their earlier result
// (refreshes, retries of failures): that result exists and is the same
// URL's, a staged URL's is flagged for a refresh, and a result flagged for
// a refresh is replaced by exactly one of them.
func (v *verifier) checkReplacing() {
	results := v.tx.Bucket(bucketResults)
	replacing := map[uint64]int{}
	for h, p := range v.pending {
		if p.replaces == 0 {
			continue
		}
		replacing[p.replaces]++
		val := results.Get(u64(p.replaces))
		if val == nil {
			v.addf("%s URL %s replaces result %d, which does not exist", p.where, p.url, p.replaces)
			continue
		}
		head, err := store.ParseRecordHead(val)
		switch {
		case err != nil: // told by readResults
		case head.Hash != h:
			v.addf("%s URL %s replaces result %d, which is of another URL (hash %x)", p.where, p.url, p.replaces, head.Hash)
		case p.where == "staged for a refresh" && val[0] != store.RecordRefreshing:
			v.addf("staged URL %s replaces result %d, which is not flagged for a refresh", p.url, p.replaces)
		default:
			if p.where != "staged for a refresh" {
				v.requeued++
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(v.staged)) {
		if n := replacing[key]; n != 1 {
			v.addf("result %d of %s is flagged for a refresh and replaced by %d waiting URLs, want 1", key, v.staged[key], n)
		}
	}
}

// checkNoneLost checks that every URL in the seen set is somewhere.
func (v *verifier) checkNoneLost() {
	found := make([]uint64, 0, len(v.results)+len(v.pending))
	for _, r := range v.results {
		found = append(found, fingerprint(r.hash))
	}
	for h := range v.pending {
		found = append(found, fingerprint(h))
	}
	slices.Sort(found)
	for _, fp := range v.seen {
		if _, ok := slices.BinarySearch(found, fp); !ok {
			v.addf("the URL with fingerprint %016x is in the seen set but neither queued, deferred, staged nor done: it is lost", fp)
		}
	}
}

func (v *verifier) checkCounters() {
	c, want := v.counts, v.computed
	want.Seen = int64(len(v.seen))
	for _, f := range []struct {
		name        string
		stored, has int64
		bucket      string
	}{
		{"seen", c.Seen, want.Seen, "the seen log holds"},
		{"queued", c.Queued, want.Queued, "the queue holds"},
		{"deferred", c.Deferred, want.Deferred, "the deferred bucket holds"},
		{"fetched", c.Fetched, want.Fetched, "the results hold pages:"},
		{"failed", c.Failed, want.Failed, "the results hold failures:"},
	} {
		if f.stored != f.has {
			v.addf("the stored count %s is %d, %s %d", f.name, f.stored, f.bucket, f.has)
		}
	}
	if got := c.Fetched + c.Failed + c.Queued + c.Deferred - v.requeued; got != c.Seen {
		v.addf("the stored counts break conservation: seen %d != fetched %d + failed %d + queued %d + deferred %d - %d queued again over their result",
			c.Seen, c.Fetched, c.Failed, c.Queued, c.Deferred, v.requeued)
	}
	if !maps.Equal(v.tallies.Status, v.computedTl.Status) {
		v.addf("the stored tallies by status %v differ from the results' %v", v.tallies.Status, v.computedTl.Status)
	}
	if !maps.Equal(v.tallies.Failed, v.computedTl.Failed) {
		v.addf("the stored tallies by error class %v differ from the results' %v", v.tallies.Failed, v.computedTl.Failed)
	}
	stored := map[string]bool{}
	v.each(bucketHosts, func(bk *bolt.Bucket, k, val []byte) {
		stored[string(k)] = true
		v.rep.Hosts++
		var hc store.HostCounts
		if err := json.Unmarshal(val, &hc); err != nil {
			v.addf("decode counts of host %s: %v", k, err)
			return
		}
		has := store.HostCounts{}
		if p := v.hosts[string(k)]; p != nil {
			has = *p
		}
		if hc != has {
			v.addf("the stored counts of host %s are %+v, its records %+v", k, hc, has)
		}
	})
	for _, h := range slices.Sorted(maps.Keys(v.hosts)) {
		if !stored[h] && !v.hosts[h].Zero() {
			v.addf("host %s has no stored counts, its records %+v", h, *v.hosts[h])
		}
	}
}

func (v *verifier) readBreakers() {
	v.each(bucketBreakers, func(bk *bolt.Bucket, k, val []byte) {
		v.rep.Breakers++
		b, err := store.DecodeBreaker(string(k), val)
		if err != nil {
			v.addf("%v", err)
			return
		}
		for _, p := range breakerProblems(b) {
			v.addf("breaker of %s: %s", k, p)
		}
		if b.Hold.Has(breaker.Case) {
			v.caseHolds = append(v.caseHolds, string(k))
		}
	})
}

// breakerProblems lists what is wrong with a stored breaker: what no
// sequence of transitions (breaker/doc.go) can leave behind.
func breakerProblems(b breaker.Breaker) []string {
	var out []string
	bad := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if b.State > breaker.HalfOpen {
		bad("state %d is none of closed, open, half-open", b.State)
	}
	if b.Hold&^(breaker.Paused|breaker.Case) != 0 {
		bad("hold %d has unknown flags", b.Hold)
	}
	if b.Hold != breaker.NoHold && b.State != breaker.Open {
		bad("held (%s) but %s: a held breaker is open", b.Hold, b.State)
	}
	if b.Failures < 0 || b.ProbeSuccesses < 0 || b.Level < 0 || b.Rest < 0 {
		bad("negative counter (failures %d, probe successes %d, level %d, rest %s)", b.Failures, b.ProbeSuccesses, b.Level, b.Rest)
	}
	switch b.State {
	case breaker.Closed:
		if !b.DownSince.IsZero() || !b.OpenedAt.IsZero() {
			bad("closed with a down time (down since %s, opened at %s)", b.DownSince, b.OpenedAt)
		}
		if b.ProbeSuccesses != 0 {
			bad("closed with %d probe successes", b.ProbeSuccesses)
		}
	case breaker.Open, breaker.HalfOpen:
		if b.DownSince.IsZero() {
			bad("%s without a down-since time", b.State)
		}
		if b.OpenedAt.IsZero() && b.Hold == breaker.NoHold {
			bad("%s without an opened-at time", b.State)
		}
		if b.Failures != 0 {
			bad("%s with %d failures counted: only a closed breaker counts them", b.State, b.Failures)
		}
	}
	if b.State == breaker.Open && b.ProbeSuccesses != 0 {
		bad("open with %d probe successes", b.ProbeSuccesses)
	}
	// A pause stored before holds were independent kept its reason in
	// HoldReason: Registry.Load moves it, so it is not wrong.
	legacyPause := b.Hold == breaker.Paused && b.PauseReason == ""
	if b.HoldReason != "" && !b.Hold.Has(breaker.Case) && !legacyPause {
		bad("a case's reason %q without a case hold", b.HoldReason)
	}
	if b.PauseReason != "" && !b.Hold.Has(breaker.Paused) {
		bad("a pause's reason %q without a pause", b.PauseReason)
	}
	return out
}

var (
	stateNames = []string{"closed", "open", "half-open"}
	holdNames  = []string{"", "paused", "case", "case+paused"}
)

type lastTransition struct {
	seq uint64
	at  time.Time
	gen uint64
	to  string
}

func (v *verifier) readTransitions() {
	last := map[string]lastTransition{}
	v.each(bucketTransitions, func(bk *bolt.Bucket, k, val []byte) {
		v.rep.Transitions++
		seq, ok := v.seqOf("transition", bk, k)
		if !ok {
			return
		}
		t, err := store.DecodeTransition(seq, val)
		if err != nil {
			v.addf("%v", err)
			return
		}
		if t.Host == "" || t.At.IsZero() || !slices.Contains(stateNames, t.From) || !slices.Contains(stateNames, t.To) ||
			!slices.Contains(holdNames, t.Hold) {
			v.addf("transition %d is malformed: host %q at %s, %q -> %q, hold %q", seq, t.Host, t.At, t.From, t.To, t.Hold)
			return
		}
		if p, ok := last[t.Host]; ok {
			if t.At.Before(p.at) {
				v.addf("transition %d of %s at %s is before transition %d at %s: the host's log goes back in time",
					seq, t.Host, t.At.Format(time.RFC3339Nano), p.seq, p.at.Format(time.RFC3339Nano))
			}
			// After a close the breaker is forgotten (a clean one has no
			// entry), and the generations of a later run's new entry for
			// the host start again from the bottom.
			if t.Generation != 0 && t.Generation < p.gen && p.to != "closed" {
				v.addf("transition %d of %s has generation %d, after generation %d in transition %d: the host's log is out of order",
					seq, t.Host, t.Generation, p.gen, p.seq)
			}
		}
		last[t.Host] = lastTransition{seq: seq, at: t.At, gen: t.Generation, to: t.To}
	})
}

func (v *verifier) readCases() {
	v.each(bucketCases, func(bk *bolt.Bucket, k, val []byte) {
		v.rep.Cases++
		seq, ok := v.seqOf("case", bk, k)
		if !ok {
			return
		}
		c, err := store.DecodeCase(seq, val)
		if err != nil {
			v.addf("%v", err)
			return
		}
		switch {
		case c.Host == "" || c.URL == "" || c.At.IsZero():
			v.addf("case %d is malformed: host %q, URL %q, at %s", seq, c.Host, c.URL, c.At)
		case !c.Resolved.IsZero() && c.Resolved.Before(c.At):
			v.addf("case %d of %s was resolved at %s, before it was raised at %s", seq, c.Host, c.Resolved, c.At)
		case c.Resolved.IsZero():
			v.openCases[c.Host] = true
		}
	})
	for _, h := range v.caseHolds {
		if !v.openCases[h] {
			v.addf("breaker of %s is held by a case, and the host has no open case to resolve", h)
		}
	}
}

func (v *verifier) readRobots() {
	v.each(bucketRobots, func(bk *bolt.Bucket, k, val []byte) {
		if _, err := store.DecodeRobots(string(k), val); err != nil {
			v.addf("%v", err)
		}
	})
}

func (v *verifier) readHostPages() {
	v.each(bucketHostPages, func(bk *bolt.Bucket, k, val []byte) {
		if _, n := binary.Uvarint(val); n <= 0 || n != len(val) {
			v.addf("page count of host %q: malformed record %x", k, val)
		}
	})
}

func (v *verifier) readCaptures() {
	v.each(bucketCaptures, func(bk *bolt.Bucket, k, val []byte) {
		_, n := binary.Varint(val)
		if n <= 0 || n == len(val) {
			v.addf("capture %q: malformed record", k)
			return
		}
		uri := string(val[n:])
		if v.opts.Archive != nil && v.opts.Archive[uri] == 0 {
			v.addf("payload %s was first captured from %s, which is not in the archive: its revisits refer to nothing", k, uri)
		}
	})
}

// isRobots reports whether u is a robots.txt URL: every run fetches those
// again and archives each answer as it comes.
func isRobots(u string) bool { return strings.HasSuffix(u, "/robots.txt") }

// robotsHops counts, for each URL, the records of it in the archive that
// are hops of a robots.txt redirect: a robots.txt fetch follows up to
// robots.MaxRedirects redirects, to any path or host, and archives each
// answer, so each 3xx record of a robots.txt URL, or of a hop, names the
// next hop by its Location. The archive does not tell which of a URL's
// records a redirect led to, so a URL that is both a hop and a page may
// lend the hop's excuse to one of its page's records.
func robotsHops(archive map[string]int, redirects map[string][]string) map[string]int {
	hops := map[string]int{}
	var from []string
	for u := range archive {
		if isRobots(u) {
			from = append(from, u)
		}
	}
	for range robots.MaxRedirects {
		var next []string
		for _, u := range from {
			for _, target := range redirects[u] {
				if isRobots(target) {
					continue // followed from itself
				}
				if hops[target] == 0 {
					next = append(next, target)
				}
				hops[target]++
			}
		}
		from = next
	}
	for u, n := range hops {
		hops[u] = min(n, archive[u]) // a hop refused by its host's breaker was not archived
	}
	return hops
}

// checkArchived checks one result against the archive.
func (v *verifier) checkArchived(key uint64, r *store.Result) {
	n, hops := v.opts.Archive[r.URL], v.robotsHops[r.URL]
	switch {
	case !r.Failed() && r.Status != 0 && n == 0:
		v.addf("page %s (result %d, status %d) is done but not in the archive", r.URL, key, r.Status)
	case n-hops > 1 && !v.opts.ArchiveRepeats && !isRobots(r.URL) && r.Status != 304:
		v.addf("%s is in %d response or revisit records%s, want 1", r.URL, n, hopsOf(hops))
	}
}

// hopsOf says how many of a URL's records are robots.txt redirect hops.
func hopsOf(hops int) string {
	if hops == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of them hops of a robots.txt redirect)", hops)
}

// checkArchive checks that every URL in the archive is done, or a robots.txt
// fetch.
func (v *verifier) checkArchive() {
	if v.opts.Archive == nil {
		return
	}
	for _, u := range slices.Sorted(maps.Keys(v.opts.Archive)) {
		if n, hops := v.opts.Archive[u], v.robotsHops[u]; !v.done[u] && !isRobots(u) && n > hops {
			v.addf("%s is in the archive (%d records%s) but has no result in the database", u, n, hopsOf(hops))
		}
	}
}
