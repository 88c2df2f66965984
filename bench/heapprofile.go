package bench

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

// profileHeapPeaks writes a heap profile of this process to path each time
// the heap in use passes its previous high by a tenth, so that the profile
// left at the end shows what held the memory at the peak, not at exit,
// when most of it is gone. stop ends the watch and waits for it.
func profileHeapPeaks(path string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		var high uint64
		var ms runtime.MemStats
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
			if err := writeHeapProfile(path); err != nil {
				fmt.Fprintln(os.Stderr, "bench child:", err)
				return
			}
		}
	}()
	return func() { close(quit); <-done }
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
