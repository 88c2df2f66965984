package warc

import (
	"os"
	"syscall"
)

// dataSync makes the records appended to f durable before the commit that
// names them. fdatasync flushes the data and the size needed to read it
// back, as fsync does, without waiting on the timestamps fsync also writes.
func dataSync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}
