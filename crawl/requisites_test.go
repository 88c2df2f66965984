package crawl

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"breakwater/store"
)

func cssPage(body string) page {
	return page{status: 200, header: http.Header{"Content-Type": {"text/css"}}, body: body}
}

func imagePage() page {
	return page{status: 200, header: http.Header{"Content-Type": {"image/png"}}, body: "\x89PNG\r\n\x1a\n"}
}

func htmlBody(body string) page {
	return page{status: 200, header: http.Header{"Content-Type": {"text/html"}}, body: body}
}

// requisiteSite is a seed host a.test whose two pages share a stylesheet
// that imports another (with a font and an image), an image on cdn.test
// (outside the scope), a frame on a.test and one on cdn.test, each with
// an image and a link of its own, and a broken image.
func requisiteSite() site {
	return site{
		"http://a.test/": htmlBody(`<html><head><title>home</title>
			<link rel="stylesheet" href="/s.css"><link rel="icon" href="/favicon.ico"></head>
			<body><img src="/logo.png" srcset="/logo-2x.png 2x"><img src="http://cdn.test/photo.png">
			<img src="/missing.png"><iframe src="/frame.html"></iframe><iframe src="http://cdn.test/ad.html"></iframe>
			<a href="/about">about</a><a href="http://cdn.test/page">cdn page</a></body></html>`),
		"http://a.test/about": htmlBody(`<html><head><link rel="stylesheet" href="/s.css"></head>
			<body><img src="/logo.png"></body></html>`),
		"http://a.test/s.css":           cssPage(`@import url("/deep/t.css"); body { background: url(bg.png) }`),
		"http://a.test/deep/t.css":      cssPage(`@font-face { src: url(font.woff2) } h1 { background: url('/deep/h1.png') }`),
		"http://a.test/deep/font.woff2": imagePage(),
		"http://a.test/deep/h1.png":     imagePage(),
		"http://a.test/bg.png":          imagePage(),
		"http://a.test/favicon.ico":     imagePage(),
		"http://a.test/logo.png":        imagePage(),
		"http://a.test/logo-2x.png":     imagePage(),
		"http://a.test/frame.html":      htmlBody(`<img src="/framed.png"><a href="/from-frame">more</a>`),
		"http://a.test/framed.png":      imagePage(),
		"http://a.test/from-frame":      htmlBody(`<title>linked from a frame</title>`),
		"http://cdn.test/photo.png":     imagePage(),
		"http://cdn.test/ad.html":       htmlBody(`<img src="/ad.png"><a href="/elsewhere">elsewhere</a>`),
		"http://cdn.test/ad.png":        imagePage(),
		"http://cdn.test/page":          htmlBody(`<title>not in scope</title>`),
		"http://cdn.test/elsewhere":     htmlBody(`<title>not in scope</title>`),
	}
}

// fetchedOnce returns the URLs requested, robots.txt left out, failing
// the test for any requested more than once.
func fetchedOnce(t *testing.T, f *fakeFetcher) []string {
	t.Helper()
	count := map[string]int{}
	for _, r := range f.requests("") {
		if !strings.HasSuffix(r.URL, "/robots.txt") {
			count[r.URL]++
		}
	}
	for u, n := range count {
		if n != 1 {
			t.Errorf("%s requested %d times, want once", u, n)
		}
	}
	return sortedKeys(count)
}

func TestCrawlFetchesEveryRequisiteOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := siteFetcher(requisiteSite())
		r := newRig(t, rigOptions("http://a.test/"), f)
		r.run()
		got := fetchedOnce(t, f)
		want := []string{
			"http://a.test/", "http://a.test/about", "http://a.test/bg.png", "http://a.test/deep/font.woff2",
			"http://a.test/deep/h1.png", "http://a.test/deep/t.css", "http://a.test/favicon.ico",
			"http://a.test/frame.html", "http://a.test/framed.png", "http://a.test/from-frame",
			"http://a.test/logo-2x.png", "http://a.test/logo.png", "http://a.test/missing.png", "http://a.test/s.css",
			"http://cdn.test/ad.html", "http://cdn.test/ad.png", "http://cdn.test/photo.png",
		}
		if !slices.Equal(got, want) {
			t.Fatalf("requested %q\nwant %q (no page of cdn.test, which is out of scope)", got, want)
		}
		results := r.results()
		for u, res := range results {
			wantKind := store.KindRequisite
			if u == "http://a.test/" || u == "http://a.test/about" || u == "http://a.test/from-frame" {
				wantKind = store.KindPage
			}
			if res.Kind != wantKind {
				t.Errorf("%s stored as %v, want %v", u, res.Kind, wantKind)
			}
		}
		if m := results["http://a.test/missing.png"]; !m.Failed() || m.Status != 404 || m.Referrer != "http://a.test/" {
			t.Errorf("broken image stored as %+v, want a failed 404 whose referrer is the page", m)
		}
		if font := results["http://a.test/deep/font.woff2"]; font.Referrer != "http://a.test/deep/t.css" {
			t.Errorf("font's referrer %q, want the stylesheet that names it", font.Referrer)
		}
	})
}

func TestCrawlRequisitesBounded(t *testing.T) {
	tests := []struct {
		name    string
		opts    func(o *Options)
		absent  []string // never requested
		present []string // requested
	}{
		{"off", func(o *Options) { o.PageRequisites = false },
			[]string{"http://a.test/logo.png", "http://a.test/s.css", "http://a.test/frame.html", "http://cdn.test/photo.png"},
			[]string{"http://a.test/", "http://a.test/about"}},
		{"two hops", func(o *Options) { o.RequisiteHops = 2 },
			[]string{"http://a.test/deep/font.woff2", "http://a.test/deep/h1.png"},
			[]string{"http://a.test/deep/t.css", "http://a.test/bg.png", "http://a.test/framed.png"}},
		{"one hop", func(o *Options) { o.RequisiteHops = 1 },
			[]string{"http://a.test/deep/t.css", "http://a.test/bg.png", "http://a.test/framed.png", "http://cdn.test/ad.png"},
			[]string{"http://a.test/s.css", "http://a.test/frame.html", "http://a.test/from-frame"}},
		{"excluded", func(o *Options) { o.Exclude = []*regexp.Regexp{regexp.MustCompile(`cdn\.test`)} },
			[]string{"http://cdn.test/photo.png", "http://cdn.test/ad.html"},
			[]string{"http://a.test/logo.png"}},
		{"depth 0", func(o *Options) { o.MaxDepth = 0 },
			[]string{"http://a.test/about", "http://a.test/from-frame"},
			[]string{"http://a.test/logo.png", "http://a.test/deep/font.woff2", "http://a.test/framed.png"}},
		// Requisites do not count, and the page's own come before the
		// host's next page; the third page, found in a frame, is left.
		{"max pages 2", func(o *Options) { o.MaxPages = 2; o.Workers = 1 },
			[]string{"http://a.test/from-frame"},
			[]string{"http://a.test/about", "http://a.test/logo.png", "http://a.test/logo-2x.png",
				"http://a.test/s.css", "http://a.test/frame.html", "http://a.test/favicon.ico"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := siteFetcher(requisiteSite())
				opts := rigOptions("http://a.test/")
				tt.opts(&opts)
				r := newRig(t, opts, f)
				r.run()
				got := fetchedOnce(t, f)
				for _, u := range tt.absent {
					if slices.Contains(got, u) {
						t.Errorf("%s requested, want not", u)
					}
				}
				for _, u := range tt.present {
					if !slices.Contains(got, u) {
						t.Errorf("%s not requested, want it (got %q)", u, got)
					}
				}
			})
		})
	}
}
