package extract

import (
	"fmt"
	"mime"
	"slices"
	"strings"
	"testing"

	"breakwater/frontier"
)

const testPage = "http://example.com/dir/page.html"

// TestScanHTMLNavigation: the anchors of a page, resolved, filtered and
// de-duplicated.
func TestScanHTMLNavigation(t *testing.T) {
	tests := []struct {
		name, contentType, body string
		want                    []string
	}{
		{"relative forms", "text/html", `
			<a href="a.html">a</a> <a href="/b">b</a> <a href="../c?x=1">c</a>
			<a href="//cdn.example/y">y</a> <a href="HTTP://Other.example:80/Z">z</a>`,
			[]string{"http://example.com/dir/a.html", "http://example.com/b", "http://example.com/c?x=1",
				"http://cdn.example/y", "http://other.example/Z"}},
		{"base href absolute", "text/html", `<head><base href="http://base.example/sub/"></head><a href="x">x</a><a href="/y">y</a>`,
			[]string{"http://base.example/sub/x", "http://base.example/y"}},
		{"base href relative to page", "text/html", `<base href="/other/"><a href="x">x</a>`,
			[]string{"http://example.com/other/x"}},
		{"first base wins", "text/html", `<base href="/one/"><base href="/two/"><a href="x">x</a>`,
			[]string{"http://example.com/one/x"}},
		{"unusable base ignored", "text/html", `<base href="javascript:void(0)"><a href="x">x</a>`,
			[]string{"http://example.com/dir/x"}},
		{"base without href ignored", "text/html", `<base target="_blank"><a href="x">x</a>`,
			[]string{"http://example.com/dir/x"}},
		{"fragments", "text/html", `<a href="#top">t</a><a href="">e</a><a href="  #x ">x</a>
			<a href="q.html#sec">q</a><a href="#">h</a>`,
			[]string{"http://example.com/dir/q.html"}},
		{"schemes dropped", "text/html", `<a href="javascript:alert(1)">j</a><a href=" JavaScript:x">J</a>
			<a href="mailto:a@example.com">m</a><a href="data:text/html,hi">d</a><a href="tel:+4712345678">t</a>
			<a href="ftp://example.com/f">f</a><a href="https://ok.example/">ok</a>`,
			[]string{"https://ok.example/"}},
		{"junk hrefs dropped", "text/html", `<a href="http://exa mple.com/">bad host</a><a href="http://[::1">v6</a>
			<a href="/100%zz">stray percent</a><a href="good">good</a>`,
			[]string{"http://example.com/dir/good"}},
		{"dedupe keeps first order", "text/html", `<a href="b">1</a><a href="a">2</a><a href="b">3</a>
			<a href="a#one">4</a><a href="./a#two">5</a>`,
			[]string{"http://example.com/dir/b", "http://example.com/dir/a"}},
		{"area yes, a without href no", "text/html", `<map><area href="/map1"></map><a name="anchor">x</a>`,
			[]string{"http://example.com/map1"}},
		{"sniffed html", "", `<!DOCTYPE html><html><a href="s">s</a></html>`,
			[]string{"http://example.com/dir/s"}},
		{"xhtml", "application/xhtml+xml; charset=utf-8", `<html xmlns="http://www.w3.org/1999/xhtml"><a href="x">x</a></html>`,
			[]string{"http://example.com/dir/x"}},
		{"content type case and junk params", "TEXT/HTML; charset", `<a href="x">x</a>`,
			[]string{"http://example.com/dir/x"}},
		{"plain text ignored", "text/plain", `<a href="x">x</a>`, nil},
		{"json ignored", "application/json", `{"a":"<a href=x>"}`, nil},
		{"sniffed plain text ignored", "", `just words, <a href="x"> later`, nil},
		{"empty body", "text/html", ``, nil},
		{"malformed", "text/html", `<html><body><a href="one"<a href="two">x</b></i><a href='three'>
			<table><a href=four>f</td></tr><a href="five"`,
			[]string{"http://example.com/dir/one", "http://example.com/dir/three", "http://example.com/dir/four"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := scan(t, tt.contentType, tt.body)
			if got := linkURLs(t, page.Links); !slices.Equal(got, tt.want) {
				t.Errorf("links:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestScanHTMLTitle(t *testing.T) {
	long := strings.Repeat("é", 600)
	tests := []struct {
		name, contentType, body, want string
	}{
		{"simple", "text/html", `<title>Hello</title>`, "Hello"},
		{"whitespace collapsed", "text/html", "<title>\n  Hello \t\n World  </title>", "Hello World"},
		{"entities", "text/html", `<title>Fish &amp; Chips</title>`, "Fish & Chips"},
		{"none", "text/html", `<p>no title</p>`, ""},
		{"first wins", "text/html", `<title>one</title><title>two</title>`, "one"},
		{"svg title ignored", "text/html", `<body><svg><title>icon</title></svg></body>`, ""},
		{"capped at 512 runes", "text/html", "<title>" + long + "</title>", strings.Repeat("é", 512)},
		{"latin-1 from header", "text/html; charset=ISO-8859-1", "<title>Caf\xe9 \xfcber</title>", "Café über"},
		{"latin-1 from meta, sniffed", "", "<html><head><meta charset=\"iso-8859-1\"><title>Caf\xe9</title></head></html>", "Café"},
		{"windows-1252 from meta", "text/html", "<meta http-equiv=\"Content-Type\" content=\"text/html; charset=windows-1252\"><title>\x93quoted\x94</title>", "\u201cquoted\u201d"},
		{"header charset beats meta", "text/html; charset=utf-8", "<meta charset=\"iso-8859-1\"><title>Caf\xc3\xa9</title>", "Café"},
		{"utf-8 bom", "text/html", "\xef\xbb\xbf<title>Bom</title>", "Bom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if title := scan(t, tt.contentType, tt.body).Title; title != tt.want {
				t.Errorf("title = %q, want %q", title, tt.want)
			}
		})
	}
}

// The cap counts every kind: a page of images and anchors keeps the first
// 10,000 of them in document order, whatever their kind.
func TestScanHTMLCapsPerPage(t *testing.T) {
	var b strings.Builder
	for i := range maxLinks + 50 {
		if i%2 == 0 {
			fmt.Fprintf(&b, `<a href="/p%d">x</a>`, i)
		} else {
			fmt.Fprintf(&b, `<img src="/p%d">`, i)
		}
	}
	links := scan(t, "text/html", b.String()).Links
	if len(links) != maxLinks {
		t.Fatalf("got %d links, want the cap %d", len(links), maxLinks)
	}
	if first, last := links[0].URL, links[len(links)-1].URL; first != "http://example.com/p0" ||
		last != fmt.Sprintf("http://example.com/p%d", maxLinks-1) {
		t.Errorf("kept %q .. %q, want the first %d in document order", first, last, maxLinks)
	}
	if links[1].Kind != Requisite || links[2].Kind != Navigation {
		t.Errorf("kinds %v, %v; want requisite, navigation", links[1].Kind, links[2].Kind)
	}
}

// scan is ScanHTML of body as testPage, which must not fail.
func scan(t testing.TB, contentType, body string) Page {
	t.Helper()
	page, err := ScanHTML(testPage, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatalf("ScanHTML: %v", err)
	}
	return page
}

// linkURLs returns the links' URLs, checking that each link's host key and
// hash are what parsing its URL on its own gives: resolving a link and
// canonicalizing it from the same parse must not change the dedupe key.
func linkURLs(t *testing.T, links []Link) []string {
	t.Helper()
	var out []string
	for _, l := range links {
		again, err := frontier.ParseLink(l.URL)
		if err != nil || again != l.Link {
			t.Fatalf("link %+v parsed on its own gives %+v, %v", l, again, err)
		}
		out = append(out, l.URL)
	}
	return out
}

func TestScanBadDocumentURL(t *testing.T) {
	for _, page := range []string{"", "/relative", "mailto:a@example.com"} {
		if _, err := ScanHTML(page, "text/html", strings.NewReader(`<a href="x">x</a>`)); err == nil {
			t.Errorf("ScanHTML(page %q) succeeded, want an error", page)
		}
		if _, err := ScanCSS(page, "text/css", strings.NewReader(`a{b:url(x)}`)); err == nil {
			t.Errorf("ScanCSS(stylesheet %q) succeeded, want an error", page)
		}
	}
}

// Declared UTF-8 bodies skip the decoder; the links and title must be the
// same as through it, and a body that is not valid UTF-8, or that carries a
// UTF-16 BOM, must still be decoded.
func TestScanHTMLUTF8FastPath(t *testing.T) {
	tests := []struct {
		name, contentType string
		body              []byte
		title             string
	}{
		{"valid utf-8", "text/html; charset=UTF-8", []byte("<title>caf\u00e9</title><a href=/x>x</a>"), "caf\u00e9"},
		{"invalid bytes under utf-8", "text/html; charset=utf-8", []byte("<title>caf\xe9</title><a href=/x>x</a>"), "caf\ufffd"},
		{"utf-16 bom overrides utf-8", "text/html; charset=utf-8",
			[]byte("\xff\xfe<\x00t\x00i\x00t\x00l\x00e\x00>\x00h\x00i\x00<\x00/\x00t\x00i\x00t\x00l\x00e\x00>\x00<\x00a\x00 \x00h\x00r\x00e\x00f\x00=\x00/\x00x\x00>\x00"), "hi"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := scan(t, tt.contentType, string(tt.body))
			if got, title := linkURLs(t, page.Links), page.Title; title != tt.title || !slices.Equal(got, []string{"http://example.com/x"}) {
				t.Errorf("title %q, links %q; want %q and [http://example.com/x]", title, got, tt.title)
			}
		})
	}
}

// The quick reading of a Content-Type's charset and type agrees with
// mime.ParseMediaType wherever it answers.
func TestContentTypeQuickReadings(t *testing.T) {
	for _, ct := range []string{"text/html", "text/html; charset=UTF-8", "TEXT/HTML;charset=iso-8859-1", "text/html ; charset=utf-8",
		"text/html; charset=\"utf-8\"", "text/html; charset=utf-8; q=1", "text/html; CHARSET=Shift_JIS", "text/html;", "text/html; charset=",
		"text", "/html", "text/html/x", "application/xhtml+xml; charset=utf-8", " text/plain ", "text/html; foo=bar", "x/y; charset=a b"} {
		_, params, err := mime.ParseMediaType(ct)
		want := ""
		if err == nil {
			want = strings.ToLower(strings.TrimSpace(params["charset"]))
		}
		if got, ok := simpleCharset(ct); ok && got != want {
			t.Errorf("simpleCharset(%q) = %q, ParseMediaType's %q", ct, got, want)
		}
		if got := charsetParam(ct); got != want {
			t.Errorf("charsetParam(%q) = %q, want %q", ct, got, want)
		}
		if mt, _, err := mime.ParseMediaType(ct); err == nil && mediaType(ct) != mt {
			t.Errorf("mediaType(%q) = %q, ParseMediaType's %q", ct, mediaType(ct), mt)
		}
	}
}
