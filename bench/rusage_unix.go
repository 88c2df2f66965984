//go:build unix

package bench

import (
	"os"
	"syscall"
)

// maxRSSKB is a finished process's peak resident set in KiB, from its
// rusage (Linux counts ru_maxrss in KiB).
func maxRSSKB(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Maxrss)
	}
	return 0
}
