package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/redisstore"
)

// fleetSchemaKey is the key that marks a Redis database as a Breakwater
// crawl's (redisstore's unexported keySchema, restated): the only kind of
// non-empty database the section flushes.
const fleetSchemaKey = "bw:{meta}:schema"

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
		o.Password = os.Getenv(redisstore.PasswordEnv)
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
