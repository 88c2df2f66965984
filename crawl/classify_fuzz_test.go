package crawl_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"breakwater/breaker"
	"breakwater/crawl"
	"breakwater/fetch"
	"breakwater/robots"
)

// fuzzFetchErrors are the failures a fetch can end in; the fuzzer picks
// one by index (past the end: none), and the last means no response at all.
var fuzzFetchErrors = []func(text string) error{
	func(string) error {
		return &fetch.BlockedAddressError{Addr: netip.MustParseAddr("127.0.0.1"), Reason: "loopback"}
	},
	func(text string) error { return &net.DNSError{Err: text, Name: "example.com", IsNotFound: true} },
	func(string) error { return fmt.Errorf("get: %w", context.DeadlineExceeded) },
	func(string) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	},
	func(string) error {
		return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	},
	func(string) error { return fmt.Errorf("body: %w", io.ErrUnexpectedEOF) },
	func(string) error { return &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}} },
	func(string) error { return context.Canceled },
	func(text string) error { return errors.New(text) },
	func(string) error {
		return fmt.Errorf("get: %w", errors.New("net/http: server response headers exceeded 1048576 bytes; aborted"))
	},
	nil, // no response: Classify(nil)
}

// FuzzClassify classifies responses the fuzzer makes up: any status,
// headers, body and product token, and any of the failures a fetch ends
// in. The class is always one of the five. A failure is Transient, or
// Permanent when our own address policy refused the dial or the headers
// were over the fetcher's cap (net/http's "server response headers
// exceeded", which the same server would send again). Without one,
// 2xx and 3xx are OK, 429 Throttled, other 4xx Permanent and anything else
// Transient, except that a 401 or 403 naming the product token in its body
// or a header, ASCII case folded, is Refused. The excerpt is valid UTF-8 of
// at most 200 bytes, only for Refused, and shows the token.
func FuzzClassify(f *testing.F) {
	f.Fuzz(func(t *testing.T, status int, errKind uint8, errText, token, name1, value1, name2, value2 string, body []byte) {
		tok := robots.ProductToken(token) // what the crawler passes
		var r *fetch.Response
		if int(errKind) != len(fuzzFetchErrors)-1 {
			r = &fetch.Response{Status: status, Body: body, Header: http.Header{}}
			r.Header[name1] = append(r.Header[name1], value1)
			r.Header[name2] = append(r.Header[name2], value2)
			if int(errKind) < len(fuzzFetchErrors)-1 {
				r.Err = fuzzFetchErrors[errKind](errText)
			}
		}
		v := crawl.Classify(r, tok)
		switch v.Class {
		case breaker.OK, breaker.Transient, breaker.Permanent, breaker.Throttled, breaker.Refused:
		default:
			t.Fatalf("class %q is none of the five", v.Class)
		}
		if v.Detail == "" || !utf8.ValidString(v.Excerpt) || len(v.Excerpt) > 200 {
			t.Fatalf("verdict %+v: no detail, or an excerpt that is not valid UTF-8 of at most 200 bytes", v)
		}
		if v.Class != breaker.Refused && v.Excerpt != "" {
			t.Fatalf("verdict %+v: an excerpt without a refusal", v)
		}
		if r == nil {
			if v.Class != breaker.Transient {
				t.Fatalf("no response classified %+v", v)
			}
			return
		}
		if v.Status != r.Status {
			t.Fatalf("Status %d, the response's %d", v.Status, r.Status)
		}
		if r.Err != nil {
			want := breaker.Transient
			if fetch.IsBlocked(r.Err) || strings.Contains(r.Err.Error(), "server response headers exceeded") {
				want = breaker.Permanent
			} else if !strings.Contains(v.Detail, r.Err.Error()) {
				t.Fatalf("Detail %q does not carry the error %q", v.Detail, r.Err)
			}
			if v.Class != want {
				t.Fatalf("error %v classified %s, want %s", r.Err, v.Class, want)
			}
			return
		}
		want := statusClass(status)
		if named := namesToken(r, tok); want == breaker.Permanent && (status == 401 || status == 403) && named {
			want = breaker.Refused
		}
		if v.Class != want {
			t.Fatalf("status %d (token %q, headers %q, body %q) classified %s, want %s", status, tok, r.Header, body, v.Class, want)
		}
		if v.Class == breaker.Refused {
			shown := lowerASCII(v.Excerpt)
			if len(tok) <= 200 && !strings.Contains(shown, tok) || len(tok) > 200 && shown != tok[:200] {
				t.Fatalf("excerpt %q does not show the token %q", v.Excerpt, tok)
			}
		}
	})
}

// statusClass is the class of a response with this status and no error.
func statusClass(s int) breaker.Class {
	switch {
	case s >= 200 && s < 400:
		return breaker.OK
	case s == 429:
		return breaker.Throttled
	case s >= 400 && s < 500:
		return breaker.Permanent
	}
	return breaker.Transient
}

// namesToken reports whether tok (a product token: letters, "-", "_")
// appears, ASCII case folded, in the body, a header name or a header value.
func namesToken(r *fetch.Response, tok string) bool {
	if tok == "" {
		return false
	}
	if strings.Contains(lowerASCII(string(r.Body)), tok) {
		return true
	}
	for name, values := range r.Header {
		if strings.Contains(lowerASCII(name), tok) {
			return true
		}
		for _, v := range values {
			if strings.Contains(lowerASCII(v), tok) {
				return true
			}
		}
	}
	return false
}

func lowerASCII(s string) string {
	return strings.Map(func(c rune) rune {
		if 'A' <= c && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}, s)
}
