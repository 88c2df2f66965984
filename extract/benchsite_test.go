package extract_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"breakwater/demosite"
	"breakwater/extract"
)

// BenchmarkScanBenchSitePage scans one page of the crawl bench's site (a
// few KB, a dozen links): the page the crawl section's figures are made of.
func BenchmarkScanBenchSitePage(b *testing.B) {
	site, err := demosite.Start(demosite.BenchSpecs(10, 60, false, 0), demosite.SiteOptions{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer site.Close()
	url := site.Host("bench-003").PageURL(17)
	resp, err := http.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		b.Fatal(err)
	}
	ctype := resp.Header.Get("Content-Type")
	want, err := extract.ScanHTML(url, ctype, bytes.NewReader(body))
	if err != nil || len(want.Links) == 0 {
		b.Fatalf("the page scans to %d links, err %v", len(want.Links), err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := extract.ScanHTML(url, ctype, bytes.NewReader(body))
		if err != nil || len(p.Links) != len(want.Links) {
			b.Fatalf("got %d links, err %v", len(p.Links), err)
		}
	}
}
