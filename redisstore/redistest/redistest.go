// Package redistest starts throwaway redis-server processes for tests: a
// single server (Start) or a small Redis Cluster (StartCluster), each on
// free loopback ports with its data in a test's temporary directory, and
// stopped when the test ends.
//
// When redis-server is not installed the test is skipped, unless the
// environment variable CI is set, in which case it fails: a CI run must not
// pass by skipping the store's tests.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startTimeout bounds how long a server may take to answer PING.
	startTimeout = 10 * time.Second
	// stopTimeout bounds how long a server may take to exit on SIGTERM
	// before it is killed.
	stopTimeout = 10 * time.Second
	// portAttempts is how many fresh ports are tried when a server cannot
	// bind the one picked (another process took it in between).
	portAttempts = 5
)

// Option changes how Start runs the server.
type Option func(*options)

type options struct {
	appendOnly bool
	password   string
}

// WithAppendOnly turns the append-only file on (fsync every second), so
// that data survives Restart.
func WithAppendOnly() Option { return func(o *options) { o.appendOnly = true } }

// WithPassword makes the server require pw (requirepass); Client and URL
// carry it.
func WithPassword(pw string) Option { return func(o *options) { o.password = pw } }

// Server is one running redis-server.
type Server struct {
	// Addr is host:port, on 127.0.0.1.
	Addr string
	// Dir is the server's working directory (its AOF lives there).
	Dir string

	bin  string
	port int
	opts options

	mu     sync.Mutex
	proc   *process
	client *redis.Client
}

// process is one run of redis-server.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid once done is closed
	log  string
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop signals the process with sig and waits for it to exit, killing it
// if it does not within stopTimeout.
func (p *process) stop(sig os.Signal) {
	if p == nil || p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// logTail returns the end of the process's log, for failure messages.
func (p *process) logTail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// serverBinary finds redis-server, or skips (fails under CI) the test.
func serverBinary(t testing.TB) string {
	t.Helper()
	return binary(t, "redis-server")
}

func binary(t testing.TB, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p := filepath.Join("/usr/bin", name); isExecutable(p) {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not installed (CI is set, so this is an error)", name)
	}
	t.Skip(name + " not installed")
	return ""
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	return port, nil
}

// Start runs a redis-server on a free loopback port with its data in a new
// temporary directory and returns once it answers PING. The server (and
// its cached client) are stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{bin: serverBinary(t), Dir: t.TempDir()}
	for _, o := range opts {
		o(&s.opts)
	}
	t.Cleanup(s.cleanup)
	var lastErr error
	for range portAttempts {
		port, err := freePort()
		if err != nil {
			t.Fatalf("redistest: pick a port: %v", err)
		}
		s.port = port
		s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		p, err := s.launch()
		if err == nil {
			s.mu.Lock()
			s.proc = p
			s.mu.Unlock()
			return s
		}
		lastErr = err
		if !errors.Is(err, errExited) {
			break
		}
	}
	t.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

func (s *Server) args() []string {
	a := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--dir", s.Dir,
		"--save", "",
		"--protected-mode", "yes",
	}
	if s.opts.appendOnly {
		a = append(a, "--appendonly", "yes", "--appendfsync", "everysec")
	} else {
		a = append(a, "--appendonly", "no")
	}
	if s.opts.password != "" {
		a = append(a, "--requirepass", s.opts.password)
	}
	return a
}

// errExited is wrapped by launch when the server exited before answering,
// most likely because its port was taken.
var errExited = errors.New("redis-server exited before answering")

// launch starts the server on s.port and waits until it answers PING.
func (s *Server) launch() (*process, error) {
	return launch(s.bin, s.Dir, s.args(), &redis.Options{Addr: s.Addr, Password: s.opts.password})
}

// launch starts bin with args in dir, logging to dir/redis.log, and waits
// until a client with opt answers PING.
func launch(bin, dir string, args []string, opt *redis.Options) (*process, error) {
	p := &process{log: filepath.Join(dir, "redis.log"), done: make(chan struct{})}
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = dir
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// Own process group: a test's Ctrl-C reaches us, and we stop it.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := waitPing(p, opt); err != nil {
		p.stop(syscall.SIGKILL)
		return nil, fmt.Errorf("%s %s: %w\n%s", bin, strings.Join(args, " "), err, p.logTail())
	}
	return p, nil
}

// waitPing polls PING until it succeeds, the process exits or startTimeout
// passes.
func waitPing(p *process, opt *redis.Options) error {
	o := *opt
	o.MaxRetries = -1
	o.DialTimeout = 200 * time.Millisecond
	o.PoolSize = 1
	o.DisableIdentity = true
	c := redis.NewClient(&o)
	defer c.Close()
	deadline := time.Now().Add(startTimeout)
	for {
		if p.exited() {
			return fmt.Errorf("%w (%v)", errExited, p.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer to PING within %v: %v", startTimeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// URL returns the server's redis:// URL (database 0, with the password if
// one was set).
func (s *Server) URL() string {
	if s.opts.password != "" {
		return "redis://:" + s.opts.password + "@" + s.Addr + "/0"
	}
	return "redis://" + s.Addr + "/0"
}

// Client returns a client of the server, the same one on every call. It is
// closed when the test ends; it survives Restart (it reconnects).
func (s *Server) Client() *redis.Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client == nil {
		s.client = redis.NewClient(&redis.Options{Addr: s.Addr, Password: s.opts.password})
	}
	return s.client
}

// Restart stops the server with SIGTERM (it writes its append-only file
// out), waits for it, and starts it again on the same port and directory:
// with WithAppendOnly the data survives.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	p.stop(syscall.SIGTERM)
	// The port may linger for a moment; retry on it rather than moving.
	var err error
	for range portAttempts {
		var np *process
		if np, err = s.launch(); err == nil {
			s.mu.Lock()
			s.proc = np
			s.mu.Unlock()
			return
		}
		if !errors.Is(err, errExited) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("redistest: restart redis-server: %v", err)
}

// Kill stops the server at once with SIGKILL, as a crash would, and waits
// for it. Data not yet fsynced is lost.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	p.stop(syscall.SIGKILL)
}

func (s *Server) cleanup() {
	s.mu.Lock()
	c, p := s.client, s.proc
	s.client, s.proc = nil, nil
	s.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
	p.stop(syscall.SIGKILL)
}

// Cluster is a running Redis Cluster of masters only.
type Cluster struct {
	// Addrs are the masters' host:port, on 127.0.0.1.
	Addrs []string

	mu     sync.Mutex
	client *redis.ClusterClient
}

// StartCluster runs masters redis-server nodes with cluster mode on (each
// in its own temporary directory, on free loopback ports, bus ports chosen
// explicitly), joins them with redis-cli --cluster create (no replicas) and
// returns once every node reports cluster_state:ok. Everything is stopped
// when the test ends.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: a cluster needs at least 3 masters, not %d", masters)
	}
	bin := serverBinary(t)
	cli := binary(t, "redis-cli")
	c := &Cluster{}
	for i := range masters {
		var lastErr error
		ok := false
		for range portAttempts {
			port, err1 := freePort()
			bus, err2 := freePort()
			if err := errors.Join(err1, err2); err != nil {
				t.Fatalf("redistest: pick a port: %v", err)
			}
			if port == bus {
				continue
			}
			dir := t.TempDir()
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
			args := []string{
				"--port", strconv.Itoa(port),
				"--bind", "127.0.0.1",
				"--dir", dir,
				"--save", "",
				"--appendonly", "no",
				"--protected-mode", "yes",
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000",
				"--cluster-port", strconv.Itoa(bus),
			}
			p, err := launch(bin, dir, args, &redis.Options{Addr: addr})
			if err != nil {
				lastErr = err
				if errors.Is(err, errExited) {
					continue
				}
				break
			}
			// Registered after the node's TempDir, so it runs before the
			// directory is removed.
			t.Cleanup(func() { p.stop(syscall.SIGKILL) })
			c.Addrs = append(c.Addrs, addr)
			ok = true
			break
		}
		if !ok {
			t.Fatalf("redistest: start cluster node %d: %v", i, lastErr)
		}
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.waitOK(); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(c.closeClient)
	return c
}

// waitOK waits until every node reports cluster_state:ok and knows every
// other node.
func (c *Cluster) waitOK() error {
	deadline := time.Now().Add(startTimeout)
	for _, addr := range c.Addrs {
		rc := redis.NewClient(&redis.Options{Addr: addr, DisableIdentity: true, PoolSize: 1})
		var last string
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			info, err := rc.ClusterInfo(ctx).Result()
			cancel()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Addrs))+"\r") {
				break
			}
			last = fmt.Sprint(info, err)
			if time.Now().After(deadline) {
				rc.Close()
				return fmt.Errorf("cluster node %s not ok within %v: %s", addr, startTimeout, last)
			}
			time.Sleep(50 * time.Millisecond)
		}
		rc.Close()
	}
	return nil
}

// Client returns a cluster client of the cluster, the same one on every
// call; it is closed when the test ends.
func (c *Cluster) Client() *redis.ClusterClient {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.client == nil {
		c.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs})
	}
	return c.client
}

func (c *Cluster) closeClient() {
	c.mu.Lock()
	cl := c.client
	c.client = nil
	c.mu.Unlock()
	if cl != nil {
		_ = cl.Close()
	}
}
