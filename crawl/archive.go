package crawl

import (
	"fmt"
	"net/http"

	"breakwater/fetch"
	"breakwater/redisstore"
	"breakwater/storage"
	"breakwater/warc"
)

// openArchive opens the crawl's WARC writer, or none without --warc. A
// crashed run's unfinished file is finished here, before any new record.
func (e *Engine) openArchive() error {
	o := e.opts.WARC
	if o.Dir == "" {
		return nil
	}
	// In a fleet each process keeps its own files, named after the
	// process (HOSTNAME-PID by default), and its own state in the store.
	var state warc.Store
	var name string
	switch db := e.db.(type) {
	case *storage.DB:
		state = db
	case *redisstore.Store:
		state, name = db.ArchiveStore(e.fleetID()), e.fleetID()
	default:
		return fmt.Errorf("--warc: a store of type %T keeps no archive state", e.db)
	}
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

// archiveEntry encodes the exchange that ends a lease, for the commit that
// stores its result: nil when there is no archive or nothing came back.
// A 304 to a refresh is a revisit of the full response record that holds
// the page it keeps (Result.Archived). A robots.txt lease's answers were
// archived as they came (archiveAside): one that ends its URL as failed
// adds no record of the URL, which was never asked.
func (e *Engine) archiveEntry(x *exchange) *warc.Entry {
	if e.archive == nil || x.resp == nil || x.robots {
		return nil
	}
	ex, ok := exchangeOf(x.resp)
	if !ok {
		return nil
	}
	if x.resp.Status == http.StatusNotModified && x.prior != nil && !x.prior.Archived.Date.IsZero() {
		ex.NotModified, ex.Original = true, x.prior.Archived
	}
	return e.encodeEntry(ex)
}

// archived notes in r where the archive holds its page after entry, the
// records that end x's lease: the full response record a later 304 is a
// revisit of. A 304 adds no page (r keeps the one its refresh kept, and
// where it is); any other answer archived is the page now, whether a
// response or a revisit of an identical payload. Without records (no
// --warc, or none could be encoded) a new answer leaves r in no archive,
// and its next refresh asks for the page in full (pageRequest).
func archived(r *storage.Result, x *exchange, entry *warc.Entry) {
	if entry != nil && x.resp.Status != http.StatusNotModified {
		r.Archived = entry.Original
	}
}

// archiveAside adds the records of a fetch that ends no lease of its own
// (robots.txt) to the next commit.
func (e *Engine) archiveAside(resp *fetch.Response) {
	if e.archive == nil || resp == nil {
		return
	}
	ex, ok := exchangeOf(resp)
	if !ok {
		return
	}
	if entry := e.encodeEntry(ex); entry != nil {
		e.submit(func(b *storage.Batch) { b.Attach(entry) })
	}
	resp.Release() // encoded: the recorded bytes are done with
}

func (e *Engine) encodeEntry(ex warc.Exchange) *warc.Entry {
	entry, err := e.archive.Encode(ex)
	if err != nil {
		e.log.Error("archive: encode records", "url", ex.URI, "err", err)
		return nil
	}
	return entry
}

// exchangeOf is resp as it crossed the wire, if an answer came.
func exchangeOf(resp *fetch.Response) (warc.Exchange, bool) {
	w := resp.Wire
	if w == nil || resp.Status == 0 || w.Response.Size() == 0 {
		return warc.Exchange{}, false
	}
	return warc.Exchange{URI: resp.URL, Date: resp.Started, Request: w.Request, Response: w.Response,
		IP: w.RemoteIP, Truncated: w.Truncated}, true
}

// closeArchive finishes the file being written; the frontier has made its
// last commit.
func (e *Engine) closeArchive() error {
	if e.archive == nil {
		return nil
	}
	if err := e.archive.Close(); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	return nil
}
