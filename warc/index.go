package warc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"

	"breakwater/spool"
)

// The archive's index is DIR/index.cdxj, merged from each finished file's
// own sorted index, NAME.warc.gz.cdxj beside it. The writer makes a
// file's index as it writes the file (Writer) and puts it in place when
// the file is finished; a file that has none (archived before indexes
// were, finished by the recovery of a crashed run, or whose index was
// lost) is read once to make it. Merging then costs a read of the small
// per-file indexes, never of the archive.

// IndexName is the name of an archive directory's index.
const IndexName = "index.cdxj"

// indexSuffix ends the name of a WARC file's own index.
const indexSuffix = ".cdxj"

// IndexStats says what an index covers.
type IndexStats struct {
	Files   int   // finished WARC files
	Records int64 // lines: their response and revisit records
	// Read is how many of the files had no index of their own yet and
	// were read to make one.
	Read int
	// Unfinished is how many .open files were left out: a crawl is
	// writing them, or crashed and has not been resumed.
	Unfinished int
}

// ErrNoWARCFiles is WriteIndex's error for a directory without WARC
// files, finished or not: no index is written.
var ErrNoWARCFiles = errors.New("no WARC files (*.warc.gz, *.warc) in the directory")

// WriteIndex writes DIR/index.cdxj (see MergeIndex), replacing it whole:
// a reader sees the old index or the new one.
func WriteIndex(dir string) (IndexStats, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return IndexStats{}, fmt.Errorf("index: %w", err)
	}
	if !slices.ContainsFunc(entries, func(de fs.DirEntry) bool {
		return !de.IsDir() && (isWARC(de.Name()) || isUnfinishedWARC(de.Name()))
	}) {
		return IndexStats{}, fmt.Errorf("index %s: %w", dir, ErrNoWARCFiles)
	}
	tmp, err := os.CreateTemp(dir, "."+IndexName+".tmp-*")
	if err != nil {
		return IndexStats{}, fmt.Errorf("index %s: %w", dir, err)
	}
	defer os.Remove(tmp.Name()) // after a rename, there is nothing by that name
	st, err := MergeIndex(dir, tmp)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, IndexName))
	}
	if err != nil {
		return st, fmt.Errorf("index %s: %w", dir, err)
	}
	return st, nil
}

// MergeIndex writes to w the CDXJ index of every finished WARC file in
// dir (*.warc.gz, *.warc; .open files are left out), its lines sorted
// bytewise, each naming its file as it is named in dir. A file without an
// index of its own is read to make one, kept beside it for next time.
func MergeIndex(dir string, w io.Writer) (IndexStats, error) {
	var st IndexStats
	entries, err := os.ReadDir(dir)
	if err != nil {
		return st, fmt.Errorf("index: %w", err)
	}
	var inputs []lineInput
	defer func() {
		for _, in := range inputs {
			in.r.(io.Closer).Close()
		}
	}()
	for _, de := range entries {
		name := de.Name()
		switch {
		case de.IsDir():
		case isUnfinishedWARC(name):
			st.Unfinished++
		case isWARC(name):
			st.Files++
			r, read, err := fileIndex(filepath.Join(dir, name))
			if err != nil {
				return st, err
			}
			if read {
				st.Read++
			}
			inputs = append(inputs, lineInput{name: name + indexSuffix, r: r})
		}
	}
	st.Records, err = mergeMany(w, inputs, dir)
	if err != nil {
		return st, fmt.Errorf("index: %w", err)
	}
	return st, nil
}

func isWARC(name string) bool {
	return strings.HasSuffix(name, ".warc.gz") || strings.HasSuffix(name, ".warc")
}

func isUnfinishedWARC(name string) bool {
	return strings.HasSuffix(name, openSuffix) && isWARC(strings.TrimSuffix(name, openSuffix))
}

// mergeMany merges inputs, mergeFanIn at a time: more become runs in
// temporary files in dir, merged in turn.
func mergeMany(w io.Writer, inputs []lineInput, dir string) (int64, error) {
	if len(inputs) <= mergeFanIn {
		return mergeLines(w, inputs)
	}
	var runs []lineInput
	defer func() {
		for _, r := range runs {
			r.r.(*spoolReader).Close()
		}
	}()
	for chunk := range slices.Chunk(inputs, mergeFanIn) {
		run := spool.New(dir, 1)
		runs = append(runs, lineInput{name: fmt.Sprintf("%s to %s", chunk[0].name, chunk[len(chunk)-1].name),
			r: &spoolReader{Buffer: run}})
		if _, err := mergeLines(run, chunk); err != nil {
			return 0, err
		}
	}
	for _, r := range runs {
		r.r.(*spoolReader).rewind()
	}
	return mergeMany(w, runs, dir)
}

// spoolReader reads a spool.Buffer from its start once it is written.
type spoolReader struct {
	*spool.Buffer
	r io.Reader
}

func (s *spoolReader) rewind()                    { s.r = s.Reader() }
func (s *spoolReader) Read(p []byte) (int, error) { return s.r.Read(p) }

// fileIndex opens the index of the finished WARC file at path, made by
// reading the file if it has none (read) or has one older than the file.
func fileIndex(path string) (r io.ReadCloser, read bool, err error) {
	side := path + indexSuffix
	if ok, err := indexCurrent(path, side); err != nil || ok {
		if err != nil {
			return nil, false, err
		}
		f, err := os.Open(side)
		if err != nil {
			return nil, false, fmt.Errorf("index: %w", err)
		}
		return f, false, nil
	}
	if err := writeFileIndex(side, func(w io.Writer) error { return indexFile(path, w) }); err != nil {
		return nil, true, err
	}
	f, err := os.Open(side)
	if err != nil {
		return nil, true, fmt.Errorf("index: %w", err)
	}
	return f, true, nil
}

// indexCurrent reports whether the WARC file at path has its own index
// at side, written after the file was.
func indexCurrent(path, side string) (bool, error) {
	si, err := os.Stat(side)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("index: %w", err)
	}
	wi, err := os.Stat(path)
	if err != nil {
		return false, fmt.Errorf("index: %w", err)
	}
	return !si.ModTime().Before(wi.ModTime()), nil
}

// writeFileIndex writes a WARC file's index to side with write, whole or
// not at all (a temporary file renamed). It is not synced: an index lost
// to a power cut is made again by reading its file.
func writeFileIndex(side string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(side), "."+filepath.Base(side)+".tmp-*")
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer os.Remove(tmp.Name())
	err = write(tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), side)
	}
	if err != nil {
		return fmt.Errorf("index %s: %w", side, err)
	}
	return nil
}

// indexFile writes the sorted CDXJ lines of the WARC file at path to w,
// reading every record: gzip members one by one (offset and length are
// a member's), or the records of an uncompressed file.
func indexFile(path string, w io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	defer f.Close()
	name := string(appendJSONString(nil, filepath.Base(path)))
	sorter := newLineSorter(filepath.Dir(path), 0)
	defer sorter.close()
	src := &countingReader{r: bufio.NewReaderSize(f, 64<<10)}
	read := readGzipMembers
	if !strings.HasSuffix(path, ".gz") {
		read = readPlainRecords
	}
	var line []byte
	err = read(src, func(rec *recordHead, offset, length int64) error {
		if rec.indexed() {
			line = appendCDXJ(line[:0], rec.cdxjHead(), offset, length, name)
			return sorter.add(line)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("index %s: %w", path, err)
	}
	return sorter.writeTo(w)
}

// countingReader counts the bytes read through it. It is a ByteReader,
// so that a gzip reader reads no further than its member's end.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// readGzipMembers calls each with the head of the record in each gzip member
// of src, the member's offset and its length.
func readGzipMembers(src *countingReader, each func(rec *recordHead, offset, length int64) error) error {
	var zr gzip.Reader
	br := bufio.NewReaderSize(nil, 32<<10)
	for {
		offset := src.n
		if err := zr.Reset(src); err != nil {
			if err == io.EOF && src.n == offset {
				return nil
			}
			return fmt.Errorf("gzip member at offset %d: %w", offset, err)
		}
		zr.Multistream(false)
		br.Reset(&zr)
		rec, err := readRecordHead(br)
		if err == nil {
			_, err = io.Copy(io.Discard, br)
		}
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", offset, err)
		}
		if err := each(rec, offset, src.n-offset); err != nil {
			return err
		}
	}
}

// readPlainRecords is readGzipMembers for an uncompressed file: each
// record runs to the end of its block, followed by two line ends.
func readPlainRecords(src *countingReader, each func(rec *recordHead, offset, length int64) error) error {
	br := bufio.NewReader(src)
	var at int64
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return nil
		}
		offset := at
		rec, err := readRecordHead(br)
		if err == nil {
			_, err = br.Discard(int(rec.length - int64(len(rec.block))))
		}
		var end [4]byte
		if err == nil {
			_, err = io.ReadFull(br, end[:])
		}
		if err == nil && string(end[:]) != "\r\n\r\n" {
			err = errors.New("its block is not followed by the two line ends that end a record")
		}
		if err != nil {
			return fmt.Errorf("record at offset %d: %w", offset, err)
		}
		// As pywb's and warcio's indexers have it, the record's length
		// leaves out the line ends between records.
		at += rec.headerBytes + rec.length + 4
		if err := each(rec, offset, rec.headerBytes+rec.length); err != nil {
			return err
		}
	}
}

// recordHead is what an index needs of a record: a few WARC fields and
// the start of its block.
type recordHead struct {
	typ, uri, date, digest, contentType string
	length                              int64  // Content-Length: the block's
	headerBytes                         int64  // the version line, the fields and the empty line
	block                               []byte // its first bytes, up to httpHeadCap, for an HTTP block
}

// indexed reports whether the record has a line in the index: a response
// or a revisit.
func (r *recordHead) indexed() bool { return r.typ == "response" || r.typ == "revisit" }

func (r *recordHead) cdxjHead() []byte {
	return cdxjHead(r.uri, r.date, r.typ == "revisit", r.block, r.digest)
}

// maxRecordHeader bounds a record's WARC header block.
const maxRecordHeader = 1 << 20

// readRecordHead reads a record's version line and fields, and for an
// HTTP block its first httpHeadCap bytes, from br.
func readRecordHead(br *bufio.Reader) (*recordHead, error) {
	rec := &recordHead{length: -1}
	var line []byte
	for first := true; ; first = false {
		var err error
		line, err = readLine(br, line[:0], maxRecordHeader-rec.headerBytes)
		rec.headerBytes += int64(len(line))
		if err != nil {
			return nil, err
		}
		text := strings.TrimRight(string(line), "\r\n")
		if first {
			if !strings.HasPrefix(text, "WARC/") {
				return nil, fmt.Errorf("not a WARC record: it begins %q", shorten(text))
			}
			continue
		}
		if text == "" {
			break
		}
		rec.field(text)
	}
	if rec.length < 0 {
		return nil, errors.New("the record has no Content-Length")
	}
	if rec.indexed() && strings.HasPrefix(strings.ToLower(rec.contentType), "application/http") {
		rec.block = make([]byte, min(rec.length, httpHeadCap))
		if _, err := io.ReadFull(br, rec.block); err != nil {
			return nil, fmt.Errorf("the block is cut short: %w", err)
		}
	}
	return rec, nil
}

// readLine appends the next line of br, its "\n" included, to buf: at
// most max bytes of a WARC header block.
func readLine(br *bufio.Reader, buf []byte, max int64) ([]byte, error) {
	for {
		part, err := br.ReadSlice('\n')
		buf = append(buf, part...)
		if int64(len(buf)) > max {
			return buf, fmt.Errorf("the WARC header block is over %d bytes", maxRecordHeader)
		}
		switch {
		case err == bufio.ErrBufferFull:
			continue
		case errors.Is(err, io.EOF):
			return buf, errors.New("the WARC header block is cut short")
		}
		return buf, err
	}
}

// field notes one WARC field line of the record, if it is one it needs.
func (r *recordHead) field(line string) {
	name, value, ok := strings.Cut(line, ":")
	if !ok {
		return
	}
	value = strings.TrimSpace(value)
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "warc-type":
		r.typ = value
	case "warc-target-uri":
		// WARC/1.0 writers put it in angle brackets.
		r.uri = strings.TrimSuffix(strings.TrimPrefix(value, "<"), ">")
	case "warc-date":
		r.date = value
	case "warc-payload-digest":
		r.digest = value
	case "content-type":
		r.contentType = value
	case "content-length":
		if n, err := strconv.ParseInt(value, 10, 64); err == nil && n >= 0 {
			r.length = n
		}
	}
}

func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
