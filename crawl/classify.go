package crawl

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"syscall"

	"breakwater/breaker"
	"breakwater/fetch"
)

// maxExcerpt is the longest Verdict.Excerpt, in bytes.
const maxExcerpt = 200

// Verdict is the classified outcome of one fetch. The retry layer and the
// breaker both read it, so a response is classified exactly once.
type Verdict struct {
	Class   breaker.Class
	Status  int    // the HTTP status, 0 when none arrived
	Detail  string // "status 503", or the error kind and text
	Excerpt string // for Refused: the text naming us, at most 200 bytes
}

// Classify maps a fetch to its outcome class. productToken is the crawler's
// name as a host would write it ("breakwater"); a 401 or 403 whose headers or
// body contain it, case-insensitively, is Refused: the host has blocked us by
// name. An empty productToken never matches. A dial refused by our own
// address policy is Permanent, not a host fault; see fetch.IsBlocked.
func Classify(r *fetch.Response, productToken string) Verdict {
	if r == nil {
		return Verdict{Class: breaker.Transient, Detail: "no response"}
	}
	if r.Err != nil {
		v := classifyError(r.Err)
		v.Status = r.Status
		return v
	}
	return classifyStatus(r, productToken)
}

func classifyStatus(r *fetch.Response, productToken string) Verdict {
	v := Verdict{Status: r.Status, Detail: fmt.Sprintf("status %d", r.Status)}
	switch s := r.Status; {
	case s >= 200 && s < 400:
		v.Class = breaker.OK
	case s == 429:
		v.Class = breaker.Throttled
	case namesUsIn(s):
		v.Class = breaker.Permanent
		if ex, ok := namesUs(r, productToken); ok {
			v.Class, v.Excerpt = breaker.Refused, ex
			v.Detail += fmt.Sprintf(", names %q", productToken)
		}
	case s >= 400 && s < 500:
		v.Class = breaker.Permanent
	case s == 0:
		v.Class, v.Detail = breaker.Transient, "no response"
	default: // 5xx, and statuses no server should send (1xx final, 6xx+)
		v.Class = breaker.Transient
	}
	return v
}

// classifyError sorts exchange failures. All are Transient (the host or the
// path to it is failing) except our own address policy, which no retry can
// fix. A certificate failure is Transient too: it says nothing about the
// URL and everything about the host (an expired certificate) or about us
// (a broken trust store), so it counts toward the host's breaker, and a
// rise of open circuits across hosts shows our side is at fault.
func classifyError(err error) Verdict {
	var blocked *fetch.BlockedAddressError
	if errors.As(err, &blocked) {
		return Verdict{Class: breaker.Permanent,
			Detail: fmt.Sprintf("blocked: %s (%s)", blocked.Reason, blocked.Addr)}
	}
	if strings.Contains(err.Error(), "server response headers exceeded") {
		// net/http refuses a header block over the fetcher's cap; it has no
		// error type to match. The same server will send the same headers:
		// retrying wastes three requests and blames nothing transient.
		return Verdict{Class: breaker.Permanent, Detail: "headers too large: " + err.Error()}
	}
	kind := transientKind(err)
	if isCertificateError(err) {
		kind = "tls certificate"
	}
	return Verdict{Class: breaker.Transient, Detail: kind + ": " + err.Error()}
}

// transientKind names the failure for logs and the Detail field.
func transientKind(err error) string {
	var dnsErr *net.DNSError
	var netErr net.Error
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.As(err, &dnsErr):
		return "dns"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timeout"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "connection reset"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "unexpected eof"
	}
	return "error"
}

func isCertificateError(err error) bool {
	var verify *tls.CertificateVerificationError
	var unknown x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &unknown) ||
		errors.As(err, &hostname) || errors.As(err, &invalid)
}

// namesUsIn reports whether a response of this status is searched for
// our name (namesUs): a refusal's. Only those keep their body's head once
// it has streamed.
func namesUsIn(status int) bool { return status == 401 || status == 403 }

// namesUs looks for productToken in the body, then in every header value,
// and returns the text around the first match.
func namesUs(r *fetch.Response, productToken string) (string, bool) {
	if productToken == "" {
		return "", false
	}
	if i := indexFoldASCII(r.Body, productToken); i >= 0 {
		return excerpt(string(r.Body), i, len(productToken)), true
	}
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		for _, val := range r.Header[name] {
			line := name + ": " + val
			if i := indexFoldASCII([]byte(line), productToken); i >= 0 {
				return excerpt(line, i, len(productToken)), true
			}
		}
	}
	return "", false
}

// indexFoldASCII is a case-insensitive index that folds ASCII letters only,
// so byte offsets in the folded copy are offsets in the original.
func indexFoldASCII(s []byte, sub string) int {
	return bytes.Index(lowerASCIIBytes(s), lowerASCIIBytes([]byte(sub)))
}

func lowerASCIIBytes(s []byte) []byte {
	out := make([]byte, len(s))
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// excerpt returns up to maxExcerpt bytes of s centred on the match at
// [i, i+n), as valid UTF-8 with runs of whitespace collapsed.
func excerpt(s string, i, n int) string {
	start := max(0, i-max(0, maxExcerpt-n)/2) // a token longer than the window starts it
	end := min(len(s), start+maxExcerpt)
	// A character cut in half at either edge is dropped by ToValidUTF8, and
	// collapsing whitespace only shortens: the result stays within the cap.
	return strings.Join(strings.Fields(strings.ToValidUTF8(s[start:end], "")), " ")
}
