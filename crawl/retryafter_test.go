package crawl

import (
	"math"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2015, time.October, 21, 7, 28, 0, 0, time.UTC)
	const def, maxWait = 30 * time.Second, time.Hour
	tests := []struct {
		name  string
		value string
		want  time.Duration
	}{
		{"seconds", "120", 2 * time.Minute},
		{"zero seconds", "0", 0},
		{"leading zeros", "0007", 7 * time.Second},
		{"whitespace around seconds", " \t5\t ", 5 * time.Second},
		{"seconds above max are capped", "7200", time.Hour},
		{"huge seconds saturate to max", "99999999999", time.Hour},
		{"beyond uint64 saturates to max", "999999999999999999999999999", time.Hour},
		{"IMF-fixdate", "Wed, 21 Oct 2015 07:29:00 GMT", time.Minute},
		{"RFC 850 date", "Wednesday, 21-Oct-15 07:28:30 GMT", 30 * time.Second},
		{"asctime date", "Wed Oct 21 07:28:10 2015", 10 * time.Second},
		{"whitespace around date", "  Wed, 21 Oct 2015 07:29:00 GMT ", time.Minute},
		{"date far in future is capped", "Fri, 31 Dec 9999 23:59:59 GMT", time.Hour},
		{"date now is zero", "Wed, 21 Oct 2015 07:28:00 GMT", 0},
		{"date in past is zero", "Tue, 20 Oct 2015 07:28:00 GMT", 0},
		{"date in distant past is zero", "Mon, 01 Jan 0001 00:00:00 GMT", 0},
		{"empty", "", def},
		{"only whitespace", " \t ", def},
		{"negative", "-5", def},
		{"plus sign", "+5", def},
		{"fraction", "1.5", def},
		{"unit suffix", "5s", def},
		{"inner space", "1 2", def},
		{"garbage", "soon", def},
		{"date with wrong zone word", "Wed, 21 Oct 2015 07:29:00 PST", def},
		{"non-ASCII digits", "٣", def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseRetryAfter(tt.value, now, def, maxWait); got != tt.want {
				t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.value, got, tt.want)
			}
		})
	}
}

func TestParseRetryAfterLimits(t *testing.T) {
	now := time.Date(2015, time.October, 21, 7, 28, 0, 0, time.UTC)
	tests := []struct {
		name         string
		value        string
		def, maxWait time.Duration
		want         time.Duration
	}{
		{"default above max is capped", "", 2 * time.Hour, time.Hour, time.Hour},
		{"negative default becomes zero", "x", -time.Second, time.Hour, 0},
		{"zero max means uncapped", "86400", time.Second, 0, 24 * time.Hour},
		{"uncapped huge value saturates", "99999999999999999999", time.Second, 0, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ParseRetryAfter(tt.value, now, tt.def, tt.maxWait); got != tt.want {
				t.Errorf("ParseRetryAfter(%q, def=%v, max=%v) = %v, want %v", tt.value, tt.def, tt.maxWait, got, tt.want)
			}
		})
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{
		"", "0", "120", "-1", "99999999999", "1.5", " 7 ",
		"Wed, 21 Oct 2015 07:29:00 GMT",
		"Wednesday, 21-Oct-15 07:28:30 GMT",
		"Wed Oct 21 07:28:10 2015",
	} {
		f.Add(seed, int64(0), int64(30*time.Second), int64(time.Hour))
	}
	f.Fuzz(func(t *testing.T, value string, offset, def, maxWait int64) {
		now := time.Date(2015, time.October, 21, 7, 28, 0, 0, time.UTC).Add(time.Duration(offset))
		if maxWait <= 0 {
			maxWait = int64(time.Hour) // zero or less means uncapped; keep the bound checkable
		}
		got := ParseRetryAfter(value, now, time.Duration(def), time.Duration(maxWait))
		if got < 0 || got > time.Duration(maxWait) {
			t.Fatalf("ParseRetryAfter(%q, def=%d, max=%d) = %v, outside [0, max]", value, def, maxWait, got)
		}
	})
}
