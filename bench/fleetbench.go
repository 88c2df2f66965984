package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/demosite"
)

// The fleet section (issue: fleet mode) crawls the crawl section's site
// with real `breakwater crawl` processes: one on a bbolt file (--db), then
// 1, 2 and 4 on one Redis store (--store, distinct --fleet-id), all of a
// run started together. Each run starts from an empty store or a new file.

// StoreAuto as Config.Store makes the fleet section start a redis-server
// of its own (a temporary directory, a free loopback port, no persistence)
// and stop it after.
const StoreAuto = "auto"

// TargetFleetRatio is the fleet's target: FleetProcs[last] processes on
// Redis together reach this share of one process's pages/s on bbolt.
const TargetFleetRatio = 0.70

// fleetSchemaKey is the key that marks a Redis database as a Breakwater
// crawl's (redisstore's keySchema): the only kind of non-empty database
// the section flushes.
const fleetSchemaKey = "bw:{meta}:schema"

// FleetProc is one `breakwater crawl` process of a fleet run.
type FleetProc struct {
	ID   string `json:"id"`   // its --fleet-id ("" on bbolt)
	Exit int    `json:"exit"` // its exit code; -1: killed (the run's cap) or no code
	// Fetched and Failed are its "this run N fetched, M failed" line on
	// stdout; -1 when the line is missing.
	Fetched int64 `json:"fetched"`
	Failed  int64 `json:"failed"`
	// Commands is its "fleet store commands" log line: the Redis commands
	// it sent (each pipelined command counted, a script call 1); -1 when
	// missing (always on bbolt).
	Commands int64         `json:"commands"`
	Wall     time.Duration `json:"wall_ns"` // its own start to its exit
	// CPU is its user + system CPU time (rusage), start-up included.
	CPU      time.Duration `json:"cpu_ns"`
	Warnings int           `json:"warnings"`
	Errors   int           `json:"errors"`
	// Problems are its first few warning and error log lines, as
	// "LEVEL msg: err".
	Problems []string `json:"problems,omitempty"`
	// Dump names the file that keeps its stderr when it did not exit 0.
	Dump string `json:"dump,omitempty"`
}

// FleetPass is one run of a fleet configuration.
type FleetPass struct {
	Wall        time.Duration `json:"wall_ns"` // the first process's start to the last one's exit
	Traffic     Traffic       `json:"traffic"` // what the site saw during the run
	PagesPerSec float64       `json:"pages_per_sec"`
	// LogCommands sums the processes' "fleet store commands" lines: the
	// commands they sent, a script call 1. ServerCommands is the server's
	// INFO stats total_commands_processed over the run, less the bench's
	// own INFO: it counts every command a script runs as well as the
	// script call, each connection's handshake and script loads, and any
	// other client's commands.
	LogCommands    int64 `json:"log_commands"`
	ServerCommands int64 `json:"server_commands"`
	// ServerCPU is the server's CPU time over the run (INFO cpu
	// used_cpu_user + used_cpu_sys): what the run cost Redis.
	ServerCPU time.Duration `json:"server_cpu_ns"`
	// CrawlCPU sums the processes' CPU time: with ServerCPU, what the
	// crawl cost the machine, whatever else ran on it (the site's serving,
	// in the bench's process, not counted).
	CrawlCPU time.Duration `json:"crawl_cpu_ns"`
	Procs    []FleetProc   `json:"procs"`
	Capped   bool          `json:"capped"` // stopped at Config.FleetCap
}

// FleetRun is one configuration: Procs processes on Store, FleetPasses times.
type FleetRun struct {
	Store  string      `json:"store"` // "bbolt" or "redis"
	Procs  int         `json:"procs"`
	Passes []FleetPass `json:"passes"`
	// Median is the index in Passes of the pass of median wall time, the
	// one whose figures the table shows.
	Median    int     `json:"median"`
	MinPerSec float64 `json:"min_pages_per_sec"`
	MaxPerSec float64 `json:"max_pages_per_sec"`
}

// Pass is the run's median pass.
func (fr *FleetRun) Pass() *FleetPass { return &fr.Passes[fr.Median] }

// Name reads "4 processes on Redis".
func (fr *FleetRun) Name() string {
	s := "es"
	if fr.Procs == 1 {
		s = ""
	}
	store := "Redis"
	if fr.Store == "bbolt" {
		store = "bbolt"
	}
	return fmt.Sprintf("%d process%s on %s", fr.Procs, s, store)
}

// FleetResult is the fleet section.
type FleetResult struct {
	// Skipped says why the section did not run; the other fields are then
	// empty.
	Skipped         string      `json:"skipped,omitempty"`
	Site            Size        `json:"site"`
	Workers         int         `json:"workers"`
	HostConcurrency int         `json:"host_concurrency"`
	Store           string      `json:"store,omitempty"` // the store's URL without its password
	Auto            bool        `json:"auto,omitempty"`  // a redis-server the bench started
	RedisVersion    string      `json:"redis_version,omitempty"`
	Passes          int         `json:"passes"`
	Runs            []*FleetRun `json:"runs,omitempty"` // bbolt first, then Redis by processes
	// FleetToBolt is the pages/s of the most processes on Redis over one
	// process on bbolt (the target); RedisToBolt one process on Redis over
	// one on bbolt: what the store costs.
	FleetToBolt float64 `json:"fleet_to_bolt"`
	RedisToBolt float64 `json:"redis_to_bolt"`
}

// Bolt is the bbolt run; Redis the run of n processes on Redis.
func (f *FleetResult) Bolt() *FleetRun { return f.find("bbolt", 1) }

func (f *FleetResult) Redis(n int) *FleetRun { return f.find("redis", n) }

func (f *FleetResult) find(store string, n int) *FleetRun {
	for _, r := range f.Runs {
		if r.Store == store && r.Procs == n {
			return r
		}
	}
	return nil
}

// Biggest is the run of the most processes on Redis.
func (f *FleetResult) Biggest() *FleetRun {
	var best *FleetRun
	for _, r := range f.Runs {
		if r.Store == "redis" && (best == nil || r.Procs > best.Procs) {
			best = r
		}
	}
	return best
}

// Clean reports whether every pass of every run fetched each of the site's
// pages exactly once, every process exited 0, and no run hit its cap; why
// names the first thing wrong. A process that fetched nothing is not
// wrong (a process holds a bounded number of hosts, and a small site's
// hosts may all be held by the others): Balanced says whether that
// happened.
func (f *FleetResult) Clean() (ok bool, why string) {
	for _, run := range f.Runs {
		for i, p := range run.Passes {
			if why := p.problem(f.Site.URLs()); why != "" {
				return false, fmt.Sprintf("%s, pass %d: %s", run.Name(), i+1, why)
			}
		}
	}
	return true, ""
}

// problem names what is wrong with a pass over a site of urls pages, or "".
func (p *FleetPass) problem(urls int) string {
	if p.Capped {
		return "stopped at its time cap"
	}
	for _, pr := range p.Procs {
		if pr.Exit != 0 {
			return fmt.Sprintf("process %s exited %d", pr.label(), pr.Exit)
		}
	}
	if d := p.Traffic.Duplicates(); d != 0 {
		return fmt.Sprintf("%d pages fetched more than once", d)
	}
	if p.Traffic.DistinctPages != urls {
		return fmt.Sprintf("%d of the site's %d pages fetched", p.Traffic.DistinctPages, urls)
	}
	return ""
}

// Fewest is the fewest pages one process of the run fetched in any pass
// (-1 when a process printed no count).
func (fr *FleetRun) Fewest() int64 {
	fewest := int64(-1)
	for i, q := range fr.Passes {
		for j, pr := range q.Procs {
			if (i == 0 && j == 0) || pr.Fetched < fewest {
				fewest = pr.Fetched
			}
		}
	}
	return fewest
}

func (pr *FleetProc) label() string {
	if pr.ID == "" {
		return "(bbolt)"
	}
	return pr.ID
}

// CommandsPerPage divides the pass's commands (from the processes' logs,
// or the server's count) by the distinct pages served; 0 without pages.
func (p *FleetPass) CommandsPerPage(server bool) float64 {
	n := p.LogCommands
	if server {
		n = p.ServerCommands
	}
	if p.Traffic.DistinctPages == 0 {
		return 0
	}
	return float64(n) / float64(p.Traffic.DistinctPages)
}

// PagesPerCPUSec is the pages per second of CPU time the processes and
// the server spent together; 0 without a measure.
func (p *FleetPass) PagesPerCPUSec() float64 {
	cpu := p.CrawlCPU + p.ServerCPU
	if cpu <= 0 {
		return 0
	}
	return float64(p.Traffic.DistinctPages) / cpu.Seconds()
}

// PagesPerServerSec is the pages per second of Redis CPU the pass cost:
// what one Redis core could carry at this cost per page; 0 without a
// measure.
func (p *FleetPass) PagesPerServerSec() float64 {
	if p.ServerCPU <= 0 {
		return 0
	}
	return float64(p.Traffic.DistinctPages) / p.ServerCPU.Seconds()
}

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
				run.Name(), pass+1, p.Traffic.DistinctPages, secs(p.Wall), rate(p.PagesPerSec, "pages/s"),
				p.LogCommands, p.ServerCommands, exits(p.Procs))
			run.Passes = append(run.Passes, p)
		}
	}
	for _, run := range res.Runs {
		run.summarize()
	}
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

// fleetStore is the Redis the fleet runs on, and the bench's connection to
// it (one, so that its own commands are few and known).
type fleetStore struct {
	url, display, version string
	rdb                   *redis.Client
	server                *redisServer // started by the bench, or nil
}

// openFleetStore connects to spec, a redis:// URL, or starts a
// redis-server in dir when spec is StoreAuto.
func openFleetStore(ctx context.Context, spec, dir string) (*fleetStore, error) {
	s := &fleetStore{url: spec}
	if spec == StoreAuto {
		srv, err := startRedisServer(ctx, dir)
		if err != nil {
			return nil, err
		}
		s.server, s.url = srv, "redis://"+srv.addr+"/0"
	}
	s.display = redactURL(s.url)
	fail := func(err error) (*fleetStore, error) {
		s.close()
		return nil, fmt.Errorf("fleet: store %s: %w", s.display, err)
	}
	u, err := url.Parse(s.url)
	switch {
	case err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "":
		return fail(errors.New("want redis://[:PASSWORD@]HOST:PORT[/DB], or auto"))
	case u.Query().Has("addr"):
		return fail(errors.New("the fleet section runs on one Redis server (it reads INFO stats and flushes the database), not a Cluster"))
	}
	o, err := redis.ParseURL(s.url)
	if err != nil {
		return fail(err)
	}
	if o.Password == "" {
		o.Password = os.Getenv("BREAKWATER_REDIS_PASSWORD") // redisstore.PasswordEnv
	}
	o.PoolSize, o.MinIdleConns, o.DisableIdentity, o.MaxRetries = 1, 1, true, -1
	s.rdb = redis.NewClient(o)
	info, err := s.rdb.Info(ctx, "server").Result()
	if err != nil {
		return fail(err)
	}
	s.version = infoField(info, "redis_version")
	return s, nil
}

// reset empties the store's database for a run: at once if it is empty
// or holds only a Breakwater crawl (the schema key present and every key
// under bw:); any other database is someone else's and is refused.
func (s *fleetStore) reset(ctx context.Context) error {
	n, err := s.rdb.DBSize(ctx).Result()
	if err != nil {
		return fmt.Errorf("fleet: store %s: DBSIZE: %w", s.display, err)
	}
	if n == 0 {
		return nil
	}
	refuse := func(why string) error {
		return fmt.Errorf("fleet: store %s holds %d key(s), %s: refusing to flush it; give the bench an empty database (or --store auto)", s.display, n, why)
	}
	has, err := s.rdb.Exists(ctx, fleetSchemaKey).Result()
	if err != nil {
		return fmt.Errorf("fleet: store %s: EXISTS: %w", s.display, err)
	}
	if has == 0 {
		return refuse("and no Breakwater crawl (no " + fleetSchemaKey + " key)")
	}
	var cursor uint64
	for {
		keys, next, err := s.rdb.Scan(ctx, cursor, "", 5000).Result()
		if err != nil {
			return fmt.Errorf("fleet: store %s: SCAN: %w", s.display, err)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, "bw:") {
				return refuse(fmt.Sprintf("a Breakwater crawl and other data (key %q)", k))
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if err := s.rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("fleet: store %s: FLUSHDB: %w", s.display, err)
	}
	return nil
}

// serverStats are the server's counters the section reads.
type serverStats struct {
	commands int64         // INFO stats total_commands_processed
	cpu      time.Duration // INFO cpu used_cpu_user + used_cpu_sys
}

// stats reads the server's counters, in one INFO.
func (s *fleetStore) stats(ctx context.Context) (serverStats, error) {
	info, err := s.rdb.Info(ctx, "stats", "cpu").Result()
	if err != nil {
		return serverStats{}, fmt.Errorf("fleet: store %s: INFO: %w", s.display, err)
	}
	n, err := strconv.ParseInt(infoField(info, "total_commands_processed"), 10, 64)
	if err != nil {
		return serverStats{}, fmt.Errorf("fleet: store %s: INFO stats has no total_commands_processed", s.display)
	}
	st := serverStats{commands: n}
	for _, f := range []string{"used_cpu_user", "used_cpu_sys"} {
		v, err := strconv.ParseFloat(infoField(info, f), 64)
		if err != nil {
			return serverStats{}, fmt.Errorf("fleet: store %s: INFO cpu has no %s", s.display, f)
		}
		st.cpu += time.Duration(v * float64(time.Second))
	}
	return st, nil
}

func (s *fleetStore) close() {
	if s.rdb != nil {
		s.rdb.Close()
	}
	if s.server != nil {
		s.server.stop()
	}
}

// infoField is one "field:value" of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// redactURL drops the password from a store URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// redisServer is a redis-server the bench started.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

// redisBinary finds redis-server on $PATH or in /usr/bin.
func redisBinary() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	if _, err := os.Stat("/usr/bin/redis-server"); err == nil {
		return "/usr/bin/redis-server", nil
	}
	return "", errors.New("fleet: --store auto needs redis-server, which is not installed (apt-get install redis-server), or give --store redis://HOST:PORT/DB")
}

// startRedisServer runs redis-server on a free loopback port with its
// files in dir, no snapshots and no append-only file, and returns once it
// answers PING. A port taken in between is retried on another.
func startRedisServer(ctx context.Context, dir string) (*redisServer, error) {
	bin, err := redisBinary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for range 5 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("fleet: pick a port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		srv := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), done: make(chan struct{}),
			log: filepath.Join(dir, "redis.log")}
		logf, err := os.OpenFile(srv.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, err
		}
		srv.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "yes")
		srv.cmd.Dir, srv.cmd.Stdout, srv.cmd.Stderr = dir, logf, logf
		err = srv.cmd.Start()
		logf.Close()
		if err != nil {
			return nil, fmt.Errorf("fleet: start %s: %w", bin, err)
		}
		go func() { srv.cmd.Wait(); close(srv.done) }()
		if lastErr = srv.waitPing(ctx); lastErr == nil {
			return srv, nil
		}
		srv.stop()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return nil, fmt.Errorf("fleet: start redis-server: %w", lastErr)
}

func (s *redisServer) waitPing(ctx context.Context) error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, PoolSize: 1, MaxRetries: -1, DisableIdentity: true,
		DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-s.done:
			b, _ := os.ReadFile(s.log)
			return fmt.Errorf("redis-server exited before answering: %s", lastLines(b, 3))
		default:
		}
		pctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING on %s: %w", s.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop ends the server with SIGTERM (no data to save), or SIGKILL after 10s.
func (s *redisServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

func (r *Report) fleetRows() []Row {
	f := r.Fleet
	if f == nil {
		return nil
	}
	if f.Skipped != "" {
		return []Row{{"fleet", "not run: " + f.Skipped + "; see the note below", "", "", ""}}
	}
	var rows []Row
	add := func(fig, val, target, v string) { rows = append(rows, Row{"fleet", fig, val, target, v}) }
	for _, run := range f.Runs {
		if len(run.Passes) == 0 {
			continue
		}
		p := run.Pass()
		spread := ""
		if len(run.Passes) > 1 {
			spread = fmt.Sprintf(", median of %d passes, %s-%s", len(run.Passes), rate(run.MinPerSec, ""), rate(run.MaxPerSec, ""))
		}
		add(fmt.Sprintf("%s: distinct pages/s (%d pages in %s%s)", run.Name(), p.Traffic.DistinctPages, secs(p.Wall), spread),
			rate(p.PagesPerSec, "pages/s"), "", "")
		if p.CrawlCPU > 0 {
			cpu := "processes " + secs(p.CrawlCPU)
			if run.Store == "redis" {
				cpu += " + Redis " + secs(p.ServerCPU)
			}
			add(fmt.Sprintf("%s: CPU time, %s (pages per CPU-second)", run.Name(), cpu), rate(p.PagesPerCPUSec(), "pages/s"), "", "")
		}
		if run.Store == "redis" {
			add(run.Name()+": Redis commands, processes' logs / server INFO (per page)",
				fmt.Sprintf("%s / %s (%.2f / %.2f)", rate(float64(p.LogCommands), ""), rate(float64(p.ServerCommands), ""),
					p.CommandsPerPage(false), p.CommandsPerPage(true)), "", "")
			if p.ServerCPU > 0 {
				add(run.Name()+": pages per Redis CPU-second", rate(p.PagesPerServerSec(), "pages/s"), "", "")
			}
		}
		if run.Procs > 1 {
			each := make([]string, len(p.Procs))
			for i, pr := range p.Procs {
				each[i] = strconv.FormatInt(pr.Fetched, 10)
			}
			fewest := run.Fewest()
			add(run.Name()+": pages fetched by each process (fewest in any pass)",
				fmt.Sprintf("%s (%d)", strings.Join(each, " / "), fewest), "each > 0", verdict(fewest > 0))
		}
	}
	if big := f.Biggest(); big != nil && f.FleetToBolt > 0 {
		add(big.Name()+" / 1 process on bbolt, pages/s", pct(f.FleetToBolt), ">= "+pct(TargetFleetRatio),
			verdict(f.FleetToBolt >= TargetFleetRatio))
	}
	if b, big := f.Bolt(), f.Biggest(); b != nil && big != nil && b.MaxPerSec > 0 && len(b.Passes) > 1 {
		add(big.Name()+" / 1 process on bbolt, best pass of each", pct(big.MaxPerSec/b.MaxPerSec), "", "")
	}
	if f.RedisToBolt > 0 {
		add("1 process on Redis / 1 on bbolt, pages/s (what the store costs)", pct(f.RedisToBolt), "", "")
	}
	warnings, errs := 0, 0
	for _, run := range f.Runs {
		for _, p := range run.Passes {
			for _, pr := range p.Procs {
				warnings += pr.Warnings
				errs += pr.Errors
			}
		}
	}
	add("warnings / errors in the processes' logs, all passes", fmt.Sprintf("%d / %d", warnings, errs), "", "")
	ok, why := f.Clean()
	v, val := verdict(true), "clean"
	if !ok {
		v, val = verdictFailed, why
	}
	add("every pass: each page fetched once, all exits 0", val, "clean", v)
	return rows
}

// fleetNote says how the fleet's figures were taken, or how to run it.
func (r *Report) fleetNote() []string {
	f := r.Fleet
	if f == nil {
		return nil
	}
	if f.Skipped != "" {
		return []string{"Fleet: not run (" + f.Skipped + "): it needs Redis. `breakwater bench --store auto` starts a " +
			"redis-server of its own (redis-server must be installed) and stops it after; `--store redis://HOST:PORT/DB` " +
			"uses that database, which must be empty or hold only a Breakwater crawl: it is flushed before each run. " +
			"`--only fleet` implies --store auto."}
	}
	store := f.Store
	if f.Auto {
		store = "a redis-server the bench started (" + f.Store + ", no snapshots, no append-only file)"
	}
	passes := "once"
	if f.Passes > 1 {
		passes = fmt.Sprintf("%d times, interleaved, and the pass of median wall time is shown", f.Passes)
	}
	notes := []string{fmt.Sprintf("Fleet: real `breakwater crawl` processes of this binary over the crawl section's site "+
		"(%s) from its roots with one seeds file and the crawl section's flags (--workers %d --host-concurrency %d "+
		"--delay 0 --sitemaps=false): one process on a new bbolt file (--db), then fleets on Redis %s, version %s, "+
		"flushed before each run; a fleet's processes are started together, with distinct --fleet-id. Each run is done %s. "+
		"Wall time runs from the first start to the last exit: start-up and the wait for the fleet's end are in it. Pages "+
		"are the distinct pages the site served (its request logs); a process's pages are its own `this run N fetched` line. "+
		"Commands are counted twice: the sum of the processes' \"fleet store commands\" log lines (each pipelined command "+
		"counted, a script call 1), and the server's INFO stats total_commands_processed over the run, less the bench's "+
		"own INFO, which also counts every command a script runs, each connection's handshake and the script loads. Redis "+
		"CPU is INFO cpu's used_cpu_user + used_cpu_sys over the run: pages per Redis CPU-second is what one Redis core could "+
		"carry at this cost per page, an estimate. CPU time is the processes' own (rusage, start-up included) plus Redis's; "+
		"unlike wall time it hardly depends on what else the machine runs.",
		f.Site, f.Workers, f.HostConcurrency, store, f.RedisVersion, passes)}
	for _, run := range f.Runs {
		if run.Procs > 1 && run.Fewest() == 0 {
			notes = append(notes, fmt.Sprintf("Fleet: in a run of %s, a process fetched no page. That is the fleet's design, "+
				"not a fault: a process holds at most about twice as many hosts with work as its workers keep busy (with "+
				"--workers %d --host-concurrency %d, %d), so on a site of %d hosts the processes that start first can hold "+
				"them all.", run.Name(), f.Workers, f.HostConcurrency, 2*((f.Workers+f.HostConcurrency-1)/f.HostConcurrency), f.Site.Hosts))
			break
		}
	}
	var troubled []string
	for _, run := range f.Runs {
		for i, p := range run.Passes {
			for _, pr := range p.Procs {
				if len(pr.Problems) > 0 || pr.Dump != "" {
					n := fmt.Sprintf("%s, pass %d, process %s: exit %d, %d warnings, %d errors: %s",
						run.Name(), i+1, pr.label(), pr.Exit, pr.Warnings, pr.Errors, strings.Join(pr.Problems, "; "))
					if pr.Dump != "" {
						n += " (its log is kept in " + pr.Dump + ")"
					}
					troubled = append(troubled, n)
				}
			}
		}
	}
	if len(troubled) > 0 {
		const shown = 5
		n := "Fleet: processes that logged warnings or errors: " + strings.Join(troubled[:min(shown, len(troubled))], ". ")
		if len(troubled) > shown {
			n += fmt.Sprintf(". And %d more.", len(troubled)-shown)
		}
		notes = append(notes, n)
	}
	return notes
}
