package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"breakwater/demosite"
	"breakwater/redisstore"
)

// TargetIdleCommands is the most commands a second an idle fleet process
// may cost Redis.
const TargetIdleCommands = 10

// idleWindow is how long the idle process's commands are counted: a few of
// its looks at the shards and at least one heartbeat.
const idleWindow = 12 * time.Second

// FleetIdle is what one idle fleet process costs Redis: a process whose
// crawl's only host another process holds, so that it has nothing to do
// but wait for work.
type FleetIdle struct {
	// Window is how long the server's commands were counted, from a second
	// after the process's first heartbeat.
	Window time.Duration `json:"window_ns"`
	// ServerCommands is INFO stats total_commands_processed over the
	// window, less the bench's own INFO: the idle process's commands, each
	// command its scripts run included (the holder sends none).
	ServerCommands int64   `json:"server_commands"`
	PerSec         float64 `json:"per_sec"`
	// Proc is the idle process, stopped with SIGTERM after the window.
	Proc FleetProc `json:"proc"`
}

// fleetIdle measures one idle process on store: the site's first host is
// occupied (redisstore.Occupy) for the whole run, by the server's clock,
// and the process is given only that host's root as its seed.
func (r *runner) fleetIdle(ctx context.Context, site *demosite.Site, dir string, store *fleetStore) (*FleetIdle, error) {
	cfg := r.cfg
	if err := store.reset(ctx); err != nil {
		return nil, err
	}
	root := site.Roots()[0]
	u, err := url.Parse(root)
	if err != nil {
		return nil, fmt.Errorf("fleet idle: seed %s: %w", root, err)
	}
	if err := redisstore.Occupy(ctx, store.rdb, u.Host, "bench-holder", time.Hour); err != nil {
		return nil, fmt.Errorf("fleet idle: %w", err)
	}
	seeds := filepath.Join(dir, "idle-seeds.txt")
	if err := writeLines(seeds, []string{root}); err != nil {
		return nil, err
	}
	const id = "bench-idle"
	args := []string{"--seeds", seeds, "--store", store.url, "--fleet-id", id, "--workers", "4",
		"--sitemaps=false", "--allow-private", "--progress", "never", "--log-format", "json", "--log-level", "info"}
	cctx, cancel := context.WithTimeout(ctx, idleWindow+time.Minute)
	defer cancel()
	cmd := cfg.Crawler(cctx, args)
	logPath := filepath.Join(dir, "idle.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("fleet idle: start breakwater crawl: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	res := &FleetIdle{Proc: FleetProc{ID: id}}
	started := cfg.now()
	beating := false
	for !beating {
		select {
		case err := <-exited:
			return nil, fmt.Errorf("fleet idle: the idle process exited before its first heartbeat (%v); log %s", err, logPath)
		case <-time.After(250 * time.Millisecond):
		}
		if beating, err = store.rdb.HExists(ctx, "bw:{meta}:procs", id).Result(); err != nil {
			stop()
			return nil, fmt.Errorf("fleet idle: %w", err)
		}
		if cfg.now().Sub(started) > 30*time.Second {
			stop()
			return nil, fmt.Errorf("fleet idle: no heartbeat of the idle process after 30s; log %s", logPath)
		}
	}
	time.Sleep(time.Second) // its start-up and first look
	before, err := store.stats(ctx)
	if err != nil {
		stop()
		return nil, err
	}
	from := cfg.now()
	select {
	case err := <-exited:
		return nil, fmt.Errorf("fleet idle: the idle process exited while idle (%v); log %s", err, logPath)
	case <-time.After(idleWindow):
	}
	after, err := store.stats(ctx)
	res.Window = cfg.now().Sub(from)
	stop()
	werr := <-exited
	if err != nil {
		return nil, err
	}
	res.ServerCommands = after.commands - before.commands - 1
	res.PerSec = float64(res.ServerCommands) / res.Window.Seconds()
	res.Proc.Exit = exitCode(werr)
	res.Proc.Wall = cfg.now().Sub(started)
	if ps := cmd.ProcessState; ps != nil {
		res.Proc.CPU = ps.UserTime() + ps.SystemTime()
	}
	if data, err := os.ReadFile(logPath); err == nil {
		res.Proc.readLog(data)
	}
	return res, store.reset(ctx)
}
