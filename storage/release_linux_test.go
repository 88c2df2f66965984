//go:build linux

package storage

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"breakwater/store"
)

// mappedKB is the resident KiB of the mappings of path in this process.
func mappedKB(t *testing.T, path string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps:", err)
	}
	var kb int64
	in := false
	for line := range bytes.Lines(data) {
		f := strings.Fields(string(line))
		switch {
		case len(f) == 0:
		case !strings.HasSuffix(f[0], ":"):
			in = f[len(f)-1] == path
		case in && f[0] == "Rss:":
			n, _ := strconv.ParseInt(f[1], 10, 64)
			kb += n
		}
	}
	return kb
}

// Dropping the file's resident pages takes them out of the process's RSS
// and loses nothing: every URL is read back as it was committed, and the
// file stays sound.
func TestDropMappedReleasesPagesAndKeepsData(t *testing.T) {
	db := openTestDB(t)
	const hosts, per = 200, 20
	var b store.Batch
	for h := range hosts {
		for p := range per {
			url := fmt.Sprintf("http://h%d.test/%d/%s", h, p, strings.Repeat("x", 100))
			b.Add(store.Item{Host: fmt.Sprintf("h%d.test", h), URL: url, Hash: store.HashOf(url)})
		}
	}
	if _, err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	for h := range hosts { // read every host's queue: its pages are mapped in
		if _, err := db.LoadQueued(fmt.Sprintf("h%d.test", h), 0, per); err != nil {
			t.Fatal(err)
		}
	}
	before := mappedKB(t, db.path)
	if before < 64 {
		t.Fatalf("%d KiB of the file resident after reading it all; want it mapped in", before)
	}
	if err := dropMapped(db.bolt); err != nil {
		t.Fatal(err)
	}
	if after := mappedKB(t, db.path); after > before/4 {
		t.Errorf("%d KiB resident after dropMapped, %d before; want most released", after, before)
	}
	for h := range hosts {
		items, err := db.LoadQueued(fmt.Sprintf("h%d.test", h), 0, per)
		if err != nil || len(items) != per {
			t.Fatalf("host %d after dropMapped: %d items, %v; want %d", h, len(items), err, per)
		}
	}
}
