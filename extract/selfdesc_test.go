package extract

import (
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"breakwater/store"
)

func TestParseRobotsDirectives(t *testing.T) {
	for _, tt := range []struct {
		list string
		want store.Directives
	}{
		{"", 0},
		{"noindex", store.Noindex},
		{"noindex, nofollow", store.Noindex | store.Nofollow},
		{"NoIndex,NOFOLLOW", store.Noindex | store.Nofollow},
		{" nofollow ,noarchive ", store.Nofollow | store.Noarchive},
		{"none", store.Noindex | store.Nofollow},
		{"None, noarchive", store.Noindex | store.Nofollow | store.Noarchive},
		{"all", 0},
		{"index, follow", 0},
		{"noindex, unavailable_after: Monday, 25-Jun-2026 15:00:00 PST", store.Noindex},
		{"max-snippet: 20, max-image-preview: large, nofollow", store.Nofollow},
		{"noindex nofollow", 0}, // not a list: one unknown directive
		{"nofollowing, no-index", 0},
	} {
		if got := ParseRobotsDirectives(tt.list); got != tt.want {
			t.Errorf("ParseRobotsDirectives(%q) = %v, want %v", tt.list, got.Names(), tt.want.Names())
		}
	}
}

func TestParseLinkRel(t *testing.T) {
	for _, tt := range []struct {
		rel  string
		want store.LinkRel
	}{
		{"", 0},
		{"nofollow", store.RelNofollow},
		{"NoFollow", store.RelNofollow},
		{"noopener nofollow", store.RelNofollow},
		{"ugc\tnofollow", store.RelNofollow | store.RelUGC},
		{" sponsored ", store.RelSponsored},
		{"nofollow ugc sponsored", store.RelNofollow | store.RelUGC | store.RelSponsored},
		{"nofollow,ugc", 0}, // commas do not separate rel keywords
		{"noreferrer external", 0},
	} {
		if got := parseLinkRel(tt.rel); got != tt.want {
			t.Errorf("parseLinkRel(%q) = %v, want %v", tt.rel, got.Names(), tt.want.Names())
		}
	}
}

// linkFacts is a link's URL, text and rel, as the tables below want them.
type linkFacts struct {
	url, text string
	rel       store.LinkRel
}

func scanFacts(t *testing.T, body string) []linkFacts {
	t.Helper()
	page, err := ScanHTML(testPage, "text/html", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var out []linkFacts
	for _, l := range page.Links {
		out = append(out, linkFacts{l.URL, l.Text, l.Rel})
	}
	return out
}

func TestScanHTMLAnchorText(t *testing.T) {
	const d = "http://example.com/dir/"
	long := strings.Repeat("word ", 100)
	for _, tt := range []struct {
		name, body string
		want       []linkFacts
	}{
		{"text", `<a href="a">About us</a>`, []linkFacts{{d + "a", "About us", 0}}},
		{"whitespace collapsed", "<a href=a>\n  About\t\tthe\n\n team  </a>", []linkFacts{{d + "a", "About the team", 0}}},
		{"inline markup joins", `<a href=a>Ab<b>out</b> <em>us</em></a>`, []linkFacts{{d + "a", "About us", 0}}},
		{"blocks and br break words", `<a href=a><div>One</div><div>Two</div>Three<br>Four</a>`, []linkFacts{{d + "a", "One Two Three Four", 0}}},
		{"entities decoded", `<a href=a>Fish &amp; chips&nbsp;&lt;3</a>`, []linkFacts{{d + "a", "Fish & chips <3", 0}}},
		{"image alt when no text", `<a href=a><img src=logo.png alt=" Home  page "></a>`,
			[]linkFacts{{d + "a", "Home page", 0}, {d + "logo.png", "Home page", 0}}},
		{"text wins over alt", `<a href=a><img src=i.png alt="icon"> Settings</a>`,
			[]linkFacts{{d + "a", "Settings", 0}, {d + "i.png", "icon", 0}}},
		{"first image with alt", `<a href=a><img src=1.png alt=""><img src=2.png alt="second"></a>`,
			[]linkFacts{{d + "a", "second", 0}, {d + "1.png", "", 0}, {d + "2.png", "second", 0}}},
		{"image outside an anchor lends nothing", `<img src=i.png alt="x"><a href=a></a>`,
			[]linkFacts{{d + "i.png", "x", 0}, {d + "a", "", 0}}},
		{"area alt", `<map><area href=m alt="North  wing"></map>`, []linkFacts{{d + "m", "North wing", 0}}},
		{"script and style are not text", `<a href=a>Go<script>var x = "no";</script><style>p{}</style>!</a>`,
			[]linkFacts{{d + "a", "Go!", 0}}},
		{"unclosed anchor ends at the next", `<a href=a>one <a href=b>two`, []linkFacts{{d + "a", "one", 0}, {d + "b", "two", 0}}},
		{"first text of a URL linked twice", `<a href=a></a><a href=a>later</a><a href=a>last</a>`, []linkFacts{{d + "a", "later", 0}}},
		{"capped at 200 runes", `<a href=a>` + long + `</a>`, []linkFacts{{d + "a", strings.TrimSpace(long[:200]), 0}}},
		{"legacy bytes decoded", "<a href=a>caf\xe9</a>", []linkFacts{{d + "a", "caf\u00e9", 0}}},
		{"text after a late base", `<a href=a>Before</a><base href="/b/"><a href=c>After</a>`,
			[]linkFacts{{"http://example.com/b/a", "Before", 0}, {"http://example.com/b/c", "After", 0}}},
		{"rel values", `<a href=a rel="nofollow">x</a><a href=b rel="UGC NoFollow">y</a><a href=c rel="sponsored noopener">z</a>`,
			[]linkFacts{{d + "a", "x", store.RelNofollow}, {d + "b", "y", store.RelNofollow | store.RelUGC}, {d + "c", "z", store.RelSponsored}}},
		{"area rel", `<area href=m rel=nofollow>`, []linkFacts{{d + "m", "", store.RelNofollow}}},
		{"one followed link makes a URL followed", `<a href=a rel=nofollow>x</a><a href=a>y</a><a href=b>y</a><a href=b rel=nofollow>z</a>`,
			[]linkFacts{{d + "a", "x", 0}, {d + "b", "y", 0}}},
		{"rel of a requisite's link is not read", `<link rel="stylesheet nofollow" href=s.css>`, []linkFacts{{d + "s.css", "", 0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := scanFacts(t, tt.body); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("links\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

// What a page says about itself: each field alone, then together.
func TestScanHTMLPageFacts(t *testing.T) {
	none := store.Noindex | store.Nofollow
	for _, tt := range []struct {
		name, token, body string
		want              Page
	}{
		{"meta robots", "", `<meta name="robots" content="noindex, nofollow">`, Page{Robots: none}},
		{"meta robots in any case", "", `<META NAME="Robots" CONTENT="NoArchive">`, Page{Robots: store.Noarchive}},
		{"none", "", `<meta name=robots content=none>`, Page{Robots: none}},
		{"several metas add up", "", `<meta name=robots content=noindex><meta name=robots content="noarchive, max-snippet:10">`,
			Page{Robots: store.Noindex | store.Noarchive}},
		{"our product token", "breakwater", `<meta name="BreakWater" content="nofollow">`, Page{Robots: store.Nofollow}},
		{"another crawler's token", "breakwater", `<meta name="googlebot" content="noindex, nofollow">`, Page{}},
		{"no token, no named meta", "", `<meta name="breakwater" content="nofollow">`, Page{}},
		{"robots and token together", "breakwater", `<meta name=robots content=noarchive><meta name=breakwater content=noindex>`,
			Page{Robots: store.Noindex | store.Noarchive}},
		{"unavailable_after ignored", "", `<meta name=robots content="unavailable_after: 2026-07-01">`, Page{}},
		{"canonical", "", `<link rel="canonical" href="/dir/page">`, Page{Canonical: "http://example.com/dir/page"}},
		{"canonical relative, first wins", "", `<link rel=Canonical href="other.html#frag"><link rel=canonical href="/x">`,
			Page{Canonical: "http://example.com/dir/other.html"}},
		{"canonical after a late base", "", `<link rel=canonical href=c><base href="http://base.example/">`,
			Page{Canonical: "http://base.example/c"}},
		{"canonical unusable", "", `<link rel=canonical href="javascript:x">`, Page{}},
		{"alternates", "", `<link rel=alternate hreflang=de href="/de/"><link rel="alternate" hreflang="x-default" href="http://example.com/">
			<link rel=alternate type="application/rss+xml" href="/feed">`,
			Page{Alternates: []store.Alternate{{Hreflang: "de", URL: "http://example.com/de/"}, {Hreflang: "x-default", URL: "http://example.com/"}}}},
		{"description", "", "<meta name=description content=\"  A page\n about   things \">", Page{Description: "A page about things"}},
		{"first description", "", `<meta name=Description content=one><meta name=description content=two>`, Page{Description: "one"}},
		{"h1", "", `<h1> Welcome <span>home</span></h1><h1>Second</h1>`, Page{H1: "Welcome home"}},
		{"h1 in an svg is not the page's", "", `<svg><h1>no</h1></svg><h1>yes</h1>`, Page{H1: "yes"}},
		{"lang", "", `<html lang=" en-GB "><html lang=fr>`, Page{Lang: "en-GB"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ScanHTMLWith(testPage, "text/html", strings.NewReader(tt.body), ScanOptions{ProductToken: tt.token})
			if err != nil {
				t.Fatal(err)
			}
			got.Links = nil
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("page\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestScanHTMLPageFactsCapped(t *testing.T) {
	long := strings.Repeat("é", 2000)
	body := `<html lang="` + long + `"><meta name=description content="` + long + `"><h1>` + long + `</h1>`
	for i := range 150 {
		body += `<link rel=alternate hreflang=l` + string(rune('a'+i%26)) + ` href="/` + string(rune('a'+i%26)) + `">`
	}
	page, err := ScanHTML(testPage, "text/html", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, tt := range map[string]struct {
		s   string
		max int
	}{"lang": {page.Lang, maxLangRunes}, "description": {page.Description, maxDescriptionRunes}, "h1": {page.H1, maxH1Runes}} {
		if n := utf8.RuneCountInString(tt.s); n != tt.max {
			t.Errorf("%s: %d runes, want the cap %d", name, n, tt.max)
		}
	}
	if len(page.Alternates) != maxAlternates {
		t.Errorf("%d alternates, want the cap %d", len(page.Alternates), maxAlternates)
	}
}

func TestTextBuf(t *testing.T) {
	for _, tt := range []struct {
		parts []string
		max   int
		want  string
	}{
		{[]string{"  a  ", " b", "c "}, 10, "a bc"},
		{[]string{"caf\xe9\xff"}, 10, "caf\uFFFD\uFFFD"},
		{[]string{"abc", "def"}, 4, "abcd"},
		{[]string{"ab  ", "  cd"}, 3, "ab"},
		{[]string{"\u00a0\u2003x\u3000"}, 5, "x"},
	} {
		var b textBuf
		b.reset(tt.max)
		for _, p := range tt.parts {
			b.add([]byte(p))
		}
		if got := b.String(); got != tt.want || !utf8.ValidString(got) {
			t.Errorf("%q (max %d) gathered as %q, want %q", tt.parts, tt.max, got, tt.want)
		}
	}
}
