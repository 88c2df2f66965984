package cli

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"breakwater/control"
	"breakwater/store"
	"breakwater/wacz"
)

// fakeCrawl answers the reads a WACZ needs; every other method of the API
// is nil and must not be called.
type fakeCrawl struct {
	control.API
	results  []store.Result
	settings map[string]json.RawMessage
}

func (f *fakeCrawl) Results(failedOnly bool, fn func(*store.Result) error) error {
	for i := range f.results {
		if err := fn(&f.results[i]); err != nil {
			return err
		}
	}
	return nil
}

func (f *fakeCrawl) Status() (*control.Status, error) {
	return &control.Status{Settings: f.settings}, nil
}

// The pages of a WACZ are the crawl's 2xx HTML pages fetched before the
// cutoff, seeds first, in the order the crawl gives them.
func TestCrawlPages(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cutoff := t0.Add(time.Hour)
	html := "text/html; charset=utf-8"
	a := &fakeCrawl{results: []store.Result{
		{URL: "http://a/x", Status: 200, ContentType: html, Depth: 1, Referrer: "http://a/", FetchedAt: t0, Title: "X"},
		{URL: "http://a/", Status: 200, ContentType: html, FetchedAt: t0, Title: "A"},
		{URL: "http://a/doc.pdf", Status: 200, ContentType: "application/pdf", Depth: 1, Referrer: "http://a/", FetchedAt: t0},
		{URL: "http://a/gone", Status: 404, ContentType: html, Depth: 1, Referrer: "http://a/", FetchedAt: t0},
		{URL: "http://a/moved", Status: 301, ContentType: html, Depth: 1, Referrer: "http://a/", FetchedAt: t0},
		{URL: "http://a/down", Status: 503, ContentType: html, ErrorClass: "transient", Depth: 1, Referrer: "http://a/", FetchedAt: t0},
		{URL: "http://a/x.xhtml", Status: 203, ContentType: "Application/XHTML+XML", Depth: 1, Referrer: "http://a/", FetchedAt: t0},
		{URL: "http://a/late", Status: 200, ContentType: html, Depth: 1, Referrer: "http://a/", FetchedAt: cutoff},
		{URL: "http://b/", Status: 200, ContentType: "TEXT/HTML", FetchedAt: t0},
		{URL: "http://a/from-sitemap", Status: 200, ContentType: html, Referrer: "http://a/sitemap.xml", FetchedAt: t0},
		{URL: "http://a/bad-type", Status: 200, ContentType: "text/html; ===", Depth: 1, Referrer: "http://a/", FetchedAt: t0},
	}}
	var got []string
	err := crawlPages(context.Background(), a, cutoff, func(p wacz.Page) error {
		got = append(got, p.URL)
		if p.Seed != (p.URL == "http://a/" || p.URL == "http://b/") {
			t.Errorf("%s: seed %v", p.URL, p.Seed)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://a/", "http://b/", "http://a/x", "http://a/x.xhtml", "http://a/from-sitemap"}
	if !slices.Equal(got, want) {
		t.Errorf("pages %v, want %v", got, want)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := crawlPages(ctx, a, cutoff, func(wacz.Page) error { return nil }); err == nil {
		t.Error("a cancelled context did not stop the pages")
	}
}

// Without --warc the directory is the crawl's stored one; a crawl run
// without --warc is a usage error.
func TestStoredWARCDir(t *testing.T) {
	dir, err := storedWARCDir(&fakeCrawl{settings: map[string]json.RawMessage{"warc": json.RawMessage(`"/srv/warc"`)}})
	if err != nil || dir != "/srv/warc" {
		t.Errorf("stored --warc: %q, %v", dir, err)
	}
	_, err = storedWARCDir(&fakeCrawl{settings: map[string]json.RawMessage{"delay": json.RawMessage(`"1s"`)}})
	if codeOf(err) != ExitUsage {
		t.Errorf("no stored --warc: %v (exit %d)", err, codeOf(err))
	}
}
