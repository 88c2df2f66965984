package fetch

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// serveKeepAlive answers every request on c with answer(n), n counting
// the connection's requests from 1, until answer returns "" or the client
// goes.
func serveKeepAlive(c net.Conn, answer func(n int) string) {
	br := bufio.NewReader(c)
	for n := 1; ; n++ {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				break
			}
		}
		a := answer(n)
		if a == "" {
			c.Close()
			return
		}
		if _, err := io.WriteString(c, a); err != nil {
			return
		}
	}
}

func okAnswer(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// A server that closes a kept-alive connection while it is idle (here:
// after each answer, without saying so) costs no failed fetch: the request
// that finds the connection dead is sent again on a new one, and its
// archive record holds the request once.
func TestPlainHTTPStaleConnectionIsRetried(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	addr := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		serveKeepAlive(c, func(n int) string {
			if n > 1 {
				return "" // closes instead of answering a second request
			}
			return okAnswer("ok")
		})
	})
	opts := testOptions()
	opts.Record = true
	f := newTestFetcher(t, opts)
	for i := range 4 {
		r := f.Get(context.Background(), "http://"+addr+"/p")
		if r.Err != nil || r.Status != 200 || string(r.Body) != "ok" {
			t.Fatalf("fetch %d: status %d body %q err %v", i, r.Status, r.Body, r.Err)
		}
		if got := strings.Count(string(r.Wire.Request), "GET /p HTTP/1.1"); got != 1 {
			t.Errorf("fetch %d: the recorded request holds %d requests:\n%s", i, got, r.Wire.Request)
		}
		r.Release()
		time.Sleep(5 * time.Millisecond) // the server's close reaches us
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("%d connections for 4 fetches, want 4 (each retried once on a new one)", n)
	}
}

// A server that restarted has closed every kept-alive connection: a fetch
// goes through all the dead idle ones to a new one, not failing on the
// second.
func TestPlainHTTPEveryStaleConnectionIsPassed(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	release := make(chan struct{})
	addr := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		serveKeepAlive(c, func(n int) string {
			if n > 1 {
				return ""
			}
			<-release // hold each answer until three connections are busy
			return okAnswer("ok")
		})
	})
	opts := testOptions()
	opts.MaxConnsPerHost = 3
	f := newTestFetcher(t, opts)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if r := f.Get(context.Background(), "http://"+addr+"/"); r.Err != nil {
				t.Errorf("first round: %v", r.Err)
			}
		})
	}
	for conns.Load() < 3 {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if r := f.Get(context.Background(), "http://"+addr+"/"); r.Err != nil || string(r.Body) != "ok" {
		t.Fatalf("a fetch over three dead idle connections: body %q err %v", r.Body, r.Err)
	}
	if n := conns.Load(); n != 4 {
		t.Errorf("%d connections, want 4 (the three dead ones passed, one new)", n)
	}
}

// A failure after the answer began is the host's, not a stale
// connection's: it is not sent again.
func TestPlainHTTPCutAnswerIsNotRetried(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	addr := rawServer(t, func(c net.Conn) {
		serveKeepAlive(c, func(n int) string {
			requests.Add(1)
			if n == 1 {
				return okAnswer("ok")
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial"))
			return ""
		})
	})
	f := newTestFetcher(t, testOptions())
	if r := f.Get(context.Background(), "http://"+addr+"/"); r.Err != nil {
		t.Fatalf("first fetch: %v", r.Err)
	}
	r := f.Get(context.Background(), "http://"+addr+"/")
	if r.Err == nil || r.Status != 200 {
		t.Fatalf("cut body: status %d err %v, want 200 and a read error", r.Status, r.Err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("the server saw %d requests, want 2 (the cut one not sent again)", n)
	}
}

// A connection goes back to the pool only when its answer was read to the
// end and neither side asked to close it.
func TestPlainHTTPReusesOnlyWholeKeptAliveAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		answer    string
		wantConns int32
	}{
		{"content length", okAnswer("ok"), 1},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", 1},
		{"no body (304)", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", 1},
		{"1xx before the answer", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + okAnswer("ok"), 1},
		{"a body sent with a 304", "HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\nok", 3},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", 3},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 3},
		{"body past MaxBody", okAnswer(strings.Repeat("x", testMaxBody+10)), 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var conns atomic.Int32
			addr := rawServer(t, func(c net.Conn) {
				conns.Add(1)
				serveKeepAlive(c, func(int) string { return tt.answer })
			})
			f := newTestFetcher(t, testOptions())
			for i := range 3 {
				r := f.Get(context.Background(), "http://"+addr+"/")
				if r.Err != nil || r.Status < 200 {
					t.Fatalf("fetch %d: status %d err %v", i, r.Status, r.Err)
				}
			}
			if n := conns.Load(); n != tt.wantConns {
				t.Errorf("3 fetches opened %d connections, want %d", n, tt.wantConns)
			}
			if n := f.conns.open(); n > 1 {
				t.Errorf("%d connections still open, want at most the one idle", n)
			}
		})
	}
}

// MaxConnsPerHost holds however many requests ask at once: the rest wait
// for a connection to come free, and one that gives up waiting leaves the
// pool as it was.
func TestPlainHTTPConnectionCapPerHost(t *testing.T) {
	t.Parallel()
	var open, most, slowIn atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(10 * time.Millisecond)
		if r.URL.Path == "/slow" {
			slowIn.Add(1)
			time.Sleep(200 * time.Millisecond)
		}
		io.WriteString(w, "ok")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			n := open.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	opts := testOptions()
	opts.MaxConnsPerHost = 2
	f := newTestFetcher(t, opts)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 12 {
		wg.Go(func() {
			if r := f.Get(context.Background(), srv.URL); r.Err != nil || string(r.Body) != "ok" {
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of 12 fetches failed", n)
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d connections open at once, want at most MaxConnsPerHost 2", m)
	}
	// Two slow fetches hold both connections; two more give up waiting.
	for range 2 {
		wg.Go(func() { f.Get(context.Background(), srv.URL+"/slow") })
	}
	for slowIn.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	for range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if r := f.Get(ctx, srv.URL); r.Err == nil {
				t.Errorf("a fetch waiting for a connection past its deadline: status %d, want its error", r.Status)
			}
		})
	}
	wg.Wait()
	if r := f.Get(context.Background(), srv.URL); r.Err != nil {
		t.Fatalf("fetch after the rush: %v", r.Err)
	}
	f.plain.mu.Lock()
	h := f.plain.hosts[strings.TrimPrefix(srv.URL, "http://")]
	f.plain.mu.Unlock()
	if h == nil || h.open > 2 || len(h.waiters) != 0 {
		t.Errorf("host after the rush: %+v, want at most 2 open and no waiter", h)
	}
}

// The pool's bookkeeping follows the hosts that have connections, not
// every host ever asked: hosts whose connections are gone leave no entry.
func TestPlainHTTPForgetsHostsWithoutConnections(t *testing.T) {
	t.Parallel()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	t.Cleanup(func() { srv.Close() })
	f := newTestFetcher(t, testOptions())
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		if r := f.Get(context.Background(), "http://"+ln.Addr().String()+"/"); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	for range 20 {
		f.Get(context.Background(), "http://"+closedAddr(t)+"/")
	}
	f.plain.mu.Lock()
	if n := len(f.plain.hosts); n != 20 {
		t.Errorf("%d hosts kept with 20 idle connections and 20 failed dials, want 20", n)
	}
	f.plain.mu.Unlock()
	f.CloseIdle()
	f.plain.mu.Lock()
	defer f.plain.mu.Unlock()
	if n, idle := len(f.plain.hosts), f.plain.idle.Len(); n != 0 || idle != 0 {
		t.Errorf("after CloseIdle: %d hosts, %d idle connections, want none", n, idle)
	}
}

// tlsTestServer is an https server and options whose fetcher trusts it.
func tlsTestServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, Options, *atomic.Int32) {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	dials := countNewConns(srv.Config)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	opts := testOptions()
	opts.tlsConfig = &tls.Config{RootCAs: pool}
	return srv, opts, dials
}

// https goes through net/http's transport: HTTP/2 when the server offers
// it, one connection for sequential fetches, and HTTP/1.1 over TLS when
// recording, with the exchange as the server saw it.
func TestFetchHTTPS(t *testing.T) {
	t.Parallel()
	srv, opts, dials := tlsTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto", r.Proto)
		io.WriteString(w, "secure")
	})
	f := newTestFetcher(t, opts)
	for i := range 3 {
		r := f.Get(context.Background(), srv.URL+"/")
		if r.Err != nil || r.Status != 200 || string(r.Body) != "secure" {
			t.Fatalf("fetch %d: status %d body %q err %v", i, r.Status, r.Body, r.Err)
		}
		if p := r.Header.Get("X-Proto"); p != "HTTP/2.0" {
			t.Errorf("fetch %d over %s, want HTTP/2.0", i, p)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("3 fetches opened %d connections, want 1", n)
	}
	opts.Record = true
	rec := newTestFetcher(t, opts)
	r := rec.Get(context.Background(), srv.URL+"/")
	if r.Err != nil || r.Wire == nil || !r.Wire.TLS {
		t.Fatalf("recorded https fetch: err %v wire %+v", r.Err, r.Wire)
	}
	defer r.Release()
	if !strings.HasPrefix(string(r.Wire.Request), "GET / HTTP/1.1\r\n") || r.Header.Get("X-Proto") != "HTTP/1.1" {
		t.Errorf("recorded request %q, served over %s: want HTTP/1.1", r.Wire.Request, r.Header.Get("X-Proto"))
	}
}
