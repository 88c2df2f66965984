package main

import (
	"breakwater/store"
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Every text cell a spreadsheet would read as a formula gets a leading
// quote, in whichever column the value lands; a cell that is safe, and the
// numeric columns (a negative duration included), are written as they are.
func TestExportCSVDefusesFormulas(t *testing.T) {
	var out bytes.Buffer
	w := bufio.NewWriter(&out)
	write, flush, err := csvExporter(w, csvColumns)
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

// End to end: titles and ETags a hostile site sends come out of
// export --format csv defused, and the status column as it was.
func TestExportCSVDefusesServedValues(t *testing.T) {
	titles := map[string]string{"/eq": "=1+1", "/plus": "+1", "/minus": "-1", "/at": "@SUM(A1)"}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch title, ok := titles[r.URL.Path]; {
		case r.URL.Path == "/":
			w.Header().Set("ETag", `=cmd|' /C calc'!A0`)
			fmt.Fprint(w, `<title>home</title><a href="/eq">1</a><a href="/plus">2</a><a href="/minus">3</a><a href="/at">4</a>`)
		case ok:
			fmt.Fprintf(w, "<title>%s</title>", title)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	db := tempDB(t)
	mustRun(t, exitOK, crawlArgs(db, srv.URL+"/")...)
	rows := readCSV(t, mustRun(t, exitOK, "export", "--db", db, "--format", "csv").stdout)
	header := rows[0]
	seen := 0
	for _, row := range rows[1:] {
		url := row[column(t, header, "url")]
		path := strings.TrimPrefix(url, srv.URL)
		if title, ok := titles[path]; ok {
			seen++
			if got := row[column(t, header, "title")]; got != "'"+title {
				t.Errorf("%s: title cell %q, want %q", path, got, "'"+title)
			}
		}
		if path == "/" {
			if got := row[column(t, header, "etag")]; got != `'=cmd|' /C calc'!A0` {
				t.Errorf("etag cell %q, want it quoted", got)
			}
		}
		if got := row[column(t, header, "status")]; got != "200" {
			t.Errorf("%s: status cell %q, want 200", path, got)
		}
	}
	if seen != len(titles) {
		t.Errorf("%d of the %d hostile titles exported", seen, len(titles))
	}
}
