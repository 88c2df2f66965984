package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package when Serve leaves its accept loop or its
// context watcher running after the context ended.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var discard = slog.New(slog.DiscardHandler)

// serve starts Serve on a fresh socket in t.TempDir(); the test's cleanup
// ends it and waits for it.
func serve(t *testing.T, h Handler) (path string, stop func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "c.sock")
	return path, serveAt(t, path, h)
}

func serveAt(t *testing.T, path string, h Handler) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done, err := Serve(ctx, path, h, discard)
	if err != nil {
		cancel()
		t.Fatalf("Serve: %v", err)
	}
	stop = func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return stop
}

type echoArgs struct {
	Host string `json:"host"`
	N    int    `json:"n"`
}

type echoReply struct {
	Cmd  string   `json:"cmd"`
	Args echoArgs `json:"args"`
}

func echo(cmd string, args json.RawMessage) (any, error) {
	var in echoArgs
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, err
		}
	}
	switch cmd {
	case "fail":
		return nil, fmt.Errorf("pause %s: no such host", in.Host)
	case "nothing":
		return nil, nil
	}
	return echoReply{Cmd: cmd, Args: in}, nil
}

func TestSocketPath(t *testing.T) {
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("f", 60)+".db")
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, db, want string
	}{
		{"absolute short path", filepath.Join(dir, "crawl.db"), filepath.Join(dir, "crawl.db") + ".sock"},
		{"relative path is made absolute", "crawl.db", filepath.Join(wd, "crawl.db") + ".sock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SocketPath(tt.db); got != tt.want {
				t.Errorf("SocketPath(%q) = %q, want %q", tt.db, got, tt.want)
			}
		})
	}
	t.Run("long path goes to the temp dir", func(t *testing.T) {
		got := SocketPath(long)
		if filepath.Dir(got) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(got), "breakwater-") ||
			!strings.HasSuffix(got, ".sock") {
			t.Errorf("SocketPath(long) = %q, want breakwater-*.sock in %s", got, os.TempDir())
		}
		if len(got) >= 100 {
			t.Errorf("SocketPath(long) = %q is %d bytes, too long for a Unix socket", got, len(got))
		}
		if again := SocketPath(long); again != got {
			t.Errorf("SocketPath is not stable: %q then %q", got, again)
		}
		if other := SocketPath(long + "2"); other == got {
			t.Errorf("two long paths share the socket %q", got)
		}
	})
}

func TestRoundTrip(t *testing.T) {
	path, _ := serve(t, echo)
	tests := []struct {
		name string
		cmd  string
		args any
		want echoReply
	}{
		{"with arguments", "status", echoArgs{Host: "example.com", N: 7}, echoReply{"status", echoArgs{"example.com", 7}}},
		{"without arguments", "hosts", nil, echoReply{Cmd: "hosts"}},
		{"repeated", "status", echoArgs{N: 1}, echoReply{"status", echoArgs{N: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got echoReply
			if err := Call(path, tt.cmd, tt.args, &got); err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got != tt.want {
				t.Errorf("Call answered %+v, want %+v", got, tt.want)
			}
		})
	}
	t.Run("nil answer leaves out untouched", func(t *testing.T) {
		got := echoReply{Cmd: "before"}
		if err := Call(path, "nothing", nil, &got); err != nil {
			t.Fatalf("Call: %v", err)
		}
		if got.Cmd != "before" {
			t.Errorf("out changed to %+v", got)
		}
	})
	t.Run("out may be nil", func(t *testing.T) {
		if err := Call(path, "status", nil, nil); err != nil {
			t.Fatalf("Call: %v", err)
		}
	})
}

func TestHandlerErrorComesBack(t *testing.T) {
	path, _ := serve(t, echo)
	err := Call(path, "fail", echoArgs{Host: "a.example"}, nil)
	if err == nil || err.Error() != "pause a.example: no such host" {
		t.Fatalf("Call = %v, want the handler's error", err)
	}
	if errors.Is(err, ErrNoServer) {
		t.Errorf("a handler error must not look like ErrNoServer")
	}
}

func TestCallWithoutServer(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	makeStaleSocket(t, stale)
	for _, path := range []string{filepath.Join(dir, "missing.sock"), stale} {
		start := time.Now()
		err := Call(path, "status", nil, nil)
		if !errors.Is(err, ErrNoServer) {
			t.Errorf("Call(%s) = %v, want ErrNoServer", filepath.Base(path), err)
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Errorf("Call(%s) took %s to find nobody", filepath.Base(path), d)
		}
	}
}

// makeStaleSocket leaves a socket file nobody listens on, as a killed crawl does.
func makeStaleSocket(t *testing.T, path string) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("stale socket not left behind: %v", err)
	}
}

func TestServeReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	makeStaleSocket(t, path)
	serveAt(t, path, echo)
	var got echoReply
	if err := Call(path, "status", nil, &got); err != nil || got.Cmd != "status" {
		t.Fatalf("Call after replacing a stale socket = %+v, %v", got, err)
	}
}

func TestServeRemovesSocketWhenDone(t *testing.T) {
	path, stop := serve(t, echo)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("socket missing while serving: %v", err)
	}
	stop()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after ctx ended: %v", err)
	}
	if err := Call(path, "status", nil, nil); !errors.Is(err, ErrNoServer) {
		t.Errorf("Call after Serve ended = %v, want ErrNoServer", err)
	}
}

func TestBadRequestDoesNotStopServer(t *testing.T) {
	path, _ := serve(t, echo)
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("this is not json\n"))
	conn.Close()
	var got echoReply
	if err := Call(path, "status", nil, &got); err != nil || got.Cmd != "status" {
		t.Fatalf("Call after a bad request = %+v, %v", got, err)
	}
}

func TestServeFailsOnUnusablePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "c.sock")
	done, err := Serve(context.Background(), path, echo, discard)
	if err == nil || done != nil {
		t.Fatalf("Serve in a missing directory = %v, %v; want an error", done, err)
	}
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should name the path", err)
	}
}
