package control

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The socket is a 0600 socket from the moment it is at its path, the
// directory it was bound in first is gone, and its owner is served.
func TestServeSocketIsOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "crawl.db.sock")
	serveAt(t, path, newRecorder())
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "crawl.db.sock" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %q, want only the socket", names)
	}
	if st, err := NewClient(path).Status(); err != nil || !reflect.DeepEqual(st, fStatus) {
		t.Errorf("Status from the socket's owner = %+v, %v", st, err)
	}
}

// A file at the socket's path that is not a socket is someone's data:
// Serve refuses to replace it.
func TestServeKeepsAFileThatIsNotASocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db.sock")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Serve(t.Context(), path, newRecorder(), discard); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Serve over a regular file: err = %v, want one naming %s", err, path)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep me" {
		t.Errorf("the file was changed: %q, %v", b, err)
	}
}

// The temp-dir home of long socket paths is made 0700, and one that is a
// symbolic link is refused.
func TestEnsurePrivateDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := ensurePrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	wide := filepath.Join(base, "wide")
	if err := os.Mkdir(wide, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(wide, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(wide); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fresh, wide} {
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: mode %v (err %v), want 0700", filepath.Base(dir), fi.Mode(), err)
		}
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(link); err == nil || !strings.Contains(err.Error(), link) {
		t.Errorf("ensurePrivateDir(symlink) = %v, want it refused by name", err)
	}
}

func TestPeerAllowed(t *testing.T) {
	for _, tt := range []struct {
		peer  int
		known bool
		own   int
		ok    bool
	}{
		{1000, true, 1000, true},
		{1001, true, 1000, false},
		{0, true, 1000, false}, // root is another user too
		{1000, true, 0, false},
		{0, true, 0, true},
		{1001, false, 1000, true}, // not known: the socket's mode decides
	} {
		err := peerAllowed(tt.peer, tt.known, tt.own)
		var pe *PeerError
		if tt.ok != (err == nil) || !tt.ok && (!errors.As(err, &pe) || pe.PeerUID != tt.peer || pe.OwnUID != tt.own) {
			t.Errorf("peerAllowed(%d, %v, %d) = %v, want allowed %v", tt.peer, tt.known, tt.own, err, tt.ok)
		}
	}
}
