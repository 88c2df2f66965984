package e2e

import (
	"breakwater/cli"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

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
	mustRun(t, cli.ExitOK, crawlArgs(db, srv.URL+"/")...)
	rows := readCSV(t, mustRun(t, cli.ExitOK, "export", "--db", db, "--format", "csv").stdout)
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
