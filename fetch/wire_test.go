package fetch

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"breakwater/fetch/fetchtest"
)

func recordOptions() Options {
	o := testOptions()
	o.Record = true
	return o
}

// wireServer is a raw HTTP/1.1 server on loopback, keep-alive included:
// respond gives the exact bytes to write for each request, and the server
// keeps the exact bytes of every request it read.
type wireServer struct {
	addr  string
	conns atomic.Int32
	mu    sync.Mutex
	reqs  [][]byte // each request's bytes as they arrived
}

func newWireServer(t *testing.T, respond func(r *http.Request) string) *wireServer {
	t.Helper()
	s := &wireServer{}
	s.addr = fetchtest.RawServer(t, func(c net.Conn) {
		defer c.Close()
		s.conns.Add(1)
		var seen bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &seen))
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			// A GET has no body and the client waits for the answer, so
			// what the reader took off the connection is this request.
			s.mu.Lock()
			s.reqs = append(s.reqs, bytes.Clone(seen.Bytes()))
			s.mu.Unlock()
			seen.Reset()
			if _, err := io.WriteString(c, respond(req)); err != nil {
				return
			}
		}
	})
	return s
}

func (s *wireServer) requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.reqs...)
}

func gzipOf(t *testing.T, s string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// chunked frames body in chunks of size n, as a server would send it.
func chunked(body string, n int) string {
	var b strings.Builder
	for len(body) > 0 {
		k := min(n, len(body))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", k, body[:k])
		body = body[k:]
	}
	b.WriteString("0\r\n\r\n")
	return b.String()
}

// The Wire holds the response exactly as the server wrote it, header case
// and order, chunk framing and gzip included, and the request exactly as
// the server read it; the Response holds the decoded body.
func TestWireKeepsExactBytes(t *testing.T) {
	t.Parallel()
	page := strings.Repeat("<p>hello wire</p>\n", 20)
	gz := string(gzipOf(t, page))
	tests := []struct {
		name     string
		response string
		wantBody string
	}{
		{"content-length",
			"HTTP/1.1 200 OK\r\nx-lower-CASE: kept\r\nContent-Type: text/html\r\nServer:  odd  spacing \r\n" +
				"Content-Length: " + strconv.Itoa(len(page)) + "\r\n\r\n" + page,
			page},
		{"chunked",
			"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(page, 37),
			page},
		{"chunked with extension and trailer",
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
				"5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n",
			"hello world"},
		{"gzip with content-length",
			"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: " + strconv.Itoa(len(gz)) + "\r\n\r\n" + gz,
			page},
		{"gzip chunked",
			"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(gz, 50),
			page},
		{"404 is data",
			"HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone",
			"gone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newWireServer(t, func(*http.Request) string { return tt.response })
			f := newTestFetcher(t, recordOptions())
			r := f.Get(context.Background(), "http://"+srv.addr+"/path?q=1")
			if r.Err != nil {
				t.Fatalf("fetch: %v", r.Err)
			}
			if string(r.Body) != tt.wantBody || r.Truncated {
				t.Errorf("Body = %q (truncated %v), want %q", r.Body, r.Truncated, tt.wantBody)
			}
			w := r.Wire
			if w == nil {
				t.Fatal("Wire is nil with Record on")
			}
			if got := wireText(t, w); got != tt.response {
				t.Errorf("Wire.Response =\n%q\nwant the bytes the server wrote:\n%q", got, tt.response)
			}
			reqs := srv.requests()
			if len(reqs) != 1 || !bytes.Equal(w.Request, reqs[0]) {
				t.Errorf("Wire.Request =\n%q\nwant the bytes the server read:\n%q", w.Request, reqs)
			}
			req := string(w.Request)
			if !strings.HasPrefix(req, "GET /path?q=1 HTTP/1.1\r\n") || !strings.HasSuffix(req, "\r\n\r\n") {
				t.Errorf("Wire.Request %q is not a GET of /path?q=1 ending its header block", req)
			}
			for _, h := range []string{"\r\nHost: " + srv.addr + "\r\n", "\r\nUser-Agent: Breakwater-test/1.0\r\n", "\r\nAccept-Encoding: gzip\r\n"} {
				if !strings.Contains(req, h) {
					t.Errorf("Wire.Request %q lacks %q", req, strings.TrimSpace(h))
				}
			}
			if w.RemoteIP != "127.0.0.1" || w.Truncated || w.TLS {
				t.Errorf("RemoteIP %q Truncated %v TLS %v; want 127.0.0.1, false, false",
					w.RemoteIP, w.Truncated, w.TLS)
			}
		})
	}
}

// Sequential fetches over one kept-alive connection: each Wire holds its
// own exchange, and nothing of the one before or after.
func TestWireKeepAliveSeparatesExchanges(t *testing.T) {
	t.Parallel()
	response := func(path string) string {
		body := "body of " + path
		if path == "/chunked" {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(body, 3)
		}
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	srv := newWireServer(t, func(r *http.Request) string { return response(r.URL.Path) })
	f := newTestFetcher(t, recordOptions())
	paths := []string{"/one", "/chunked", "/three", "/one"}
	for i, p := range paths {
		r := f.Get(context.Background(), "http://"+srv.addr+p)
		if r.Err != nil || string(r.Body) != "body of "+p {
			t.Fatalf("fetch %d %s: body %q err %v", i, p, r.Body, r.Err)
		}
		if got, want := wireText(t, r.Wire), response(p); got != want {
			t.Errorf("fetch %d %s: Wire.Response =\n%q\nwant only its own exchange:\n%q", i, p, got, want)
		}
		req := string(r.Wire.Request)
		if !strings.HasPrefix(req, "GET "+p+" HTTP/1.1\r\n") || strings.Count(req, "GET ") != 1 ||
			strings.Index(req, "\r\n\r\n") != len(req)-4 {
			t.Errorf("fetch %d %s: Wire.Request = %q, want that one request", i, p, req)
		}
		if reqs := srv.requests(); len(reqs) != i+1 || !bytes.Equal(r.Wire.Request, reqs[i]) {
			t.Errorf("fetch %d %s: Wire.Request is not what the server read", i, p)
		}
		if r.Wire.Truncated {
			t.Errorf("fetch %d %s: Wire.Truncated", i, p)
		}
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("server saw %d connections for %d fetches, want 1 (kept alive)", n, len(paths))
	}
}

// Concurrent fetches to several servers, some sharing connections in
// turn (MaxConnsPerHost): each Wire holds its own request and response.
func TestWireConcurrentFetches(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	var srvs []*httptest.Server
	for range 3 {
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// Bodies of varied sizes, some chunked (no Content-Length), so
			// reads and hand-overs interleave.
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			if n%2 == 1 {
				w.Header().Set("Content-Length", strconv.Itoa(len(r.URL.Path)+n+1))
			}
			fmt.Fprintf(w, "%s ", r.URL.Path)
			if n%2 == 0 {
				w.(http.Flusher).Flush() // headers out now: chunked
			}
			io.WriteString(w, strings.Repeat("x", n))
		}))
		srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		}
		srv.Start()
		t.Cleanup(srv.Close)
		srvs = append(srvs, srv)
	}
	o := recordOptions()
	o.MaxConnsPerHost = 2
	f := newTestFetcher(t, o)
	const perServer = 24
	var wg sync.WaitGroup
	for s, srv := range srvs {
		for i := range perServer {
			wg.Go(func() {
				path := fmt.Sprintf("/s%d/p%d", s, i)
				n := (i * 997) % 20000
				target := fmt.Sprintf("%s%s?n=%d", srv.URL, path, n)
				r := f.Get(context.Background(), target)
				wantBody := path + " " + strings.Repeat("x", n)
				if r.Err != nil || string(r.Body) != wantBody {
					t.Errorf("%s: err %v, body of %d bytes, want %d", target, r.Err, len(r.Body), len(wantBody))
					return
				}
				req, resp := string(r.Wire.Request), wireText(t, r.Wire)
				if !strings.HasPrefix(req, fmt.Sprintf("GET %s?n=%d HTTP/1.1\r\n", path, n)) || strings.Count(req, "GET ") != 1 ||
					!strings.Contains(req, "\r\nHost: "+strings.TrimPrefix(srv.URL, "http://")+"\r\n") {
					t.Errorf("%s: Wire.Request = %q", target, req)
				}
				if !strings.HasPrefix(resp, "HTTP/1.1 200 OK\r\n") || strings.Count(resp, "HTTP/1.1 ") != 1 ||
					strings.Count(resp, "/s") != 1 || !strings.Contains(resp, "\r\n\r\n") {
					t.Errorf("%s: Wire.Response holds another exchange: %.200q", target, resp)
				}
				if n%2 == 1 && !strings.HasSuffix(resp, "\r\n\r\n"+wantBody) {
					t.Errorf("%s: Wire.Response does not end with its body", target)
				}
				if n%2 == 0 && (!strings.Contains(resp, "Transfer-Encoding: chunked\r\n") || !strings.HasSuffix(resp, "\r\n0\r\n\r\n")) {
					t.Errorf("%s: Wire.Response lost the chunk framing: %.200q", target, resp)
				}
				if r.Wire.Truncated || r.Wire.RemoteIP != "127.0.0.1" {
					t.Errorf("%s: Wire.Truncated %v RemoteIP %q", target, r.Wire.Truncated, r.Wire.RemoteIP)
				}
			})
		}
	}
	wg.Wait()
	if n := conns.Load(); n > int32(len(srvs)*o.MaxConnsPerHost) {
		t.Errorf("%d connections, want at most %d: connections were not shared", n, len(srvs)*o.MaxConnsPerHost)
	}
}

// MaxBody cuts the page, not the record: the rest is read off the wire up
// to RecordMax, which caps the whole response.
func TestWireRecordMax(t *testing.T) {
	t.Parallel()
	const maxBody, recordMax = 1000, 8000
	member, _ := gzipBomb(t) // 1 MiB of zeros in about 1 KiB
	head := func(n int, extra string) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n", extra, n)
	}
	long := strings.Repeat("0123456789", 500) // 5000: over MaxBody, under RecordMax
	huge := strings.Repeat("abcdefghij", 2000)
	tests := []struct {
		name          string
		response      string
		wantBody      string
		wantTruncated bool // Response.Truncated
		wantWire      string
		wireTruncated bool
	}{
		{"under both", head(10, "") + "0123456789", "0123456789", false, head(10, "") + "0123456789", false},
		{"over MaxBody under RecordMax", head(len(long), "") + long, long[:maxBody], true, head(len(long), "") + long, false},
		{"chunked over MaxBody under RecordMax",
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(long, 700), long[:maxBody], true,
			"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(long, 700), false},
		{"over RecordMax", head(len(huge), "") + huge, huge[:maxBody], true, (head(len(huge), "") + huge)[:recordMax], true},
		{"gzip bomb capped after decoding", head(len(member), "Content-Encoding: gzip\r\n") + string(member),
			string(make([]byte, maxBody)), true, head(len(member), "Content-Encoding: gzip\r\n") + string(member), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newWireServer(t, func(*http.Request) string { return tt.response })
			o := recordOptions()
			o.MaxBody, o.RecordMax = maxBody, recordMax
			f := newTestFetcher(t, o)
			r := f.Get(context.Background(), "http://"+srv.addr+"/")
			if r.Err != nil || string(r.Body) != tt.wantBody || r.Truncated != tt.wantTruncated {
				t.Fatalf("err %v, %d body bytes, Truncated %v; want %d bytes, Truncated %v",
					r.Err, len(r.Body), r.Truncated, len(tt.wantBody), tt.wantTruncated)
			}
			if wireText(t, r.Wire) != tt.wantWire || r.Wire.Truncated != tt.wireTruncated {
				t.Errorf("Wire.Response %d bytes (want %d, equal %v), Wire.Truncated %v (want %v)",
					r.Wire.Response.Size(), len(tt.wantWire), wireText(t, r.Wire) == tt.wantWire,
					r.Wire.Truncated, tt.wireTruncated)
			}
		})
	}
}

// A broken gzip body is a failed read, not a panic; the exchange itself
// did not fail, so the Wire holds the whole response, not truncated, even
// when the body is longer than what was read before the decoding failed.
func TestWireBrokenGzip(t *testing.T) {
	t.Parallel()
	gz := gzipOf(t, strings.Repeat("hello ", 1000))
	tests := map[string]string{
		"not gzip at all":       "this is not gzip",
		"long and not gzip":     strings.Repeat("not gzip ", 20000),
		"cut short":             string(gz[:len(gz)/2]),
		"bad checksum":          string(gz[:len(gz)-8]) + "\x00\x00\x00\x00" + string(gz[len(gz)-4:]),
		"empty":                 "",
		"garbage after members": string(gz) + strings.Repeat("junk", 5000),
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			resp := fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			srv := newWireServer(t, func(*http.Request) string { return resp })
			for _, record := range []bool{false, true} {
				o := testOptions()
				o.Record = record
				r := newTestFetcher(t, o).Get(context.Background(), "http://"+srv.addr+"/")
				if r.Err == nil || r.Status != 200 {
					t.Errorf("Record %v: status %d err %v; want 200 and a read error", record, r.Status, r.Err)
				}
				if !record {
					continue
				}
				if r.Wire == nil {
					t.Fatal("Record: Wire is nil")
				}
				if wireText(t, r.Wire) != resp || r.Wire.Truncated {
					t.Errorf("Record: Wire.Response %d of %d bytes (equal %v), Truncated %v; want all of it, not truncated",
						r.Wire.Response.Size(), len(resp), wireText(t, r.Wire) == resp, r.Wire.Truncated)
				}
			}
		})
	}
}

// An exchange that fails partway (the server closes mid-body) leaves the
// Wire with what arrived, marked Truncated.
func TestWireTruncatedWhenExchangeFails(t *testing.T) {
	t.Parallel()
	gz := gzipOf(t, strings.Repeat("hello ", 1000))
	tests := map[string]string{
		"content-length": "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part",
		"chunked":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n10\r\nshort",
		"gzip":           fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s", len(gz), gz[:len(gz)/2]),
	}
	for name, sent := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			addr := fetchtest.RawServer(t, func(c net.Conn) {
				defer c.Close()
				fetchtest.ReadRequestHead(c)
				io.WriteString(c, sent)
			})
			r := newTestFetcher(t, recordOptions()).Get(context.Background(), "http://"+addr+"/")
			if r.Err == nil {
				t.Errorf("fetch of a cut body: no error")
			}
			if r.Wire == nil || wireText(t, r.Wire) != sent || !r.Wire.Truncated {
				t.Errorf("Wire %+v; want the %d bytes sent, Truncated", r.Wire, len(sent))
			}
		})
	}
}

// Over TLS the Wire holds the plaintext HTTP/1.1 inside it: Record turns
// down the h2 the server offers.
func TestWireHTTPS(t *testing.T) {
	t.Parallel()
	var protoMajor atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		protoMajor.Store(int32(r.ProtoMajor))
		fmt.Fprint(w, r.Proto)
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f := newTestFetcher(t, recordOptions())
	f.transport.current().TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	for i := range 2 {
		r := f.Get(context.Background(), srv.URL+"/secure")
		if r.Err != nil || string(r.Body) != "HTTP/1.1" || protoMajor.Load() != 1 {
			t.Fatalf("fetch %d: body %q err %v, server saw HTTP/%d; want HTTP/1.1", i, r.Body, r.Err, protoMajor.Load())
		}
		w := r.Wire
		resp := wireText(t, w)
		if !strings.HasPrefix(resp, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(resp, "\r\n\r\nHTTP/1.1") {
			t.Errorf("fetch %d: Wire.Response = %q, want the plaintext HTTP/1.1 response", i, resp)
		}
		if !strings.HasPrefix(string(w.Request), "GET /secure HTTP/1.1\r\n") {
			t.Errorf("fetch %d: Wire.Request = %q", i, w.Request)
		}
		if !w.TLS || w.Truncated || w.RemoteIP != "127.0.0.1" {
			t.Errorf("fetch %d: TLS %v Truncated %v RemoteIP %q; want true, false, 127.0.0.1",
				i, w.TLS, w.Truncated, w.RemoteIP)
		}
	}
}

// Without Record there is no Wire and gzip is still decoded (the transport
// does not decode it: Fetch does); a request's own Accept-Encoding wins
// over the gzip Fetch asks for, with Record or without.
func TestWireOffAndAcceptEncoding(t *testing.T) {
	t.Parallel()
	page := strings.Repeat("decoded text ", 50)
	gz := gzipOf(t, page)
	var sawAE sync.Map // path -> Accept-Encoding
	srv := newTestServer(t, func(w http.ResponseWriter, r *http.Request) {
		sawAE.Store(r.URL.Path, r.Header.Get("Accept-Encoding"))
		if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			w.Header().Set("Content-Encoding", "gzip")
			w.Write(gz)
			return
		}
		io.WriteString(w, page)
	})
	for _, record := range []bool{false, true} {
		for _, ae := range []string{"", "identity"} {
			name := fmt.Sprintf("record=%v ae=%q", record, ae)
			path := fmt.Sprintf("/%v/%s", record, ae)
			o := testOptions()
			o.Record = record
			f := newTestFetcher(t, o)
			in := Request{URL: srv.URL + path}
			if ae != "" {
				in.Header = http.Header{"accept-encoding": {ae}} // not canonical: Fetch canonicalises
			}
			r := f.Fetch(context.Background(), in)
			if r.Err != nil || string(r.Body) != page {
				t.Errorf("%s: err %v body %.40q..., want the decoded page", name, r.Err, r.Body)
			}
			wantAE := ae
			if ae == "" {
				wantAE = "gzip"
			}
			if got, _ := sawAE.Load(path); got != wantAE {
				t.Errorf("%s: server saw Accept-Encoding %q, want %q", name, got, wantAE)
			}
			if !record {
				if r.Wire != nil {
					t.Errorf("%s: Wire = %+v, want nil without Record", name, r.Wire)
				}
				continue
			}
			if r.Wire == nil {
				t.Fatalf("%s: Wire is nil", name)
			}
			req, resp := string(r.Wire.Request), wireText(t, r.Wire)
			if !strings.Contains(req, "\r\nAccept-Encoding: "+wantAE+"\r\n") || strings.Count(req, "Accept-Encoding") != 1 {
				t.Errorf("%s: Wire.Request = %q, want one Accept-Encoding: %s", name, req, wantAE)
			}
			if wantBody := string(gz); ae == "identity" {
				if !strings.HasSuffix(resp, "\r\n\r\n"+page) {
					t.Errorf("%s: Wire.Response does not end with the plain page", name)
				}
			} else if !strings.HasSuffix(resp, "\r\n\r\n"+wantBody) || !strings.Contains(resp, "\r\nContent-Encoding: gzip\r\n") {
				t.Errorf("%s: Wire.Response does not keep the gzip bytes: %.120q", name, resp)
			}
		}
	}
}

// Through an HTTP proxy: an http target's Wire is the absolute-form
// exchange with the proxy (AllowPrivate: see TestFetchThroughProxyPins);
// an https target's is the bytes inside the TLS the fetcher runs over the
// CONNECT tunnel, as direct.
func TestWireThroughHTTPProxy(t *testing.T) {
	t.Parallel()
	site, tlsSite := newBackend(t, false), newBackend(t, true)
	px := fetchtest.NewHTTPProxy(t, fetchtest.ProxyOptions{})
	f := proxiedFetcher(t, recordOptions(), px.URL)
	trustTLS(f, tlsSite.srv)

	url := "http://" + site.addr + "/plain?x=1"
	r := f.Get(context.Background(), url)
	wantOK(t, r, "HTTP/1.1")
	w := r.Wire
	if req := string(w.Request); !strings.HasPrefix(req, "GET "+url+" HTTP/1.1\r\n") {
		t.Errorf("http target: Wire.Request = %q, want the absolute form", req)
	}
	if resp := wireText(t, w); !strings.HasPrefix(resp, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(resp, "\r\n\r\nHTTP/1.1") {
		t.Errorf("http target: Wire.Response = %q", resp)
	}
	if w.TLS || w.Truncated || w.RemoteIP != "127.0.0.1" {
		t.Errorf("http target: TLS %v Truncated %v RemoteIP %q; want false, false, the proxy's 127.0.0.1",
			w.TLS, w.Truncated, w.RemoteIP)
	}

	r = f.Get(context.Background(), "https://"+tlsSite.addr+"/tunnelled")
	wantOK(t, r, "HTTP/1.1") // h2 is not spoken inside the tunnel either
	w = r.Wire
	if !w.TLS || w.Truncated || w.RemoteIP != "127.0.0.1" {
		t.Errorf("https target: TLS %v Truncated %v RemoteIP %q; want true, false, the proxy's 127.0.0.1",
			w.TLS, w.Truncated, w.RemoteIP)
	}
	if req := string(w.Request); !strings.HasPrefix(req, "GET /tunnelled HTTP/1.1\r\nHost: "+tlsSite.addr+"\r\n") ||
		!strings.Contains(req, "\r\nUser-Agent: Breakwater-test/1.0\r\n") || !strings.HasSuffix(req, "\r\n\r\n") {
		t.Errorf("https target: Wire.Request = %q", req)
	}
	if resp := wireText(t, w); !strings.HasPrefix(resp, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(resp, "\r\n\r\nHTTP/1.1") {
		t.Errorf("https target: Wire.Response = %q", resp)
	}
	wantForwarded(t, px.Forwarded(), "GET "+url, "CONNECT "+tlsSite.addr)
}

// wireText is the recorded response, read back from its spool.
func wireText(t *testing.T, w *Wire) string {
	t.Helper()
	b, err := w.Response.Bytes()
	if err != nil {
		t.Fatalf("read the spooled response: %v", err)
	}
	return string(b)
}

// A response the spool cannot keep whole (here its directory is gone; a
// full disk alike) is kept as far as it went, and Wire.Err says why: the
// record would be cut short for our fault, not the host's. A response
// that fitted has no error.
func TestWireSpoolFailure(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("0123456789", 40<<10) // 400 KiB: past the spool's memory
	srv := newWireServer(t, func(r *http.Request) string {
		body := "small"
		if r.URL.Path == "/big" {
			body = big
		}
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	})
	o := recordOptions()
	o.MaxBody, o.RecordMax = 1<<20, 1<<20
	o.SpoolDir = filepath.Join(t.TempDir(), "gone")
	f := newTestFetcher(t, o)
	r := f.Get(context.Background(), "http://"+srv.addr+"/small")
	if r.Err != nil || r.Wire == nil || r.Wire.Err() != nil {
		t.Fatalf("small: err %v, wire %+v", r.Err, r.Wire)
	}
	r = f.Get(context.Background(), "http://"+srv.addr+"/big")
	if r.Err != nil || string(r.Body) != big {
		t.Fatalf("big: err %v, %d body bytes: the page itself must not suffer", r.Err, len(r.Body))
	}
	if err := r.Wire.Err(); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), o.SpoolDir) {
		t.Errorf("Wire.Err() = %v, want the spool's failure, naming %s", err, o.SpoolDir)
	}
	if !r.Wire.Truncated {
		t.Error("the record of a response the spool could not keep is not marked truncated")
	}
}
