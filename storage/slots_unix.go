//go:build unix

package storage

import (
	"syscall"
	"unsafe"
)

// allocSlots returns n zeroed slots for the seen table, mapped outside the
// Go heap. The table is large, long-lived and holds no pointers: on the
// heap, the GC would let the heap grow to twice the table's size on top of
// it before collecting, doubling what the seen set costs.
func allocSlots(n int) []uint64 {
	b, err := syscall.Mmap(-1, 0, n*8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]uint64, n) // no mapping to be had: the heap will do
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n)
}

// freeSlots releases slots from allocSlots; nothing may use them after.
func freeSlots(slots []uint64) {
	if len(slots) == 0 {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(slots))), len(slots)*8)
	// A heap fallback from allocSlots is not a mapping: Munmap refuses it
	// (EINVAL) and the GC frees it.
	_ = syscall.Munmap(b)
}
