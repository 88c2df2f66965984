package e2e

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestEveryPackageHasADocComment keeps the codebase readable top-down: each
// package states what it owns in one place.
func TestEveryPackageHasADocComment(t *testing.T) {
	documented := map[string]bool{} // directory -> some file has a package doc
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || filepath.Ext(path) != ".go" || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		dir := filepath.Dir(path)
		documented[dir] = documented[dir] || f.Doc != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(documented) < 8 {
		t.Fatalf("found only %d package directories; the walk is broken", len(documented))
	}
	for dir, ok := range documented {
		if !ok {
			t.Errorf("package in %s has no doc comment", dir)
		}
	}
}
