package crawl

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/fetch/fetchtest"
)

const testToken = "breakwater"

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		name        string
		resp        *fetch.Response
		wantClass   breaker.Class
		wantDetail  string
		wantExcerpt string // substring the excerpt must contain; "" means none
	}{
		{"200", &fetch.Response{Status: 200}, breaker.OK, "status 200", ""},
		{"204", &fetch.Response{Status: 204}, breaker.OK, "status 204", ""},
		{"301", &fetch.Response{Status: 301}, breaker.OK, "status 301", ""},
		{"304", &fetch.Response{Status: 304}, breaker.OK, "status 304", ""},
		{"399", &fetch.Response{Status: 399}, breaker.OK, "status 399", ""},
		{"400", &fetch.Response{Status: 400}, breaker.Permanent, "status 400", ""},
		{"404", &fetch.Response{Status: 404}, breaker.Permanent, "status 404", ""},
		{"404 naming us is still permanent", &fetch.Response{Status: 404, Body: []byte("breakwater")}, breaker.Permanent, "status 404", ""},
		{"405", &fetch.Response{Status: 405}, breaker.Permanent, "status 405", ""},
		{"410", &fetch.Response{Status: 410}, breaker.Permanent, "status 410", ""},
		{"451", &fetch.Response{Status: 451}, breaker.Permanent, "status 451", ""},
		{"plain 401", &fetch.Response{Status: 401, Body: []byte("login required")}, breaker.Permanent, "status 401", ""},
		{"plain 403", &fetch.Response{Status: 403, Body: []byte("Forbidden"),
			Header: http.Header{"Server": {"nginx"}}}, breaker.Permanent, "status 403", ""},
		{"403 body names us", &fetch.Response{Status: 403, Body: []byte("<p>Bots like BreakWater are blocked.</p>")},
			breaker.Refused, `status 403, names "breakwater"`, "Bots like BreakWater are blocked"},
		{"401 header names us", &fetch.Response{Status: 401,
			Header: http.Header{"Www-Authenticate": {`Basic realm="no BREAKWATER here"`}}},
			breaker.Refused, "status 401", `Www-Authenticate: Basic realm="no BREAKWATER here"`},
		{"403 with empty token never refused", &fetch.Response{Status: 403, Body: []byte("anything")}, breaker.Permanent, "status 403", ""},
		{"429", &fetch.Response{Status: 429}, breaker.Throttled, "status 429", ""},
		{"429 naming us is throttled", &fetch.Response{Status: 429, Body: []byte("slow down breakwater")}, breaker.Throttled, "status 429", ""},
		{"500", &fetch.Response{Status: 500}, breaker.Transient, "status 500", ""},
		{"502", &fetch.Response{Status: 502}, breaker.Transient, "status 502", ""},
		{"503", &fetch.Response{Status: 503}, breaker.Transient, "status 503", ""},
		{"504", &fetch.Response{Status: 504}, breaker.Transient, "status 504", ""},
		{"599", &fetch.Response{Status: 599}, breaker.Transient, "status 599", ""},
		{"600", &fetch.Response{Status: 600}, breaker.Transient, "status 600", ""},
		{"no status, no error", &fetch.Response{}, breaker.Transient, "no response", ""},
		{"nil response", nil, breaker.Transient, "no response", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := testToken
			if strings.Contains(tt.name, "empty token") {
				token = ""
			}
			v := Classify(tt.resp, token)
			if v.Class != tt.wantClass || !strings.HasPrefix(v.Detail, tt.wantDetail) {
				t.Errorf("Classify = %s %q, want %s %q", v.Class, v.Detail, tt.wantClass, tt.wantDetail)
			}
			if tt.resp != nil && v.Status != tt.resp.Status {
				t.Errorf("Status = %d, want %d", v.Status, tt.resp.Status)
			}
			if tt.wantExcerpt == "" && v.Excerpt != "" {
				t.Errorf("Excerpt = %q, want none", v.Excerpt)
			}
			if !strings.Contains(v.Excerpt, tt.wantExcerpt) {
				t.Errorf("Excerpt = %q, want it to contain %q", v.Excerpt, tt.wantExcerpt)
			}
		})
	}
}

func TestClassifyRefusedExcerpt(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"token mid long body", strings.Repeat("é lorem ipsum\n\t", 100) + "Access denied for Breakwater crawler." + strings.Repeat(" dolor ü", 100)},
		{"token at start", "breakwater" + strings.Repeat("x", 1000)},
		{"token at end", strings.Repeat("ß", 1000) + "BREAKWATER"},
		{"invalid utf-8 around", "\xff\xfe" + strings.Repeat("\xc3", 150) + "breakwater" + strings.Repeat("\x80", 150)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Classify(&fetch.Response{Status: 403, Body: []byte(tt.body)}, testToken)
			if v.Class != breaker.Refused {
				t.Fatalf("Class = %s, want refused", v.Class)
			}
			if len(v.Excerpt) > maxExcerpt || !utf8.ValidString(v.Excerpt) {
				t.Errorf("excerpt of %d bytes, valid UTF-8 %v: %q", len(v.Excerpt), utf8.ValidString(v.Excerpt), v.Excerpt)
			}
			if !strings.Contains(strings.ToLower(v.Excerpt), testToken) {
				t.Errorf("excerpt %q does not contain the token", v.Excerpt)
			}
			if strings.ContainsAny(v.Excerpt, "\n\t") || strings.Contains(v.Excerpt, "  ") {
				t.Errorf("excerpt %q has uncollapsed whitespace", v.Excerpt)
			}
		})
	}
}

func TestClassifyLongTokenExcerptCapped(t *testing.T) {
	token := strings.Repeat("bot", 100) // 300 bytes
	v := Classify(&fetch.Response{Status: 403, Body: []byte("no " + token + " please")}, token)
	if v.Class != breaker.Refused || len(v.Excerpt) > maxExcerpt {
		t.Errorf("got %s with a %d-byte excerpt, want refused and at most %d", v.Class, len(v.Excerpt), maxExcerpt)
	}
	if !strings.HasPrefix(v.Excerpt, "botbot") {
		t.Errorf("excerpt %q does not start at the token", v.Excerpt)
	}
}

// TestClassifyErrors produces each failure for real against loopback
// listeners, so the classifier is tested on the error chains net/http
// actually returns, not on hand-built ones.
func TestClassifyErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		fetch      func(t *testing.T) *fetch.Response
		wantClass  breaker.Class
		wantDetail string // prefix
		wantStatus int
	}{
		{"connection refused", fetchClosedPort, breaker.Transient, "connection refused", 0},
		{"connection reset", fetchResetConn, breaker.Transient, "connection reset", 0},
		{"closed before response", fetchRaw(func(c net.Conn) { c.Close() }), breaker.Transient, "unexpected eof", 0},
		{"header timeout", fetchRaw(func(c net.Conn) { io.Copy(io.Discard, c) }), breaker.Transient, "timeout", 0},
		{"read timeout mid-body", fetchRaw(func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			io.Copy(io.Discard, c)
		}), breaker.Transient, "timeout", 200},
		{"eof mid-body", fetchRaw(func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789")
			c.Close()
		}), breaker.Transient, "unexpected eof", 200},
		{"malformed response", fetchRaw(func(c net.Conn) {
			io.WriteString(c, "SPDY/9 what\r\n\r\n")
			c.Close()
		}), breaker.Transient, "error", 0},
		{"tls handshake timeout", fetchTLSSilent, breaker.Transient, "timeout", 0},
		{"untrusted certificate", fetchUntrustedTLS, breaker.Transient, "tls certificate", 0},
		{"dns failure", fetchDNSFailure, breaker.Transient, "dns", 0},
		{"blocked address", fetchBlocked, breaker.Permanent, "blocked: loopback (127.0.0.1)", 0},
		{"canceled", fetchCanceled, breaker.Transient, "canceled", 0},
		{"unknown error", func(*testing.T) *fetch.Response {
			return &fetch.Response{Err: errors.New("boom")}
		}, breaker.Transient, "error: boom", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := tt.fetch(t)
			if r.Err == nil {
				t.Fatalf("fetch succeeded with status %d, want an error", r.Status)
			}
			v := Classify(r, testToken)
			if v.Class != tt.wantClass || !strings.HasPrefix(v.Detail, tt.wantDetail) || v.Status != tt.wantStatus {
				t.Errorf("Classify = %s %q status %d, want %s %q... status %d (err: %v)",
					v.Class, v.Detail, v.Status, tt.wantClass, tt.wantDetail, tt.wantStatus, r.Err)
			}
			if got, want := fetch.IsBlocked(r.Err), tt.name == "blocked address"; got != want {
				t.Errorf("IsBlocked = %v, want %v", got, want)
			}
		})
	}
}

// hostileTimeout is the fetch timeout in tests that expect one to fire.
const hostileTimeout = 200 * time.Millisecond

// testFetchOptions allows loopback, with timeouts long enough that only the
// tests meant to time out do.
func testFetchOptions() fetch.Options {
	return fetch.Options{UserAgent: "Breakwater-test/1.0", Timeout: 10 * time.Second,
		ConnectTimeout: 5 * time.Second, AllowPrivate: true}
}

func newTestFetcher(t *testing.T, o fetch.Options) *fetch.Fetcher {
	t.Helper()
	f := fetch.New(o)
	t.Cleanup(f.Close)
	return f
}

func newTestServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func shortFetcher(t *testing.T) *fetch.Fetcher {
	t.Helper()
	o := testFetchOptions()
	o.Timeout, o.ConnectTimeout = hostileTimeout, hostileTimeout
	return newTestFetcher(t, o)
}

func fetchRaw(handle func(c net.Conn)) func(t *testing.T) *fetch.Response {
	return func(t *testing.T) *fetch.Response {
		addr := fetchtest.RawServer(t, func(c net.Conn) {
			fetchtest.ReadRequestHead(c)
			handle(c)
		})
		return shortFetcher(t).Get(context.Background(), "http://"+addr+"/")
	}
}

func fetchClosedPort(t *testing.T) *fetch.Response {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return shortFetcher(t).Get(context.Background(), "http://"+addr+"/")
}

// fetchResetConn has the server abort with an RST (linger 0) once the
// request has arrived.
func fetchResetConn(t *testing.T) *fetch.Response {
	return fetchRaw(func(c net.Conn) {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})(t)
}

// fetchTLSSilent accepts TCP but never answers the ClientHello.
func fetchTLSSilent(t *testing.T) *fetch.Response {
	addr := fetchtest.RawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	return shortFetcher(t).Get(context.Background(), "https://"+addr+"/")
}

func fetchUntrustedTLS(t *testing.T) *fetch.Response {
	srv := newTLSTestServer(t)
	// Default timeouts: a handshake under -race can outlast a short one.
	return newTestFetcher(t, testFetchOptions()).Get(context.Background(), srv.URL)
}

func newTLSTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	// The handshake fails on the client side; keep the server quiet about it.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// fetchDNSFailure resolves through a resolver whose transport always fails,
// so a genuine *net.DNSError is produced without any DNS traffic.
func fetchDNSFailure(t *testing.T) *fetch.Response {
	res := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in tests")
	}}
	_, err := res.LookupHost(context.Background(), "nonexistent.invalid")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Fatalf("lookup err = %v, want *net.DNSError", err)
	}
	// Wrapped the way http.Client returns a dial failure.
	return &fetch.Response{Err: &url.Error{Op: "Get", URL: "http://nonexistent.invalid/",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}}}
}

func fetchBlocked(t *testing.T) *fetch.Response {
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) {})
	o := testFetchOptions()
	o.AllowPrivate = false
	return newTestFetcher(t, o).Get(context.Background(), srv.URL)
}

func fetchCanceled(t *testing.T) *fetch.Response {
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return shortFetcher(t).Get(ctx, srv.URL)
}

func TestClassifyConstructedErrors(t *testing.T) {
	// Failures loopback cannot produce: a connect timeout needs a
	// black-holed address.
	connectTimeout := &url.Error{Op: "Get", URL: "http://example.com/",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: timeoutError{}}}
	tests := []struct {
		name       string
		err        error
		wantClass  breaker.Class
		wantDetail string
	}{
		{"connect timeout", connectTimeout, breaker.Transient, "timeout"},
		{"deadline", fmt.Errorf("read body: %w", context.DeadlineExceeded), breaker.Transient, "timeout"},
		{"tls alert is not a certificate problem", &url.Error{Op: "Get", URL: "https://example.com/",
			Err: tls.AlertError(40)}, breaker.Transient, "error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Classify(&fetch.Response{Err: tt.err}, testToken)
			if v.Class != tt.wantClass || !strings.HasPrefix(v.Detail, tt.wantDetail) {
				t.Errorf("Classify = %s %q, want %s %q...", v.Class, v.Detail, tt.wantClass, tt.wantDetail)
			}
		})
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// A request whose connection was refused because the host's circuit had
// opened never reached the host: like one cancelled, it is not an attempt.
func TestRefusedOrCancelledRequestIsCutShort(t *testing.T) {
	live := context.Background()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	refused := fmt.Errorf("get: %w", fmt.Errorf("dial 127.0.0.1:1: %w", fetch.ErrHostRefused))
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"refused at dial", live, refused, true},
		{"cancelled", cancelled, errors.New("context canceled"), true},
		{"host timed out", live, errors.New("timeout awaiting response headers"), false},
		{"no error", live, nil, false},
	} {
		if got := cutShort(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: cutShort = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A header block over the fetcher's cap is the server's doing, every time.
func TestClassifyOversizedHeaders(t *testing.T) {
	err := fmt.Errorf(`Get "http://127.0.0.1:1/": %w`, errors.New("net/http: server response headers exceeded 262144 bytes; aborted"))
	if v := Classify(&fetch.Response{Err: err}, "breakwater"); v.Class != breaker.Permanent || !strings.HasPrefix(v.Detail, "headers too large") {
		t.Errorf("Classify = %+v, want permanent, headers too large", v)
	}
}
