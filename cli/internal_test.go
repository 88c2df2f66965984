package cli

// Tests of what the commands print, run on their internals.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"breakwater/backend"
	"breakwater/control"
	"breakwater/crawl"
	"breakwater/store"
)

// While the local-fault guard pauses a running crawl, status says so first
// among the figures, with the evidence and the probes.
func TestStatusShowsLocalFault(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	var out strings.Builder
	printStatus(&out, &control.Status{Running: true, LocalFault: &control.LocalFault{Since: at, TrippedAt: at.Add(2 * time.Second),
		FailingHosts: 7, ActiveHosts: 8, ErrorKinds: map[string]int{"timeout": 6, "dns": 1},
		Probing: []string{"a.test", "b.test"}, NextProbe: at.Add(10 * time.Second), ProbeRounds: 3}})
	want := "LOCAL FAULT  fetching paused since 10:00:02: 7 of 8 active hosts failing at once (dns 1, timeout 6); probing a.test b.test, 3 rounds, next at 10:00:10"
	if !strings.Contains(out.String(), want) {
		t.Errorf("status:\n%s\nwant the line %q", out.String(), want)
	}
	out.Reset()
	printStatus(&out, &control.Status{Running: true})
	if strings.Contains(out.String(), "LOCAL FAULT") {
		t.Errorf("status without an incident shows one:\n%s", out.String())
	}
}

// The progress line says why nothing moves: the guard's pause first, else
// the open hosts everything waits on.
func TestProgressTextSaysWhatItWaitsFor(t *testing.T) {
	p := crawl.Progress{Fetched: 100, Queued: 50, Open: 2, NextProbe: 190 * time.Second, GiveUpIn: 27 * time.Minute,
		Elapsed: 10 * time.Second}
	if got := progressText(p); !strings.Contains(got, "waiting on 2 open hosts: next probe in 3m10s, giving up in 27m0s") {
		t.Errorf("progress %q, want what it waits on", got)
	}
	p.LocalFault = &control.LocalFault{FailingHosts: 7, ActiveHosts: 8, Probing: []string{"a", "b", "c"},
		NextProbe: time.Now().Add(4 * time.Second)}
	got := progressText(p)
	if !strings.Contains(got, "PAUSED: local fault suspected, 7 of 8 hosts failing at once; probing 3 hosts") ||
		strings.Contains(got, "waiting on") {
		t.Errorf("progress %q, want the local fault and nothing else to wait on", got)
	}
}

// Every flag of crawl is an entry of the settings table and every entry
// is a flag; crawl --help shows each under its group's heading, the
// groups in the table's order.
func TestCrawlFlagsAreTheTable(t *testing.T) {
	c := &crawlFlags{vals: crawl.DefaultFlagValues()}
	fs := newFlagSet("crawl", "crawl", io.Discard)
	c.addFlags(fs)
	bound := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) {
		bound[f.Name] = true
		if _, ok := crawl.LookupFlag(f.Name); !ok {
			t.Errorf("crawl's flag --%s is not in the settings table", f.Name)
		}
	})
	for _, f := range crawl.Flags() {
		if !bound[f.Name] {
			t.Errorf("the table's --%s is not a flag of crawl", f.Name)
		}
	}

	help := mustRun(t, ExitOK, "crawl", "--help").stdout
	shown := helpFlags(help)
	if len(shown) != len(crawl.Flags()) {
		t.Errorf("crawl --help shows %d flags, the table has %d:\n%s", len(shown), len(crawl.Flags()), help)
	}
	at := 0
	for _, g := range crawl.Groups() {
		i := strings.Index(help[at:], "\n"+g.String()+":\n")
		if i < 0 {
			t.Fatalf("crawl --help lacks the heading %q after byte %d:\n%s", g, at, help)
		}
		at += i + 1
		section := help[at:]
		if next := strings.Index(section, "\n\n"); next >= 0 {
			section = section[:next]
		}
		for _, f := range crawl.Flags() {
			if f.Group == g && flagLine(section, f.Name) == "" {
				t.Errorf("--%s is not under %q", f.Name, g)
			}
		}
	}
	sentence := regexp.MustCompile(`(?s)Settings: every flag but (.*?) is a setting`).FindStringSubmatch(help)
	if sentence == nil {
		t.Fatalf("crawl --help does not say which flags are not stored:\n%s", help)
	}
	notStored := map[string]bool{}
	for _, m := range regexp.MustCompile(`--([a-z-]+)`).FindAllStringSubmatch(sentence[1], -1) {
		notStored[m[1]] = true
	}
	for _, f := range crawl.Flags() {
		if notStored[f.Name] == f.Stored {
			t.Errorf("--%s: stored %v, but crawl --help says otherwise", f.Name, f.Stored)
		}
	}
}

// The table's --log-* help is the other commands' too, and --store's names
// the store's password variable.
func TestCrawlHelpAgreesWithTheOtherCommands(t *testing.T) {
	var l logFlags
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	l.addFlags(fs)
	for _, name := range []string{"log-format", "log-level"} {
		f, _ := crawl.LookupFlag(name)
		if got := fs.Lookup(name); got.Usage != f.Help || got.DefValue != f.Default() {
			t.Errorf("--%s: the table says %q (default %q), the log flags %q (default %q)", name, f.Help, f.Default(), got.Usage, got.DefValue)
		}
	}
	if f, _ := crawl.LookupFlag("store"); !strings.Contains(f.Help, "$"+backend.PasswordEnv) {
		t.Errorf("--store's help does not name $%s: %s", backend.PasswordEnv, f.Help)
	}
}

// Every text cell a spreadsheet would read as a formula gets a leading
// quote, in whichever column the value lands; a cell that is safe, and the
// numeric columns (a negative duration included), are written as they are.
func TestExportCSVDefusesFormulas(t *testing.T) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	write, flush, err := csvExporter(w, CSVColumns)
	if err != nil {
		t.Fatal(err)
	}
	type want struct{ col, cell string }
	var cases []want
	for i, lead := range []string{"=", "+", "-", "@", "\t", "\r", "'"} {
		v := lead + "HYPERLINK(\"http://evil.example/\",\"x\")"
		r := &store.Result{URL: v, Title: v, Error: v, ErrorClass: v, Referrer: v, ETag: v, Host: v,
			Status: 200 + i, Attempts: 1, DurationMS: -5, Depth: 2, Length: 10, Outlinks: 3,
			FetchedAt: time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)}
		if err := write(r); err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"url", "title", "error", "error_class", "referrer", "etag", "host"} {
			cases = append(cases, want{c, "'" + v})
		}
		cases = append(cases, want{"status", fmt.Sprint(200 + i)}, want{"duration_ms", "-5"}, want{"depth", "2"},
			want{"truncated", "false"}, want{"fetched_at", "2024-01-02T03:04:05Z"})
	}
	safe := &store.Result{URL: "http://a.example/", Title: "a=b, \"c\"", Error: "status 404", ErrorClass: "permanent", Status: 404}
	if err := write(safe); err != nil {
		t.Fatal(err)
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	rows := readCSV(t, out.String())
	header := rows[0]
	per := len(cases) / 7
	for i, c := range cases {
		row := rows[1+i/per]
		if got := row[column(t, header, c.col)]; got != c.cell {
			t.Errorf("row %d %s = %q, want %q", i/per+1, c.col, got, c.cell)
		}
	}
	last := rows[len(rows)-1]
	for col, v := range map[string]string{"url": safe.URL, "title": safe.Title, "error": safe.Error, "error_class": "permanent", "status": "404"} {
		if got := last[column(t, header, col)]; got != v {
			t.Errorf("safe row %s = %q, want %q unchanged", col, got, v)
		}
	}
}

func readCSV(t *testing.T, out string) [][]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("export is not RFC 4180 CSV: %v\n%s", err, out)
	}
	return rows
}

func column(t *testing.T, header []string, name string) int {
	t.Helper()
	i := slices.Index(header, name)
	if i < 0 {
		t.Fatalf("no %q column in %v", name, header)
	}
	return i
}

type runResult struct{ stdout, stderr string }

// mustRun runs a command in-process and fails the test unless it exits with want.
func mustRun(t *testing.T, want int, args ...string) runResult {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), args, &stdout, &stderr)
	if code := ExitCode(err, &stderr); code != want {
		t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, stdout.String(), stderr.String())
	}
	return runResult{stdout.String(), stderr.String()}
}

// helpFlags lists the flags crawl --help shows, in order.
func helpFlags(help string) []string {
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\s+--([a-z-]+)`).FindAllStringSubmatch(help, -1) {
		out = append(out, m[1])
	}
	return out
}

// flagLine returns the --help line of flag name.
func flagLine(help, name string) string {
	re := regexp.MustCompile(`(?m)^\s+(-\w, )?--` + regexp.QuoteMeta(name) + `\b.*$`)
	return re.FindString(help)
}
