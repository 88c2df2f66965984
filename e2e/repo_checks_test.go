package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// trackedFiles lists the repository's files as git knows them, or skips
// the test outside a git checkout (a source tarball).
func trackedFiles(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("git", "-C", "..", "ls-files").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	return strings.Fields(string(out))
}

// TestDocumentationStaysShort keeps the two documents a newcomer reads
// first readable in one sitting; the rest belongs in docs/.
func TestDocumentationStaysShort(t *testing.T) {
	for _, name := range []string{"README.md", "BENCHMARKS.md"} {
		data, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if n := bytes.Count(data, []byte("\n")); n > 200 {
			t.Errorf("%s has %d lines; keep it to 200 and move the rest to docs/", name, n)
		}
	}
}

// TestNothingPointsOutsideTheRepository: whoever clones the repository
// has only what is in it.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	for _, name := range trackedFiles(t) {
		data, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			continue // deleted in the working tree
		}
		if bytes.Contains(data, []byte("../"+"shared")) {
			t.Errorf("%s points outside the repository (../%s)", name, "shared")
		}
	}
}

// TestNoIssueNumbersInCode: code says why in its own words; which issue
// asked for it is in git's history.
func TestNoIssueNumbersInCode(t *testing.T) {
	issue := regexp.MustCompile(`(?i)\bissues? #?[0-9]+\b|\(#[0-9]+\)`)
	for _, name := range trackedFiles(t) {
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := os.Open(filepath.Join("..", name))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			if m := issue.FindString(sc.Text()); m != "" {
				t.Errorf("%s:%d names an issue (%q)", name, line, m)
			}
		}
		f.Close()
	}
}

// TestEngineKnowsNoStore: the engine runs on interfaces; which store it
// runs on is the backend package's business alone.
func TestEngineKnowsNoStore(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "breakwater/crawl").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "breakwater/storage" || dep == "breakwater/redisstore" {
			t.Errorf("crawl depends on %s", dep)
		}
	}
}

// TestCommandsOpenStoresThroughBackend: the commands name a store by the
// target the user gave (--db, --store) and open it through package
// backend; neither store's package is theirs to import, nor is telling a
// store URL from a file anyone's but the package that opens backends.
func TestCommandsOpenStoresThroughBackend(t *testing.T) {
	out, err := exec.Command("go", "list", "-f",
		`{{join .Imports " "}} {{join .TestImports " "}}`, "breakwater/cli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(out)) {
		if imp == "breakwater/storage" || imp == "breakwater/redisstore" {
			t.Errorf("cli imports %s: open the store through breakwater/backend", imp)
		}
	}
	isURL := []byte("redisstore" + ".IsURL(") // split, so that this file is not a hit
	for _, name := range trackedFiles(t) {
		if !strings.HasSuffix(name, ".go") || strings.HasPrefix(name, "backend/") || strings.HasPrefix(name, "redisstore/") {
			continue
		}
		data, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(data, isURL) {
			t.Errorf("%s tells a store URL from a file itself (redisstore.IsURL): that is package backend's", name)
		}
	}
}
