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
	"unicode/utf8"

	"breakwater/breaker"
)

const testToken = "breakwater"

func TestClassifyStatus(t *testing.T) {
	tests := []struct {
		name        string
		resp        *Response
		wantClass   breaker.Class
		wantDetail  string
		wantExcerpt string // substring the excerpt must contain; "" means none
	}{
		{"200", &Response{Status: 200}, breaker.OK, "status 200", ""},
		{"204", &Response{Status: 204}, breaker.OK, "status 204", ""},
		{"301", &Response{Status: 301}, breaker.OK, "status 301", ""},
		{"304", &Response{Status: 304}, breaker.OK, "status 304", ""},
		{"399", &Response{Status: 399}, breaker.OK, "status 399", ""},
		{"400", &Response{Status: 400}, breaker.Permanent, "status 400", ""},
		{"404", &Response{Status: 404}, breaker.Permanent, "status 404", ""},
		{"404 naming us is still permanent", &Response{Status: 404, Body: []byte("breakwater")}, breaker.Permanent, "status 404", ""},
		{"405", &Response{Status: 405}, breaker.Permanent, "status 405", ""},
		{"410", &Response{Status: 410}, breaker.Permanent, "status 410", ""},
		{"451", &Response{Status: 451}, breaker.Permanent, "status 451", ""},
		{"plain 401", &Response{Status: 401, Body: []byte("login required")}, breaker.Permanent, "status 401", ""},
		{"plain 403", &Response{Status: 403, Body: []byte("Forbidden"),
			Header: http.Header{"Server": {"nginx"}}}, breaker.Permanent, "status 403", ""},
		{"403 body names us", &Response{Status: 403, Body: []byte("<p>Bots like BreakWater are blocked.</p>")},
			breaker.Refused, `status 403, names "breakwater"`, "Bots like BreakWater are blocked"},
		{"401 header names us", &Response{Status: 401,
			Header: http.Header{"Www-Authenticate": {`Basic realm="no BREAKWATER here"`}}},
			breaker.Refused, "status 401", `Www-Authenticate: Basic realm="no BREAKWATER here"`},
		{"403 with empty token never refused", &Response{Status: 403, Body: []byte("anything")}, breaker.Permanent, "status 403", ""},
		{"429", &Response{Status: 429}, breaker.Throttled, "status 429", ""},
		{"429 naming us is throttled", &Response{Status: 429, Body: []byte("slow down breakwater")}, breaker.Throttled, "status 429", ""},
		{"500", &Response{Status: 500}, breaker.Transient, "status 500", ""},
		{"502", &Response{Status: 502}, breaker.Transient, "status 502", ""},
		{"503", &Response{Status: 503}, breaker.Transient, "status 503", ""},
		{"504", &Response{Status: 504}, breaker.Transient, "status 504", ""},
		{"599", &Response{Status: 599}, breaker.Transient, "status 599", ""},
		{"600", &Response{Status: 600}, breaker.Transient, "status 600", ""},
		{"no status, no error", &Response{}, breaker.Transient, "no response", ""},
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
			v := Classify(&Response{Status: 403, Body: []byte(tt.body)}, testToken)
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
	v := Classify(&Response{Status: 403, Body: []byte("no " + token + " please")}, token)
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
		fetch      func(t *testing.T) *Response
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
		{"untrusted certificate", fetchUntrustedTLS, breaker.Permanent, "tls certificate", 0},
		{"dns failure", fetchDNSFailure, breaker.Transient, "dns", 0},
		{"blocked address", fetchBlocked, breaker.Permanent, "blocked: loopback (127.0.0.1)", 0},
		{"canceled", fetchCanceled, breaker.Transient, "canceled", 0},
		{"unknown error", func(*testing.T) *Response {
			return &Response{Err: errors.New("boom")}
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
			if got, want := IsBlocked(r.Err), tt.name == "blocked address"; got != want {
				t.Errorf("IsBlocked = %v, want %v", got, want)
			}
		})
	}
}

func shortFetcher(t *testing.T) *Fetcher {
	t.Helper()
	o := testFetchOptions()
	o.Timeout, o.ConnectTimeout = hostileTimeout, hostileTimeout
	return newTestFetcher(t, o)
}

func fetchRaw(handle func(c net.Conn)) func(t *testing.T) *Response {
	return func(t *testing.T) *Response {
		addr := rawServer(t, func(c net.Conn) {
			readRequestHead(c)
			handle(c)
		})
		return fetchWithin(t, shortFetcher(t), "http://"+addr+"/", hostileDeadline)
	}
}

func fetchClosedPort(t *testing.T) *Response {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return shortFetcher(t).Fetch(context.Background(), "http://"+addr+"/")
}

// fetchResetConn has the server abort with an RST (linger 0) once the
// request has arrived.
func fetchResetConn(t *testing.T) *Response {
	return fetchRaw(func(c net.Conn) {
		c.(*net.TCPConn).SetLinger(0)
		c.Close()
	})(t)
}

// fetchTLSSilent accepts TCP but never answers the ClientHello.
func fetchTLSSilent(t *testing.T) *Response {
	addr := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	return fetchWithin(t, shortFetcher(t), "https://"+addr+"/", hostileDeadline)
}

func fetchUntrustedTLS(t *testing.T) *Response {
	srv := newTLSTestServer(t)
	// Default timeouts: a handshake under -race can outlast a short one.
	return newTestFetcher(t, testFetchOptions()).Fetch(context.Background(), srv.URL)
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
func fetchDNSFailure(t *testing.T) *Response {
	res := &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS in tests")
	}}
	_, err := res.LookupHost(context.Background(), "nonexistent.invalid")
	var dnsErr *net.DNSError
	if !errors.As(err, &dnsErr) {
		t.Fatalf("lookup err = %v, want *net.DNSError", err)
	}
	// Wrapped the way http.Client returns a dial failure.
	return &Response{Err: &url.Error{Op: "Get", URL: "http://nonexistent.invalid/",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: dnsErr}}}
}

func fetchBlocked(t *testing.T) *Response {
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) {})
	o := testFetchOptions()
	o.AllowPrivate = false
	return newTestFetcher(t, o).Fetch(context.Background(), srv.URL)
}

func fetchCanceled(t *testing.T) *Response {
	srv := newTestServer(t, func(http.ResponseWriter, *http.Request) {})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return shortFetcher(t).Fetch(ctx, srv.URL)
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
			v := Classify(&Response{Err: tt.err}, testToken)
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
