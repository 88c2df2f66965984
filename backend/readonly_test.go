package backend_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"breakwater/backend"
	"breakwater/redisstore/redistest"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/verify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A target that names no store is the user's to fix, and nothing is
// created for it: not a file, not a connection.
func TestOpenReadOnlyRefusesNoStore(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		target backend.Target
		want   string
	}{
		{"missing file", backend.Target{DB: filepath.Join(dir, "missing.db")}, "no such file"},
		{"a file name as the store", backend.Target{Store: "crawl-store"}, `--store "crawl-store": want redis://`},
		{"another scheme", backend.Target{Store: "http://127.0.0.1:1/0"}, "want redis://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro, err := tc.target.OpenReadOnly(context.Background())
			if err == nil {
				ro.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, backend.ErrTarget) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrTarget naming %q", err, tc.want)
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) > 0 {
		t.Errorf("refused opens left %d files behind", len(ents))
	}
}

// A file opens read-only and verifies without a byte of it changing; a
// file a crawl holds is ErrLocked.
func TestOpenReadOnlyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crawl.db")
	b, err := backend.Target{DB: path}.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutSettings([]byte(`{"seeds":["http://a.test/"]}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)

	ro, err := backend.Target{DB: path}.OpenReadOnly(context.Background())
	if err != nil {
		t.Fatalf("open read-only: %v", err)
	}
	rep, err := ro.Verify(context.Background(), verify.Options{MaxProblems: 10})
	if err != nil || !rep.OK() {
		t.Errorf("verify: %v, %+v", err, rep)
	}
	if _, ok, err := ro.ArchiveState(); ok || err != nil {
		t.Errorf("archive state of a crawl without one: ok %v, err %v", ok, err)
	}
	if s, err := ro.Settings(); err != nil || !bytes.Contains(s, []byte("a.test")) {
		t.Errorf("settings: %q, %v", s, err)
	}
	if ro.Path() != path {
		t.Errorf("path %q, want %q", ro.Path(), path)
	}
	if err := ro.Close(); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Error("opening read-only and verifying changed the file")
	}

	holder, err := storage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if ro, err := (backend.Target{DB: path}).OpenReadOnly(context.Background()); !errors.Is(err, backend.ErrLocked) {
		if err == nil {
			ro.Close()
		}
		t.Errorf("open of a file a crawl holds: %v, want ErrLocked", err)
	}
}

// A fleet's store must hold a crawl to be read; it verifies, and has no
// one archive of the crawl to check.
func TestOpenReadOnlyFleet(t *testing.T) {
	srv := redistest.Start(t)
	target := backend.Target{Store: srv.URL()}
	if ro, err := target.OpenReadOnly(context.Background()); err == nil {
		ro.Close()
		t.Fatal("an empty store opened read-only")
	} else if !strings.Contains(err.Error(), "holds no Breakwater crawl") {
		t.Errorf("open of an empty store: %v", err)
	}
	b, err := target.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.PutSettings([]byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := target.OpenReadOnly(context.Background())
	if err != nil {
		t.Fatalf("open read-only: %v", err)
	}
	defer ro.Close()
	rep, err := ro.Verify(context.Background(), verify.Options{MaxProblems: 10})
	if err != nil || !rep.OK() {
		t.Errorf("verify: %v, %+v", err, rep)
	}
	if _, _, err := ro.ArchiveState(); !errors.Is(err, store.ErrUnsupported) {
		t.Errorf("archive state of a fleet: %v, want ErrUnsupported", err)
	}
}
