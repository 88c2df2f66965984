package e2e

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"breakwater/cli"
)

// linkSite is a site whose home page and /a both link to a broken page,
// the home page also to a broken image and to a page of another host
// (out of the crawl's scope): one server each, on loopback.
func linkSite(t *testing.T) (root, other string) {
	t.Helper()
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the other host, out of scope, was asked for %s", r.URL)
		http.NotFound(w, r)
	}))
	t.Cleanup(elsewhere.Close)
	pages := map[string]string{
		"/": `<html><title>home</title><a href="/a">first</a> <a href="/broken">gone</a>
			<img src="/missing.png"> <a href="` + elsewhere.URL + `/page">elsewhere</a></html>`,
		"/a": `<html><title>a</title><a href="/broken">also gone</a> <a href="/">home</a></html>`,
	}
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(site.Close)
	return site.URL + "/", elsewhere.URL + "/page"
}

type exportedLink struct {
	From, To     string
	Kind         string
	Element      string
	FromStatus   int    `json:"from_status"`
	ToStatus     int    `json:"to_status"`
	ToErrorClass string `json:"to_error_class"`
}

func linkLines(t *testing.T, out string) []exportedLink {
	t.Helper()
	var rows []exportedLink
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var l exportedLink
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("export line: %v\n%s", err, sc.Text())
		}
		rows = append(rows, l)
	}
	return rows
}

// export --links gives every link of every page fetched, out-of-scope
// ones too, with both ends' statuses; --inlinks every page linking to a
// broken URL; csv has the columns named.
func TestExportLinksEndToEnd(t *testing.T) {
	root, other := linkSite(t)
	db := tempDB(t)
	mustRun(t, cli.ExitOK, crawlArgs(db, root)...)
	base := strings.TrimSuffix(root, "/")

	rows := linkLines(t, mustRun(t, cli.ExitOK, "export", "--db", db, "--links").stdout)
	if len(rows) != 6 {
		t.Fatalf("exported %d links, want 6 (4 on the home page, 2 on /a): %+v", len(rows), rows)
	}
	byTo := map[string][]exportedLink{}
	for _, r := range rows {
		byTo[r.To] = append(byTo[r.To], r)
	}
	if l := byTo[other]; len(l) != 1 || l[0].ToStatus != 0 || l[0].From != root || l[0].FromStatus != 200 {
		t.Errorf("the out-of-scope link: %+v, want one from the home page, its target never fetched", l)
	}
	if l := byTo[base+"/missing.png"]; len(l) != 1 || l[0].Kind != "requisite" || l[0].Element != "img" || l[0].ToStatus != 404 {
		t.Errorf("the broken image: %+v", l)
	}
	if l := byTo[base+"/broken"]; len(l) != 2 || l[0].ToStatus != 404 || l[0].ToErrorClass == "" {
		t.Errorf("links to the broken page: %+v, want two, to a failed 404", l)
	}

	in := linkLines(t, mustRun(t, cli.ExitOK, "export", "--db", db, "--inlinks", base+"/broken").stdout)
	var from []string
	for _, l := range in {
		from = append(from, l.From)
	}
	slices.Sort(from)
	if want := []string{root, base + "/a"}; !slices.Equal(from, want) {
		t.Errorf("inlinks of /broken from %v, want %v", from, want)
	}

	out := mustRun(t, cli.ExitOK, "export", "--db", db, "--links", "--format", "csv").stdout
	records, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, out)
	}
	if !slices.Equal(records[0], cli.LinkColumns) || len(records) != 7 {
		t.Fatalf("csv header %v and %d rows, want %v and 6", records[0], len(records)-1, cli.LinkColumns)
	}

	r := mustRun(t, cli.ExitUsage, "export", "--db", db, "--links", "--failed")
	if !strings.Contains(r.stderr, "give one") {
		t.Errorf("--links --failed: %s", r)
	}
}
