package e2e

import (
	"breakwater/cli"
	"encoding/json"
	"strings"
	"testing"
)

// --sitemaps is on by default and stored. On the demo site, which has no
// sitemaps, every host's /sitemap.xml is asked for once and its 404 alarms
// no one: no log line at info, no failure against --fail-ratio, exit 0.
func TestSitemapsFlag(t *testing.T) {
	if line := flagLine(mustRun(t, cli.ExitOK, "crawl", "--help").stdout, "sitemaps"); !strings.Contains(line, "(default true)") {
		t.Errorf("crawl --help line for --sitemaps %q, want it listed with (default true)", line)
	}
	site := startSite(t, 2, 5)
	db := tempDB(t)
	args := []string{"crawl", "--db", db, "--allow-private", "--delay", "10ms", "--timeout", "2s",
		"--connect-timeout", "1s", "--log-format", "text", "--log-level", "info", "--fail-ratio", "0.01"}
	r := mustRun(t, cli.ExitOK, append(args, site.Roots()...)...)

	for _, h := range site.Hosts() {
		n := 0
		for _, req := range h.Requests() {
			if req.Path == "/sitemap.xml" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s: /sitemap.xml requested %d times, want 1", h.Name, n)
		}
	}
	if strings.Contains(r.stderr, "sitemap") {
		t.Errorf("a missing /sitemap.xml was logged at info or above:\n%s", r.stderr)
	}
	st := mustRun(t, cli.ExitOK, "status", "--db", db, "--json")
	var status struct {
		Settings map[string]json.RawMessage `json:"settings"`
	}
	if err := json.Unmarshal([]byte(st.stdout), &status); err != nil {
		t.Fatalf("status --json: %v\n%s", err, st.stdout)
	}
	if got := string(status.Settings["sitemaps"]); got != "true" {
		t.Errorf("status settings sitemaps = %s, want the stored true", got)
	}
}
