package control

import (
	"reflect"
	"testing"
	"time"

	"breakwater/breaker"
)

func TestHostRows(t *testing.T) {
	_, db := offline(t, "a.example", "b.example")
	breakers := map[string]breaker.Breaker{
		"b.example": {State: breaker.Open, Failures: 8, OpenedAt: t0.Add(-time.Minute), Rest: 5 * time.Minute, Generation: 3},
		"c.example": {State: breaker.Open, OpenedAt: t0, Rest: time.Minute, Hold: breaker.Paused, HoldReason: "by hand"},
	}
	live := func(host string) LiveHost {
		return LiveHost{Interval: 9 * time.Millisecond, Throttles: 1, Retries: 2, FirstAttempts: 3}
	}
	rows, err := HostRows(db, "", breakers, live, t0)
	if err != nil {
		t.Fatal(err)
	}
	liveCols := func(r HostRow) HostRow {
		r.Interval, r.Throttles, r.Retries, r.FirstAttempts = 9*time.Millisecond, 1, 2, 3
		return r
	}
	want := []HostRow{
		liveCols(HostRow{Host: "a.example", State: "closed", Queued: 1}),
		liveCols(HostRow{Host: "b.example", State: "open", Failures: 8, OpenedAt: t0.Add(-time.Minute),
			RestRemaining: 4 * time.Minute, Queued: 1}),
		liveCols(HostRow{Host: "c.example", State: "open", Hold: "paused", HoldReason: "by hand", OpenedAt: t0}),
	}
	if !reflect.DeepEqual(rows, want) {
		t.Errorf("HostRows =\n%+v\nwant\n%+v", rows, want)
	}
	if _, ok := breakers["c.example"]; !ok || len(breakers) != 2 {
		t.Errorf("HostRows changed the caller's map: %v", breakers)
	}
	if rows, err := HostRows(db, "open", breakers, nil, t0); err != nil || len(rows) != 2 || rows[0].Interval != 0 {
		t.Errorf("HostRows(open) without live = %+v, %v; want b and c, no live columns", rows, err)
	}
}

func TestHostRowMatches(t *testing.T) {
	tests := []struct {
		state, hold, filter string
		want                bool
	}{
		{"open", "", "", true},
		{"open", "", "open", true},
		{"half-open", "", "open", false},
		{"open", "paused", "paused", true},
		{"open", "case", "paused", false},
		{"open", "case+paused", "paused", true},
		{"open", "case+paused", "case", true},
		{"open", "case+paused", "open", true},
		{"closed", "", "paused", false},
	}
	for _, tt := range tests {
		r := HostRow{State: tt.state, Hold: tt.hold}
		if got := r.matches(tt.filter); got != tt.want {
			t.Errorf("row %s/%q matches(%q) = %v, want %v", tt.state, tt.hold, tt.filter, got, tt.want)
		}
	}
}

func TestNormalizeHost(t *testing.T) {
	tests := []struct{ in, want string }{
		{"example.com", "example.com"},
		{"Example.COM", "example.com"},
		{"127.0.0.1:8080", "127.0.0.1:8080"},
		{"http://example.com:80/a/b", "example.com"},
		{"https://example.com:8443/", "example.com:8443"},
	}
	for _, tt := range tests {
		if got, err := NormalizeHost(tt.in); err != nil || got != tt.want {
			t.Errorf("NormalizeHost(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "ftp://example.com/", "http://"} {
		if got, err := NormalizeHost(bad); err == nil {
			t.Errorf("NormalizeHost(%q) = %q, want an error", bad, got)
		}
	}
}
