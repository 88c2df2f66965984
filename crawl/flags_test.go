package crawl

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/flags.md from the settings table")

// docs/flags.md is the settings table rendered; it fails when stale.
// Regenerate it with: go test ./crawl -run TestFlagsDoc -update
func TestFlagsDoc(t *testing.T) {
	path := filepath.Join("..", "docs", "flags.md")
	want := FlagsMarkdown()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (generate it: go test ./crawl -run TestFlagsDoc -update)", err)
	}
	if string(got) != want {
		t.Errorf("%s is stale: regenerate it with go test ./crawl -run TestFlagsDoc -update", path)
	}
	for _, f := range Flags() {
		if !strings.Contains(string(got), "`--"+f.Name+"` ") {
			t.Errorf("%s does not list --%s", path, f.Name)
		}
	}
}

// Each entry is a flag of its own: a unique name, a group, help, a field
// of a known kind that no other flag binds, and a default that a library
// user of DefaultOptions gets too.
func TestFlagTableEntries(t *testing.T) {
	names := map[string]bool{}
	fields := map[uintptr]string{}
	var v FlagValues
	for _, f := range Flags() {
		switch {
		case names[f.Name]:
			t.Errorf("--%s is in the table twice", f.Name)
		case f.Help == "" || f.Group < 0 || f.Group >= groupCount:
			t.Errorf("--%s lacks help or a group", f.Name)
		case !f.Stored && f.Why == "":
			t.Errorf("--%s is not stored and does not say why", f.Name)
		}
		names[f.Name] = true
		_ = f.Type() // panics on a field of unknown kind
		p := reflect.ValueOf(f.field(&v)).Pointer()
		if other, ok := fields[p]; ok {
			t.Errorf("--%s and --%s bind the same field", f.Name, other)
		}
		fields[p] = f.Name
		if f.Secret != nil && !f.Stored {
			t.Errorf("--%s is secret but not stored: nothing shows it to mask", f.Name)
		}
	}
	for _, g := range Groups() {
		n := 0
		for _, f := range Flags() {
			if f.Group == g {
				n++
			}
		}
		if n == 0 {
			t.Errorf("group %q has no flag", g)
		}
	}
	// A few defaults as crawl --help has always shown them.
	for name, want := range map[string]string{"workers": "32", "delay": "1s", "scope": "seeds", "max-depth": "20",
		"breaker": "true", "retry-budget": "0.2", "fleet-lease": "10s", "db": "breakwater.db", "exclude": "", "log-level": "info"} {
		if f, _ := LookupFlag(name); f.Default() != want {
			t.Errorf("--%s default %q, want %q", name, f.Default(), want)
		}
	}
}
