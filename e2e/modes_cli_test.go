package e2e

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/control"
)

// modesUnder lists the mode of everything under dir, by path relative to
// dir, but the names in skip.
func modesUnder(t *testing.T, dir string, skip ...string) map[string]fs.FileMode {
	t.Helper()
	out := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil // a temporary file gone between the listing and the look
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == "." || slices.Contains(skip, rel) {
			return nil
		}
		info, err := d.Info()
		if os.IsNotExist(err) {
			return nil
		}
		if err != nil {
			return err
		}
		out[rel] = info.Mode()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkPrivate asserts that every file in modes is its owner's only: 0600
// for a file or socket, 0700 for a directory.
func checkPrivate(t *testing.T, when string, modes map[string]fs.FileMode) {
	t.Helper()
	for rel, mode := range modes {
		want := fs.FileMode(0o600)
		if mode.IsDir() {
			want = 0o700
		}
		if mode.Perm() != want {
			t.Errorf("%s: %s has mode %v, want %#o", when, rel, mode, want)
		}
	}
}

// Under the common umask 022 every file and directory a crawl makes (the
// database, the copy of piped seeds, the control socket, the WARC
// directory and files, the metrics textfile) is its owner's only, and a
// file or directory that exists keeps its mode. Not parallel: the umask is
// the process's.
func TestFilesArePrivate(t *testing.T) {
	defer syscall.Umask(syscall.Umask(0o022))
	site := startSite(t, 2, 15)
	dir := t.TempDir()
	db := filepath.Join(dir, "crawl.db")
	warcDir := filepath.Join(dir, "archive", "warc") // both made by the crawl
	metricsFile := filepath.Join(dir, "crawl.prom")
	seeds := filepath.Join(dir, "seeds.txt")
	writeFile(t, seeds, strings.Join(site.Roots(), "\n")+"\n")

	// --seeds - reads standard input, which the crawl copies beside the
	// database: a regular file read as "-" is copied all the same.
	stdin, err := os.Open(seeds)
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	realStdin := os.Stdin
	os.Stdin = stdin
	defer func() { os.Stdin = realStdin }()
	bg := startBackgroundCrawl(t, crawlArgs(db, "--seeds", "-", "--warc", warcDir, "--metrics-file", metricsFile,
		"--delay", "200ms"))
	os.Stdin = realStdin
	waitFor(t, 5*time.Second, "an open WARC file", func() bool {
		open, _ := filepath.Glob(filepath.Join(warcDir, "*.open"))
		return len(open) > 0
	})
	live := modesUnder(t, dir, "seeds.txt")
	for _, want := range []string{"crawl.db", "crawl.db.sock", "archive", "archive/warc"} {
		if _, ok := live[want]; !ok {
			t.Errorf("while the crawl runs there is no %s: %v", want, live)
		}
	}
	if live["crawl.db.sock"].Type() != fs.ModeSocket || control.SocketPath(db) != filepath.Join(dir, "crawl.db.sock") {
		t.Errorf("the control socket is not beside the database: %v, %s", live["crawl.db.sock"], control.SocketPath(db))
	}
	copies, opens := 0, 0
	for rel := range live {
		copies += btoi(strings.HasPrefix(rel, cli.SeedsCopyPrefix(db)))
		opens += btoi(strings.HasSuffix(rel, ".open"))
	}
	if copies != 1 || opens != 1 {
		t.Errorf("while the crawl runs: %d copies of the seeds and %d open WARC files, want 1 each: %v", copies, opens, live)
	}
	checkPrivate(t, "while the crawl runs", live)

	bg.cancel()
	<-bg.done
	if bg.res.code != cli.ExitWorkLeft {
		t.Fatalf("the stopped crawl: %s", bg.res)
	}
	after := modesUnder(t, dir, "seeds.txt")
	if _, ok := after["crawl.prom"]; !ok {
		t.Errorf("no metrics file after the run: %v", after)
	}
	finished, _ := filepath.Glob(filepath.Join(warcDir, "*.warc.gz"))
	if len(finished) == 0 {
		t.Errorf("no finished WARC file after the run: %v", after)
	}
	checkPrivate(t, "after the run", after)

	// Modes a user set are theirs: a resume changes none of them, and only
	// what it makes anew (the next WARC file) is private.
	for path, mode := range map[string]fs.FileMode{db: 0o644, warcDir: 0o755, metricsFile: 0o644} {
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	mustRun(t, cli.ExitOK, crawlArgs(db, "--metrics-file", metricsFile)...)
	resumed := modesUnder(t, dir, "seeds.txt")
	for rel, want := range map[string]fs.FileMode{"crawl.db": 0o644, "archive/warc": 0o755, "crawl.prom": 0o644} {
		if got := resumed[rel].Perm(); got != want {
			t.Errorf("after a resume %s has mode %#o, want the %#o it had", rel, got, want)
		}
		delete(resumed, rel)
	}
	if all, _ := filepath.Glob(filepath.Join(warcDir, "*.warc.gz")); len(all) <= len(finished) {
		t.Errorf("the resume made no WARC file of its own: %v", all)
	}
	checkPrivate(t, "after a resume", resumed)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
