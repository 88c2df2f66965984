//go:build !unix

package control

import "os"

// fileOwner cannot tell a file's owner here; ensurePrivateDir then relies
// on the directory's mode alone.
func fileOwner(os.FileInfo) (int, bool) { return 0, false }
