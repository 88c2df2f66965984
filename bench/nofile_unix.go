//go:build unix

package bench

import (
	"fmt"
	"syscall"
)

// raiseNoFile raises the soft RLIMIT_NOFILE to at least want, up to the
// hard limit, and returns the soft limit in force. A hard limit below want
// is an error: a soak of that many hosts would fail part way with EMFILE,
// which reads like a crawler bug.
func raiseNoFile(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if lim.Cur >= want {
		return lim.Cur, nil
	}
	if lim.Max < want {
		return lim.Cur, fmt.Errorf("RLIMIT_NOFILE: need %d descriptors, the hard limit is %d (raise it with ulimit -Hn as root)", want, lim.Max)
	}
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", want, err)
	}
	return lim.Cur, nil
}
