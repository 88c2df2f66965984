package crawl

import (
	"runtime/debug"
	"testing"
)

// The crawl's memory limit holds while it runs and the one before it
// comes back after; zero, or GOMEMLIMIT in the environment, leaves the
// runtime's own.
func TestApplyMemoryLimit(t *testing.T) {
	const before = 1 << 40
	for _, tc := range []struct {
		name  string
		limit int64
		env   string
		want  int64
	}{
		{"set", 64 << 20, "", 64 << 20},
		{"zero leaves it", 0, "", before},
		{"GOMEMLIMIT wins", 64 << 20, "1GiB", before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", tc.env)
			prev := debug.SetMemoryLimit(before)
			defer debug.SetMemoryLimit(prev)
			restore := applyMemoryLimit(tc.limit)
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("while running: limit %d, want %d", got, tc.want)
			}
			restore()
			if got := debug.SetMemoryLimit(-1); got != before {
				t.Errorf("after: limit %d, want %d back", got, before)
			}
		})
	}
}
