package crawl

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"breakwater/fetch"
	"breakwater/store"
	"breakwater/warc"
)

// openArchive opens the crawl's WARC writer, or none without --warc. A
// crashed run's unfinished file is finished here, before any new record.
func (e *Engine) openArchive() error {
	o := e.opts.WARC
	if o.Dir == "" {
		return nil
	}
	// On a store several processes crawl, each keeps its own files, named
	// after the process (its fleet ID), and its own state.
	state, name := e.db.Archive(e.processID())
	w, err := warc.Open(state, warc.Options{Dir: o.Dir, Prefix: o.Prefix, MaxFileSize: o.Size, Dedupe: o.Dedupe, Hostname: name,
		KeepSecrets: o.Secrets == WARCSecretsKeep, Software: "breakwater/" + Version, Now: e.opts.Now, Logger: e.log,
		Info: [][2]string{{"robots", "obey"}, {"http-header-user-agent", e.opts.UserAgent},
			{"isPartOf", e.db.Path()}}})
	if err != nil {
		return fmt.Errorf("--warc %s: %w", o.Dir, err)
	}
	e.archive = w
	return nil
}

// A page is done only with its records: the commit that marks it done
// carries them (settle attaches them), so when they cannot be made the
// page is not completed. Encoding fails for faults of ours, never the
// host's: the spool cannot write its temporary file, the fetcher's spool
// could not keep the answer whole, a fleet's store did not answer the
// dedupe lookup. The host answered, and its breaker was told so; the URL
// is deferred (archive-failed) with a short backoff and fetched again,
// its attempts as they were, so no retry of the host's is spent. The
// rule that stops the crawl instead, with an error that names the
// directory or file and the cause (exit 1, like a full disk at write
// time):
//
//   - at once when the cause is a file system's that waiting will not
//     mend: no space (ENOSPC, EDQUOT), read-only (EROFS), permission
//     (EACCES, EPERM), a directory gone (ENOENT, ENOTDIR);
//   - otherwise (a store's hiccup, an I/O error) when one page's records
//     have failed archiveGiveUpTries times in a row over at least
//     archiveGiveUpAfter. The count is the page's, not the crawl's: other
//     pages archived meanwhile do not clear it, or a page that can never
//     be archived would be fetched for ever; when the archive fails for
//     every page, each page's count gets there.
//
// The pages deferred stay queued in the database, so the run that follows
// the fix fetches and archives them.
const (
	archiveRetryBase   = time.Second
	archiveRetryMax    = 10 * time.Second
	archiveGiveUpTries = 5
	archiveGiveUpAfter = time.Minute
)

// archiveFaults counts, per page, the failures to archive it since it
// was last archived, and in all since the last page archived (a warning
// starts an incident, a line at its end says how many retries it cost).
type archiveFaults struct {
	mu      sync.Mutex
	pages   map[store.Hash]*archiveFault
	failing int
}

type archiveFault struct {
	tries int
	first time.Time
}

// failed counts one failure of the page's and reports its tries so far,
// since when it has been failing, and whether it is the first failure
// since a page was last archived.
func (a *archiveFaults) failed(h store.Hash, now time.Time) (tries int, since time.Time, first bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	first = a.failing == 0
	a.failing++
	if a.pages == nil {
		a.pages = map[store.Hash]*archiveFault{}
	}
	f := a.pages[h]
	if f == nil {
		f = &archiveFault{first: now}
		a.pages[h] = f
	}
	f.tries++
	return f.tries, f.first, first
}

// archived forgets the page's failures; failures counts those since the
// last page archived before it.
func (a *archiveFaults) archived(h store.Hash) (failures int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.pages) > 0 {
		delete(a.pages, h)
	}
	failures, a.failing = a.failing, 0
	return failures
}

// permanentArchiveFault reports whether err is a file system's that
// retrying will not mend. Only a file's error counts: a connection
// refused with EPERM (a firewall) is a store's hiccup, not a full disk.
func permanentArchiveFault(err error) bool {
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return false
	}
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EACCES, syscall.EPERM,
		syscall.ENOENT, syscall.ENOTDIR} {
		if errors.Is(pe.Err, errno) {
			return true
		}
	}
	return false
}

// archived is the stage after the request's outcome is known: a lease
// that completes its URL with an answer gets the answer's records, for
// the commit that stores the result, or, if they cannot be made, the
// URL is deferred instead (archiveFailed). A robots.txt lease whose
// answers could not all be archived (x.asideErr) neither completes nor
// counts an attempt of its URL.
func (e *Engine) archived(x *exchange, d disposition) disposition {
	if e.archive == nil {
		return d
	}
	if x.asideErr != nil {
		if d.ending == complete || d.ending == deferURL {
			return e.archiveFailed(x, x.asideErr)
		}
		return d // the URL goes back unattempted: robots.txt is asked again
	}
	if d.ending != complete {
		return d
	}
	entry, err := e.archiveEntry(x)
	if err != nil {
		return e.archiveFailed(x, err)
	}
	if entry != nil {
		if failures := e.archiveFaults.archived(x.lease.Item.Hash); failures > 0 {
			e.log.Info("archive: records are made again", "failures", failures)
		}
		d.records = entry
	}
	return d
}

// archiveFailed defers x's URL, whose records could not be made for err,
// to be fetched again soon, and stops the crawl when the archive is
// beyond retrying (see archiveGiveUpTries).
func (e *Engine) archiveFailed(x *exchange, err error) disposition {
	it := x.lease.Item
	now := e.opts.Now()
	tries, since, first := e.archiveFaults.failed(it.Hash, now)
	var stop error
	switch {
	case permanentArchiveFault(err):
		stop = fmt.Errorf("archive --warc %s: %w", e.opts.WARC.Dir, err)
	case tries >= archiveGiveUpTries && now.Sub(since) >= archiveGiveUpAfter:
		stop = fmt.Errorf("archive --warc %s: the records of %s could not be made %d times in a row over %s: %w",
			e.opts.WARC.Dir, it.URL, tries, now.Sub(since).Round(time.Second), err)
	}
	switch {
	case stop != nil:
		e.log.Error("archive: a page's records could not be made; it is not marked done, and the crawl stops",
			"url", it.URL, "err", err)
		e.halt(stop)
	case first:
		e.log.Warn("archive: a page's records could not be made; it is not marked done, and will be fetched again "+
			"(as will any other until records are made again; those are logged at debug level)",
			"url", it.URL, "err", err)
	default:
		e.log.Debug("archive: a page's records could not be made", "url", it.URL, "tries", tries, "err", err)
	}
	return deferred(it, now.Add(Backoff(tries, archiveRetryBase, archiveRetryMax, e.opts.Rand)), deferArchive)
}

// archiveEntry encodes the exchange that ends a lease: nil when nothing
// came back. A 304 to a refresh is a revisit of the full response record
// that holds the page it keeps (Result.Archived). A robots.txt lease's
// answers were archived as they came (archiveAside): one that ends its
// URL as failed adds no record of the URL, which was never asked.
func (e *Engine) archiveEntry(x *exchange) (*warc.Entry, error) {
	if x.resp == nil || x.robots {
		return nil, nil
	}
	ex, ok, err := exchangeOf(x.resp)
	if !ok || err != nil {
		return nil, err
	}
	if x.resp.Status == http.StatusNotModified && x.prior != nil && !x.prior.Archived.Date.IsZero() {
		ex.NotModified, ex.Original = true, x.prior.Archived
	}
	return e.encode(ex)
}

// noteArchived notes in r where the archive holds its page after entry,
// the records that end x's lease: the full response record a later 304
// is a revisit of. A 304 adds no page (r keeps the one its refresh kept, and
// where it is); any other answer archived is the page now, whether a
// response or a revisit of an identical payload. Without records (no
// --warc, or none could be encoded) a new answer leaves r in no archive,
// and its next refresh asks for the page in full (pageRequest).
func noteArchived(r *store.Result, x *exchange, entry *warc.Entry) {
	if entry != nil && x.resp.Status != http.StatusNotModified {
		r.Archived = entry.Original
	}
}

// archiveAside adds the records of a fetch that ends no lease of its own
// (robots.txt) to the next commit; an error says they could not be made.
func (e *Engine) archiveAside(resp *fetch.Response) error {
	if e.archive == nil || resp == nil {
		return nil
	}
	ex, ok, err := exchangeOf(resp)
	if !ok || err != nil {
		return err
	}
	entry, err := e.encode(ex)
	resp.Release() // encoded, or never to be: the recorded bytes are done with
	if err != nil {
		return err
	}
	e.submit(func(b *store.Batch) { b.Attach(entry) })
	return nil
}

func (e *Engine) encode(ex warc.Exchange) (*warc.Entry, error) {
	if fault := e.opts.encodeFault; fault != nil {
		if err := fault(ex); err != nil {
			return nil, err
		}
	}
	return e.archive.Encode(ex)
}

// exchangeOf is resp as it crossed the wire, if an answer came; an error
// if the answer could not be recorded whole.
func exchangeOf(resp *fetch.Response) (warc.Exchange, bool, error) {
	w := resp.Wire
	if w == nil || resp.Status == 0 {
		return warc.Exchange{}, false, nil
	}
	if err := w.Err(); err != nil {
		return warc.Exchange{}, false, fmt.Errorf("record the answer of %s: %w", resp.URL, err)
	}
	if w.Response.Size() == 0 {
		return warc.Exchange{}, false, nil
	}
	return warc.Exchange{URI: resp.URL, Date: resp.Started, Request: w.Request, Response: w.Response,
		IP: w.RemoteIP, Truncated: w.Truncated}, true, nil
}

// closeArchive finishes the file being written, then writes the archive
// directory's index; the frontier has made its last commit.
func (e *Engine) closeArchive() error {
	if e.archive == nil {
		return nil
	}
	err := e.archive.Close()
	e.writeIndex() // of the files finished, whether or not this one could be
	if err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}

// writeIndex writes index.cdxj in the --warc directory, covering every
// finished file there (another process's too). The index is made from the
// files, and `breakwater index DIR` makes it again: a failure to write it
// is logged, and leaves the run's outcome and exit code as they are.
func (e *Engine) writeIndex() {
	dir := e.opts.WARC.Dir
	st, err := warc.WriteIndex(dir)
	switch {
	case errors.Is(err, warc.ErrNoWARCFiles):
	case err != nil:
		e.log.Error("archive: the index could not be written; the archive itself is whole, "+
			"and 'breakwater index DIR' writes the index", "dir", dir, "err", err)
	default:
		e.log.Info("archive: index written", "file", filepath.Join(dir, warc.IndexName), "records", st.Records,
			"files", st.Files, "files_read", st.Read, "unfinished", st.Unfinished)
	}
}
