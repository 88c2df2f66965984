// Package store holds what every crawl store shares, whichever keeps it
// (the bbolt file of package storage, or the fleet's Redis store of
// package redisstore): the records of a crawl (Item, Result, Transition,
// Case, ArchiveState, Capture), their byte encodings, the counters
// (Counts, HostCounts, Tallies) and the Batch of writes a store applies
// in one transaction.
//
// The encodings are part of the file format: items and results, written
// by the million, have compact binary forms (item.go, result.go); breaker
// state, transitions and cases are JSON; robots rules keep the robots
// package's versioned layout (codec.go). Every decoding error names the
// record and its host or sequence number.
package store
