package breaker

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnusedAPIRemoved keeps out exported names that nothing used and that
// were removed: an error for a refused Decision (callers branch on the
// Decision's fields) and class predicates the breaker never consulted.
func TestUnusedAPIRemoved(t *testing.T) {
	removed := map[string]bool{"Decision.Err": true, "ErrOpen": true, "Class.IsFailure": true, "Class.IsNeutral": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			for _, n := range declNames(decl) {
				if removed[n] {
					t.Errorf("%s: %s is back", fset.Position(decl.Pos()), n)
				}
			}
		}
	}
}

// declNames returns the names decl declares, methods as Type.Method.
func declNames(decl ast.Decl) []string {
	var names []string
	switch d := decl.(type) {
	case *ast.FuncDecl:
		name := d.Name.Name
		if d.Recv != nil && len(d.Recv.List) == 1 {
			typ := d.Recv.List[0].Type
			if star, ok := typ.(*ast.StarExpr); ok {
				typ = star.X
			}
			if id, ok := typ.(*ast.Ident); ok {
				name = id.Name + "." + name
			}
		}
		names = append(names, name)
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			switch s := spec.(type) {
			case *ast.ValueSpec:
				for _, id := range s.Names {
					names = append(names, id.Name)
				}
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			}
		}
	}
	return names
}
