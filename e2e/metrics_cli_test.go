package e2e

import (
	"breakwater/cli"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scraper keeps no connection: the package's leak check runs after the tests.
var scraper = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}

// scrape parses /metrics with the Prometheus text parser.
func scrape(addr string) (map[string]*dto.MetricFamily, error) {
	resp, err := scraper.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(resp.Body)
}

// value is the value of the series of family name whose labels include
// want; ok is false if there is none.
func value(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
series:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue series
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, found
}

// A crawl with --listen serves /healthz and /metrics while it runs: the
// dead host's circuit shows open in the per-host gauge (and only hosts not
// closed have a series), its transition is counted, and the live pages'
// answers, bytes and durations are.
func TestMetricsDuringACrawl(t *testing.T) {
	site := startSite(t, 2, 25)
	db := tempDB(t)
	addr := freeLoopbackAddr(t)
	dead := "127.0.0.1:1" // nothing listens on port 1
	args := crawlArgs(db, append([]string{"--listen", addr, "--delay", "40ms", "--retries", "0",
		"--breaker-threshold", "1", "http://" + dead + "/"}, site.Roots()...)...)
	done := make(chan result, 1)
	go func() { done <- runCLI(t, context.Background(), args...) }()

	var fams map[string]*dto.MetricFamily
	deadline := time.Now().Add(15 * time.Second)
	for {
		var err error
		if fams, err = scrape(addr); err == nil {
			if v, ok := value(fams, "breakwater_host_breaker_state", map[string]string{"host": dead}); ok && v == 2 {
				if n, _ := value(fams, "breakwater_responses_total", map[string]string{"class": "ok", "status_class": "2xx"}); n > 0 {
					break
				}
			}
		}
		select {
		case r := <-done:
			t.Fatalf("the crawl ended before the metrics showed the dead host open: %s", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no scrape showed the dead host open: %v", fams["breakwater_host_breaker_state"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp, err := scraper.Get("http://" + addr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/healthz: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if n, _ := value(fams, "breakwater_breaker_transitions_total", map[string]string{"from": "closed", "to": "open"}); n < 1 {
		t.Errorf("closed->open transitions = %v, want the dead host's", n)
	}
	if f := fams["breakwater_host_breaker_state"]; len(f.GetMetric()) != 1 {
		t.Errorf("per-host gauge has %d series, want only the dead host's: %v", len(f.GetMetric()), f)
	}
	if v, ok := value(fams, "breakwater_hosts", map[string]string{"state": "open"}); !ok || v != 1 {
		t.Errorf("hosts open = %v (%v), want 1", v, ok)
	}
	for _, name := range []string{"breakwater_received_body_bytes_total", "breakwater_fetch_duration_seconds", "breakwater_requests_total"} {
		if v, _ := value(fams, name, nil); v <= 0 {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	for _, state := range []string{"queued", "deferred", "leased", "done", "failed"} {
		if _, ok := value(fams, "breakwater_frontier_urls", map[string]string{"state": state}); !ok {
			t.Errorf("no frontier gauge for %s", state)
		}
	}
	if n, _ := value(fams, "breakwater_responses_total", map[string]string{"class": "transient", "status_class": "none"}); n < 1 {
		t.Errorf("the dead host's failed connect is not counted: %v", fams["breakwater_responses_total"])
	}
	r := <-done
	if r.code != cli.ExitOK {
		t.Errorf("crawl: %s", r)
	}
	if _, err := scrape(addr); err == nil {
		t.Errorf("metrics still served after the crawl ended")
	}
}

// --metrics-file leaves the run's metrics in node_exporter's textfile
// format when the run ends, for a cron job that nothing scrapes.
func TestMetricsFile(t *testing.T) {
	site := startSite(t, 2, 5)
	db := tempDB(t)
	path := filepath.Join(t.TempDir(), "breakwater.prom")
	mustRun(t, cli.ExitOK, crawlArgs(db, append([]string{"--metrics-file", path}, site.Roots()...)...)...)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("the textfile does not parse: %v", err)
	}
	if n, _ := value(fams, "breakwater_responses_total", map[string]string{"class": "ok", "status_class": "2xx"}); n < 10 {
		t.Errorf("2xx answers in the textfile = %v, want the 10 pages", n)
	}
	if v, _ := value(fams, "breakwater_frontier_urls", map[string]string{"state": "done"}); v != 10 {
		t.Errorf("done URLs in the textfile = %v, want 10: written after the last commit", v)
	}
	if left, _ := filepath.Glob(path + "*[0-9]"); len(left) != 0 {
		t.Errorf("temporary files left beside it: %v", left)
	}
	r := mustRun(t, cli.ExitUsage, crawlArgs(tempDB(t), "--metrics-file", "/nonexistent/dir/m.prom", site.Roots()[0])...)
	if !strings.Contains(r.stderr, "--metrics-file") {
		t.Errorf("a bad --metrics-file: %s", r)
	}
}
