package e2e

import (
	"breakwater/cli"
	"bufio"
	"encoding/json"
	"strings"
	"testing"
)

// jsonLines decodes every line of out as one JSON object, failing on any
// line that is not.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("stderr line is not JSON: %v\n%s", err, sc.Text())
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := m[k]; !ok {
				t.Fatalf("stderr line lacks %q: %s", k, sc.Text())
			}
		}
		lines = append(lines, m)
	}
	return lines
}

func byMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

// Off a terminal the log is JSON, every line of it: the per-fetch debug
// lines, the run's summary, and the last word of a run that stopped with
// work left.
func TestJSONLogEveryLine(t *testing.T) {
	site := startSite(t, 2, 10)
	db := tempDB(t)
	args := crawlArgs(db, append([]string{"--log-format", "auto", "--log-level", "debug", "--max-pages", "5"}, site.Roots()...)...)
	r := mustRun(t, cli.ExitWorkLeft, args...)
	lines := jsonLines(t, r.stderr)
	fetches := byMsg(lines, "fetch")
	if len(fetches) < 5 {
		t.Fatalf("%d fetch lines at debug, want one a request (5 pages and robots.txt)", len(fetches))
	}
	for _, f := range fetches {
		for _, k := range []string{"url", "status", "class", "ms", "bytes", "attempt"} {
			if _, ok := f[k]; !ok {
				t.Errorf("fetch line lacks %q: %v", k, f)
			}
		}
	}
	sum := byMsg(lines, "run summary")
	if len(sum) != 1 || sum[0]["exit"] != float64(cli.ExitWorkLeft) || sum[0]["fetched"] != float64(5) {
		t.Errorf("run summary lines %v, want one with exit 3 and 5 fetched", sum)
	}
	last := lines[len(lines)-1]
	if last["msg"] != "crawl ended" || last["exit"] != float64(cli.ExitWorkLeft) || !strings.Contains(last["err"].(string), "work left") {
		t.Errorf("last line %v, want the crawl's ending as JSON", last)
	}
	if strings.Contains(r.stderr, "breakwater: stopped") {
		t.Errorf("the ending was printed as text too:\n%s", r.stderr)
	}

	// A bad seed, once the log is set up, is told in JSON too (exit 2).
	r = mustRun(t, cli.ExitUsage, "crawl", "--db", tempDB(t), "--log-format", "json", "ftp://nope/")
	lines = jsonLines(t, r.stderr)
	if len(lines) != 1 || lines[0]["exit"] != float64(cli.ExitUsage) || !strings.Contains(lines[0]["err"].(string), "ftp://nope/") {
		t.Errorf("a bad seed in a JSON log: %v", lines)
	}

	// A finished run ends with its summary; nothing is printed after it.
	r = mustRun(t, cli.ExitOK, crawlArgs(db, "--log-format", "json", "--log-level", "info")...)
	lines = jsonLines(t, r.stderr)
	if len(lines) == 0 || lines[len(lines)-1]["msg"] != "run summary" {
		t.Errorf("a finished run's log ends with %v, want its summary", lines)
	}
}
