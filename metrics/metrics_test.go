package metrics

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestNilCrawlCountsNothing(t *testing.T) {
	var c *Crawl
	c.Fetched("ok", 200, false, 10, 0.1) // a crawl without --listen: no panic
	c.Transition("closed", "open")
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{0: "none", 99: "none", 200: "2xx", 304: "3xx", 404: "4xx", 503: "5xx", 600: "none"} {
		if got := statusClass(status); got != want {
			t.Errorf("statusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

// A snapshot that fails is a scrape error for its gauges, not a panic, and
// the counters are still served.
func TestSnapshotFailureStillServesCounters(t *testing.T) {
	c := New(func() (Snapshot, error) { return Snapshot{}, errors.New("file closed") })
	c.Fetched("ok", 200, false, 10, 0.1)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(rec.Body.String(), `breakwater_responses_total{class="ok",status_class="2xx"} 1`) {
		t.Errorf("counters not served after a failed snapshot:\n%s", rec.Body.String())
	}
}

func TestCountersByLabel(t *testing.T) {
	c := New(func() (Snapshot, error) {
		return Snapshot{NotClosed: map[string]int{"a.test": 2}, LocalFault: true}, nil
	})
	c.LocalFault()
	c.Deferred("retry-backoff")
	c.Deferred("retry-backoff")
	c.Deferred("retry-budget")
	c.Transition("closed", "open")
	c.Fetched("transient", 0, true, 0, 2)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`breakwater_deferrals_total{reason="retry-backoff"} 2`,
		`breakwater_deferrals_total{reason="retry-budget"} 1`,
		`breakwater_breaker_transitions_total{from="closed",to="open"} 1`,
		`breakwater_requests_total{kind="retry"} 1`,
		`breakwater_responses_total{class="transient",status_class="none"} 1`,
		`breakwater_host_breaker_state{host="a.test"} 2`,
		`breakwater_fetch_duration_seconds_count 1`,
		"breakwater_local_fault 1\n",
		"breakwater_local_fault_incidents_total 1\n",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s:\n%s", want, body)
		}
	}
}
