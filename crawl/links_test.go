package crawl

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"breakwater/frontier"
)

const testPage = "http://example.com/dir/page.html"

func TestExtractLinks(t *testing.T) {
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
		{"area yes, link and a-without-href no", "text/html", `<map><area href="/map1"></map><a name="anchor">x</a>
			<link rel="stylesheet" href="/style.css"><img src="/i.png">`,
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
			_, links, err := ExtractLinks(testPage, tt.contentType, []byte(tt.body))
			if err != nil {
				t.Fatalf("ExtractLinks: %v", err)
			}
			if got := linkURLs(t, links); !slices.Equal(got, tt.want) {
				t.Errorf("links:\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestExtractTitle(t *testing.T) {
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
			title, _, err := ExtractLinks(testPage, tt.contentType, []byte(tt.body))
			if err != nil {
				t.Fatalf("ExtractLinks: %v", err)
			}
			if title != tt.want {
				t.Errorf("title = %q, want %q", title, tt.want)
			}
		})
	}
}

func TestExtractLinksCapsPerPage(t *testing.T) {
	var b strings.Builder
	for i := range maxLinksPerPage + 50 {
		fmt.Fprintf(&b, `<a href="/p%d">x</a>`, i)
	}
	_, links, err := ExtractLinks(testPage, "text/html", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != maxLinksPerPage {
		t.Fatalf("got %d links, want the cap %d", len(links), maxLinksPerPage)
	}
	if first, last := links[0].URL, links[len(links)-1].URL; first != "http://example.com/p0" ||
		last != fmt.Sprintf("http://example.com/p%d", maxLinksPerPage-1) {
		t.Errorf("kept %q .. %q, want the first %d in document order", first, last, maxLinksPerPage)
	}
}

// linkURLs returns the links' URLs, checking that each link's host key and
// hash are what parsing its URL on its own gives: resolving a link and
// canonicalizing it from the same parse must not change the dedupe key.
func linkURLs(t *testing.T, links []frontier.Link) []string {
	t.Helper()
	var out []string
	for _, l := range links {
		again, err := frontier.ParseLink(l.URL)
		if err != nil || again != l {
			t.Fatalf("link %+v parsed on its own gives %+v, %v", l, again, err)
		}
		out = append(out, l.URL)
	}
	return out
}

func TestExtractLinksBadPageURL(t *testing.T) {
	for _, page := range []string{"", "/relative", "mailto:a@example.com"} {
		if _, _, err := ExtractLinks(page, "text/html", []byte(`<a href="x">x</a>`)); err == nil {
			t.Errorf("ExtractLinks(page %q) succeeded, want an error", page)
		}
	}
}

func FuzzExtractLinks(f *testing.F) {
	f.Add("text/html", []byte(`<base href="/b/"><title>t</title><a href="x#f">x</a><area href="javascript:x">`))
	f.Add("", []byte("<meta charset=iso-8859-1><title>\xe9</title><a href='//h/p'>"))
	f.Add("text/html; charset=shift_jis", []byte("<a href=\"\x82\xa0\">"))
	f.Add("application/xhtml+xml", []byte(`<a href="<a href=">`))
	f.Fuzz(func(t *testing.T, contentType string, body []byte) {
		title, links, err := ExtractLinks(testPage, contentType, body)
		if err != nil {
			t.Fatalf("ExtractLinks errored on a valid page URL: %v", err)
		}
		if utf8.RuneCountInString(title) > maxTitleRunes || len(links) > maxLinksPerPage {
			t.Fatalf("title of %d runes, %d links", utf8.RuneCountInString(title), len(links))
		}
		seen := make(map[string]bool)
		for _, l := range linkURLs(t, links) {
			if !strings.HasPrefix(l, "http://") && !strings.HasPrefix(l, "https://") || strings.Contains(l, "#") || seen[l] {
				t.Fatalf("bad or duplicate link %q", l)
			}
			seen[l] = true
		}
	})
}

// benchPage is about 30 KB of HTML with 100 links.
func benchPage() []byte {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Benchmark page</title></head><body>\n")
	for i := range 100 {
		fmt.Fprintf(&b, "<div class=\"item\"><h2>Item %d</h2><p>%s</p><a href=\"/section/%d/item-%d.html?ref=list#top\">more</a></div>\n",
			i, strings.Repeat("Lorem ipsum dolor sit amet. ", 9), i%7, i)
	}
	b.WriteString("</body></html>")
	return []byte(b.String())
}

func BenchmarkExtractLinks(b *testing.B) {
	page := benchPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if _, links, err := ExtractLinks(testPage, "text/html; charset=utf-8", page); err != nil || len(links) != 100 {
			b.Fatalf("got %d links, err %v", len(links), err)
		}
	}
}

// Declared UTF-8 bodies skip the decoder; the links and title must be the
// same as through it, and a body that is not valid UTF-8, or that carries a
// UTF-16 BOM, must still be decoded.
func TestExtractLinksUTF8FastPath(t *testing.T) {
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
			title, links, err := ExtractLinks(testPage, tt.contentType, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if got := linkURLs(t, links); title != tt.title || !slices.Equal(got, []string{"http://example.com/x"}) {
				t.Errorf("title %q, links %q; want %q and [http://example.com/x]", title, got, tt.title)
			}
		})
	}
}
