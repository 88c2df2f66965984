//go:build linux

package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Even under umask 0, which would leave a socket bound at its path open to
// everyone until a chmod, the socket is 0600 when it appears. Not parallel:
// the umask is the process's.
func TestServeSocketOwnerOnlyUnderUmaskZero(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "c.sock")
	serveAt(t, path, newRecorder())
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v under umask 0, want 0600", fi.Mode().Perm())
	}
}

// SO_PEERCRED names this process's uid on both ends of a connection it
// makes to itself.
func TestPeerUIDOfOwnConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	defer s.Close()
	for name, conn := range map[string]net.Conn{"dialled": c, "accepted": s} {
		uid, known, err := peerUID(conn)
		if err != nil || !known || uid != os.Geteuid() {
			t.Errorf("%s: peerUID = %d, %v, %v; want %d", name, uid, known, err, os.Geteuid())
		}
		if err := checkPeer(conn); err != nil {
			t.Errorf("%s: checkPeer = %v, want nil", name, err)
		}
	}
}

// nobody is the uid the root-only tests run their other peer as.
const nobody = 65534

// The temp-dir home of long socket paths, when another user made it first,
// is refused. Needs root, to give a directory away.
func TestEnsurePrivateDirRefusesAnotherUsersDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown a directory to another user")
	}
	dir := filepath.Join(t.TempDir(), "theirs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") {
		t.Errorf("ensurePrivateDir(another user's dir) = %v, want it refused", err)
	}
}

// helperEnv makes the test binary act as the other user's process in
// TestPeerHelper instead of running the tests.
const helperEnv = "BREAKWATER_CONTROL_PEER_HELPER"

// TestPeerHelper is not a test: run as another user by the tests below, it
// dials a socket and prints what it answers ("dial PATH"), or serves one
// with a plausible status ("serve PATH").
func TestPeerHelper(t *testing.T) {
	mode, path, ok := strings.Cut(os.Getenv(helperEnv), " ")
	if !ok {
		t.Skip("helper process only")
	}
	switch mode {
	case "dial":
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Println("dial error:", err)
			return
		}
		defer c.Close()
		json.NewEncoder(c).Encode(request{Cmd: "status"})
		b, _ := io.ReadAll(c)
		fmt.Print(string(b))
	case "serve":
		ln, err := net.Listen("unix", path)
		if err != nil {
			fmt.Println("listen error:", err)
			return
		}
		fmt.Println("ready")
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			json.NewDecoder(c).Decode(&request{})
			data, _ := json.Marshal(fStatus)
			json.NewEncoder(c).Encode(response{Data: data})
			c.Close()
		}
	}
}

// asNobody starts the test binary, copied where nobody can run it, as
// TestPeerHelper in the given mode, as uid nobody.
func asNobody(t *testing.T, dir, mode string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "helper.test")
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestPeerHelper$")
	cmd.Env = []string{helperEnv + "=" + mode}
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	return cmd
}

// sharedDir is a directory uid nobody may enter and create sockets in.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "breakwater-peer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A process of another user that can reach the socket (here it is made
// world-writable on purpose, so only the uid check stands) is answered
// with a refusal naming its uid, and no command runs. Needs root, to run
// a process as another user.
func TestServeRefusesAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a peer as another user")
	}
	dir := sharedDir(t)
	path := filepath.Join(dir, "open.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	api := newRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := serveListener(ctx, ln, path, api, discard)
	defer func() { cancel(); <-done }()

	out, err := asNobody(t, dir, "dial "+path).Output()
	if err != nil {
		t.Fatalf("helper: %v (output %q)", err, out)
	}
	var resp response
	if err := json.Unmarshal(firstLine(out), &resp); err != nil || !strings.Contains(resp.Error, "uid 65534") || resp.Data != nil {
		t.Errorf("another user's request got %q (%v), want a refusal naming uid 65534", out, err)
	}
	if len(api.calls) != 0 {
		t.Errorf("another user's request ran %q", api.calls)
	}
}

// A socket served by another user's process (one that took the name
// first) is not talked to: the client refuses it before sending anything,
// though it answers like a crawl would. Needs root.
func TestClientRefusesAnotherUsersServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a peer as another user")
	}
	dir := sharedDir(t)
	path := filepath.Join(dir, "squatted.sock")
	cmd := asNobody(t, dir, "serve "+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("helper: %q", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("helper did not start serving")
	}
	st, err := NewClient(path).Status()
	var pe *PeerError
	if !errors.As(err, &pe) || pe.PeerUID != nobody || st != nil {
		t.Errorf("Status from another user's server = %+v, %v; want a *PeerError for uid %d", st, err, nobody)
	}
}

func firstLine(b []byte) []byte {
	line, _, _ := strings.Cut(string(b), "\n")
	return []byte(line)
}
