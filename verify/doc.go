// Package verify states the crawl's invariants once, over a view of the
// crawl that either store produces: the bbolt file (package storage) and
// the fleet's Redis store (package redisstore) each present their records
// host by host (Host) plus what they keep for the crawl as a whole
// (Crawl), and Run checks them with the same rules, into one Report with
// one cap on the problems kept.
//
// What only one store's layout has (bbolt's pages and buckets, sequence
// numbers and key encodings; Redis's ready sets and leases) is checked by
// that store while it produces the view, and reported into the same
// Report. A check that needs a part of the view a store does not keep
// (Parts) is named in Report.NotChecked: it never passes silently.
//
// Memory follows one host: a store hands Run one Host at a time. The one
// exception is a seen set kept without hosts (the bbolt file's), which is
// held whole, as the store itself holds it, with one bit per URL besides.
package verify
