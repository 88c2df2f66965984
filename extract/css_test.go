package extract

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

const testSheet = "http://example.com/css/site.css"

// TestScanCSS is the table of what a stylesheet loads: @import in each
// form, url() quoted, bare and escaped, image-set(), and what is not a URL.
func TestScanCSS(t *testing.T) {
	const d = "http://example.com/css/"
	imp := func(path string) want { return want{Requisite, "@import", "", d + path} }
	url := func(path string) want { return want{Requisite, "url", "", d + path} }
	tests := []struct {
		name, contentType, body string
		want                    []want
	}{
		{"@import string", "text/css", `@import "a.css";`, []want{imp("a.css")}},
		{"@import single-quoted", "text/css", `@import 'a.css';`, []want{imp("a.css")}},
		{"@import url()", "text/css", `@import url(a.css);`, []want{imp("a.css")}},
		{"@import url() quoted, with media", "text/css", `@import url("a.css") screen;`, []want{imp("a.css")}},
		{"@import url() spaced, with a query", "text/css", `@import url( 'a.css' ) screen and (min-width: 600px);`, []want{imp("a.css")}},
		{"@import with layer and supports", "text/css", `@import "a.css" layer(base) supports(display: grid);`, []want{imp("a.css")}},
		{"@import in capitals, no space", "text/css", `@IMPORT"a.css";@Import url(b.css);`, []want{imp("a.css"), imp("b.css")}},
		{"@import with a comment before", "text/css", `@import /* why */ "a.css";`, []want{imp("a.css")}},
		{"@import of nothing usable", "text/css", `@import foo; @import ; p{background:url(x.png)}`, []want{url("x.png")}},
		{"url() bare", "text/css", `a{background:url(i.png)}`, []want{url("i.png")}},
		{"url() double-quoted", "text/css", `a{background:url("i.png")}`, []want{url("i.png")}},
		{"url() single-quoted", "text/css", `a{background:url('i.png')}`, []want{url("i.png")}},
		{"url() with spaces", "text/css", "a{background:url(  i.png\t)} b{background:url(\n \"j.png\" )}", []want{url("i.png"), url("j.png")}},
		{"URL() in capitals", "text/css", `a{background:URL(i.png)}`, []want{url("i.png")}},
		{"url() with an escaped name", "text/css", `a{background:u\rl(i.png)}`, []want{url("i.png")}},
		{"escaped parentheses", "text/css", `a{background:url(a\(1\).png)}`, []want{url("a(1).png")}},
		{"escaped quote in a string", "text/css", `a{background:url("a\"b.png")}`, []want{url("a%22b.png")}},
		{"hex escapes", "text/css", `a{background:url(\61.png); b:url("\000062 .png")}`, []want{url("a.png"), url("b.png")}},
		{"escaped space", "text/css", `a{background:url(a\ b.png)}`, []want{url("a%20b.png")}},
		{"line continuation in a string", "text/css", "a{background:url(\"a\\\nb.png\")}", []want{url("ab.png")}},
		{"relative forms", "text/css", `a{b:url(../img/up.png);c:url(/root.png);d:url(//cdn.example/x.png);e:url(http://o.example/y.png)}`,
			[]want{{Requisite, "url", "", "http://example.com/img/up.png"}, {Requisite, "url", "", "http://example.com/root.png"},
				{Requisite, "url", "", "http://cdn.example/x.png"}, {Requisite, "url", "", "http://o.example/y.png"}}},
		{"font-face", "text/css", `@font-face{font-family:F;src:url(f.woff2) format("woff2"),url('f.woff') format('woff')}`,
			[]want{url("f.woff2"), url("f.woff")}},
		{"image-set", "text/css", `a{background:image-set("a.png" 1x, url(b.png) 2x); c:-webkit-image-set('c.png' 1x)}`,
			[]want{{Requisite, "image-set", "", d + "a.png"}, url("b.png"), {Requisite, "image-set", "", d + "c.png"}}},
		{"strings elsewhere are not URLs", "text/css", `a::before{content:"x.png"} b{font-family:"y.png"} c{d:format("z.png")}`, nil},
		{"nested function inside image-set", "text/css", `a{b:image-set(linear-gradient("no.png") 1x, "yes.png" 2x)}`,
			[]want{{Requisite, "image-set", "", d + "yes.png"}}},
		{"@namespace is not fetched", "text/css", `@namespace url(http://www.w3.org/1999/xhtml); @namespace svg "http://www.w3.org/2000/svg"; a{b:url(x.png)}`,
			[]want{url("x.png")}},
		{"comments hide URLs", "text/css", `/* url(no.png) @import "no.css"; */ a{b:url(yes.png)}`, []want{url("yes.png")}},
		{"bad url() skipped", "text/css", `a{b:url(a b.png)} c{d:url(x"y)} e{f:url(ok.png)}`, []want{url("ok.png")}},
		{"self, fragments, data and javascript dropped", "text/css",
			`a{b:url();c:url("");d:url(#f);e:url(data:image/png;base64,AAAA);f:url(javascript:x);g:url(mailto:a@b)}`, nil},
		{"duplicates kept once", "text/css", `a{b:url(x.png)} c{d:url("x.png")} e{f:url(./x.png#frag)}`, []want{url("x.png")}},
		{"unterminated at the end", "text/css", `@import "a.css`, []want{imp("a.css")}},
		{"unterminated url() at the end", "text/css", `a{b:url(x.png`, []want{url("x.png")}},
		{"latin-1 from the Content-Type", "text/css; charset=iso-8859-1", "a{b:url(caf\xe9.png)}", []want{url("caf%C3%A9.png")}},
		{"@charset rule", "text/css", "@charset \"iso-8859-1\";a{b:url(caf\xe9.png)}", []want{url("caf%C3%A9.png")}},
		{"Content-Type charset beats @charset", "text/css; charset=utf-8", "@charset \"iso-8859-1\";a{b:url(caf\xc3\xa9.png)}",
			[]want{url("caf%C3%A9.png")}},
		{"utf-16 @charset means utf-8", "", "@charset \"utf-16\";a{b:url(caf\xc3\xa9.png)}", []want{url("caf%C3%A9.png")}},
		{"utf-8 BOM", "", "\xef\xbb\xbfa{b:url(x.png)}", []want{url("x.png")}},
		{"utf-16le BOM", "text/css; charset=iso-8859-1", "\xff\xfeu\x00r\x00l\x00(\x00x\x00.\x00p\x00n\x00g\x00)\x00", []want{url("x.png")}},
		{"empty", "text/css", ``, nil},
		{"in a style attribute's form", "", `background: url(bg.png) no-repeat, url("bg2.png")`, []want{url("bg.png"), url("bg2.png")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			links, err := ScanCSS(testSheet, tt.contentType, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if g := got(t, links); !slices.Equal(g, tt.want) {
				t.Errorf("links:\n got %v\nwant %v", g, tt.want)
			}
		})
	}
}

// realisticCSS is about 20 KB of stylesheet: imports, fonts, backgrounds
// and a lot of rules without URLs.
func realisticCSS() []byte {
	var b strings.Builder
	b.WriteString("@charset \"utf-8\";\n@import url(\"reset.css\");\n@import 'theme.css' screen;\n")
	b.WriteString("@font-face { font-family: Inter; src: url(/fonts/inter.woff2) format(\"woff2\"), url(/fonts/inter.woff) format(\"woff\"); }\n")
	for i := range 150 {
		fmt.Fprintf(&b, ".c%d > a:hover, .c%d .title::after { color: #%06x; margin: %dpx 0 1.5em; transition: opacity .2s ease-in-out; }\n", i, i, i*4099, i%17)
		if i%10 == 0 {
			fmt.Fprintf(&b, ".bg%d { background: #fff url('../img/bg-%d.png') no-repeat 50%% 0 / cover; }\n", i, i)
		}
	}
	b.WriteString("/* sprites */ .icon { background-image: image-set(\"../img/i.png\" 1x, \"../img/i@2x.png\" 2x); }\n")
	return []byte(b.String())
}

// A stylesheet read a byte at a time, or lexed in windows of any size,
// gives the links of lexing it whole.
func TestScanCSSStreams(t *testing.T) {
	sheet := realisticCSS()
	whole, err := scanCSS(testSheet, "text/css", bytes.NewReader(sheet), len(sheet)+cssLookahead+1)
	if err != nil || len(whole) != 21 {
		t.Fatalf("whole: %d links, %v; want 21", len(whole), err)
	}
	oneByte, err := ScanCSS(testSheet, "text/css", iotest.OneByteReader(bytes.NewReader(sheet)))
	if err != nil || !slices.Equal(oneByte, whole) {
		t.Fatalf("a byte at a time: %d links, %v", len(oneByte), err)
	}
	for window := cssLookahead + 1; window < 300; window++ {
		links, err := scanCSS(testSheet, "text/css", iotest.OneByteReader(bytes.NewReader(sheet)), window)
		if err != nil || !slices.Equal(links, whole) {
			t.Fatalf("windows of %d bytes: %v, %v\nwant %v", window, got(t, links), err, got(t, whole))
		}
	}
}

// A token longer than a window (a long comment, a long data: URL) makes
// the window grow, and one over maxTokenBytes ends the scan.
func TestScanCSSLongTokens(t *testing.T) {
	long := "a{b:url(first.png)} /*" + strings.Repeat("url(no.png) ", 20000) + "*/ c{d:url(data:image/png;base64," +
		strings.Repeat("A", 100000) + ")} e{f:url(last.png)}"
	links, err := scanCSS(testSheet, "text/css", strings.NewReader(long), 64)
	if g := got(t, links); err != nil || len(g) != 2 || g[0].url != "http://example.com/css/first.png" || g[1].url != "http://example.com/css/last.png" {
		t.Fatalf("got %v, %v; want first.png and last.png", g, err)
	}
	huge := "a{b:url(first.png)} /*" + strings.Repeat("x", maxTokenBytes+1) + "*/ e{f:url(after.png)}"
	links, err = ScanCSS(testSheet, "text/css", strings.NewReader(huge))
	if g := got(t, links); err != nil || len(g) != 1 || g[0].url != "http://example.com/css/first.png" {
		t.Fatalf("got %v, %v; want first.png alone", g, err)
	}
}

func TestScanCSSCaps(t *testing.T) {
	var b strings.Builder
	for i := range maxLinks + 10 {
		fmt.Fprintf(&b, ".a%d{background:url(/i/%d.png)}\n", i, i)
	}
	links, err := ScanCSS(testSheet, "text/css", strings.NewReader(b.String()))
	if err != nil || len(links) != maxLinks || links[maxLinks-1].URL != fmt.Sprintf("http://example.com/i/%d.png", maxLinks-1) {
		t.Fatalf("%d links (%v); want the first %d", len(links), err, maxLinks)
	}
}
