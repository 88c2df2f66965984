//go:build !linux

package warc

import "os"

// dataSync makes the records appended to f durable before the commit that
// names them.
func dataSync(f *os.File) error { return f.Sync() }
