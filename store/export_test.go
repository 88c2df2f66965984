package store

import (
	"strings"
	"testing"
)

// Every operation kind has a name, each its own, for the messages that
// refuse one; a value beyond them says it is none.
func TestOpKindNames(t *testing.T) {
	seen := map[string]OpKind{}
	for k := OpAdd; k <= OpPutLinks; k++ {
		name := k.String()
		if strings.HasPrefix(name, "OpKind(") {
			t.Errorf("kind %d has no name", k)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("kinds %d and %d are both named %s", other, k, name)
		}
		seen[name] = k
	}
	if got := (OpPutLinks + 1).String(); got != "OpKind(19)" {
		t.Errorf("the kind after the last is named %q", got)
	}
	if got := OpKind(0).String(); got != "OpKind(0)" {
		t.Errorf("the zero kind is named %q", got)
	}
}
