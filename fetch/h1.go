package fetch

import (
	"bufio"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"time"
)

// h1Transport makes the plain-http requests that go direct (no proxy):
// HTTP/1.1 over pooled keep-alive connections, each request written and
// its response read on the goroutine that asked. net/http's Transport
// gives every connection a reader and a writer goroutine and hands each
// request and response between them and the caller over channels; on a
// crawl of small pages those hand-offs and their wake-ups cost a sixth of
// the crawler's CPU. https stays on net/http, for its HTTP/2 and TLS
// session handling, where the handshake dwarfs the hand-offs.
//
// What it keeps of net/http's behaviour: one exchange at a time on a
// connection; a connection reused only after its body was read to the end
// and when neither side asked to close; a GET that failed on a reused
// connection before any byte of an answer came is sent again on the next
// (the server had closed it while idle), down to a new one; the response header block
// capped at maxResponseHeaderBytes; 1xx answers skipped; the request's
// context ending the exchange wherever it is.
type h1Transport struct {
	dial        dialFunc
	maxPerHost  int // connections per address, dialling included; 0: no cap
	idlePerHost int
	maxIdle     int // idle connections of all addresses together
	idleTimeout time.Duration

	mu    sync.Mutex
	hosts map[string]*h1Host // by address; an entry lives while it has a connection or a waiter
	idle  list.List          // every idle *h1Conn, least recently used first
}

// h1Host is one address's connections.
type h1Host struct {
	addr    string
	idle    []*h1Conn // most recently used last
	open    int       // connections open or being dialled, idle ones included
	waiters []chan struct{}
}

// h1Conn is one connection and its buffers. Only the request using it
// touches its buffers; the pool's fields are under h1Transport.mu.
type h1Conn struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
	host *h1Host

	// headerLeft is how much more the reader may take while the header
	// block is read (-1: no cap, the body's own framing bounds it); read
	// counts the bytes an exchange has read, to tell a stale connection.
	headerLeft int64
	read       int64

	idleElem *list.Element // in h1Transport.idle while idle
	timer    *time.Timer   // closes it once idle for idleTimeout
}

func newH1Transport(dial dialFunc, o Options) *h1Transport {
	return &h1Transport{
		dial:        dial,
		maxPerHost:  o.MaxConnsPerHost,
		idlePerHost: idleConnsPerHost(o.MaxConnsPerHost),
		maxIdle:     o.IdleConns,
		idleTimeout: o.IdleTimeout,
		hosts:       make(map[string]*h1Host),
	}
}

// errHeadersTooLong ends the read of a header block past the cap.
var errHeadersTooLong = fmt.Errorf("server response headers exceeded %d bytes; aborted", maxResponseHeaderBytes)

// errConnClosed is a body's read after the exchange ended.
var errConnClosed = errors.New("read on a closed response body")

// aLongTimeAgo is the deadline that makes a connection's reads and
// writes fail at once: how a context that ended stops an exchange.
var aLongTimeAgo = time.Unix(1, 0)

func (c *h1Conn) Read(p []byte) (int, error) {
	if c.headerLeft >= 0 {
		if c.headerLeft == 0 {
			return 0, errHeadersTooLong
		}
		if int64(len(p)) > c.headerLeft {
			p = p[:c.headerLeft]
		}
	}
	n, err := c.conn.Read(p)
	c.read += int64(n)
	if c.headerLeft >= 0 {
		c.headerLeft -= int64(n)
	}
	return n, err
}

// RoundTrip sends req, a GET without a body to an http URL, and reads the
// answer's status and headers; the body is read from the connection as
// the caller reads it.
func (t *h1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	trace := httptrace.ContextClientTrace(ctx)
	for {
		c, reused, err := t.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		if trace != nil && trace.GotConn != nil {
			trace.GotConn(httptrace.GotConnInfo{Conn: c.conn, Reused: reused})
		}
		resp, err := t.exchange(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		stale := reused && c.read == 0
		t.discard(c)
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		// Each dead idle connection is tried once and dropped (a restarted
		// server closed them all), so this ends at a new one at the latest.
		if !stale || req.Body != nil && req.Body != http.NoBody {
			return nil, err
		}
	}
}

// exchange writes req on c and reads the answer's head. On success the
// response's body owns c (see h1Body); on failure c is the caller's to
// discard.
func (t *h1Transport) exchange(ctx context.Context, c *h1Conn, req *http.Request) (*http.Response, error) {
	stop := context.AfterFunc(ctx, func() { _ = c.conn.SetDeadline(aLongTimeAgo) })
	c.read = 0
	err := req.Write(c.bw)
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		stop()
		return nil, err
	}
	c.headerLeft = maxResponseHeaderBytes
	var resp *http.Response
	for range 5 { // 1xx answers come before the real one; a few at most
		resp, err = http.ReadResponse(c.br, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		resp = nil
	}
	if err != nil && c.headerLeft == 0 {
		err = errHeadersTooLong // the cap cut the last line short: say so, not that it is malformed
	}
	c.headerLeft = -1
	if err == nil && resp == nil {
		err = errors.New("too many 1xx informational responses")
	}
	if err != nil {
		stop()
		return nil, err
	}
	reuse := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	b := &h1Body{t: t, c: c, ctx: ctx, body: resp.Body, stop: stop, reuse: reuse}
	if resp.Body == http.NoBody {
		b.finish(true) // nothing follows the head: the connection is free now
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// h1Body is a response's body; it hands its connection back to the pool
// once read to the end, and closes it if closed sooner or broken.
type h1Body struct {
	t     *h1Transport
	c     *h1Conn // nil once finished
	ctx   context.Context
	body  io.ReadCloser
	stop  func() bool // stops the context's watch on c
	reuse bool
	err   error // what reads return once finished
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.c == nil {
		return 0, b.err
	}
	n, err := b.body.Read(p)
	switch {
	case err == io.EOF:
		b.finish(true)
	case err != nil:
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx) // the deadline set on c to stop it, said as why
		}
		b.finish(false)
		b.err = err
	}
	return n, err
}

// Close ends the exchange; a body not read to its end costs its
// connection, as with net/http.
func (b *h1Body) Close() error {
	if b.c != nil {
		b.finish(false)
	}
	return nil
}

func (b *h1Body) finish(whole bool) {
	c := b.c
	b.c, b.err = nil, io.EOF
	if !whole {
		b.err = errConnClosed
	}
	// A watch that already ran has put a deadline on c: it cannot be reused.
	if b.stop() && whole && b.reuse {
		b.t.put(c)
		return
	}
	b.t.discard(c)
}

// get returns an idle connection to addr, or a new one once the address
// has room for it; reused says which.
func (t *h1Transport) get(ctx context.Context, addr string) (c *h1Conn, reused bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, context.Cause(ctx)
	}
	t.mu.Lock()
	var h *h1Host
	for {
		// Looked up on every turn: a wait may have outlived the entry.
		if h = t.hosts[addr]; h == nil {
			h = &h1Host{addr: addr}
			t.hosts[addr] = h
		}
		if n := len(h.idle); n > 0 {
			c := h.idle[n-1]
			h.idle[n-1] = nil
			h.idle = h.idle[:n-1]
			t.idle.Remove(c.idleElem)
			c.idleElem = nil
			t.mu.Unlock()
			c.timer.Stop() // its firing finds it no longer idle
			return c, true, nil
		}
		if t.maxPerHost <= 0 || h.open < t.maxPerHost {
			break
		}
		wake := make(chan struct{}, 1)
		h.waiters = append(h.waiters, wake)
		t.mu.Unlock()
		select {
		case <-wake:
			t.mu.Lock()
		case <-ctx.Done():
			t.mu.Lock()
			if i := slices.Index(h.waiters, wake); i >= 0 {
				h.waiters = append(h.waiters[:i], h.waiters[i+1:]...)
			} else {
				t.wakeLocked(h) // woken as it gave up: pass the turn on
			}
			t.forgetLocked(h)
			t.mu.Unlock()
			return nil, false, context.Cause(ctx)
		}
	}
	h.open++
	t.mu.Unlock()
	conn, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		t.mu.Lock()
		h.open--
		t.wakeLocked(h)
		t.forgetLocked(h)
		t.mu.Unlock()
		return nil, false, err
	}
	c = &h1Conn{conn: conn, host: h, headerLeft: -1}
	c.br = bufio.NewReaderSize(c, 4<<10)
	c.bw = bufio.NewWriterSize(conn, 4<<10)
	return c, false, nil
}

// put makes c idle, evicting the least recently used idle connection
// when the pool is full.
func (t *h1Transport) put(c *h1Conn) {
	if c.br.Buffered() > 0 {
		// Bytes past the end of the answer (a body sent with a 304, say)
		// would be read as the next request's answer.
		t.discard(c)
		return
	}
	h := c.host
	t.mu.Lock()
	if len(h.idle) >= t.idlePerHost {
		t.mu.Unlock()
		t.discard(c)
		return
	}
	var evicted *h1Conn
	if t.idle.Len() >= t.maxIdle {
		evicted = t.idle.Front().Value.(*h1Conn)
		t.unidleLocked(evicted)
	}
	h.idle = append(h.idle, c)
	c.idleElem = t.idle.PushBack(c)
	if c.timer == nil {
		c.timer = time.AfterFunc(t.idleTimeout, func() { t.expire(c) })
	} else {
		c.timer.Reset(t.idleTimeout)
	}
	t.wakeLocked(h)
	t.mu.Unlock()
	if evicted != nil {
		t.discard(evicted)
	}
}

// expire closes c if it is still idle.
func (t *h1Transport) expire(c *h1Conn) {
	t.mu.Lock()
	if c.idleElem == nil {
		t.mu.Unlock()
		return // taken since
	}
	t.unidleLocked(c)
	t.mu.Unlock()
	t.discard(c)
}

// unidleLocked takes c out of the idle lists; it stays counted open.
func (t *h1Transport) unidleLocked(c *h1Conn) {
	h := c.host
	for i, ic := range h.idle {
		if ic == c {
			h.idle = append(h.idle[:i], h.idle[i+1:]...)
			break
		}
	}
	t.idle.Remove(c.idleElem)
	c.idleElem = nil
}

// discard closes c, which is in no idle list, and frees its place.
func (t *h1Transport) discard(c *h1Conn) {
	_ = c.conn.Close()
	if c.timer != nil {
		c.timer.Stop()
	}
	h := c.host
	t.mu.Lock()
	h.open--
	t.wakeLocked(h)
	t.forgetLocked(h)
	t.mu.Unlock()
}

// wakeLocked lets the first waiter for h look again.
func (t *h1Transport) wakeLocked(h *h1Host) {
	if len(h.waiters) == 0 {
		return
	}
	h.waiters[0] <- struct{}{}
	h.waiters = h.waiters[1:]
}

// forgetLocked drops h once nothing holds it, so that the map follows the
// hosts being crawled, not every host ever asked.
func (t *h1Transport) forgetLocked(h *h1Host) {
	if h.open == 0 && len(h.waiters) == 0 && t.hosts[h.addr] == h {
		delete(t.hosts, h.addr)
	}
}

// closeIdle closes every idle connection.
func (t *h1Transport) closeIdle() {
	t.mu.Lock()
	var idle []*h1Conn
	for e := t.idle.Front(); e != nil; e = e.Next() {
		idle = append(idle, e.Value.(*h1Conn))
	}
	for _, c := range idle {
		t.unidleLocked(c)
	}
	t.mu.Unlock()
	for _, c := range idle {
		t.discard(c)
	}
}

// directPlainHTTP sends plain-http requests on h1 and the rest on other.
type directPlainHTTP struct {
	h1    *h1Transport
	other http.RoundTripper
}

func (d directPlainHTTP) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" {
		return d.h1.RoundTrip(req)
	}
	return d.other.RoundTrip(req)
}
