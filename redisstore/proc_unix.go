//go:build unix

package redisstore

import (
	"errors"
	"syscall"
)

// processRuns reports whether a process pid runs on this machine (in this
// PID namespace): signal 0 finds it, or finds it not ours to signal.
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
