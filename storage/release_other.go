//go:build !linux

package storage

import bolt "go.etcd.io/bbolt"

// dropMapped does nothing here: the kernel reclaims the clean mapped pages
// of the file under pressure anyway.
func dropMapped(*bolt.DB) error { return nil }
