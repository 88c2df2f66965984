package wacz

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// openSuffix marks a WARC file the crawl is still writing.
const openSuffix = ".open"

// Listing is a directory's WARC files as packaging sees them, taken in
// one read of the directory.
type Listing struct {
	// Finished are the paths of the finished files (*.warc.gz, *.warc),
	// sorted by name: what a package may hold.
	Finished []string
	// Unfinished are the paths of the files still being written (.open),
	// or left open by a crawl that crashed and was not resumed.
	Unfinished []string
	// UnfinishedSince is the earliest time an unfinished file was begun
	// (its warcinfo record's WARC-Date): a page fetched at or after it may
	// be in no finished file. Zero when there is no unfinished file whose
	// first record can be read yet.
	UnfinishedSince time.Time
}

// ListWARCs lists dir's WARC files.
func ListWARCs(dir string) (*Listing, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list WARC files: %w", err)
	}
	l := &Listing{}
	for _, de := range entries {
		name, path := de.Name(), filepath.Join(dir, de.Name())
		switch {
		case !de.Type().IsRegular():
		case strings.HasSuffix(name, ".warc.gz"+openSuffix) || strings.HasSuffix(name, ".warc"+openSuffix):
			l.Unfinished = append(l.Unfinished, path)
		case strings.HasSuffix(name, ".warc.gz") || strings.HasSuffix(name, ".warc"):
			l.Finished = append(l.Finished, path)
		}
	}
	for _, path := range l.Unfinished {
		// A file just created may not hold its first record yet: it was
		// begun now, after every page the caller has read.
		if t, err := warcinfoDate(path); err == nil && (l.UnfinishedSince.IsZero() || t.Before(l.UnfinishedSince)) {
			l.UnfinishedSince = t
		}
	}
	return l, nil
}

// warcinfoDate is the WARC-Date of the first record of the WARC file at
// path, gzipped or not: its warcinfo record, written as the file is
// begun. Only that record is read; the file may be growing.
func warcinfoDate(path string) (time.Time, error) {
	f, err := os.Open(path)
	if err != nil {
		return time.Time{}, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.Contains(filepath.Base(path), ".warc.gz") {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return time.Time{}, err
		}
		zr.Multistream(false)
		r = zr
	}
	tp := textproto.NewReader(bufio.NewReader(io.LimitReader(r, 64<<10)))
	version, err := tp.ReadLine()
	if err != nil {
		return time.Time{}, err
	}
	if !strings.HasPrefix(version, "WARC/") {
		return time.Time{}, fmt.Errorf("%s: no WARC record at its start", path)
	}
	h, err := tp.ReadMIMEHeader()
	if err != nil {
		return time.Time{}, err
	}
	return time.Parse(time.RFC3339Nano, h.Get("WARC-Date"))
}
