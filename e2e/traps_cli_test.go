package e2e

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/demosite"
)

// failedByClass maps every URL export --failed lists to its error class
// and error, but for the site's missing /sitemap.xml.
func failedByClass(t *testing.T, db string) map[string][2]string {
	t.Helper()
	r := mustRun(t, cli.ExitOK, "export", "--db", db, "--failed", "--format", "jsonl")
	out := map[string][2]string{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		var row struct {
			URL   string `json:"url"`
			Class string `json:"error_class"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("export line: %v\n%s", err, sc.Text())
		}
		if !strings.HasSuffix(row.URL, "/sitemap.xml") {
			out[row.URL] = [2]string{row.Class, row.Error}
		}
	}
	return out
}

// A crawl of an endless calendar at the default settings (but --delay 0)
// exits 0 by itself, having asked a few dozen months, each once; the month
// the date rule held back is exported as failed, class trap, naming the
// rule, and was never asked. A resume with the rule off and --retry-failed
// fetches it.
func TestCalendarTrapCrawlEndsAtDefaults(t *testing.T) {
	cal, err := demosite.StartCalendar(time.Now()) // the crawl's clock is the wall clock too
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cal.Close(); err != nil {
			t.Errorf("close calendar: %v", err)
		}
	})
	db := tempDB(t)
	mustRun(t, cli.ExitOK, "crawl", "--db", db, "--allow-private", "--delay", "0", "--log-format", "text",
		"--log-level", "warn", cal.URL("/"))

	months := 0
	for target, n := range cal.Requests() {
		if n != 1 {
			t.Errorf("%s asked %d times, want once", target, n)
		}
		if strings.HasPrefix(target, "/calendar/") {
			months++
		}
	}
	if months < 12 || months > 36 {
		t.Errorf("%d months asked, want a year ahead and no more than a few dozen in all", months)
	}
	heldBack := cal.URL(cal.MonthPath(13))
	failed := failedByClass(t, db)
	if got := failed[heldBack]; got[0] != "trap" || !strings.Contains(got[1], "--trap-future-years 1") {
		t.Errorf("%s exported as %q: want class trap naming --trap-future-years 1 (all failed: %v)", heldBack, got, failed)
	}
	if len(failed) != 1 {
		t.Errorf("export --failed lists %v, want the held-back month alone", failed)
	}
	if n := cal.Requests()[cal.MonthPath(13)]; n != 0 {
		t.Errorf("held-back %s asked %d times", cal.MonthPath(13), n)
	}

	rep := readReport(t, db)
	if rep.Trapped.Total != 1 || rep.Trapped.Items[0].URL != heldBack {
		t.Errorf("the report's held-back pages: %+v, want %s", rep.Trapped, heldBack)
	}

	// A wider rule is a wider scope: the resume fetches what it admits.
	mustRun(t, cli.ExitOK, "crawl", "--db", db, "--trap-future-years", "0",
		"--log-format", "text", "--log-level", "warn")
	if n := cal.Requests()[cal.MonthPath(13)]; n != 1 {
		t.Errorf("after --trap-future-years 0, %s asked %d times, want once", cal.MonthPath(13), n)
	}
	if failed := failedByClass(t, db); len(failed) != 0 {
		t.Errorf("after the retry export --failed lists %v, want none", failed)
	}
}
