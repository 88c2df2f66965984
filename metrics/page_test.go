package metrics

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"breakwater/control"
	"breakwater/store"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

const hostile = `evil<script>window.__pwned=1</script>.test`

// pageAPI answers the page's reads with a dead host open, a half-open one
// and a case whose words (and host name) carry a script.
type pageAPI struct{ control.API }

func (pageAPI) Status() (*control.Status, error) {
	return &control.Status{Counts: store.Counts{Fetched: 120, Failed: 3, Queued: 40}, Running: true, Hosts: 4}, nil
}

func (pageAPI) Hosts(string) ([]control.HostRow, error) {
	return []control.HostRow{
		{Host: "dead.test", State: "open", OpenedAt: t0.Add(10 * time.Second), RestRemaining: 4 * time.Minute, Queued: 30},
		{Host: "flaky.test", State: "half-open", Queued: 5},
		{Host: hostile, State: "open", Hold: "case", HoldReason: `go away <script>window.__pwned=2</script>`},
		{Host: "fine.test", State: "closed"},
	}, nil
}

func (pageAPI) Transitions(string, time.Time) ([]store.Transition, error) {
	return []store.Transition{
		{At: t0.Add(10 * time.Second), Host: "dead.test", From: "closed", To: "open", Detail: "connection refused"},
		{At: t0.Add(20 * time.Second), Host: "flaky.test", From: "closed", To: "open", Detail: "status 503"},
		{At: t0.Add(50 * time.Second), Host: "flaky.test", From: "open", To: "half-open"},
	}, nil
}

func (pageAPI) Cases() ([]store.Case, error) {
	return []store.Case{{Host: hostile, At: t0.Add(30 * time.Second), Status: 403,
		Excerpt: `not you, breakwater <script>window.__pwned=3</script>`}}, nil
}

func pageServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(PageHandler(pageAPI{}, t0, func() time.Time { return t0.Add(time.Minute) }))
	t.Cleanup(srv.Close)
	return srv
}

func TestStatusJSON(t *testing.T) {
	srv := pageServer(t)
	resp, err := http.Get(srv.URL + "/status.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d PageData
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if len(d.Hosts) != 3 || d.Hosts[0].Host != "dead.test" || d.Hosts[0].Cause != "connection refused" ||
		len(d.Cases) != 1 || d.Status.Fetched != 120 || d.PagesPerSec != 2 {
		t.Errorf("status.json = %+v", d)
	}
}

// chromium is the Debian package's browser, which .ci/run installs.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; .ci/run installs it")
	}
	t.Skip("chromium is not installed")
	return ""
}

// The page, rendered by a real headless Chromium: the dead host's row,
// the timeline's bars coloured by state, and hostile host names and
// server words shown as text, never run.
func TestStatusPageInChromium(t *testing.T) {
	exe := chromium(t)
	srv := pageServer(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first call starts the browser: no timeout on its context.
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#timeline"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	ctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
	}
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#hosts tr.host td:first-child")].map(td => td.textContent)`))
	must(err)
	bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline rect").length`))
	must(err)
	openBars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#timeline rect.open").length`))
	must(err)
	pwned, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.__pwned !== undefined`))
	must(err)
	casesText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#cases").textContent`))
	must(err)
	hostsText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#hosts").textContent`))
	must(err)
	if len(rows) != 3 || rows[0] != "dead.test" {
		t.Errorf("host rows %q, want dead.test first and the closed host left out", rows)
	}
	if bars != 3 || openBars != 2 {
		t.Errorf("timeline has %d bars, %d open; want 3 and 2", bars, openBars)
	}
	if pwned {
		t.Error("a script from a host name or a server's words ran")
	}
	if !strings.Contains(casesText, "<script>window.__pwned=3</script>") || !strings.Contains(hostsText, hostile) {
		t.Errorf("hostile text not shown as text:\ncases %q\nhosts %q", casesText, hostsText)
	}
}

// faultAPI is pageAPI during a local-fault incident.
type faultAPI struct{ pageAPI }

func (faultAPI) Status() (*control.Status, error) {
	st, _ := pageAPI{}.Status()
	st.LocalFault = &control.LocalFault{Since: t0, TrippedAt: t0.Add(5 * time.Second), FailingHosts: 7, ActiveHosts: 8,
		ErrorKinds: map[string]int{"timeout": 6, "dns": 1}, Probing: []string{"a.test", hostile},
		NextProbe: t0.Add(70 * time.Second), ProbeRounds: 4}
	return st, nil
}

// During an incident the page says so first, with its evidence; a probed
// host's name is text.
func TestStatusPageShowsLocalFault(t *testing.T) {
	for _, api := range []control.API{pageAPI{}, faultAPI{}} {
		srv := httptest.NewServer(PageHandler(api, t0, func() time.Time { return t0.Add(time.Minute) }))
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		srv.Close()
		page := string(body)
		_, during := api.(faultAPI)
		if got := strings.Contains(page, `id="local-fault"`); got != during {
			t.Errorf("incident under way %v, banner shown %v:\n%s", during, got, page)
			continue
		}
		if !during {
			continue
		}
		for _, want := range []string{"7 of 8", "dns: 1, timeout: 6", "a.test, evil&lt;script&gt;", "4 rounds"} {
			if !strings.Contains(page, want) {
				t.Errorf("banner lacks %q:\n%s", want, page)
			}
		}
		if strings.Contains(page, "<script>window.__pwned=1") {
			t.Error("a probed host's name is served as markup")
		}
	}
}
