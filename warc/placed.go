package warc

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/nlnwa/gowarc/v3"
)

// PageAt reads the records the writer put at offset in the WARC file at
// path for one page (an Entry's Placement): its request record, then
// its response or revisit. It returns the type and the WARC-Target-URI
// of the response or revisit, or what is wrong: no record starts at
// offset, or the records there are not a page's.
func PageAt(path string, offset int64) (typ, uri string, err error) {
	checking.Lock() // see Check
	defer checking.Unlock()
	r, err := gowarc.NewWarcFileReader(path, offset, checkOptions...)
	if err != nil {
		return "", "", fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	defer r.Close()
	var requestURI string
	for i := range 2 {
		rec, err := r.Next()
		switch {
		case errors.Is(err, io.EOF):
			return "", "", fmt.Errorf("%s ends at offset %d: no record of the page", filepath.Base(path), rec.Offset)
		case err != nil:
			return "", "", fmt.Errorf("%s: no record starts at offset %d: %w", filepath.Base(path), offset, err)
		case i == 0 && rec.Offset != offset:
			rec.Close()
			return "", "", fmt.Errorf("%s: no record starts at offset %d (the next one is at %d)", filepath.Base(path), offset, rec.Offset)
		}
		wr := rec.WarcRecord
		t, target := wr.Type(), wr.WarcHeader().Get(gowarc.WarcTargetURI)
		rec.Close()
		switch {
		case i == 1 && (t == gowarc.Response || t == gowarc.Revisit):
			if requestURI != target {
				return "", "", fmt.Errorf("%s at offset %d: the request is of %s, its response of %s", filepath.Base(path), offset, requestURI, target)
			}
			return t.String(), target, nil
		case i == 0 && t == gowarc.Request:
			requestURI = target
		default:
			return "", "", fmt.Errorf("%s at offset %d: a %s record of %s, not a page's request and response", filepath.Base(path), rec.Offset, t, target)
		}
	}
	return "", "", fmt.Errorf("%s at offset %d: a request record with no response or revisit after it", filepath.Base(path), offset)
}
