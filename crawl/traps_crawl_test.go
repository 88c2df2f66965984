package crawl_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"breakwater/crawl"
	"breakwater/demosite"
	"breakwater/storage"
	"breakwater/store"
)

func startCalendar(t *testing.T, today time.Time) *demosite.Calendar {
	t.Helper()
	c, err := demosite.StartCalendar(today)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close calendar: %v", err)
		}
	})
	return c
}

// calendarMonths are the paths of the months from offset from to to.
func calendarMonths(c *demosite.Calendar, from, to int) []string {
	var out []string
	for m := from; m <= to; m++ {
		out = append(out, c.MonthPath(m))
	}
	return out
}

// checkCalendarCrawl checks that the calendar's ordinary pages and the
// months fetched were each asked once and stored as pages, that nothing
// else was asked, and that the months held back are stored as class trap
// with the rule in their error, never asked.
func checkCalendarCrawl(t *testing.T, c *demosite.Calendar, db *storage.DB, fetched, heldBack []string) {
	t.Helper()
	asked := c.Requests()
	delete(asked, "/robots.txt")
	results := map[string]string{} // target: class
	err := db.ForEachResult(func(r *store.Result) error {
		target := strings.TrimPrefix(r.URL, c.URL(""))
		results[target] = r.ErrorClass
		if r.ErrorClass == "trap" && !strings.Contains(r.Error, "--trap-future-years") {
			t.Errorf("%s: error %q does not name the rule", target, r.Error)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("read results: %v", err)
	}
	for _, p := range slices.Concat(demosite.CalendarPages, fetched) {
		if asked[p] != 1 || results[p] != "" {
			t.Errorf("%s asked %d times, class %q: want fetched once", p, asked[p], results[p])
		}
		delete(asked, p)
	}
	for _, p := range heldBack {
		if asked[p] != 0 || results[p] != "trap" {
			t.Errorf("%s asked %d times, class %q: want held back as trap, never asked", p, asked[p], results[p])
		}
	}
	if len(asked) > 0 {
		t.Errorf("also asked: %v", asked)
	}
	if n := len(results); n != len(demosite.CalendarPages)+len(fetched)+len(heldBack) {
		t.Errorf("%d results, want %d", n, len(demosite.CalendarPages)+len(fetched)+len(heldBack))
	}
}

// An endless calendar crawled at the default settings ends by itself: the
// months within --trap-future-years (1) of today are fetched, the first
// beyond is held back, as trap; the months before today end at the
// default --max-depth (20: month -19 is 20 links from the seed). Held
// back, the trap is no failure of the run. Widened by a later run,
// --retry-failed fetches what it held back, up to --max-depth.
func TestCalendarTrapEndsAtDefaults(t *testing.T) {
	t.Parallel()
	c := startCalendar(t, time.Now()) // the crawl's clock is the wall clock too
	path := filepath.Join(t.TempDir(), "crawl.db")
	run := func(opts crawl.Options, given ...string) crawl.Summary {
		t.Helper()
		db := openDB(t, path)
		defer db.Close()
		merged, _, err := crawl.ResolveSettings(db, opts, func(flag string) bool { return slices.Contains(given, flag) })
		if err != nil {
			t.Fatalf("resolve settings: %v", err)
		}
		return runCrawl(t, testContext(t, 30*time.Second), db, merged)
	}

	first := testOptions(t, c.URL("/"))
	first.Delay = 0
	sum := run(first)
	if !sum.Exhausted || sum.Failed != 0 {
		t.Errorf("first run: exhausted %v, %d failed (%s): want the end, no failure", sum.Exhausted, sum.Failed, sum.Why)
	}
	db := openDB(t, path)
	checkCalendarCrawl(t, c, db, calendarMonths(c, -19, 12), []string{c.MonthPath(13)})
	db.Close()

	wider := testOptions(t)
	wider.Traps.FutureYears = 2
	wider.RetryFailed = true
	sum = run(wider, "trap-future-years")
	if !sum.Exhausted || sum.Failed != 0 {
		t.Errorf("retry: exhausted %v, %d failed (%s): want the end, no failure", sum.Exhausted, sum.Failed, sum.Why)
	}
	db = openDB(t, path)
	defer db.Close()
	checkCalendarCrawl(t, c, db, calendarMonths(c, -19, 19), nil)
}
