package crawl

import (
	"runtime/debug"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		live, floor uint64
		want        int
	}{
		{10 * mib, 32 * mib, 320}, // grows by the floor
		{32 * mib, 32 * mib, 100},
		{80 * mib, 32 * mib, 100}, // above the floor: the runtime's own pace
		{1 * mib, 32 * mib, maxFloorPercent},
		{0, 32 * mib, maxFloorPercent},
	} {
		if got := gcPercentFor(tc.live, tc.floor); got != tc.want {
			t.Errorf("gcPercentFor(%d MiB, %d MiB) = %d, want %d", tc.live/mib, tc.floor/mib, got, tc.want)
		}
	}
}

// The floor holds while any engine holds it, GOGC comes back after the
// last, and a GOGC in the environment is left alone.
func TestHoldHeapFloor(t *testing.T) {
	t.Setenv("GOGC", "")
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	release1 := holdHeapFloor(1 << 40) // far above any test's heap: the cap
	release2 := holdHeapFloor(1 << 40)
	if got := debug.SetGCPercent(-1); got != maxFloorPercent {
		t.Errorf("held: GOGC %d, want %d", got, maxFloorPercent)
	}
	debug.SetGCPercent(maxFloorPercent)
	release1()
	release1() // once only
	if got := debug.SetGCPercent(maxFloorPercent); got != maxFloorPercent {
		t.Errorf("one holder left: GOGC %d, want %d", got, maxFloorPercent)
	}
	release2()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("released: GOGC %d, want 100 back", got)
	}

	t.Setenv("GOGC", "150")
	holdHeapFloor(1 << 40)()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set: GOGC %d, want it left at 100", got)
	}
}

func TestHeapFloorUnder(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	for _, tc := range []struct {
		limit int64
		want  uint64
	}{
		{DefaultMemoryLimit, DefaultHeapFloor},
		{64 << 20, 16 << 20},
		{0, 0},
	} {
		if got := heapFloorUnder(tc.limit); got != tc.want {
			t.Errorf("heapFloorUnder(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
	t.Setenv("GOMEMLIMIT", "1GiB")
	if got := heapFloorUnder(DefaultMemoryLimit); got != 0 {
		t.Errorf("with GOMEMLIMIT set: floor %d, want none", got)
	}
}
