package control

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// ErrNoServer means no crawl is serving the socket: the caller should open
// the database file directly.
var ErrNoServer = errors.New("no running crawl on the control socket")

// Timeouts of one exchange. A command is quick; these only keep a stuck
// peer from hanging the other side.
const (
	dialTimeout   = time.Second
	clientTimeout = 15 * time.Second
	serverTimeout = 10 * time.Second
)

type request struct {
	Cmd  string          `json:"cmd"`
	Args json.RawMessage `json:"args,omitempty"`
}

type response struct {
	Data  json.RawMessage `json:"data,omitempty"`
	Error string          `json:"error,omitempty"`
}

// SocketPath is where the control socket of the database at dbPath lives:
// next to it, or, when that path is too long for a socket, in a directory
// of this user's own in the temp dir (see privateDir).
func SocketPath(dbPath string) string {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		abs = dbPath
	}
	p := abs + ".sock"
	if fits(p) {
		return p
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(privateDir(), hex.EncodeToString(sum[:8])+".sock")
}

// maxSocketPath keeps a socket path under every system's sun_path (104
// bytes on the BSDs and macOS, 108 on Linux).
const maxSocketPath = 100

// bindOverhead is what listenPrivate adds to the socket's directory for
// the path it binds first: "/" + the temporary directory + "/s".
var bindOverhead = len("/" + bindDirPrefix + "4294967295" + "/s")

const bindDirPrefix = ".breakwater-"

// fits reports whether both the socket path and the one listenPrivate
// binds before renaming it there are short enough.
func fits(path string) bool {
	return len(path) < maxSocketPath && len(filepath.Dir(path))+bindOverhead < maxSocketPath
}

// privateDir is the temp-dir home of the sockets whose own paths are too
// long: one directory per user, since the temp dir is everyone's and a name
// there can be taken by anyone first. Serve makes it 0700 and refuses it
// unless this user owns it.
func privateDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("breakwater-%d", os.Geteuid()))
}

// Serve listens on path until ctx is done, answering each request by the
// command table with api. Only this user can connect: the socket is 0600
// from the moment it appears at path (see listenPrivate), and where the
// system tells a peer's uid (SO_PEERCRED on Linux) a connection from
// another user is refused; Client refuses a server of another user alike.
// The caller must hold the database lock (a stale socket is replaced).
// done is closed once the socket is removed.
func Serve(ctx context.Context, path string, api API, log *slog.Logger) (done <-chan struct{}, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if filepath.Dir(path) == privateDir() {
		if err := ensurePrivateDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	ln, err := listenPrivate(path)
	if err != nil {
		return nil, err
	}
	return serveListener(ctx, ln, path, api, log), nil
}

// listenPrivate listens on a Unix socket at path that only this user may
// connect to, with no moment at which anyone else could. The socket is
// bound inside a fresh 0700 directory beside path, where no one else can
// reach it, made 0600 there and then renamed to path, which also replaces
// a stale socket in one step. Binding at path and then chmod-ing would
// leave the socket as open as the umask makes it until the chmod (world
// writable under umask 0), and the umask is the whole process's: setting
// it around the bind would race every file the crawl's other goroutines
// create.
func listenPrivate(path string) (*net.UnixListener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != os.ModeSocket {
		return nil, fmt.Errorf("control socket %s: exists and is not a socket (%s); not replacing it", path, fi.Mode().Type())
	}
	tmp, err := os.MkdirTemp(filepath.Dir(path), bindDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // it is not at bound for long; Serve removes it at path
	if err := os.Chmod(bound, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	if err := os.Rename(bound, path); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, nil
}

// ensurePrivateDir makes dir, in the shared temp dir, this user's: created
// 0700 if missing, and refused if it is a symbolic link or another user's
// (who could then swap the socket, or read the crawl's commands).
func ensurePrivateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("control socket directory %s: not a directory (%s)", dir, fi.Mode().Type())
	}
	if uid, ok := fileOwner(fi); ok && uid != os.Geteuid() {
		return fmt.Errorf("control socket directory %s: owned by uid %d, not by you (uid %d)", dir, uid, os.Geteuid())
	}
	if fi.Mode().Perm()&0o077 != 0 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("control socket directory %s: %w", dir, err)
		}
	}
	return nil
}

// serveListener answers on ln, the socket at path, until ctx is done, and
// then removes path.
func serveListener(ctx context.Context, ln net.Listener, path string, api API, log *slog.Logger) <-chan struct{} {
	finished := make(chan struct{})
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var streaming sync.WaitGroup // long answers, served beside the others
	go func() {
		defer close(finished)
		defer streaming.Wait()
		defer os.Remove(path)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			if err := checkPeer(conn); err != nil {
				log.Warn("control: connection refused", "socket", path, "err", err)
				refuse(conn, err)
				continue
			}
			serveConn(conn, api, log, &streaming)
		}
	}()
	return finished
}

// refuse tells a refused peer why, without reading its request, and hangs up.
func refuse(conn net.Conn, why error) {
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(dialTimeout))
	json.NewEncoder(conn).Encode(&response{Error: why.Error()})
}

// PeerError is a control connection refused because the process at the
// other end runs as another user.
type PeerError struct {
	PeerUID, OwnUID int
}

func (e *PeerError) Error() string {
	return fmt.Sprintf("control socket peer runs as uid %d, not as this user (uid %d)", e.PeerUID, e.OwnUID)
}

// checkPeer refuses a connection, accepted or dialled, to a process of
// another user. Where the system cannot tell (see peerUID), the socket's
// 0600 mode is the only guard.
func checkPeer(conn net.Conn) error {
	uid, known, err := peerUID(conn)
	if err != nil {
		return fmt.Errorf("control socket peer credentials: %w", err)
	}
	return peerAllowed(uid, known, os.Geteuid())
}

// peerAllowed is checkPeer's decision: a known peer uid must be ours. Root
// is refused like anyone else when we are not root: root can reach the
// socket whatever its mode, and a crawl's commands are its user's.
func peerAllowed(peer int, known bool, own int) error {
	if known && peer != own {
		return &PeerError{PeerUID: peer, OwnUID: own}
	}
	return nil
}

// serveConn answers one request inline: commands are quick and rare, and
// answering them one at a time keeps them from racing each other. A
// streaming command (a read, however long) is answered on its own
// goroutine, so an export does not hold up a status.
func serveConn(conn net.Conn, api API, log *slog.Logger, streaming *sync.WaitGroup) {
	conn.SetDeadline(time.Now().Add(serverTimeout))
	var req request
	if err := json.NewDecoder(conn).Decode(&req); err != nil {
		log.Warn("control: bad request", "err", err)
		conn.Close()
		return
	}
	if h, ok := streams[req.Cmd]; ok {
		streaming.Go(func() {
			defer conn.Close()
			serveStream(conn, api, h, req)
		})
		return
	}
	defer conn.Close()
	var resp response
	data, err := dispatch(api, req)
	if err == nil {
		resp.Data, err = json.Marshal(data)
	}
	if err != nil {
		resp.Error = err.Error()
	}
	json.NewEncoder(conn).Encode(&resp)
}

// dispatch decodes the request's Args and calls its command.
func dispatch(api API, req request) (any, error) {
	h, ok := commands[req.Cmd]
	if !ok {
		return nil, fmt.Errorf("unknown control command %q", req.Cmd)
	}
	a, err := req.args()
	if err != nil {
		return nil, err
	}
	return h(api, a)
}

// args decodes the request's Args; none is the zero Args.
func (req request) args() (Args, error) {
	var a Args
	if len(req.Args) > 0 {
		if err := json.Unmarshal(req.Args, &a); err != nil {
			return a, fmt.Errorf("%s: bad arguments: %w", req.Cmd, err)
		}
	}
	return a, nil
}

// call sends one command to the crawl serving path and decodes its answer
// into out. It returns ErrNoServer when nothing is listening.
func call(path, cmd string, args Args, out any) error {
	conn, err := dial(path)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(clientTimeout))
	req := request{Cmd: cmd}
	if req.Args, err = json.Marshal(args); err != nil {
		return fmt.Errorf("control %s: %w", cmd, err)
	}
	if err := json.NewEncoder(conn).Encode(&req); err != nil {
		return fmt.Errorf("control %s: send: %w", cmd, err)
	}
	var resp response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return fmt.Errorf("control %s: read answer: %w", cmd, err)
	}
	if resp.Error != "" {
		return errors.New(resp.Error)
	}
	if len(resp.Data) > 0 {
		if err := json.Unmarshal(resp.Data, out); err != nil {
			return fmt.Errorf("control %s: decode answer: %w", cmd, err)
		}
	}
	return nil
}

// dial connects to the crawl serving path: ErrNoServer when nothing
// listens, an error when another user's process does (it could be anyone
// who took the name first, and would be sent our commands and believed).
func dial(path string) (net.Conn, error) {
	conn, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return nil, ErrNoServer
	}
	if err := checkPeer(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return conn, nil
}

// streamLine is one line of a streamed answer: a value, or the last line,
// which says whether the stream ended well.
type streamLine struct {
	Data  json.RawMessage `json:"data,omitempty"`
	End   bool            `json:"end,omitempty"`
	Error string          `json:"error,omitempty"`
}

// serveStream writes each value the command emits as a line, then the end
// line. Each write has its own deadline: a reader that stops reading is
// dropped, one that keeps reading may take as long as the answer needs.
func serveStream(conn net.Conn, api API, h streamHandler, req request) {
	w := bufio.NewWriterSize(conn, 64<<10)
	enc := json.NewEncoder(w)
	emit := func(v any) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		conn.SetWriteDeadline(time.Now().Add(serverTimeout))
		return enc.Encode(streamLine{Data: data})
	}
	a, err := req.args()
	if err == nil {
		err = h(api, a, emit)
	}
	end := streamLine{End: true}
	if err != nil {
		end.Error = err.Error()
	}
	conn.SetWriteDeadline(time.Now().Add(serverTimeout))
	enc.Encode(end)
	w.Flush()
}

// stream sends a streaming command and calls fn with each value of the
// answer. An answer cut short before its end line is an error: an export
// must not look complete when it is not.
func stream(path string, cmd command[struct{}], args Args, fn func(json.RawMessage) error) error {
	conn, err := dial(path)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := request{Cmd: cmd.name}
	if req.Args, err = json.Marshal(args); err != nil {
		return fmt.Errorf("control %s: %w", cmd.name, err)
	}
	conn.SetDeadline(time.Now().Add(clientTimeout))
	if err := json.NewEncoder(conn).Encode(&req); err != nil {
		return fmt.Errorf("control %s: send: %w", cmd.name, err)
	}
	dec := json.NewDecoder(bufio.NewReaderSize(conn, 64<<10))
	for {
		conn.SetReadDeadline(time.Now().Add(clientTimeout))
		var line streamLine
		if err := dec.Decode(&line); err != nil {
			return fmt.Errorf("control %s: the answer ended early: %w", cmd.name, err)
		}
		if line.End {
			if line.Error != "" {
				return errors.New(line.Error)
			}
			return nil
		}
		if err := fn(line.Data); err != nil {
			return err
		}
	}
}
