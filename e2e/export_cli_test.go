package e2e

import (
	"breakwater/cli"
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// brokenLinkSite serves a home page linking to a good page, a missing one
// and one whose title needs CSV quoting.
func brokenLinkSite(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			fmt.Fprint(w, `<title>home</title><a href="/ok">ok</a> <a href="/missing">broken</a> <a href="/odd">odd</a>`)
		case "/ok":
			fmt.Fprint(w, `<title>ok</title>`)
		case "/odd":
			fmt.Fprint(w, `<title>a, "quoted" line</title>`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
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

func TestExportCSVAndFailed(t *testing.T) {
	srv := brokenLinkSite(t)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, srv.URL+"/")...)

	rows := readCSV(t, mustRun(t, cli.ExitOK, "export", "--db", db, "--format", "csv").stdout)
	header, body := rows[0], rows[1:]
	if !slices.Equal(header, cli.CSVColumns) || len(body) != 4 { // robots.txt's 404 is not a result
		t.Fatalf("header %q and %d rows, want %q and the 4 pages", header, len(body), cli.CSVColumns)
	}
	byURL := map[string][]string{}
	for _, row := range body {
		if len(row) != len(header) {
			t.Fatalf("row %q has %d fields, header %d", row, len(row), len(header))
		}
		byURL[row[column(t, header, "url")]] = row
	}
	if len(byURL) != len(body) {
		t.Errorf("%d rows for %d URLs: one row per URL", len(body), len(byURL))
	}
	odd := byURL[srv.URL+"/odd"]
	if odd == nil || odd[column(t, header, "title")] != `a, "quoted" line` || odd[column(t, header, "referrer")] != srv.URL+"/" {
		t.Errorf("the odd page's row %q: title and referrer should come back as they were", odd)
	}
	if home := byURL[srv.URL+"/"]; home == nil || home[column(t, header, "referrer")] != "" {
		t.Errorf("the seed's row %q: a seed has no referrer", home)
	}

	failed := readCSV(t, mustRun(t, cli.ExitOK, "export", "--db", db, "--format", "csv", "--failed").stdout)
	if !slices.Equal(failed[0], cli.FailedColumns) {
		t.Fatalf("--failed header %q, want %q", failed[0], cli.FailedColumns)
	}
	want := [][]string{{srv.URL + "/missing", "permanent", "404", "status 404", "1", srv.URL + "/"}}
	var got [][]string
	for _, row := range failed[1:] {
		got = append(got, row[:6])
	}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("--failed rows %q, want %q: the broken link and the page that holds it", got, want)
	}
	jl := mustRun(t, cli.ExitOK, "export", "--db", db, "--failed").stdout
	if strings.Count(jl, "\n") != 1 || !strings.Contains(jl, `"referrer":"`+srv.URL+`/"`) {
		t.Errorf("--failed jsonl:\n%s", jl)
	}
}

// An export taken while a crawl runs comes through the crawl's control
// socket with the results committed so far.
func TestExportWhileCrawling(t *testing.T) {
	bin := buildBinary(t)
	const pages = 400
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/p/"))
		if err != nil {
			n = 0
		}
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		time.Sleep(5 * time.Millisecond)
		if n+1 < pages {
			fmt.Fprintf(w, `<a href="/p/%d">next</a>`, n+1)
		}
	}))
	defer srv.Close()
	db := tempDB(t)
	// The chain is deeper than the default 20 hops: without -1 the crawl
	// ends after 21 pages, half a second, sooner than a loaded machine's
	// first export.
	crawl := exec.Command(bin, crawlArgs(db, "--delay", "20ms", "--max-depth", "-1", srv.URL+"/p/0")...)
	var out bytes.Buffer
	crawl.Stdout, crawl.Stderr = &out, &out
	if err := crawl.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- crawl.Wait() }()
	defer func() {
		crawl.Process.Kill()
		<-exited
	}()
	var lines int
	waitFor(t, 20*time.Second, "an export during the crawl with some results", func() bool {
		r := runCLI(t, t.Context(), "export", "--db", db)
		if r.code != cli.ExitOK {
			return false
		}
		lines = strings.Count(r.stdout, "\n")
		return lines >= 5
	})
	select {
	case err := <-exited:
		exited <- err // for the deferred wait: without it a failure here hangs the package
		t.Fatalf("the crawl ended (%v) before the export was taken: the test proves nothing; its output:\n%s", err, out.Bytes())
	default:
	}
	if lines >= pages {
		t.Errorf("export during the crawl had %d lines, all of them", lines)
	}
}
