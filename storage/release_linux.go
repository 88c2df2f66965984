//go:build linux

package storage

import (
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// dropMapped tells the kernel this process no longer needs the resident
// pages of the file's mapping (madvise MADV_DONTNEED). The mapping is
// shared and read-only (bbolt writes with pwrite), so every page is clean:
// it stays in the page cache and comes back at the next read that touches
// it, as a minor fault. Only the pages' count in this process's RSS goes.
//
// It runs in a read transaction, which holds bbolt's mmap lock: no commit
// can remap the file meanwhile, so the range is the file's mapping and
// nothing else.
func dropMapped(bdb *bolt.DB) error {
	return bdb.View(func(tx *bolt.Tx) error {
		base, size := bdb.Info().Data, uintptr(tx.Size())
		if base == 0 || size == 0 {
			return nil
		}
		if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, base, size, syscall.MADV_DONTNEED); errno != 0 {
			return errno
		}
		return nil
	})
}
