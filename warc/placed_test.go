package warc

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// PageAt finds a page's response or revisit at each entry's placement,
// and refuses an offset where no page's records start.
func TestPageAt(t *testing.T) {
	dir := t.TempDir()
	db := openDB(t, filepath.Join(dir, "c.db"))
	defer db.Close()
	warcs := filepath.Join(dir, "warc")
	w := openWriter(t, db, Options{Dir: warcs, Dedupe: true, Software: "breakwater/test"})
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var entries []*Entry
	for i := range 3 {
		e := encodeAll(t, w, exchange(fmt.Sprintf("http://127.0.0.1:1/p%d", i), "same body", at))
		commit(t, w, db, e...)
		entries = append(entries, e...)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		file, offset := e.Placement()
		typ, uri, err := PageAt(filepath.Join(warcs, file), offset)
		wantType := map[bool]string{false: "response", true: "revisit"}[i > 0]
		if err != nil || uri != fmt.Sprintf("http://127.0.0.1:1/p%d", i) || typ != wantType {
			t.Errorf("PageAt(%s, %d) = %q, %q, %v; want the %s of p%d", file, offset, typ, uri, err, wantType, i)
		}
	}
	file, offset := entries[1].Placement()
	for _, tc := range []struct {
		name   string
		offset int64
		want   string
	}{
		{"the warcinfo record", 0, "a warcinfo record"},
		{"inside a record", offset + 3, "no record starts at offset"},
		{"the response, not the request", entries[0].Offset + entries[0].reqSize, "response record of http://127.0.0.1:1/p0, not"},
		{"past the end", 1 << 30, "ends at offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := PageAt(filepath.Join(warcs, file), tc.offset)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("PageAt at %d: %v, want an error saying %q", tc.offset, err, tc.want)
			}
		})
	}
}
