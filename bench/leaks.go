package bench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"
)

// LeakCheck is what the soak's child finds after Run returns: its
// goroutines and open file descriptors against their counts before the
// crawl, the database open both times. Connections and their goroutines
// close a little after the code that closed them has returned, so the
// counts are read again until they are back or the settle limit passes.
type LeakCheck struct {
	GoroutinesBefore  int `json:"goroutines_before"`
	GoroutinesAtEnd   int `json:"goroutines_at_end"` // as Run returned
	GoroutinesSettled int `json:"goroutines_settled"`
	FDsBefore         int `json:"fds_before"`
	FDsAtEnd          int `json:"fds_at_end"`
	FDsSettled        int `json:"fds_settled"`
	// SettleNS is how long after Run's return both counts were back, or
	// the settle limit when they were not.
	SettleNS int64 `json:"settle_ns"`
	// ExtraFDs are what the descriptors open beyond the baseline's point
	// at (a path, "socket:[inode]"), the first few, when some stayed open.
	ExtraFDs []string `json:"extra_fds,omitempty"`
	// GoroutineDump is the goroutine profile (pprof debug=1: identical
	// stacks counted together) when goroutines stayed above the baseline.
	GoroutineDump string `json:"goroutine_dump,omitempty"`
	NoFile        uint64 `json:"nofile,omitempty"` // the child's RLIMIT_NOFILE soft limit, when raised
}

// Back reports whether both counts fell back to their baselines.
func (l *LeakCheck) Back() bool { return l.GoroutinesBack() && l.FDsBack() }

// GoroutinesBack reports whether the goroutines fell back to the baseline.
func (l *LeakCheck) GoroutinesBack() bool { return l.GoroutinesSettled <= l.GoroutinesBefore }

// FDsBack reports whether the open descriptors fell back to the baseline.
func (l *LeakCheck) FDsBack() bool { return l.FDsSettled <= l.FDsBefore }

// maxExtraFDs is how many leftover descriptors a report names.
const maxExtraFDs = 20

// leakBaseline is the state taken before the crawl.
type leakBaseline struct {
	goroutines int
	fds        []string // readlink of each open descriptor
}

func takeLeakBaseline() *leakBaseline {
	return &leakBaseline{goroutines: runtime.NumGoroutine(), fds: openFDs()}
}

// check reads both counts as Run returns and then every 10 ms until they
// are back or settle has passed.
func (b *leakBaseline) check(settle time.Duration) *LeakCheck {
	end := time.Now()
	fds := openFDs()
	l := &LeakCheck{GoroutinesBefore: b.goroutines, FDsBefore: len(b.fds),
		GoroutinesAtEnd: runtime.NumGoroutine(), FDsAtEnd: len(fds)}
	l.GoroutinesSettled, l.FDsSettled = l.GoroutinesAtEnd, l.FDsAtEnd
	for !l.Back() && time.Since(end) < settle {
		time.Sleep(10 * time.Millisecond)
		fds = openFDs()
		l.GoroutinesSettled, l.FDsSettled = runtime.NumGoroutine(), len(fds)
	}
	l.SettleNS = int64(time.Since(end))
	if !l.FDsBack() {
		extra := multisetMinus(fds, b.fds)
		l.ExtraFDs = extra[:min(len(extra), maxExtraFDs)]
	}
	if !l.GoroutinesBack() {
		var dump strings.Builder
		if err := pprof.Lookup("goroutine").WriteTo(&dump, 1); err != nil {
			fmt.Fprintf(&dump, "goroutine profile: %v\n", err)
		}
		l.GoroutineDump = dump.String()
	}
	return l
}

// openFDs lists what this process's open descriptors point at, sorted.
// The directory read counts itself, the same in every listing. Nil where
// there is no /proc.
func openFDs() []string {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // the directory's own descriptor, closed by now
		}
		out = append(out, target)
	}
	slices.Sort(out)
	return out
}

// multisetMinus returns the elements of a (sorted) not matched one for one
// in b (sorted).
func multisetMinus(a, b []string) []string {
	var out []string
	j := 0
	for _, s := range a {
		for j < len(b) && b[j] < s {
			j++
		}
		if j < len(b) && b[j] == s {
			j++
			continue
		}
		out = append(out, s)
	}
	return out
}
