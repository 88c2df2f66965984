package bench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"
)

// profileHeapPeaks watches this process's heap: each time the heap in use
// passes its previous high by a tenth it writes a heap profile to path (if
// not "") and reads what holds the heap (takeHeapParts), so that what is
// left at the end shows the memory at the peak, not at exit, when most of
// it is gone. stop (which may be called again) ends the watch, waits for it, and returns the parts
// read at the last high (or now, if the heap was never read).
func profileHeapPeaks(path string) (stop func() *HeapParts) {
	var parts *HeapParts // written by the watch, read once it has ended
	var ms runtime.MemStats
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		var high uint64
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse <= high+high/10 {
				continue
			}
			high = ms.HeapInuse
			parts = takeHeapParts(&ms)
			if path == "" {
				continue
			}
			if err := writeHeapProfile(path); err != nil {
				fmt.Fprintln(os.Stderr, "bench child:", err)
				path = ""
			}
		}
	}()
	var once sync.Once
	return func() *HeapParts {
		once.Do(func() {
			close(quit)
			<-done
			if parts == nil { // a run shorter than a tick
				runtime.ReadMemStats(&ms)
				parts = takeHeapParts(&ms)
			}
		})
		return parts
	}
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	// Renamed into place so that a reader never sees half a profile.
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	return nil
}
