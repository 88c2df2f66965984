package e2e

import (
	"breakwater/cli"
	"breakwater/demosite"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// hook records the events POSTed to it; the first fails answers fail.
type hook struct {
	mu     sync.Mutex
	events []map[string]any
	fail   int
	calls  int
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls <= h.fail {
		http.Error(w, "busy", http.StatusServiceUnavailable)
		return
	}
	var ev map[string]any
	if err := json.Unmarshal(body, &ev); err == nil && r.Header.Get("Content-Type") == "application/json" {
		h.events = append(h.events, ev)
	}
}

func (h *hook) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		out = append(out, e["event"].(string))
	}
	return out
}

// A run whose every seed fails ends with exit 4, and the webhook hears of
// it, after a retry; a webhook that is down changes nothing of the exit
// code.
func TestNotifyRunEnded(t *testing.T) {
	h := &hook{fail: 1}
	srv := httptest.NewServer(h)
	defer srv.Close()
	db := tempDB(t)
	start := time.Now()
	mustRun(t, cli.ExitFailed, crawlArgs(db, "--retries", "0", "--notify", srv.URL+"/hook", "http://127.0.0.1:1/")...)
	got := h.kinds()
	if len(got) != 1 || got[0] != "run-ended" {
		t.Fatalf("events %v, want one run-ended (delivered on the second try)", got)
	}
	h.mu.Lock()
	ev := h.events[0]
	h.mu.Unlock()
	fields := ev["fields"].(map[string]any)
	if fields["exit"] != float64(cli.ExitFailed) || !strings.Contains(fields["err"].(string), "every seed failed") || ev["crawl"] != db {
		t.Errorf("run-ended event %v", ev)
	}
	if time.Since(start) > 10*time.Second {
		t.Errorf("the run took %s", time.Since(start))
	}

	srv.Close() // the webhook is down now
	mustRun(t, cli.ExitFailed, crawlArgs(tempDB(t), "--retries", "0", "--notify", srv.URL, "http://127.0.0.1:1/")...)

	if r := mustRun(t, cli.ExitUsage, crawlArgs(tempDB(t), "--notify", "ftp://x/", "http://127.0.0.1:1/")...); !strings.Contains(r.stderr, "--notify") {
		t.Errorf("a bad --notify: %s", r)
	}
}

// A host that refuses us by name raises a case, and the webhook hears of
// it with the host and the server's words.
func TestNotifyCase(t *testing.T) {
	h := &hook{}
	srv := httptest.NewServer(h)
	defer srv.Close()
	site, err := demosite.Start([]demosite.HostSpec{{Name: "gatekeeper", Pages: 3, Behavior: demosite.Refusing,
		RefuseToken: demosite.DefaultRefuseToken}}, demosite.SiteOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer site.Close()
	mustRun(t, cli.ExitWorkLeft, crawlArgs(tempDB(t), append([]string{"--notify", srv.URL}, site.Roots()...)...)...)
	h.mu.Lock()
	defer h.mu.Unlock()
	var cases []map[string]any
	for _, ev := range h.events {
		if ev["event"] == "case" {
			cases = append(cases, ev["fields"].(map[string]any))
		}
	}
	if len(cases) != 1 || cases[0]["status"] != float64(403) || !strings.Contains(cases[0]["excerpt"].(string), demosite.DefaultRefuseToken) {
		t.Errorf("case events %v, want one with the 403 and the server's words", cases)
	}
}
