package fetch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"breakwater/spool"
)

// DefaultRecordMax caps the wire bytes kept of one response when recording.
const DefaultRecordMax int64 = 100 << 20

// maxRequestCapture caps the request bytes kept: a GET is its header block,
// which the transport already bounds; the cap only guards a runaway.
const maxRequestCapture = 1 << 20

// Wire is an exchange as it crossed the connection, for an archive: the
// request as written and the response as read, status line, headers and
// body, with the body's transfer framing (chunks) and content encoding
// kept. It is set on a Response when Options.Record is on.
type Wire struct {
	Request []byte
	// Response is spooled: its first spool.DefaultMemMax bytes in memory,
	// the rest in a temporary file (see Options.SpoolDir), so that a large
	// answer is archived whole without being held in memory. Close, or the
	// Response's Release, frees it.
	Response *spool.Buffer
	// Truncated is set when Response stops before the end of the body:
	// it reached the record cap, or the exchange failed partway.
	Truncated bool
	// RemoteIP is the address of the peer the bytes came from (a proxy's
	// when there is one); "" if unknown.
	RemoteIP string
	// TLS is set when the exchange was over TLS.
	TLS bool

	limit int64
	full  bool
	// failed is the spool's write failure: the record cannot be whole.
	failed error
}

func newWire(limit int64, spoolDir string) *Wire {
	return &Wire{limit: limit, Response: spool.New(spoolDir, 0)}
}

func (w *Wire) addResponse(p []byte) {
	room := w.limit - w.Response.Size()
	if room <= 0 || w.failed != nil {
		w.full = true
		return
	}
	if int64(len(p)) > room {
		p, w.full = p[:room], true
	}
	if _, err := w.Response.Write(p); err != nil {
		w.failed, w.full = err, true
	}
}

// Err is why the response could not be spooled whole (its spool's disk
// is full, say), or nil. Response then stops short for a fault of ours,
// not the host's: a record made of it would not be the exchange.
func (w *Wire) Err() error { return w.failed }

// Close frees the spooled response.
func (w *Wire) Close() {
	if w != nil && w.Response != nil {
		w.Response.Close()
	}
}

func (w *Wire) addRequest(p []byte) {
	if room := maxRequestCapture - len(w.Request); room > 0 {
		w.Request = append(w.Request, p[:min(len(p), room)]...)
	}
}

// wireConn copies what crosses it into the Wire of the request that is
// using it. HTTP/1.1 carries one exchange at a time on a connection: the
// tap is set when the transport hands the connection to a request, before
// the request is written, and its bytes until the next hand-over are that
// exchange's. The transport's reader goroutine and the request's own
// goroutine both reach the tap, hence the lock.
type wireConn struct {
	net.Conn
	tls bool
	mu  sync.Mutex
	tap *Wire
}

func (c *wireConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		if c.tap != nil {
			c.tap.addResponse(p[:n])
		}
		c.mu.Unlock()
	}
	return n, err
}

func (c *wireConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	if c.tap != nil {
		c.tap.addRequest(p)
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *wireConn) bind(w *Wire) {
	c.mu.Lock()
	c.tap = w
	// Bound again, the request is being sent once more (its first
	// connection had been closed by the server while idle): the record
	// holds the exchange that was answered.
	w.Request = w.Request[:0]
	c.mu.Unlock()
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		w.RemoteIP = a.IP.String()
	}
	w.TLS = c.tls
}

// unbind stops copying into w; after it w is the caller's alone.
func (c *wireConn) unbind(w *Wire) {
	c.mu.Lock()
	if c.tap == w {
		c.tap = nil
	}
	c.mu.Unlock()
}

// full reports whether w has taken all it may; read under the conn's lock.
func (c *wireConn) full(w *Wire) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return w.full
}

// recordDials makes tr's connections copy their exchanges, and its TLS
// run here, over plain connections, offering HTTP/1.1 only: an archive
// holds HTTP/1.1 messages, and the bytes to copy are those inside TLS.
// A proxy's tunnel is such a plain connection (see router.tunnel).
func recordDials(tr *http.Transport, connectTimeout time.Duration) {
	plain := tr.DialContext
	tr.ForceAttemptHTTP2 = false
	tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{} // no h2
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &wireConn{Conn: c}, nil
	}
	tr.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		c, err := plain(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cfg := &tls.Config{}
		if tr.TLSClientConfig != nil {
			cfg = tr.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		cfg.NextProtos = []string{"http/1.1"}
		hctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(hctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
		}
		return &wireConn{Conn: tc, tls: true}, nil
	}
}

// capture follows one request onto its connection.
type capture struct {
	wire *Wire
	conn *wireConn // nil until the transport hands over a recording connection
}

// traced returns req with a trace that binds the capture to the
// connection the transport gives it.
func (c *capture) traced(req *http.Request) *http.Request {
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		if wc, ok := info.Conn.(*wireConn); ok {
			c.conn = wc
			wc.bind(c.wire)
		}
	}}
	return req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
}

// full reports whether the capture has taken all it may.
func (c *capture) full() bool { return c.conn != nil && c.conn.full(c.wire) }

// errUnrecorded fails the Wire of an exchange that came off a connection
// recordDials did not make. No route makes one (through a proxy the
// fetcher opens the tunnel and runs the target's TLS itself); if one ever
// did, the page must not be done without its records.
var errUnrecorded = errors.New("the exchange used a connection that records nothing")

// finish detaches the capture.
func (c *capture) finish(resp *http.Response, bodyDone bool) *Wire {
	w := c.wire
	if c.conn == nil {
		if resp == nil {
			return nil
		}
		w.failed = errUnrecorded
		return w
	}
	c.conn.unbind(w)
	w.Truncated = w.full || !bodyDone
	return w
}

// rawTee remembers how the body's reads ended.
type rawTee struct {
	r   io.Reader
	err error // the body's own error, io.EOF at its end; nil while it reads
}

func (t *rawTee) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil {
		t.err = err
	}
	return n, err
}
