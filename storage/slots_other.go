//go:build !unix

package storage

// allocSlots returns n zeroed slots for the seen table.
func allocSlots(n int) []uint64 { return make([]uint64, n) }

// freeSlots releases slots from allocSlots.
func freeSlots([]uint64) {}
