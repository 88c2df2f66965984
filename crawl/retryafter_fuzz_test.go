package crawl_test

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"breakwater/crawl"
)

// FuzzRetryAfterContract holds ParseRetryAfter to its whole documented
// contract, for any header value, clock, default and cap (FuzzParseRetryAfter
// checks the bounds alone). Uncapped, a value of ASCII digits is that many
// seconds, saturating at the largest Duration; an HTTP-date is the time
// left until it, 0 once past; anything else is def; never negative. The
// cap takes the smaller of that and maxWait, and a maxWait of zero or less
// is no cap. Spaces and tabs around the value change nothing.
func FuzzRetryAfterContract(f *testing.F) {
	f.Fuzz(func(t *testing.T, value string, offset, def, maxWait int64) {
		now := time.Date(2015, time.October, 21, 7, 28, 0, 0, time.UTC).Add(time.Duration(offset))
		d, m := time.Duration(def), time.Duration(maxWait)
		got := crawl.ParseRetryAfter(value, now, d, m)
		uncapped := crawl.ParseRetryAfter(value, now, d, 0)
		if got < 0 || uncapped < 0 {
			t.Fatalf("ParseRetryAfter(%q, def=%v, max=%v) = %v (uncapped %v): negative", value, d, m, got, uncapped)
		}
		if m > 0 && got != min(uncapped, m) || m <= 0 && got != uncapped {
			t.Fatalf("ParseRetryAfter(%q, def=%v, max=%v) = %v; uncapped it is %v", value, d, m, got, uncapped)
		}
		if again := crawl.ParseRetryAfter(" \t"+value+"\t ", now, d, m); again != got {
			t.Fatalf("ParseRetryAfter(%q) = %v, but %v with blanks around it", value, got, again)
		}
		if want, ok := retryAfterWant(strings.Trim(value, " \t"), now); !ok {
			if uncapped != max(d, 0) {
				t.Fatalf("ParseRetryAfter(%q, def=%v) = %v; an unusable value gives the default", value, d, uncapped)
			}
		} else if uncapped != want {
			t.Fatalf("ParseRetryAfter(%q, now=%v) = %v uncapped, want %v", value, now, uncapped, want)
		}
	})
}

// retryAfterWant is the uncapped wait value names, read from RFC 9110's
// grammar, or false when it is neither delta-seconds nor an HTTP-date.
func retryAfterWant(v string, now time.Time) (time.Duration, bool) {
	if v != "" && strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n > uint64(math.MaxInt64/time.Second) {
			return math.MaxInt64, true
		}
		return time.Duration(n) * time.Second, true
	}
	when, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(when.Sub(now), 0), true
}
