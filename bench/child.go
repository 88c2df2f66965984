package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"breakwater/crawl"
	"breakwater/storage"
)

// ChildReport is what the child process prints, as one JSON line, when its
// crawl ends.
type ChildReport struct {
	Fetched   int64 `json:"fetched"`
	Failed    int64 `json:"failed"`
	Queued    int64 `json:"queued"`
	Exhausted bool  `json:"exhausted"`
	SeedsNS   int64 `json:"seeds_ns"` // reading and checking the seeds file
	WallNS    int64 `json:"wall_ns"`  // the whole crawl, seeds included
	VmHWMKB   int64 `json:"vmhwm_kb"` // the child's own peak RSS at the end
}

// Child is the entry point of the memory section's child process: a crawl
// set up the way `breakwater crawl` sets one up (seeds read from a file with
// crawl.ReadSeeds, a file opened with storage.Open, crawl.New and Run), with
// the bench's settings. It prints a ChildReport on stdout.
func Child(ctx context.Context, args []string, stdout io.Writer) error {
	fs := pflag.NewFlagSet("internal-bench-child", pflag.ContinueOnError)
	o := crawl.DefaultOptions()
	seeds := fs.String("seeds", "", "file of seed URLs")
	fs.StringVar(&o.DB, "db", "", "database file")
	fs.IntVar(&o.Workers, "workers", 64, "workers")
	fs.IntVar(&o.HostConcurrency, "host-concurrency", 4, "in-flight requests per host")
	fs.IntVar(&o.MaxPages, "max-pages", 0, "stop after this many pages")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("bench child: %w", err)
	}
	o.Delay, o.AllowPrivate, o.Logger = 0, true, slog.New(slog.DiscardHandler)
	start := time.Now()
	if *seeds != "" {
		list, err := readSeedsFile(*seeds)
		if err != nil {
			return err
		}
		o.Seeds = list
	}
	rep := ChildReport{SeedsNS: int64(time.Since(start))}
	db, err := storage.Open(o.DB, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	sum, err := crawlDB(ctx, o, db)
	if err != nil {
		return err
	}
	rep.WallNS = int64(time.Since(start))
	rep.Fetched, rep.Failed, rep.Queued = sum.Counts.Fetched, sum.Counts.Failed, sum.Counts.Queued
	rep.Exhausted = sum.Exhausted
	if st, err := readProcStatus("self"); err == nil {
		rep.VmHWMKB = st.hwmKB
	}
	return json.NewEncoder(stdout).Encode(&rep)
}

func readSeedsFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench child: %w", err)
	}
	defer f.Close()
	return crawl.ReadSeeds(bufio.NewReader(f), path)
}

// procStatus holds the memory lines of /proc/PID/status, in KiB.
type procStatus struct{ rssKB, hwmKB int64 }

// readProcStatus reads VmRSS and VmHWM of pid ("self" for this process).
func readProcStatus(pid string) (procStatus, error) {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return procStatus{}, err
	}
	var st procStatus
	for line := range bytes.Lines(data) {
		key, val, ok := strings.Cut(string(line), ":")
		if !ok {
			continue
		}
		switch key {
		case "VmRSS":
			st.rssKB = parseKB(val)
		case "VmHWM":
			st.hwmKB = parseKB(val)
		}
	}
	if st.rssKB == 0 {
		return st, fmt.Errorf("/proc/%s/status: no VmRSS", pid)
	}
	return st, nil
}

// parseKB parses a /proc value such as "   123456 kB".
func parseKB(v string) int64 {
	n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
	return n
}
