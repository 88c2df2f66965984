package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"breakwater/cli"
)

// The HTML report opened in headless chromium: one row per broken target
// with its referrers, the four SVG charts drawn, the hostile title shown
// as text and never run. A screenshot is left for the developer.
func TestReportInChromium(t *testing.T) {
	site := startAuditSite(t, false)
	db := crawlAudit(t, site)
	rep := readReport(t, db)
	out := filepath.Join(t.TempDir(), "report.html")
	mustRun(t, cli.ExitOK, "report", "--db", db, "-o", out)

	browser := startBrowser(t)
	ctx, cancel := context.WithTimeout(browser, time.Minute)
	defer cancel()
	type reportDOM struct {
		Targets   map[string]int `json:"targets"`
		Requisite map[string]int `json:"requisites"`
		Charts    int            `json:"charts"`
		Bars      int            `json:"bars"`
		Scripts   int            `json:"scripts"`
		Pwned     bool           `json:"pwned"`
		Slowest   string         `json:"slowest"`
	}
	if err := chromedp.Do(ctx, chromedp.Navigate("file://"+out)); err != nil {
		t.Fatalf("open the report in chromium: %v", err)
	}
	dom, err := chromedp.Run(ctx, chromedp.Evaluate[reportDOM](`(() => {
			const rows = sel => Object.fromEntries([...document.querySelectorAll(sel + " tr.target")].map(tr =>
				[tr.querySelector("td.url").textContent, tr.querySelectorAll("li.referrer").length]));
			return {
				targets: rows("#broken-links"),
				requisites: rows("#broken-requisites"),
				charts: document.querySelectorAll("figure svg").length,
				bars: document.querySelectorAll("svg rect.bar").length,
				scripts: document.querySelectorAll("script").length,
				pwned: window.pwned !== undefined,
				slowest: document.querySelector("#slowest").textContent,
			};
		})()`))
	if err != nil {
		t.Fatalf("read the report's DOM: %v", err)
	}
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot the report: %v", err)
	}
	png := filepath.Join(t.TempDir(), "report.png")
	if err := os.WriteFile(png, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the report: %s", png)

	for name, tt := range map[string]struct {
		got  map[string]int
		want []string
	}{"broken links": {dom.Targets, []string{"/missing", "/gone"}}, "broken requisites": {dom.Requisite, []string{"/broken.png"}}} {
		if len(tt.got) != len(tt.want) {
			t.Errorf("%s: rows %v, want one per %q", name, tt.got, tt.want)
		}
		for _, p := range tt.want {
			n, ok := tt.got[site.URL+p]
			want := 1 // the first page it was found on
			if rep.LinkGraph == "edges" {
				want = len(site.linkingPages()[site.URL+p])
			}
			if !ok || n != want {
				t.Errorf("%s: %s has %d referrers listed (row: %v), want %d", name, p, n, ok, want)
			}
		}
	}
	if dom.Charts < 4 || dom.Bars == 0 {
		t.Errorf("%d charts with %d bars, want the status, time and depth charts and the timeline", dom.Charts, dom.Bars)
	}
	if dom.Scripts != 0 || dom.Pwned {
		t.Errorf("a page's title ran as script: %d script elements, pwned %v", dom.Scripts, dom.Pwned)
	}
	if !strings.Contains(dom.Slowest, hostileTitle) {
		t.Errorf("the hostile title is not shown as text in the slowest pages:\n%s", dom.Slowest)
	}
}
