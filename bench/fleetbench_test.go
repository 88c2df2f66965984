package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"breakwater/redisstore/redistest"
)

// buildBreakwater builds the breakwater binary into the test's temporary
// directory: the fleet section runs real `breakwater crawl` processes,
// which this package's test binary cannot be.
func buildBreakwater(t *testing.T) string {
	t.Helper()
	start := time.Now()
	path := filepath.Join(t.TempDir(), "breakwater")
	out, err := exec.Command("go", "build", "-o", path, "..").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Logf("go build of breakwater: %s", time.Since(start).Round(time.Millisecond))
	return path
}

// fleetConfig is the quick configuration's fleet section on the Redis at
// storeURL.
func fleetConfig(t *testing.T, storeURL string) Config {
	t.Helper()
	bin := buildBreakwater(t)
	cfg := QuickConfig()
	cfg.Sections = map[string]bool{SectionFleet: true}
	cfg.Store = storeURL
	// The quick site has 40 hosts, and a process of 64 workers holds up to
	// 32 hosts with work at a time: the third and fourth processes of four
	// would find every host held, by design. Enough hosts for each of four
	// to be given some, and few pages each (as many pages in all as the
	// quick site), keep the test short.
	cfg.Site = Size{200, 6}
	cfg.FleetCap = 20 * time.Second
	cfg.Crawler = func(ctx context.Context, args []string) *exec.Cmd {
		return exec.CommandContext(ctx, bin, append([]string{"crawl"}, args...)...)
	}
	start := time.Now()
	cfg.Log = func(format string, args ...any) {
		t.Logf("%5.2fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	cfg.TempDir = t.TempDir()
	return cfg
}

func TestFleetSection(t *testing.T) {
	srv := redistest.Start(t)
	cfg := fleetConfig(t, srv.URL())
	start := time.Now()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("fleet section took %s", time.Since(start).Round(time.Millisecond))
	f := rep.Fleet
	if f == nil || f.Skipped != "" {
		t.Fatalf("fleet = %+v; want it run", f)
	}
	if len(f.Runs) != 1+len(cfg.FleetProcs) || f.Bolt() == nil || f.Redis(4) == nil {
		t.Fatalf("runs = %+v; want bbolt and %v on Redis", f.Runs, cfg.FleetProcs)
	}
	urls := cfg.Site.URLs()
	for _, run := range f.Runs {
		if len(run.Passes) != cfg.FleetPasses {
			t.Errorf("%s: %d passes, want %d", run.Name(), len(run.Passes), cfg.FleetPasses)
		}
		for i, p := range run.Passes {
			name := fmt.Sprintf("%s, pass %d", run.Name(), i+1)
			if p.Capped || p.Traffic.DistinctPages != urls || p.Traffic.Duplicates() != 0 {
				t.Errorf("%s: capped %v, %d distinct pages of %d, %d duplicates; want every page once",
					name, p.Capped, p.Traffic.DistinctPages, urls, p.Traffic.Duplicates())
			}
			if len(p.Procs) != run.Procs {
				t.Errorf("%s: %d processes, want %d", name, len(p.Procs), run.Procs)
			}
			var sum int64
			for _, pr := range p.Procs {
				if pr.Exit != 0 || pr.Errors != 0 {
					t.Errorf("%s: process %s exited %d with %d errors: %v (log in %s)", name, pr.label(), pr.Exit, pr.Errors, pr.Problems, pr.Dump)
				}
				sum += pr.Fetched
			}
			if sum != int64(urls) {
				t.Errorf("%s: the processes' own counts sum to %d pages, want %d", name, sum, urls)
			}
			if p.PagesPerSec <= 0 || p.Wall <= 0 {
				t.Errorf("%s: wall %s, %v pages/s; want both positive", name, p.Wall, p.PagesPerSec)
			}
			if run.Store == "bbolt" {
				continue
			}
			for _, server := range []bool{false, true} {
				if c := p.CommandsPerPage(server); c <= 0 || math.IsInf(c, 0) || math.IsNaN(c) {
					t.Errorf("%s: commands per page (server count %v) = %v; want positive and finite", name, server, c)
				}
			}
			if p.ServerCommands < p.LogCommands {
				t.Errorf("%s: the server counted %d commands, fewer than the processes' %d", name, p.ServerCommands, p.LogCommands)
			}
		}
	}
	// On this small site a pass lasts well under a second: a process that
	// starts last can find every host taken, and ends without a page. Most
	// must share the work.
	for i, p := range f.Redis(4).Passes {
		idle := 0
		for _, pr := range p.Procs {
			if pr.Fetched <= 0 {
				idle++
			}
		}
		if idle > 1 {
			t.Errorf("4 processes, pass %d: %d fetched no page; want at most one (%s)", i+1, idle, pagesOf(p))
		}
	}
	if ok, why := f.Clean(); !ok {
		t.Errorf("Clean = false: %s", why)
	}
	if f.FleetToBolt <= 0 || f.RedisToBolt <= 0 || math.IsInf(f.FleetToBolt, 0) {
		t.Errorf("ratios to bbolt: fleet %v, one on Redis %v; want positive and finite", f.FleetToBolt, f.RedisToBolt)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"largest fleet / 1 process on bbolt", "1 process on Redis: Redis commands",
		"4 processes on Redis: fewest pages of one process", "passes not clean", "fleet: real `breakwater crawl`",
		"hosts a process holds 32"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	// The run left the database as it found it: empty.
	if n, err := srv.Client().DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("DBSIZE after the section = %d, %v; want 0", n, err)
	}
}

func pagesOf(p FleetPass) string {
	var s []string
	for _, pr := range p.Procs {
		s = append(s, fmt.Sprint(pr.Fetched))
	}
	return strings.Join(s, " / ")
}

// TestFleetStoreReset checks which databases the section flushes: an
// empty one and one holding only a Breakwater crawl; any other is refused
// by name and left as it was.
func TestFleetStoreReset(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	st, err := openFleetStore(ctx, srv.URL(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	if err := st.reset(ctx); err != nil {
		t.Fatalf("reset of an empty database: %v", err)
	}
	rdb.Set(ctx, fleetSchemaKey, "breakwater-fleet/1", 0)
	rdb.HSet(ctx, "bw:{a.test}:c", "seq", 1)
	if err := st.reset(ctx); err != nil {
		t.Fatalf("reset of a Breakwater crawl: %v", err)
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("a Breakwater crawl's database holds %d keys after reset, want 0", n)
	}
	for _, tc := range []struct {
		name string
		keys []string
	}{
		{"foreign", []string{"user:1"}},
		{"crawl and foreign", []string{fleetSchemaKey, "bw:{a.test}:q", "session:9"}},
	} {
		rdb.FlushDB(ctx)
		for _, k := range tc.keys {
			rdb.Set(ctx, k, "x", 0)
		}
		err := st.reset(ctx)
		if err == nil || !strings.Contains(err.Error(), srv.Addr) || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("%s: reset = %v; want a refusal naming the store", tc.name, err)
		}
		if n := rdb.DBSize(ctx).Val(); n != int64(len(tc.keys)) {
			t.Errorf("%s: %d keys after a refused reset, want %d", tc.name, n, len(tc.keys))
		}
	}
	if _, err := openFleetStore(ctx, "redis://127.0.0.1:1/0?addr=127.0.0.1:2", t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "Cluster") {
		t.Errorf("a Cluster URL: %v; want it refused", err)
	}
}

// TestFleetStoreAuto starts and stops the section's own redis-server.
func TestFleetStoreAuto(t *testing.T) {
	if _, err := redisBinary(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx := context.Background()
	st, err := openFleetStore(ctx, StoreAuto, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if st.server == nil || !strings.HasPrefix(st.url, "redis://127.0.0.1:") || st.version == "" {
		t.Errorf("auto store = %+v; want a server of ours on loopback", st)
	}
	if _, err := st.stats(ctx); err != nil {
		t.Error(err)
	}
	st.close()
	select {
	case <-st.server.done:
	default:
		t.Error("redis-server still running after close")
	}
}

// TestFleetSkipped checks that without a store the section is skipped and
// the report says how to run it.
func TestFleetSkipped(t *testing.T) {
	cfg := QuickConfig()
	cfg.Sections = map[string]bool{SectionFleet: true}
	cfg.TempDir = t.TempDir()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Fleet == nil || rep.Fleet.Skipped == "" {
		t.Fatalf("fleet = %+v; want skipped", rep.Fleet)
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "no store given") || !strings.Contains(out.String(), "--store auto") {
		t.Errorf("table does not say the fleet was skipped and how to run it:\n%s", out.String())
	}
}

func TestParseRunLineAndLog(t *testing.T) {
	out := []byte("crawl finished after 1.2s: this run 300 fetched, 2 failed; in all 1200 fetched, 0 failed, 0 queued, 0 deferred, 0 hosts held: done\n")
	if f, fl := parseRunLine(out); f != 300 || fl != 2 {
		t.Errorf("parseRunLine = %d, %d; want 300, 2", f, fl)
	}
	if f, _ := parseRunLine([]byte("nothing")); f != -1 {
		t.Errorf("parseRunLine of no line = %d, want -1", f)
	}
	log := `{"time":"t","level":"INFO","msg":"crawl started"}
{"time":"t","level":"WARN","msg":"slow","err":"x"}
goroutine 1 [running]:
{"time":"t","level":"INFO","msg":"fleet store commands","store":"redis://127.0.0.1:1/0","commands":4567}
`
	var p FleetProc
	p.readLog([]byte(log))
	if p.Commands != 4567 || p.Warnings != 1 || p.Errors != 0 || len(p.Problems) != 1 || p.Problems[0] != "WARN slow: x" {
		t.Errorf("readLog = %+v", p)
	}
	var none FleetProc
	none.readLog(nil)
	if none.Commands != -1 {
		t.Errorf("readLog without the line: commands %d, want -1", none.Commands)
	}
}
