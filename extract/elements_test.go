package extract

import (
	"fmt"
	"slices"
	"testing"
)

// want is one expected link: kind, element, attribute and URL.
type want struct {
	kind          Kind
	element, attr string
	url           string
}

func (w want) String() string { return fmt.Sprintf("%v %s %s %s", w.kind, w.element, w.attr, w.url) }

// got returns the links as wants, checking their keys (linkURLs).
func got(t *testing.T, links []Link) []want {
	t.Helper()
	linkURLs(t, links)
	var out []want
	for _, l := range links {
		out = append(out, want{l.Kind, l.Element, l.Attr, l.URL})
	}
	return out
}

const dir = "http://example.com/dir/"

// TestScanHTMLElements is the table of where links come from: each element
// and attribute, with the kind it yields. The page is testPage.
func TestScanHTMLElements(t *testing.T) {
	req := func(element, attr, path string) want { return want{Requisite, element, attr, dir + path} }
	tests := []struct {
		name, body string
		want       []want
	}{
		{"a href", `<a href="n.html">n</a>`, []want{{Navigation, "a", "href", dir + "n.html"}}},
		{"area href", `<map><area href="m.html"></map>`, []want{{Navigation, "area", "href", dir + "m.html"}}},
		{"iframe src", `<iframe src="f.html"></iframe>`, []want{{Frame, "iframe", "src", dir + "f.html"}}},
		{"frame src", `<frameset><frame src="f.html"></frameset>`, []want{{Frame, "frame", "src", dir + "f.html"}}},
		{"img src", `<img src="i.png">`, []want{req("img", "src", "i.png")}},
		{"img srcset with descriptors", `<img srcset="i-1.png 1x, i-2.png 2x">`,
			[]want{req("img", "srcset", "i-1.png"), req("img", "srcset", "i-2.png")}},
		{"img src and srcset", `<img srcset="s.png 300w, t.png 600w" src="i.png" sizes="50vw">`,
			[]want{req("img", "src", "i.png"), req("img", "srcset", "s.png"), req("img", "srcset", "t.png")}},
		{"picture source srcset", `<picture><source type="image/webp" srcset="p.webp 1x, p2.webp 2x"><img src="p.jpg"></picture>`,
			[]want{req("source", "srcset", "p.webp"), req("source", "srcset", "p2.webp"), req("img", "src", "p.jpg")}},
		{"video src and poster", `<video src="v.mp4" poster="v.jpg"></video>`,
			[]want{req("video", "src", "v.mp4"), req("video", "poster", "v.jpg")}},
		{"audio src", `<audio src="a.ogg"></audio>`, []want{req("audio", "src", "a.ogg")}},
		{"source and track src", `<video><source src="v.webm" type="video/webm"><track src="v.vtt" kind="subtitles"></video>`,
			[]want{req("source", "src", "v.webm"), req("track", "src", "v.vtt")}},
		{"embed src", `<embed src="e.swf">`, []want{req("embed", "src", "e.swf")}},
		{"object data", `<object data="o.svg" type="image/svg+xml"></object>`, []want{req("object", "data", "o.svg")}},
		{"input type=image", `<input type="image" src="b.png"><input type=" IMAGE " src="c.png">`,
			[]want{req("input", "src", "b.png"), req("input", "src", "c.png")}},
		{"input of other types", `<input type="text" src="t.png"><input src="u.png">`, nil},
		{"script src", `<script src="s.js"></script><script type="module" src="m.js"></script>`,
			[]want{req("script", "src", "s.js"), req("script", "src", "m.js")}},
		{"inline script is not scanned", `<script>document.write('<img src="x.png">')</script>`, nil},
		{"svg image href", `<svg><image href="i.svg" width="10" height="10"/></svg>`, []want{req("image", "href", "i.svg")}},
		{"svg image xlink:href", `<svg><image xlink:href="x.svg"/></svg>`, []want{req("image", "xlink:href", "x.svg")}},
		{"svg use, sprite and local", `<svg><use href="sprite.svg#icon"/><use xlink:href="#local"/></svg>`,
			[]want{req("use", "href", "sprite.svg")}},
		{"style attribute", `<div style="background: url(bg.png) no-repeat">x</div><p style='background-image:url("q.png")'>`,
			[]want{req("div", "style", "bg.png"), req("p", "style", "q.png")}},
		{"style attribute with a src", `<img src="i.png" style="background:url('placeholder.png')">`,
			[]want{req("img", "src", "i.png"), req("img", "style", "placeholder.png")}},
		{"style element", `<style>@import "base.css"; @import url(print.css) print;
			body { background: url( "paper.png" ) } .h { background: image-set("h1.png" 1x, "h2.png" 2x) }</style>`,
			[]want{req("style", "@import", "base.css"), req("style", "@import", "print.css"), req("style", "url", "paper.png"),
				req("style", "image-set", "h1.png"), req("style", "image-set", "h2.png")}},
		{"style element, entities not decoded", `<style>a{b:url(x&amp;y.png)}</style>`, []want{req("style", "url", "x&amp;y.png")}},
		{"noscript is raw text, as with scripts on", `<noscript><img src="n.png"></noscript>`, nil},
		{"upper case names", `<IMG SRC="u.png"><LINK REL="STYLESHEET" HREF="u.css">`,
			[]want{req("img", "src", "u.png"), req("link", "href", "u.css")}},
		{"entities in attributes", `<img src="i.php?a=1&amp;b=2">`, []want{req("img", "src", "i.php?a=1&b=2")}},
		{"first of duplicate attributes", `<img src="first.png" src="second.png">`, []want{req("img", "src", "first.png")}},
		{"data: and javascript: dropped", `<img src="data:image/png;base64,iVBORw0KGgo=">
			<img srcset="data:image/gif;base64,R0lGOD,lhAQ 1x, ok.png 2x"><script src="javascript:void(0)"></script>
			<link rel=stylesheet href="data:text/css,a{}"><div style="background:url(data:image/png;base64,AAAA)">
			<iframe src="javascript:''"></iframe><a href="javascript:go()">`,
			[]want{req("img", "srcset", "ok.png")}},
		{"empty and fragment-only dropped", `<img src=""><img src="#x"><img srcset=" , "><div style="filter:url(#blur)">`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := got(t, scan(t, "text/html", tt.body).Links); !slices.Equal(g, tt.want) {
				t.Errorf("links:\n got %v\nwant %v", g, tt.want)
			}
		})
	}
}

// TestScanHTMLLinkRel: a <link> is a requisite when one of its rel
// keywords (space-separated, any case) is one that makes the page.
func TestScanHTMLLinkRel(t *testing.T) {
	tests := []struct {
		rel  string
		want bool
	}{
		{"stylesheet", true},
		{"alternate stylesheet", true},
		{"StyleSheet", true},
		{"icon", true},
		{"shortcut icon", true},
		{"SHORTCUT  ICON", true},
		{"\ticon\n", true},
		{"preload", true},
		{"modulepreload", true},
		{"manifest", true},
		{"apple-touch-icon", true},
		{"apple-touch-icon-precomposed", true},
		{"canonical", false},
		{"alternate", false},
		{"next", false},
		{"dns-prefetch", false},
		{"stylesheets", false},
		{"", false},
	}
	for _, tt := range tests {
		body := `<link rel="` + tt.rel + `" href="l.res">`
		var w []want
		if tt.want {
			w = []want{{Requisite, "link", "href", dir + "l.res"}}
		}
		if g := got(t, scan(t, "text/html", body).Links); !slices.Equal(g, w) {
			t.Errorf("rel %q: got %v, want %v", tt.rel, g, w)
		}
	}
	if g := scan(t, "text/html", `<link href="no-rel.css">`).Links; len(g) != 0 {
		t.Errorf("a link without rel gave %v", g)
	}
}

// TestScanHTMLKindsOfOneURL: a URL found as two kinds is kept once, at its
// first place, with the greater kind and where that came from.
func TestScanHTMLKindsOfOneURL(t *testing.T) {
	tests := []struct {
		name, body string
		want       []want
	}{
		{"anchor then image", `<a href="big.jpg"><img src="thumb.jpg"></a><img src="big.jpg">`,
			[]want{{Requisite, "img", "src", dir + "big.jpg"}, {Requisite, "img", "src", dir + "thumb.jpg"}}},
		{"image then anchor", `<img src="big.jpg"><a href="big.jpg">`, []want{{Requisite, "img", "src", dir + "big.jpg"}}},
		{"anchor then frame", `<a href="f.html">f</a><iframe src="f.html"></iframe>`, []want{{Frame, "iframe", "src", dir + "f.html"}}},
		{"frame then image", `<iframe src="x"></iframe><img src="x">`, []want{{Frame, "iframe", "src", dir + "x"}}},
		{"same requisite twice keeps the first origin", `<img src="i.png"><link rel=preload href="i.png" as=image>`,
			[]want{{Requisite, "img", "src", dir + "i.png"}}},
		{"fragments do not make two URLs", `<a href="p.html#a">a</a><a href="p.html#b">b</a><object data="p.html#c">`,
			[]want{{Requisite, "object", "data", dir + "p.html"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if g := got(t, scan(t, "text/html", tt.body).Links); !slices.Equal(g, tt.want) {
				t.Errorf("links:\n got %v\nwant %v", g, tt.want)
			}
		})
	}
}

// TestScanHTMLBase: every kind of link, the CSS ones included, is relative
// to the first <base href>, also one that comes after them.
func TestScanHTMLBase(t *testing.T) {
	const b = "http://cdn.example/assets/"
	body := `<img src="i.png" srcset="i2.png 2x"><a href="page.html">p</a><div style="background:url(bg.png)"></div>
		<style>@import "s.css"; a{b:url(../up.png)}</style><base href="http://cdn.example/assets/"><base href="/ignored/">
		<script src="/root.js"></script><iframe src="f.html"></iframe>`
	w := []want{
		{Requisite, "img", "src", b + "i.png"}, {Requisite, "img", "srcset", b + "i2.png"},
		{Navigation, "a", "href", b + "page.html"}, {Requisite, "div", "style", b + "bg.png"},
		{Requisite, "style", "@import", b + "s.css"}, {Requisite, "style", "url", "http://cdn.example/up.png"},
		{Requisite, "script", "src", "http://cdn.example/root.js"}, {Frame, "iframe", "src", b + "f.html"},
	}
	if g := got(t, scan(t, "text/html", body).Links); !slices.Equal(g, w) {
		t.Errorf("links:\n got %v\nwant %v", g, w)
	}
}
