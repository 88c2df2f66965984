package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"breakwater/store"
)

const (
	hostileTitle = `</title><script>alert("title")</script>`
	hostileText  = `<img src=x onerror=alert(1)> & "quotes"`
	hostileURL   = `http://a.test/<script>alert('url')</script>`
	hostileHost  = `<u>evil.test</u>`
)

// hostileReport is a report whose every page-controlled text is markup.
func hostileReport(t *testing.T) *Report {
	t.Helper()
	src := &fakeSource{
		results: []store.Result{
			ok("http://a.test/", title(hostileTitle), took(700)), ok("http://a.test/copy", title(hostileTitle)),
			ok(hostileURL, status(404), failedAs("permanent"), from("http://a.test/")),
			ok("http://a.test/x.png", status(500), failedAs("transient"), requisite, from("http://a.test/")),
			ok("http://a.test/r1", redirectTo("http://a.test/r2")), ok("http://a.test/r2", redirectTo("http://a.test/r1")),
		},
		transitions: []store.Transition{{At: t0, Host: hostileHost, From: "closed", To: "open"}},
	}
	g := edges{{From: "http://a.test/", To: hostileURL, Text: hostileText, Element: "a", Attr: "href"},
		{From: "http://a.test/copy", To: hostileURL, Text: "second"},
		{From: "http://a.test/", To: "http://a.test/x.png", Kind: store.LinkRequisite, Element: "img", Attr: "src"}}
	return build(t, src, Options{Source: "crawl.db", Graph: g})
}

// TestHTMLShowsHostileTextAsText parses the report as a browser would: no
// element came from the pages' text, and the text reads exactly as sent.
func TestHTMLShowsHostileTextAsText(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteHTML(&buf, hostileReport(t)); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatalf("parse report: %v", err)
	}
	var texts []string
	elements := map[string]int{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		switch n.Type {
		case html.ElementNode:
			elements[n.Data]++
			for _, a := range n.Attr {
				if strings.HasPrefix(a.Key, "on") || strings.Contains(a.Val, "javascript:") {
					t.Errorf("<%s %s=%q>: an attribute that runs script", n.Data, a.Key, a.Val)
				}
				if (a.Key == "src" || a.Key == "href") && !strings.HasPrefix(a.Val, "#") {
					t.Errorf("<%s %s=%q>: the report loads or links outside itself", n.Data, a.Key, a.Val)
				}
			}
		case html.TextNode:
			texts = append(texts, n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, el := range []string{"script", "img", "u", "link", "iframe"} {
		if elements[el] != 0 {
			t.Errorf("%d <%s> elements: page text became markup", elements[el], el)
		}
	}
	all := strings.Join(texts, "\n")
	for _, s := range []string{hostileTitle, hostileText, hostileURL, hostileHost} {
		if !strings.Contains(all, s) {
			t.Errorf("the text %q is not shown as text", s)
		}
	}
	if elements["svg"] < 4 || elements["rect"] == 0 {
		t.Errorf("charts: %d svg, %d rect; want the four charts drawn", elements["svg"], elements["rect"])
	}
}

func TestJSONIsTheModel(t *testing.T) {
	rep := hostileReport(t)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `<img src=x onerror=alert(1)> &`) {
		t.Error("JSON escapes page text as HTML")
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil {
		t.Fatalf("read back: %v", err)
	}
	if back.Schema != SchemaVersion || back.BrokenLinks.Total != 1 || back.BrokenLinks.Items[0].ReferrersTotal != 2 ||
		back.RedirectLoops.Total != 1 || back.DuplicateTitles.Items[0].Key != hostileTitle {
		t.Errorf("read back %+v", back)
	}
}

func TestCSVOneFilePerTable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report")
	if err := WriteCSV(dir, hostileReport(t)); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := slices.Sorted(slices.Values(CSVFiles())); !slices.Equal(names, want) {
		t.Errorf("files %q, want %q", names, want)
	}
	rows := readCSV(t, filepath.Join(dir, "broken_links.csv"))
	if len(rows) != 3 || rows[0][5] != "from" {
		t.Fatalf("broken_links.csv: %q, want a header and a row per referrer", rows)
	}
	if rows[1][0] != hostileURL || rows[1][6] != hostileText {
		t.Errorf("row %q", rows[1])
	}
	loops := readCSV(t, filepath.Join(dir, "redirect_loops.csv"))
	if len(loops) != 4 || loops[3][2] != "http://a.test/r1" {
		t.Errorf("redirect_loops.csv: %q, want two hops and the URL it came back to", loops)
	}
}

func TestCSVDefusesFormulas(t *testing.T) {
	for in, want := range map[string]string{"=1+1": "'=1+1", "-x": "'-x", "'q": "''q", "plain": "plain", "": ""} {
		if got := csvRow([]any{in})[0]; got != want {
			t.Errorf("%q -> %q, want %q", in, got, want)
		}
	}
	if got := csvRow([]any{-5})[0]; got != "-5" {
		t.Errorf("a number was defused: %q", got)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}
