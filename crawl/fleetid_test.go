package crawl

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultFleetID: the default ID is the host name and a random
// suffix, kept in the WARC directory (or the state directory) so that a
// restart keeps it; another directory gets another suffix; a bad suffix
// file is replaced; the ID is always a valid --fleet-id.
func TestDefaultFleetID(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	host, _ := os.Hostname()
	warcA, warcB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	first, err := defaultFleetID(warcA)
	if err != nil {
		t.Fatal(err)
	}
	if !validFleetID(first) || !strings.HasSuffix(first, "-"+strings.TrimSpace(readFile(t, filepath.Join(warcA, fleetSuffixFile)))) {
		t.Errorf("ID %q: not valid, or not ending with the kept suffix", first)
	}
	if validFleetID(host) && !strings.HasPrefix(first, host+"-") {
		t.Errorf("ID %q does not start with the host name %q", first, host)
	}
	for _, tc := range []struct {
		dir  string
		same bool
	}{{warcA, true}, {warcB, false}, {"", false}} {
		id, err := defaultFleetID(tc.dir)
		if err != nil {
			t.Fatal(err)
		}
		if (id == first) != tc.same {
			t.Errorf("ID for %q: %q, first %q: want same %v", tc.dir, id, first, tc.same)
		}
		if again, _ := defaultFleetID(tc.dir); again != id {
			t.Errorf("ID for %q changed between runs: %q then %q", tc.dir, id, again)
		}
	}
	if _, err := os.Stat(filepath.Join(os.Getenv("XDG_STATE_HOME"), "breakwater", "fleet-suffix")); err != nil {
		t.Errorf("without --warc the suffix is not kept in the state directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(warcB, fleetSuffixFile), []byte("bad/suffix\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if id, _ := defaultFleetID(warcB); !validFleetID(id) || strings.Contains(id, "bad") {
		t.Errorf("a bad suffix file gave ID %q", id)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
