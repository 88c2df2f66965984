package extract

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// realisticPage is about 30 KB of HTML shaped like a news site's front
// page: a head of stylesheets, icons, preloads and scripts, an inline
// <style>, a navigation bar, 20 articles each with an image (src and a
// srcset), tag links and a teaser, a <picture>, a <video>, an iframe and
// a styled banner: 100 anchors and about 40 requisites in all.
func realisticPage() []byte {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>The Daily Bench - front page</title>
<link rel="stylesheet" href="/static/css/main.css?v=3"><link rel="stylesheet" href="/static/css/grid.css">
<link rel="stylesheet" href="https://cdn.example.net/fonts/inter.css"><link rel="alternate stylesheet" href="/static/css/print.css" media="print">
<link rel="icon" href="/favicon.ico"><link rel="apple-touch-icon" href="/static/img/touch-180.png">
<link rel="preload" href="/static/fonts/inter.woff2" as="font" crossorigin><link rel="manifest" href="/site.webmanifest">
<link rel="modulepreload" href="/static/js/app.mjs"><link rel="canonical" href="https://news.example.com/">
<script src="/static/js/vendor.js" defer></script><script src="/static/js/app.js" defer></script>
<script async src="https://analytics.example.org/tag.js"></script>
<style>
body { font: 16px/1.5 Inter, sans-serif; background: #fafafa url("/static/img/paper.png") repeat; }
.banner { background-image: url(/static/img/banner.jpg); min-height: 120px; }
@font-face { font-family: Icons; src: url('/static/fonts/icons.woff2') format("woff2"); }
.card { border: 1px solid #ddd; padding: 1em; margin: 0 0 1em 0; border-radius: 4px; }
</style></head><body>
<header><nav class="top"><ul>
`)
	for i := range 20 {
		fmt.Fprintf(&b, "<li><a href=\"/section/%d/\" class=\"nav-link\">Section %d</a></li>\n", i, i)
	}
	b.WriteString("</ul></nav><div class=\"banner\" style=\"background-position: center; background-image: url('/static/img/banner-wide.jpg')\"></div></header>\n<main>\n")
	for i := range 20 {
		fmt.Fprintf(&b, `<article class="card" id="story-%d"><h2><a href="/news/2024/%02d/story-%d.html">Story number %d</a></h2>
`, i, i%12+1, i, i)
		if i%2 == 0 {
			fmt.Fprintf(&b, `<img src="/media/%d-400.jpg" srcset="/media/%d-400.jpg 400w, /media/%d-800.jpg 800w" sizes="(max-width: 600px) 100vw, 400px" alt="Photo for story %d" loading="lazy" width="400" height="300">
`, i, i, i, i)
		}
		fmt.Fprintf(&b, "<p class=\"teaser\">%s</p>\n", strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 17))
		fmt.Fprintf(&b, `<p class="tags"><a href="/tag/t%d">t%d</a> <a href="/tag/t%d">t%d</a> <a href="/news/2024/%02d/story-%d.html#comments">Comments</a></p></article>
`, i, i, i+20, i+20, i%12+1, i+100)
	}
	b.WriteString(`<picture><source type="image/webp" srcset="/media/hero.webp"><img src="/media/hero.jpg" alt="Hero"></picture>
<video controls poster="/media/clip-poster.jpg" src="/media/clip.mp4"></video>
<iframe src="https://video.example.org/embed/42" width="560" height="315"></iframe>
</main><footer><p>&copy; The Daily Bench</p></footer></body></html>`)
	return []byte(b.String())
}

// BenchmarkScanHTML scans realisticPage: 100 anchors, 40 requisites and a
// frame.
func BenchmarkScanHTML(b *testing.B) {
	page := realisticPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := ScanHTML(testPage, "text/html; charset=utf-8", bytes.NewReader(page))
		if err != nil || len(p.Links) != 141 {
			b.Fatalf("got %d links, err %v", len(p.Links), err)
		}
	}
}

// anchorsPage is about 30 KB of HTML with 100 anchors and nothing else
// that links: what a scan of anchors alone costs.
func anchorsPage() []byte {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Benchmark page</title></head><body>\n")
	for i := range 100 {
		fmt.Fprintf(&b, "<div class=\"item\"><h2>Item %d</h2><p>%s</p><a href=\"/section/%d/item-%d.html?ref=list#top\">more</a></div>\n",
			i, strings.Repeat("Lorem ipsum dolor sit amet. ", 9), i%7, i)
	}
	b.WriteString("</body></html>")
	return []byte(b.String())
}

func BenchmarkScanHTMLAnchors(b *testing.B) {
	page := anchorsPage()
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	for b.Loop() {
		if p, err := ScanHTML(testPage, "text/html; charset=utf-8", bytes.NewReader(page)); err != nil || len(p.Links) != 100 {
			b.Fatalf("got %d links, err %v", len(p.Links), err)
		}
	}
}

// BenchmarkScanCSS scans realisticCSS, about 20 KB with 21 URLs.
func BenchmarkScanCSS(b *testing.B) {
	sheet := realisticCSS()
	b.SetBytes(int64(len(sheet)))
	b.ReportAllocs()
	for b.Loop() {
		if links, err := ScanCSS(testSheet, "text/css", bytes.NewReader(sheet)); err != nil || len(links) != 21 {
			b.Fatalf("got %d links, err %v", len(links), err)
		}
	}
}
