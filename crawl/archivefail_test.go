package crawl

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/backend"
	"breakwater/redisstore"
	"breakwater/redisstore/redistest"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
)

// archiveRig crawls two small hosts into a database file, or a fleet's
// store, and a WARC directory, with a fault that may fail the encoding of
// any exchange.
type archiveRig struct {
	t     *testing.T
	db    *storage.DB       // the file; nil for a fleet
	fleet *redisstore.Store // the fleet's store; nil for a file
	store Store
	dir   string
	s     site
	rand  func() float64 // nil: rigOptions'
}

func newArchiveRig(t *testing.T) *archiveRig {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "crawl.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return &archiveRig{t: t, db: db, store: backend.File(db), dir: filepath.Join(t.TempDir(), "warc"),
		s: site{}.chain("a.test", 6).chain("b.test", 4)}
}

// newFleetArchiveRig is newArchiveRig on a fleet's store: a Redis server
// of its own, one process. It runs in real time (the store's client is
// not for a synctest bubble), with backoffs a hundredth of their ceiling.
func newFleetArchiveRig(t *testing.T) *archiveRig {
	t.Helper()
	srv := redistest.Start(t)
	st, err := redisstore.Open(t.Context(), srv.URL(), redisstore.Create)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &archiveRig{t: t, fleet: st, store: backend.Fleet(st), dir: filepath.Join(t.TempDir(), "warc"),
		s: site{}.chain("a.test", 6).chain("b.test", 4), rand: func() float64 { return 0.01 }}
}

// pages are the URLs of the site's pages.
func (r *archiveRig) pages() []string { return sortedKeys(r.s) }

// run crawls until the end, each encoding asking fault first (nil: none).
func (r *archiveRig) run(fault func(warc.Exchange) error) (*Engine, Summary, error) {
	r.t.Helper()
	opts := rigOptions(chainURL("a.test", 0), chainURL("b.test", 0))
	opts.WARC = WARCOptions{Dir: r.dir, Dedupe: true}
	if r.fleet == nil {
		// The retries must not count against the host's pages: a page
		// whose records failed comes back unattempted.
		opts.MaxPagesPerHost = 6
	} else {
		opts.Fleet = FleetOptions{ID: "p1", Lease: time.Second}
	}
	if r.rand != nil {
		opts.Rand = r.rand
	}
	opts.encodeFault = fault
	f := siteFetcher(r.s)
	opts.Fetcher, opts.Now, opts.Logger = wired{f}, time.Now, rigLogger(r.t)
	e, err := New(opts, r.store)
	if err != nil {
		r.t.Fatal(err)
	}
	f.refuse = e.circuitOpen
	sum, err := e.Run(r.t.Context())
	return e, sum, err
}

// verify is what verify --warc checks: the archive reads back clean, with
// no unfinished file, every page done is in it, once, and nothing is in
// it that is not done. The file's own Verify checks this; a fleet's
// store is checked here. It returns what the archive holds.
func (r *archiveRig) verify() *warc.Report {
	r.t.Helper()
	rep, err := warc.Check(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	if !rep.OK() {
		r.t.Errorf("archive problems %v, unfinished %v", rep.Problems, rep.Unfinished)
	}
	var v *storage.VerifyReport
	if r.db != nil {
		v, err = r.db.Verify(storage.VerifyOptions{Archive: rep.Responses})
	} else {
		v, err = r.fleet.Verify(r.t.Context(), storage.VerifyOptions{})
		res := r.results()
		for u, got := range res {
			if n := rep.Responses[u]; got.Status != 0 && n != 1 {
				r.t.Errorf("%s is done (status %d) and in %d records, want 1", u, got.Status, n)
			}
		}
		for u := range rep.Responses {
			if _, ok := res[u]; !ok && !strings.HasSuffix(u, "/robots.txt") {
				r.t.Errorf("%s is archived but not done", u)
			}
		}
	}
	if err != nil {
		r.t.Fatal(err)
	}
	for _, p := range v.Problems {
		r.t.Errorf("verify: %s", p)
	}
	return rep
}

// results are the pages done, by URL.
func (r *archiveRig) results() map[string]store.Result {
	r.t.Helper()
	out := map[string]store.Result{}
	if err := r.store.ScanResults(false, func(res *store.Result) error { out[res.URL] = *res; return nil }); err != nil {
		r.t.Fatal(err)
	}
	return out
}

// allDone asserts that every page of the site is done with a 200, at its
// first attempt, and archived once.
func (r *archiveRig) allDone(rep *warc.Report) {
	r.t.Helper()
	res := r.results()
	for _, u := range r.pages() {
		got, ok := res[u]
		switch {
		case !ok:
			r.t.Errorf("%s: not done", u)
		case got.Status != 200 || got.Attempts != 1:
			r.t.Errorf("%s: status %d (%s) after %d attempts, want 200 at the first", u, got.Status, got.ErrorClass, got.Attempts)
		case rep.Responses[u] != 1:
			r.t.Errorf("%s: in %d records, want 1", u, rep.Responses[u])
		}
	}
}

// failing fails the encodings fail says to fail with err, and counts
// them.
type failing struct {
	mu     sync.Mutex
	tries  map[string]int
	failed int
	fail   func(uri string, try int) bool
	err    func(uri string) error
}

func (f *failing) fault(ex warc.Exchange) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tries == nil {
		f.tries = map[string]int{}
	}
	f.tries[ex.URI]++
	if !f.fail(ex.URI, f.tries[ex.URI]) {
		return nil
	}
	f.failed++
	return f.err(ex.URI)
}

// A store's hiccup (here: the dedupe lookup) fails the first two
// encodings of every page and the first of robots.txt: each is fetched
// again after a short wait, unattempted, and the crawl ends with every
// page done and archived once. The hosts did nothing wrong: their
// breakers learnt no failure, no attempt of theirs was spent (nor any of
// --max-pages-per-host), and robots.txt's rules were kept only once
// archived.
func TestArchiveFailuresAreRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { retriedUntilArchived(t, newArchiveRig(t)) })
}

// The same in a fleet: its frontier defers the pages in the store.
func TestFleetArchiveFailuresAreRetried(t *testing.T) {
	retriedUntilArchived(t, newFleetArchiveRig(t))
}

func retriedUntilArchived(t *testing.T, r *archiveRig) {
	f := &failing{
		fail: func(uri string, try int) bool {
			if strings.HasSuffix(uri, "/robots.txt") {
				return try == 1
			}
			return try <= 2
		},
		err: func(uri string) error {
			return errors.New("look up the payload of " + uri + ": store redis://127.0.0.1:6379: read capture: connection reset by peer")
		},
	}
	e, sum, err := r.run(f.fault)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !sum.Exhausted {
		t.Errorf("the run ended with work left: %+v", sum)
	}
	if want := int64(2*len(r.pages()) + 2); f.failed != int(want) || sum.ArchiveRetries != want {
		t.Errorf("%d encodings failed and %d pages were deferred for it, want %d of each", f.failed, sum.ArchiveRetries, want)
	}
	rep := r.verify()
	r.allDone(rep)
	for _, host := range []string{"a.test", "b.test"} {
		if rep.Responses["http://"+host+"/robots.txt"] != 1 {
			t.Errorf("%s's robots.txt in %d records, want 1 (its first answer could not be archived)",
				host, rep.Responses["http://"+host+"/robots.txt"])
		}
		if f.tries["http://"+host+"/robots.txt"] != 2 {
			t.Errorf("%s's robots.txt encoded %d times, want 2: asked again as its first answer was not archived",
				host, f.tries["http://"+host+"/robots.txt"])
		}
		if b, ok := e.breakers.Get(host); ok && !b.Clean() {
			t.Errorf("%s's breaker %+v: the archive's failures were fed to it", host, b)
		}
	}
}

// archiveTrouble is a fault that keeps the archive failing.
type archiveTrouble struct {
	name string
	fail func(uri string, try int) bool
	err  func(dir, uri string) error
	// want is in the run's error, which takes between after and within.
	want          []string
	after, within time.Duration
}

// storeDown fails every page's records (not robots.txt's) as a fleet's
// store that is gone would.
var storeDown = archiveTrouble{
	name: "store down",
	fail: func(uri string, _ int) bool { return !strings.HasSuffix(uri, "/robots.txt") },
	err: func(_, uri string) error {
		return errors.New("look up the payload of " + uri + ": store redis://127.0.0.1:6379: connection refused")
	},
	want:   []string{"could not be made", "times in a row", "connection refused"},
	after:  archiveGiveUpAfter,
	within: 2 * archiveGiveUpAfter,
}

// diskFull fails one page's records as a spool on a full disk would.
var diskFull = archiveTrouble{
	name: "disk full",
	fail: func(uri string, _ int) bool { return uri == chainURL("a.test", 3) },
	err: func(dir, uri string) error {
		spool := filepath.Join(dir, ".breakwater-spool-1234")
		return fmt.Errorf("write the records of %s: spool to %s: %w", uri, spool,
			&fs.PathError{Op: "write", Path: spool, Err: syscall.ENOSPC}) // as the spool says it
	},
	want:   []string{".breakwater-spool-1234", "no space left on device"},
	within: 5 * time.Second,
}

// When the archive keeps failing, the crawl stops with an error naming the
// cause, and no page is done without its records: at once for a file
// system's fault retrying cannot mend (a full disk), after a page failed
// archiveGiveUpTries times over archiveGiveUpAfter for any other. The
// pages it could not archive stay queued, and once the fault is gone the
// same crawl resumes and completes, every page archived once.
func TestArchiveFailureStopsTheCrawl(t *testing.T) {
	for _, tc := range []archiveTrouble{storeDown, diskFull} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { stoppedThenResumed(t, newArchiveRig(t), tc) })
		})
	}
}

// The same in a fleet, for the fault that stops it at once (the other
// takes a minute of real time).
func TestFleetArchiveFailureStopsTheCrawl(t *testing.T) {
	stoppedThenResumed(t, newFleetArchiveRig(t), diskFull)
}

func stoppedThenResumed(t *testing.T, r *archiveRig, tc archiveTrouble) {
	f := &failing{fail: tc.fail, err: func(uri string) error { return tc.err(r.dir, uri) }}
	start := time.Now()
	_, sum, err := r.run(f.fault)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("run: no error, summary %+v", sum)
	}
	for _, w := range tc.want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("run: %v, want it to say %q", err, w)
		}
	}
	if !strings.Contains(err.Error(), r.dir) {
		t.Errorf("run: %v, want it to name the --warc directory", err)
	}
	if took < tc.after || took > tc.within {
		t.Errorf("the run stopped after %s, want between %s and %s", took, tc.after, tc.within)
	}
	if f.failed == 0 {
		t.Fatal("no encoding failed")
	}
	res := r.results()
	for u := range f.tries {
		if got, ok := res[u]; ok && f.fail(u, 1) {
			t.Errorf("%s is done (status %d) though its records were never made", u, got.Status)
		}
	}
	t.Logf("stopped after %s, %d pages done, %d failed encodings: %v", took, len(res), f.failed, err)
	r.verify()

	_, sum, err = r.run(nil)
	if err != nil || !sum.Exhausted {
		t.Fatalf("resume with the fault gone: %v %+v", err, sum)
	}
	r.allDone(r.verify())
}

// Only a file's error that waiting will not mend stops the crawl at once;
// a connection's (a store's hiccup), whatever its errno, is retried.
func TestPermanentArchiveFault(t *testing.T) {
	spool := func(errno syscall.Errno) error {
		return fmt.Errorf("write the records of http://a.test/: spool to /w/.breakwater-spool-1: %w",
			&fs.PathError{Op: "write", Path: "/w/.breakwater-spool-1", Err: errno})
	}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{spool(syscall.ENOSPC), true},
		{spool(syscall.EROFS), true},
		{spool(syscall.EACCES), true},
		{fmt.Errorf("spool: %w", &fs.PathError{Op: "open", Path: "/gone/.breakwater-spool-1", Err: syscall.ENOENT}), true},
		{spool(syscall.EIO), false},
		{fmt.Errorf("look up the payload: %w", &net.OpError{Op: "dial", Net: "tcp",
			Err: os.NewSyscallError("connect", syscall.EPERM)}), false},
		{errors.New("store redis://127.0.0.1:6379: connection refused"), false},
	} {
		if got := permanentArchiveFault(tc.err); got != tc.want {
			t.Errorf("permanentArchiveFault(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
