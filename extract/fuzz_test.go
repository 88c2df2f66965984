package extract_test

import (
	"bytes"
	"mime"
	neturl "net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"unicode/utf8"

	"breakwater/extract"
	"breakwater/frontier"
	"breakwater/store"
)

// testPage is the page URL of the seeds that have one.
const testPage = "http://example.com/dir/page.html"

// FuzzScanHTML feeds ScanHTML arbitrary bytes under an arbitrary page URL
// and Content-Type, through its exported API only. It must never panic and
// never fail with a usable page URL. The title is valid UTF-8 of at most
// 512 runes. Every link is a requestable http(s) URL without a fragment
// whose host key and hash are those of its canonical form, of a valid kind
// from an element and attribute of that kind; there are no duplicates and
// at most 10,000 links. A navigation link or frame is an attribute value,
// so there are never more of them than the body has "=" bytes (every
// charset the decoder knows writes "=", "(" and "@" as their ASCII bytes),
// and a body with none of "=", "(", "@" has no links at all (a <style>
// element's url() or @import needs one). A body declared as something
// other than HTML yields nothing, and the same input gives the same answer
// twice.
func FuzzScanHTML(f *testing.F) {
	f.Add(testPage, "text/html", []byte(`<base href="/b/"><title>t</title><a href="x#f">x</a><area href="javascript:x">`))
	f.Add(testPage, "", []byte("<meta charset=iso-8859-1><title>\xe9</title><a href='//h/p'>"))
	f.Add(testPage, "text/html; charset=shift_jis", []byte("<a href=\"\x82\xa0\">"))
	f.Add(testPage, "application/xhtml+xml", []byte(`<a href="<a href=">`))
	f.Add(testPage, "text/html", []byte(`<img src=a.png srcset="b.png 2x, c.png 300w"><a href=a.png><iframe src=a.png>`))
	f.Add(testPage, "text/html", []byte(`<style>@import "s.css"; p{background:url(i.png)}</style><p style="background:url('j.png')">`))
	f.Add(testPage, "text/html", []byte(`<link rel="Shortcut Icon" href=/f.ico><svg><use xlink:href="s.svg#i"/><image href=i.svg /></svg>`))
	f.Add(testPage, "text/html", []byte(`<html lang=en><meta name=robots content="noindex, NOFOLLOW"><meta name=description content=d>`+
		`<link rel=canonical href=/c><link rel=alternate hreflang=de href=/de><h1>T<br>x</h1><a href=a rel="nofollow ugc">t<img alt=i></a>`))
	f.Fuzz(func(t *testing.T, pageURL, contentType string, body []byte) {
		page, err := extract.ScanHTML(pageURL, contentType, bytes.NewReader(body))
		if err != nil {
			if _, perr := frontier.ParseBaseURL(pageURL); perr == nil {
				t.Fatalf("ScanHTML(%q, %q) failed with a usable page URL: %v", pageURL, contentType, err)
			}
			if page.Title != "" || page.Links != nil {
				t.Fatalf("an error, and a title %q and %d links too", page.Title, len(page.Links))
			}
			return
		}
		title, links := page.Title, page.Links
		if n := utf8.RuneCountInString(title); n > 512 || !utf8.ValidString(title) {
			t.Fatalf("title %q: %d runes (the cap is 512), or not valid UTF-8", title, n)
		}
		if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt != "text/html" && mt != "application/xhtml+xml" && len(links)+len(title) > 0 {
			t.Fatalf("Content-Type %q is not HTML, yet title %q and %d links", contentType, title, len(links))
		}
		checkLinks(t, links)
		attrValues := 0
		for _, l := range links {
			if l.Kind != extract.Requisite {
				attrValues++
			}
		}
		if eq := bytes.Count(body, []byte("=")); attrValues > eq {
			t.Fatalf("%d navigation links and frames from a body with %d '=' bytes", attrValues, eq)
		}
		if len(links) > 0 && !bytes.ContainsAny(body, "=(@") {
			t.Fatalf("%d links from a body without '=', '(' or '@': %+v", len(links), links[0])
		}
		checkPageFacts(t, page)
		again, err := extract.ScanHTML(pageURL, contentType, iotest.OneByteReader(bytes.NewReader(body)))
		if err != nil || again.Title != title || !slices.Equal(again.Links, links) || !reflect.DeepEqual(again, page) {
			t.Fatalf("a second run, a byte at a time, differs: title %q -> %q, %d -> %d links, %v", title, again.Title, len(links), len(again.Links), err)
		}
	})
}

// FuzzScanCSS feeds ScanCSS arbitrary bytes under an arbitrary Content-Type.
// It must never panic or fail. Every link is a requestable http(s) URL
// without a fragment, a requisite from a CSS construct, once, at most
// 10,000 of them; and the links are the same whether the stylesheet is
// read a byte at a time, lexed in windows of any size, or whole.
func FuzzScanCSS(f *testing.F) {
	f.Add("text/css", []byte(`@import "a.css"; @import url(b.css) screen; p{background:url( "c.png" )}`), uint16(40))
	f.Add("text/css; charset=iso-8859-1", []byte("a{b:url(caf\xe9.png)} /* url(no.png) */ @namespace url(http://ns.example/)"), uint16(33))
	f.Add("", []byte(`a{b:image-set("x.png" 1x, url(y.png) 2x); c:url(\61\ b.png)}`), uint16(1))
	f.Add("text/css", []byte("@charset \"utf-16\"; a{b:url(a\\(1\\).png 1e3 U+12-4F}"), uint16(100))
	f.Fuzz(func(t *testing.T, contentType string, body []byte, window uint16) {
		const sheet = "http://example.com/css/site.css"
		links, err := extract.ScanCSS(sheet, contentType, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("ScanCSS failed: %v", err)
		}
		checkLinks(t, links)
		for _, l := range links {
			if l.Kind != extract.Requisite || l.Attr != "" {
				t.Fatalf("link %+v: not a requisite from a stylesheet", l)
			}
		}
		// Decoded to UTF-8, a byte is at most 3.
		whole, err := extract.ScanCSSWindow(sheet, contentType, bytes.NewReader(body), 3*len(body)+extract.CSSLookahead+1)
		if err != nil || !slices.Equal(whole, links) {
			t.Fatalf("lexed whole: %d links, read in windows: %d (%v)", len(whole), len(links), err)
		}
		w := extract.CSSLookahead + 1 + int(window)%512
		small, err := extract.ScanCSSWindow(sheet, contentType, iotest.OneByteReader(bytes.NewReader(body)), w)
		if err != nil || !slices.Equal(small, links) {
			t.Fatalf("windows of %d bytes, read a byte at a time: %d links, want %d (%v)\n got %v\nwant %v", w, len(small), len(links), err, small, links)
		}
	})
}

// checkLinks fails unless every link is a valid one (checkLink) of a
// valid kind, from an element of that kind, once, and there are at most
// 10,000.
func checkLinks(t *testing.T, links []extract.Link) {
	t.Helper()
	if len(links) > 10000 {
		t.Fatalf("%d links, over the cap of 10,000", len(links))
	}
	seen := make(map[string]bool, len(links))
	for _, l := range links {
		checkLink(t, l.Link)
		if seen[l.URL] {
			t.Fatalf("link %q twice", l.URL)
		}
		seen[l.URL] = true
		ok := l.Element != ""
		switch l.Kind {
		case extract.Navigation:
			ok = ok && (l.Element == "a" || l.Element == "area") && l.Attr == "href"
		case extract.Frame:
			ok = ok && (l.Element == "iframe" || l.Element == "frame") && l.Attr == "src"
		case extract.Requisite:
		default:
			ok = false
		}
		if !ok {
			t.Fatalf("link %+v: kind %v from %q %q", l, l.Kind, l.Element, l.Attr)
		}
	}
}

// checkLink fails unless l is what the frontier may be given: a
// requestable http(s) URL without a fragment, whose Host and Hash are the
// host key and the hash of its canonical form, as ParseLink makes them.
func checkLink(t *testing.T, l frontier.Link) {
	t.Helper()
	u, err := neturl.Parse(l.URL)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || strings.Contains(l.URL, "#") {
		t.Fatalf("link %q is not a requestable http(s) URL without a fragment (%v)", l.URL, err)
	}
	if len(l.URL) > frontier.MaxURLLength {
		t.Fatalf("link of %d bytes", len(l.URL))
	}
	canonical, err := frontier.Canonicalize(l.URL)
	if err != nil {
		t.Fatalf("link %q does not canonicalize: %v", l.URL, err)
	}
	if again, err := frontier.Canonicalize(canonical); err != nil || again != canonical {
		t.Fatalf("link %q: canonical form %q is not stable: %q, %v", l.URL, canonical, again, err)
	}
	host, err := frontier.HostKey(l.URL)
	if err != nil || l.Host != host || l.Hash != store.HashOf(canonical) {
		t.Fatalf("link %+v: host key %q (%v), canonical form %q", l, host, err, canonical)
	}
	if parsed, err := frontier.ParseLink(l.URL); err != nil || parsed != l {
		t.Fatalf("link %+v, but ParseLink of its URL gives %+v, %v", l, parsed, err)
	}
}

// checkPageFacts checks what a page says about itself: text valid UTF-8
// within its cap, URLs requestable, directives among the known ones.
func checkPageFacts(t *testing.T, page extract.Page) {
	t.Helper()
	for _, f := range []struct {
		name, s string
		max     int
	}{{"description", page.Description, 512}, {"h1", page.H1, 512}, {"lang", page.Lang, 64}} {
		if n := utf8.RuneCountInString(f.s); n > f.max || !utf8.ValidString(f.s) || strings.TrimSpace(f.s) != f.s {
			t.Fatalf("%s %q: %d runes (cap %d), invalid UTF-8 or untrimmed", f.name, f.s, n, f.max)
		}
	}
	if page.Robots&^(store.Noindex|store.Nofollow|store.Noarchive) != 0 {
		t.Fatalf("robots %08b has unknown bits", page.Robots)
	}
	urls := []string{page.Canonical}
	for _, a := range page.Alternates {
		urls = append(urls, a.URL)
		if a.Hreflang == "" || !utf8.ValidString(a.Hreflang) {
			t.Fatalf("alternate %+v without a valid hreflang", a)
		}
	}
	for _, u := range urls[1:] {
		if _, err := frontier.ParseLink(u); err != nil {
			t.Fatalf("alternate %q is not a requestable URL: %v", u, err)
		}
	}
	if page.Canonical != "" {
		if _, err := frontier.ParseLink(page.Canonical); err != nil {
			t.Fatalf("canonical %q is not a requestable URL: %v", page.Canonical, err)
		}
	}
	if len(page.Alternates) > 100 {
		t.Fatalf("%d alternates, over the cap of 100", len(page.Alternates))
	}
	for _, l := range page.Links {
		if n := utf8.RuneCountInString(l.Text); n > 200 || !utf8.ValidString(l.Text) || strings.TrimSpace(l.Text) != l.Text {
			t.Fatalf("anchor text %q: %d runes (cap 200), invalid UTF-8 or untrimmed", l.Text, n)
		}
		if l.Rel&^(store.RelNofollow|store.RelUGC|store.RelSponsored) != 0 {
			t.Fatalf("rel %08b has unknown bits", l.Rel)
		}
	}
}

// FuzzParseRobotsDirectives: any list gives known directives only; a list
// means the same in any case, in any order, and joined with another
// gives what both give.
func FuzzParseRobotsDirectives(f *testing.F) {
	for _, s := range []string{"noindex, nofollow", "NONE", "noarchive,max-snippet:20", "unavailable_after: Mon, 25 Jun 2026 15:00:00 PST", ",,", "index, follow"} {
		f.Add(s, "nofollow")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		da, db := extract.ParseRobotsDirectives(a), extract.ParseRobotsDirectives(b)
		if da&^(store.Noindex|store.Nofollow|store.Noarchive) != 0 {
			t.Fatalf("%q gives unknown bits %08b", a, da)
		}
		// Only ASCII: some letters (a dotless ı) upper-case into ASCII ones.
		if up := extract.ParseRobotsDirectives(strings.ToUpper(a)); up != da && isASCII(a) {
			t.Fatalf("%q gives %v, upper case %v", a, da.Names(), up.Names())
		}
		if both := extract.ParseRobotsDirectives(a + "," + b); both != da|db {
			t.Fatalf("%q and %q give %v and %v, joined %v", a, b, da.Names(), db.Names(), both.Names())
		}
		if rev := extract.ParseRobotsDirectives(b + "," + a); rev != da|db {
			t.Fatalf("%q after %q gives %v, want %v", a, b, rev.Names(), (da | db).Names())
		}
	})
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
