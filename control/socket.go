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
// next to it, or in the temp dir when that path is too long for a socket.
func SocketPath(dbPath string) string {
	abs, err := filepath.Abs(dbPath)
	if err != nil {
		abs = dbPath
	}
	p := abs + ".sock"
	if len(p) < 100 {
		return p
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), "breakwater-"+hex.EncodeToString(sum[:8])+".sock")
}

// Serve listens on path until ctx is done, answering each request by the
// command table with api. The caller must hold the database lock (a stale
// socket file is replaced). done is closed once the socket is removed.
func Serve(ctx context.Context, path string, api API, log *slog.Logger) (done <-chan struct{}, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on control socket %s: %w", path, err)
	}
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
			serveConn(conn, api, log, &streaming)
		}
	}()
	return finished, nil
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
	conn, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return ErrNoServer
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
	conn, err := net.DialTimeout("unix", path, dialTimeout)
	if err != nil {
		return ErrNoServer
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
