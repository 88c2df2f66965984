package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"breakwater/demosite"
)

// fleetSection runs the fleet configurations, FleetPasses rounds of each,
// interleaved so that a change in the machine's load falls on all of them.
func (r *runner) fleetSection(ctx context.Context) error {
	cfg := r.cfg
	res := &FleetResult{Site: cfg.Site, Workers: cfg.Workers, HostConcurrency: cfg.HostConcurrency, Passes: cfg.FleetPasses}
	switch {
	case cfg.Store == "":
		res.Skipped = "no store given (--store)"
		r.report.Fleet = res
		return nil
	case cfg.Crawler == nil:
		res.Skipped = "no breakwater binary to run (Config.Crawler)"
		r.report.Fleet = res
		return nil
	}
	dir := filepath.Join(r.dir, "fleet")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	store, err := openFleetStore(ctx, cfg.Store, dir)
	if err != nil {
		return err
	}
	defer store.close()
	// Refuse someone else's database before anything runs.
	if err := store.reset(ctx); err != nil {
		return err
	}
	r.report.Fleet = res
	res.Store, res.Auto, res.RedisVersion = store.display, store.server != nil, store.version
	cfg.logf("fleet: %s on %s (redis %s), %d pass(es) of: 1 process on bbolt, %v on Redis", cfg.Site, store.display,
		store.version, cfg.FleetPasses, cfg.FleetProcs)
	site, err := startSite(cfg.Site, 0, 0)
	if err != nil {
		return err
	}
	defer site.Close()
	seeds := filepath.Join(dir, "seeds.txt")
	if err := writeLines(seeds, site.Roots()); err != nil {
		return err
	}
	res.Runs = append(res.Runs, &FleetRun{Store: "bbolt", Procs: 1})
	for _, n := range cfg.FleetProcs {
		res.Runs = append(res.Runs, &FleetRun{Store: "redis", Procs: n})
	}
	for pass := range cfg.FleetPasses {
		for _, run := range res.Runs {
			var st *fleetStore
			if run.Store == "redis" {
				st = store
			}
			name := fmt.Sprintf("%s-%d-pass%d", run.Store, run.Procs, pass+1)
			p, err := r.fleetPass(ctx, site, seeds, dir, name, st, run.Procs)
			if err != nil {
				return err
			}
			cfg.logf("fleet: %s, pass %d: %d pages in %s, %s; commands %d (log) / %d (server); exits %v",
				run.Name(), pass+1, p.Traffic.DistinctPages, format(Seconds, p.Wall.Seconds()), format(PagesPerSec, p.PagesPerSec),
				p.LogCommands, p.ServerCommands, exits(p.Procs))
			run.Passes = append(run.Passes, p)
		}
	}
	for _, run := range res.Runs {
		run.summarize()
	}
	if res.Idle, err = r.fleetIdle(ctx, site, dir, store); err != nil {
		return err
	}
	cfg.logf("fleet: an idle process: %d commands in %s, %.1f a second (server INFO)", res.Idle.ServerCommands,
		format(Seconds, res.Idle.Window.Seconds()), res.Idle.PerSec)
	if err := store.reset(ctx); err != nil { // leave the database as empty as the last run found it
		return err
	}
	if b := res.Bolt(); b != nil && b.Pass().PagesPerSec > 0 {
		if big := res.Biggest(); big != nil {
			res.FleetToBolt = big.Pass().PagesPerSec / b.Pass().PagesPerSec
		}
		if one := res.Redis(1); one != nil {
			res.RedisToBolt = one.Pass().PagesPerSec / b.Pass().PagesPerSec
		}
	}
	if ok, why := res.Clean(); !ok {
		cfg.logf("fleet: NOT CLEAN: %s", why)
	}
	return nil
}

func exits(procs []FleetProc) []int {
	out := make([]int, len(procs))
	for i, p := range procs {
		out[i] = p.Exit
	}
	return out
}

// summarize picks the median pass by wall time and the range of rates.
func (fr *FleetRun) summarize() {
	if len(fr.Passes) == 0 {
		return
	}
	idx := make([]int, len(fr.Passes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return int(fr.Passes[a].Wall - fr.Passes[b].Wall) })
	fr.Median = idx[(len(idx)-1)/2]
	fr.MinPerSec, fr.MaxPerSec = fr.Passes[0].PagesPerSec, fr.Passes[0].PagesPerSec
	for _, p := range fr.Passes {
		fr.MinPerSec, fr.MaxPerSec = min(fr.MinPerSec, p.PagesPerSec), max(fr.MaxPerSec, p.PagesPerSec)
	}
}

// fleetPass runs procs `breakwater crawl` processes together over site,
// on store (nil: one process on a new bbolt file), and measures them.
func (r *runner) fleetPass(ctx context.Context, site *demosite.Site, seeds, dir, name string, store *fleetStore, procs int) (FleetPass, error) {
	cfg := r.cfg
	var pass FleetPass
	var before serverStats
	if store != nil {
		if err := store.reset(ctx); err != nil {
			return pass, err
		}
		var err error
		if before, err = store.stats(ctx); err != nil {
			return pass, err
		}
	}
	common := []string{"--seeds", seeds, "--workers", strconv.Itoa(cfg.Workers),
		"--host-concurrency", strconv.Itoa(cfg.HostConcurrency), "--delay", "0", "--sitemaps=false",
		"--allow-private", "--progress", "never", "--log-format", "json", "--log-level", "info"}
	cctx, cancel := context.WithTimeout(ctx, cfg.FleetCap)
	defer cancel()
	type child struct {
		cmd    *exec.Cmd
		stdout bytes.Buffer
		log    string
		start  time.Time
		end    time.Time
		err    error
	}
	children := make([]*child, procs)
	pass.Procs = make([]FleetProc, procs)
	for i := range procs {
		args := slices.Clone(common)
		if store == nil {
			args = append(args, "--db", filepath.Join(dir, name+".db"))
		} else {
			pass.Procs[i].ID = fmt.Sprintf("bench-%d-of-%d", i+1, procs)
			args = append(args, "--store", store.url, "--fleet-id", pass.Procs[i].ID)
		}
		c := &child{cmd: cfg.Crawler(cctx, args), log: filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, i+1))}
		// At the cap a process dumps its goroutines (SIGQUIT) into its log.
		cmd := c.cmd
		cmd.Cancel = func() error {
			if ctx.Err() != nil {
				return cmd.Process.Kill()
			}
			return cmd.Process.Signal(syscall.SIGQUIT)
		}
		cmd.WaitDelay = 10 * time.Second
		children[i] = c
	}
	mark := markLogs(site)
	var wg sync.WaitGroup
	start := cfg.now()
	var startErr error
	for _, c := range children {
		f, err := os.Create(c.log)
		if err != nil {
			startErr = err
			break
		}
		c.cmd.Stdout, c.cmd.Stderr = &c.stdout, f
		c.start = cfg.now()
		if err := c.cmd.Start(); err != nil {
			f.Close()
			startErr = fmt.Errorf("fleet %s: start breakwater crawl: %w", name, err)
			break
		}
		wg.Go(func() {
			c.err = c.cmd.Wait()
			c.end = cfg.now()
			f.Close()
		})
	}
	if startErr != nil {
		cancel()
	}
	wg.Wait()
	if startErr != nil {
		return pass, startErr
	}
	if ctx.Err() != nil {
		return pass, fmt.Errorf("fleet %s: %w", name, ctx.Err())
	}
	pass.Capped = cctx.Err() != nil
	for i, c := range children {
		pass.Wall = max(pass.Wall, c.end.Sub(start))
		p := &pass.Procs[i]
		p.Wall = c.end.Sub(c.start)
		p.Exit = exitCode(c.err)
		if ps := c.cmd.ProcessState; ps != nil {
			p.CPU = ps.UserTime() + ps.SystemTime()
			pass.CrawlCPU += p.CPU
		}
		p.Fetched, p.Failed = parseRunLine(c.stdout.Bytes())
		data, err := os.ReadFile(c.log)
		if err != nil {
			return pass, err
		}
		p.readLog(data)
		pass.LogCommands += max(p.Commands, 0)
		if p.Exit != 0 {
			p.Dump = r.keep(name+"-"+strconv.Itoa(i+1), append(append(data, "\n--- stdout ---\n"...), c.stdout.Bytes()...))
		}
	}
	pass.Traffic = trafficSince(site, mark)
	if store != nil {
		after, err := store.stats(ctx)
		if err != nil {
			return pass, err
		}
		// Less the INFO that read "before": counted once it had run.
		pass.ServerCommands = after.commands - before.commands - 1
		pass.ServerCPU = after.cpu - before.cpu
	}
	if pass.Wall > 0 {
		pass.PagesPerSec = float64(pass.Traffic.DistinctPages) / pass.Wall.Seconds()
	}
	return pass, nil
}

// exitCode is a finished process's exit code: 0 for nil, -1 when it was
// killed by a signal or did not run.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// runLine matches crawl's last stdout line: "... this run N fetched, M failed; ...".
var runLine = regexp.MustCompile(`this run (\d+) fetched, (\d+) failed`)

func parseRunLine(stdout []byte) (fetched, failed int64) {
	m := runLine.FindSubmatch(stdout)
	if m == nil {
		return -1, -1
	}
	fetched, _ = strconv.ParseInt(string(m[1]), 10, 64)
	failed, _ = strconv.ParseInt(string(m[2]), 10, 64)
	return fetched, failed
}

// maxProcProblems is how many warning and error lines a process keeps.
const maxProcProblems = 5

// readLog reads a process's JSON log: its "fleet store commands" line and
// its warnings and errors.
func (p *FleetProc) readLog(data []byte) {
	p.Commands = -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var line struct {
			Level    string          `json:"level"`
			Msg      string          `json:"msg"`
			Err      any             `json:"err"`
			Commands json.RawMessage `json:"commands"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue // a goroutine dump, or a panic
		}
		switch line.Level {
		case "WARN":
			p.Warnings++
		case "ERROR":
			p.Errors++
		}
		if (line.Level == "WARN" || line.Level == "ERROR") && len(p.Problems) < maxProcProblems {
			s := line.Level + " " + line.Msg
			if line.Err != nil {
				s += fmt.Sprintf(": %v", line.Err)
			}
			p.Problems = append(p.Problems, s)
		}
		if line.Msg == "fleet store commands" {
			if n, err := strconv.ParseInt(string(line.Commands), 10, 64); err == nil {
				p.Commands = n
			}
		}
	}
}
