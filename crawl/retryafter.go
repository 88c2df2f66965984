package crawl

// Retry-After parsing (RFC 9110 §10.2.3). The header is server-controlled
// input, so the parser never fails: anything unusable yields the caller's
// default, and every result is clamped to [0, max].

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter returns how long a server asked the crawler to wait.
//
// value is either delta-seconds (ASCII digits only) or an HTTP-date in any of
// the three formats http.ParseTime accepts, measured from now. Surrounding
// spaces and tabs are ignored. An empty, malformed or negative value yields
// def. A date at or before now yields 0: the server's wait is already over,
// and the caller's pace floor still spaces the next request. Delta-seconds
// too large for a time.Duration saturate rather than overflow.
//
// The result is capped at maxWait so a hostile or mistaken server cannot park
// a host for days; def is capped too. A maxWait of zero or less means no cap.
// The result is never negative.
func ParseRetryAfter(value string, now time.Time, def, maxWait time.Duration) time.Duration {
	if maxWait <= 0 {
		maxWait = math.MaxInt64
	}
	d, ok := parseRetryAfter(strings.Trim(value, " \t"), now)
	if !ok {
		d = def
	}
	return min(max(d, 0), maxWait)
}

// parseRetryAfter reports the wait named by a trimmed value, or false when
// the value is neither delta-seconds nor an HTTP-date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if isASCIIDigits(v) {
		return deltaSeconds(v), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	// Sub saturates at the Duration limits, so far-off dates are safe.
	return t.Sub(now), true
}

// deltaSeconds converts a string of digits to a Duration, saturating at the
// largest Duration instead of wrapping.
func deltaSeconds(digits string) time.Duration {
	const maxSeconds = uint64(math.MaxInt64 / time.Second)
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || n > maxSeconds { // only ErrRange is possible here
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

func isASCIIDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
