//go:build !unix

package bench

import "os"

// maxRSSKB is 0 where there is no rusage.
func maxRSSKB(*os.ProcessState) int64 { return 0 }
