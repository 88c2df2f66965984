package warc

import (
	"breakwater/store"
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nlnwa/gowarc/v3"
)

// Defaults for Options' zero fields.
const (
	DefaultPrefix      = "breakwater"
	DefaultMaxFileSize = 1 << 30
)

// openSuffix marks a file still being written.
const openSuffix = ".open"

// Options configure a Writer.
type Options struct {
	Dir    string // where the files go; created if missing
	Prefix string // file names start with it; "" means DefaultPrefix
	// MaxFileSize is the size (compressed, on disk) after which a file is
	// finished and the next commit starts another; 0 means
	// DefaultMaxFileSize.
	MaxFileSize int64
	// Dedupe writes a response whose payload was archived before in this
	// crawl as a revisit of the first capture.
	Dedupe bool
	// KeepSecrets keeps the values of secret request headers
	// (Authorization, Cookie, tokens: fetch.IsSecretHeader) in request
	// records; false, the default, writes SecretMarker instead (see
	// cleanRequest), for an archive that may be handed to others. The
	// warcinfo record says which (breakwater-secrets: masked or kept).
	// A proxy's credentials are never kept.
	KeepSecrets bool
	// Info is written into each file's warcinfo record, after the fields
	// every file has (software, format, hostname), in order.
	Info [][2]string
	// Software names the writer in warcinfo, e.g. "breakwater/1.4".
	Software string
	// Hostname goes into file names and warcinfo; "" means os.Hostname.
	Hostname string
	Now      func() time.Time
	Logger   *slog.Logger
}

// Store is where the archive's state is kept with the crawl's: the
// database file (*storage.DB), or a fleet process's part of the fleet's
// store.
type Store interface {
	ArchiveState() (s store.ArchiveState, ok bool, err error)
	PutArchiveState(s store.ArchiveState) error
	LookupCapture(digest string) (c store.Capture, ok bool, err error)
}

// Writer appends the crawl's records to WARC files in step with the
// crawl's commits (it is the frontier's Archive): the records of the
// pages a commit marks done are in the file, flushed to disk, before that
// commit, and the commit records how far the file is accounted for. A
// crash can leave only records no commit accounted for at the end of a
// file, and Open cuts them off: a page is in the archive exactly when the
// database says it is done.
type Writer struct {
	db   Store
	opts Options

	// Touched by the frontier's writer goroutine only.
	state  store.ArchiveState // as the database has it
	staged store.ArchiveState // as the commit under way will have it
	file   *os.File
	size   int64 // bytes written to file
	// out gathers a commit's records into few writes: one write a record
	// was a system call a page.
	out *bufio.Writer
	// err is the first failure to write the archive, or to have a commit
	// account for what was written: from then on every BeforeCommit
	// returns it, so nothing more is appended after bytes no commit will
	// account for, and no new file is begun while the database still names
	// one that could not be finished (Open finishes only the file the
	// database names). unfinished is that file, for Close to try again.
	err        error
	unfinished string
	// index holds the CDXJ lines of the file being written, of the records
	// commits accounted for; pending those of the commit under way, added
	// once it is made. A file's index is put beside it when it is finished
	// (putIndex); nil after a failure to keep it, and then the file is
	// read to make it when the archive's index is next written.
	index     *lineSorter
	pending   []byte
	indexName string // the file's name, as a CDXJ line's "filename" holds it
	sortRun   int    // bytes of lines sorted in memory at a time; 0 means sortRunBytes
	// indexing is the finished files' indexes being sorted and written,
	// off the writer goroutine, so that commits do not wait for them.
	indexing sync.WaitGroup

	mu     sync.Mutex
	claims map[string]*claim // first captures encoded, not yet committed
}

// Open prepares the archive of the crawl in db: it finishes the file a
// crashed run left open (cut back to what the database accounts for) and
// returns a Writer that starts a new file at its first commit.
func Open(db Store, o Options) (*Writer, error) {
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(o.Prefix, `/\`) {
		return nil, fmt.Errorf("warc prefix %q: must not contain a path separator", o.Prefix)
	}
	if o.MaxFileSize <= 0 {
		o.MaxFileSize = DefaultMaxFileSize
	}
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
		if o.Hostname == "" {
			o.Hostname = "localhost"
		}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("warc directory: %w", err)
	}
	state, _, err := db.ArchiveState()
	if err != nil {
		return nil, err
	}
	w := &Writer{db: db, opts: o, state: state, claims: map[string]*claim{}}
	if err := w.recover(); err != nil {
		return nil, err
	}
	return w, nil
}

// recover finishes the file the last run was writing if it is still
// open. Other .open files are not this crawl's to touch (another crawl
// may share the directory); they are named in a warning.
//
// The file the database names may not be in Dir: the crawl was resumed
// with another --warc (its disk was full, say). If it was moved to Dir
// with the rest, it is finished here; if it is still open in the
// directory it was begun in, it is finished there, where it stays, so
// that no record of a page marked done is lost; if it is in neither, the
// records it accounts for are not in this archive, which the log says
// (the records it may hold past them are of pages not marked done, which
// are fetched again). New files go to Dir in every case.
func (w *Writer) recover() error {
	names, err := filepath.Glob(filepath.Join(w.opts.Dir, "*"+openSuffix))
	if err != nil {
		return fmt.Errorf("warc directory: %w", err)
	}
	found := false
	for _, path := range names {
		name := strings.TrimSuffix(filepath.Base(path), openSuffix)
		if name != w.state.File {
			w.opts.Logger.Warn("archive: leaving an unfinished WARC file alone: this crawl's database does not name it",
				"file", path)
			continue
		}
		found = true
		if err := w.finishAt(path, w.state.Committed, true); err != nil {
			return err
		}
	}
	st := w.state
	elsewhere := st.Dir != "" && filepath.Clean(st.Dir) != filepath.Clean(w.opts.Dir)
	switch {
	case st.File == "":
		return nil
	case found:
		if old := filepath.Join(st.Dir, st.File+openSuffix); elsewhere && exists(old) {
			w.opts.Logger.Warn("archive: the unfinished WARC file was finished in the new --warc directory; "+
				"its copy in the old directory is left alone, unfinished", "finished", filepath.Join(w.opts.Dir, st.File), "copy", old)
		}
		return nil
	case exists(filepath.Join(w.opts.Dir, st.File)):
		return nil // finished by the run that wrote it: the usual case
	case elsewhere && exists(filepath.Join(st.Dir, st.File+openSuffix)):
		path := filepath.Join(st.Dir, st.File+openSuffix)
		if err := w.finishAt(path, st.Committed, true); err != nil {
			return fmt.Errorf("the crawl's unfinished WARC file is not in %s, where this run writes, but in %s: %w "+
				"(move it to %s, or resume with --warc %s)", w.opts.Dir, st.Dir, err, w.opts.Dir, st.Dir)
		}
		w.opts.Logger.Warn("archive: finished the crawl's unfinished WARC file in the directory it was begun in, where it stays; "+
			"new files go to the new --warc directory, so the archive is now in both (move the old files in with the new ones "+
			"for verify --warc to see it whole)", "file", strings.TrimSuffix(path, openSuffix), "dir", w.opts.Dir)
	case elsewhere && exists(filepath.Join(st.Dir, st.File)):
		w.opts.Logger.Info("archive: the crawl's earlier WARC files are in another directory; new files go to the --warc directory",
			"earlier", st.Dir, "dir", w.opts.Dir)
	case st.Committed > 0:
		w.opts.Logger.Warn("archive: the database names a WARC file that is not in the --warc directory, unfinished or finished: "+
			"the records of pages marked done it holds are not in this archive unless it is moved here; any records it holds "+
			"past them are of pages not marked done, which will be fetched again; new records go to a new file",
			"file", st.File, "dir", w.opts.Dir, "accounted_bytes", st.Committed)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// finishAt cuts the open file at path to size bytes, the end of its last
// accounted-for record, and gives it its final name; a file with nothing
// accounted for is removed.
func (w *Writer) finishAt(path string, size int64, afterCrash bool) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("finish %s: %w", path, err)
	}
	if afterCrash && info.Size() != size {
		w.opts.Logger.Warn("archive: cut an unfinished WARC file back to its last record of a page marked done; "+
			"the pages of the records cut off were not marked done and will be fetched again",
			"file", path, "bytes", info.Size(), "kept", size)
	}
	if size == 0 {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove %s, which holds no record of a page marked done: %w", path, err)
		}
		return syncDir(filepath.Dir(path))
	}
	if info.Size() > size {
		if err := os.Truncate(path, size); err != nil {
			return fmt.Errorf("cut %s back to %d bytes: %w", path, size, err)
		}
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("finish %s: %w", path, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("finish %s: %w", path, err)
	}
	final := strings.TrimSuffix(path, openSuffix)
	if err := os.Rename(path, final); err != nil {
		return fmt.Errorf("finish %s: %w", path, err)
	}
	return syncDir(filepath.Dir(final))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Encode builds ex's records, on the caller's goroutine. With Dedupe, a
// payload archived before becomes a revisit. The request record holds ex's
// request cleaned of what was the proxy's and, unless KeepSecrets, of
// secret header values (cleanRequest); its digest and length are of that.
func (w *Writer) Encode(ex Exchange) (*Entry, error) {
	ex.Request = cleanRequest(ex.Request, !w.opts.KeepSecrets)
	if !w.opts.Dedupe {
		return encode(ex, nil, w.opts.Dir)
	}
	var claimed *claim
	entry, err := encode(ex, func(digest string, this store.Capture) (*store.Capture, *claim, *claim, error) {
		known, pending, c, err := w.firstCapture(digest, this)
		claimed = c
		return known, pending, c, err
	}, w.opts.Dir)
	if err != nil && claimed != nil {
		// This entry will never be written: its payload's first capture is
		// still to come. Revisits already encoded against the claim keep
		// their full records, written instead (see BeforeCommit).
		w.mu.Lock()
		if w.claims[claimed.digest] == claimed {
			delete(w.claims, claimed.digest)
		}
		w.mu.Unlock()
	}
	return entry, err
}

// firstCapture finds the first capture of digest: one encoded and not yet
// committed (its claim), else one in the database; else this becomes it.
func (w *Writer) firstCapture(digest string, this store.Capture) (known *store.Capture, pending, claimed *claim, err error) {
	w.mu.Lock()
	if c, ok := w.claims[digest]; ok {
		w.mu.Unlock()
		return nil, c, nil, nil
	}
	w.mu.Unlock()
	c, ok, err := w.db.LookupCapture(digest)
	if err != nil || ok {
		return &c, nil, nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if c, ok := w.claims[digest]; ok { // claimed meanwhile
		return nil, c, nil, nil
	}
	claimed = &claim{digest: digest, capture: this}
	w.claims[digest] = claimed
	return nil, nil, claimed, nil
}

// BeforeCommit appends the records of the entries b carries and flushes
// them to disk, then adds to b how far the file is now accounted for.
//
// A revisit must never outlive the capture it refers to: a crash cuts a
// file back to a commit, so the capture must come before it in the file
// or in the same commit. A revisit encoded while its capture was still on
// its way (another worker's, not yet here) is written in full instead if
// that capture is in neither.
func (w *Writer) BeforeCommit(b *store.Batch) error {
	var entries []*Entry
	for _, v := range b.Attached() {
		if e, ok := v.(*Entry); ok && e != nil {
			entries = append(entries, e)
			if e.first != nil {
				e.first.written = true // in this commit, whatever the order within it
			}
		}
	}
	w.pending = w.pending[:0]
	if len(entries) == 0 {
		return nil
	}
	defer func() { // whatever happens, their spools are done with
		for _, e := range entries {
			e.Close()
		}
	}()
	if w.err != nil {
		return w.err
	}
	if w.staged.File != "" {
		// Staged by a BeforeCommit whose commit failed: the file holds
		// records of pages the database has not marked done.
		w.err = fmt.Errorf("archive: %s holds records of a commit that failed",
			filepath.Join(w.opts.Dir, w.staged.File+openSuffix))
		return w.err
	}
	if w.file == nil {
		if err := w.create(); err != nil {
			w.err = err
			return err
		}
	}
	if w.out == nil {
		w.out = bufio.NewWriterSize(w.file, commitBuffer)
	}
	w.out.Reset(w.file)
	for _, e := range entries {
		data, line := e.data, e.index
		if e.of != nil && !e.of.written {
			data, line = e.fallback, e.fallbackIndex
		}
		e.File, e.Offset = w.state.File, w.size
		if line != nil {
			w.pending = appendCDXJ(w.pending, line, e.Offset+e.reqSize, data.Size()-e.reqSize, w.indexName)
		}
		n, err := data.WriteTo(w.out)
		w.size += n
		if err != nil {
			// A PathError names the file and the cause already.
			w.err = fmt.Errorf("archive: %w", err)
			return w.err
		}
		if e.first != nil {
			b.PutCapture(e.first.digest, e.first.capture)
		}
	}
	if err := w.out.Flush(); err != nil {
		w.err = fmt.Errorf("archive: %w", err)
		return w.err
	}
	w.out.Reset(nil) // hold on to no file between commits
	if err := dataSync(w.file); err != nil {
		w.err = fmt.Errorf("archive: flush %s: %w", w.file.Name(), err)
		return w.err
	}
	w.staged = w.state
	w.staged.Committed = w.size
	b.PutArchiveState(w.staged)
	return nil
}

// commitBuffer is how many bytes of records a commit hands the file at a
// time.
const commitBuffer = 256 << 10

// AfterCommit forgets the claims now in the database and finishes a full
// file.
func (w *Writer) AfterCommit() {
	w.mu.Lock()
	maps.DeleteFunc(w.claims, func(_ string, c *claim) bool { return c.written })
	w.mu.Unlock()
	if w.staged.File != "" {
		w.state, w.staged = w.staged, store.ArchiveState{}
		w.indexCommitted()
	}
	if w.file != nil && w.state.Committed >= w.opts.MaxFileSize {
		path := w.file.Name()
		if err := w.finish(); err != nil {
			// The file keeps its .open name, and the database names it:
			// the next run finishes it, provided this one begins no other.
			w.err, w.unfinished = fmt.Errorf("archive: finish a full WARC file: %w", err), path
			w.opts.Logger.Error("archive: finish a full WARC file", "file", path, "err", err)
		}
	}
}

// create starts the next file. Its name is committed to the database
// before the file exists, so that after a crash Open knows it is this
// crawl's; its warcinfo record is accounted for with the first commit.
func (w *Writer) create() error {
	now := w.opts.Now().UTC()
	state := w.state
	state.Serial++
	state.File = fmt.Sprintf("%s-%s-%05d-%s.warc.gz", w.opts.Prefix, now.Format("20060102150405"), state.Serial,
		fileSafe(w.opts.Hostname))
	state.Committed, state.Dir = 0, w.opts.Dir
	if err := w.db.PutArchiveState(state); err != nil {
		return fmt.Errorf("name the next WARC file: %w", err)
	}
	w.state = state
	path := filepath.Join(w.opts.Dir, state.File+openSuffix)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("archive: create a WARC file: %w", err) // a PathError: the file and the cause
	}
	info, err := w.warcinfo(state.File, now)
	if err == nil {
		_, err = f.Write(info)
	}
	if err != nil {
		// No commit accounts for the file yet: a full disk must not be
		// left with half a record in a file only the next run would remove.
		f.Close()
		os.Remove(path)
		return fmt.Errorf("archive: write the warcinfo record of %s: %w", path, err)
	}
	w.file, w.size = f, int64(len(info))
	w.indexName = string(appendJSONString(nil, state.File))
	w.index = newLineSorter(w.opts.Dir, w.sortRun)
	return nil
}

func (w *Writer) warcinfo(name string, now time.Time) ([]byte, error) {
	block := &gowarc.WarcFields{}
	block.Add("software", w.opts.Software)
	block.Add("format", "WARC File Format 1.1")
	block.Add("conformsTo", "https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/")
	block.Add("hostname", w.opts.Hostname)
	secrets := secretsMasked
	if w.opts.KeepSecrets {
		secrets = secretsKept
	}
	block.Add(secretsField, secrets)
	for _, kv := range w.opts.Info {
		block.Add(kv[0], kv[1])
	}
	var content bytes.Buffer
	block.Write(&content)
	id, err := newRecordID()
	if err != nil {
		return nil, err
	}
	f := newWarcFields()
	f.Add(gowarc.WarcType, gowarc.Warcinfo.String())
	f.Add(gowarc.WarcRecordID, "<"+id+">")
	f.Add(gowarc.WarcDate, now.UTC().Format(time.RFC3339Nano))
	f.Add(gowarc.WarcFilename, name)
	f.Add(gowarc.ContentType, gowarc.ApplicationWarcFields)
	var buf bytes.Buffer
	if err := appendMember(&buf, f, bytes.NewReader(content.Bytes()), "", false); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// finish closes the current file at what the database accounts for and
// gives it its final name.
func (w *Writer) finish() error {
	if w.file == nil {
		return nil
	}
	path := w.file.Name()
	err := w.file.Close()
	w.file, w.size = nil, 0
	if err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return w.finishFile(path)
}

// finishFile finishes the open file at path, as the database accounts
// for it, and puts its index beside it.
func (w *Writer) finishFile(path string) error {
	if err := w.finishAt(path, w.state.Committed, false); err != nil {
		return err
	}
	if w.state.Committed > 0 {
		w.putIndex(strings.TrimSuffix(path, openSuffix))
	}
	w.dropIndex()
	return nil
}

// Close finishes the current file, cut back to what the database
// accounts for (after a failed write or commit, the records of pages not
// marked done go), and returns once every finished file's index is
// written. It must follow the frontier's Close: no commit may come
// after it. A full file that could not be finished earlier is tried again;
// if it still cannot be, Close says so, and the next run finishes it.
func (w *Writer) Close() error {
	defer w.indexing.Wait()
	if w.unfinished != "" {
		err := w.finishFile(w.unfinished)
		if err != nil {
			return fmt.Errorf("finish a full WARC file: %w", err)
		}
		w.unfinished = ""
		return nil
	}
	return w.finish()
}

// fileSafe keeps a host name usable in a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == os.PathSeparator || r < ' ' {
			return '_'
		}
		return r
	}, s)
}

// ErrUnfinished is wrapped by Check's error for .open files.
var ErrUnfinished = errors.New("unfinished WARC file")

// indexCommitted adds the lines of the commit just made to the file's
// index.
func (w *Writer) indexCommitted() {
	if w.index == nil || len(w.pending) == 0 {
		return
	}
	if err := w.index.add(w.pending); err != nil {
		w.opts.Logger.Warn("archive: the index of the WARC file being written cannot be kept; "+
			"the file will be read to index it when the archive's index is next written",
			"file", w.state.File, "err", err)
		w.dropIndex()
	}
	w.pending = w.pending[:0]
}

// putIndex writes the index of the finished file at path beside it, in
// the background (Close waits for it). An index that cannot be written is
// only a warning: the file is read to make it when the archive's index is
// next written.
func (w *Writer) putIndex(path string) {
	index := w.index
	w.index = nil
	if index == nil {
		return
	}
	w.indexing.Go(func() {
		defer index.close()
		if err := writeFileIndex(path+indexSuffix, index.writeTo); err != nil {
			w.opts.Logger.Warn("archive: the index of a finished WARC file could not be written; "+
				"the file will be read to index it when the archive's index is next written", "file", path, "err", err)
		}
	})
}

func (w *Writer) dropIndex() {
	if w.index != nil {
		w.index.close()
		w.index = nil
	}
}
