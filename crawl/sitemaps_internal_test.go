package crawl

import (
	"breakwater/store"
	"encoding/json"
	"testing"
	"testing/synctest"
)

// What a sitemap queues: an index's sitemaps one nesting level deeper, a
// urlset's pages at depth 1, each with the sitemap as its referrer and its
// lastmod; robots.txt is the referrer of the sitemaps it names.
func TestSitemapItems(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions(aRoot) // its host is the scope
		opts.Sitemaps = true
		s := site{
			aRobots:                   {status: 200, body: "User-agent: *\nSitemap: http://a.test/index.xml\n"},
			aRoot:                     htmlPage("root"),
			"http://a.test/index.xml": {status: 200, body: `<sitemapindex><sitemap><loc>http://a.test/set.xml</loc><lastmod>2024-03-04</lastmod></sitemap></sitemapindex>`},
			"http://a.test/set.xml":   {status: 200, body: `<urlset><url><loc> /p </loc><lastmod>2024-01-02</lastmod></url></urlset>`},
		}
		r := newRig(t, opts, siteFetcher(s))
		r.add(0, aRoot)
		r.step() // robots.txt, on the root's lease
		found := map[string][]store.Item{}
		leased := map[string]store.Item{}
		for range 3 {
			x, d := r.process(r.lease())
			r.e.settle(x, d)
			found[x.lease.Item.URL] = d.found
			leased[x.lease.Item.URL] = x.lease.Item
		}
		if it := leased["http://a.test/index.xml"]; it.Kind != store.KindSitemap || it.Depth != 1 || it.Referrer != aRobots {
			t.Errorf("the sitemap robots.txt names was queued as %+v, want a sitemap at nesting 1, referred by robots.txt", it)
		}
		want := map[string]store.Item{
			"http://a.test/index.xml": {URL: "http://a.test/set.xml", Kind: store.KindSitemap, Depth: 2,
				Referrer: "http://a.test/index.xml", Lastmod: "2024-03-04"},
			"http://a.test/set.xml": {URL: "http://a.test/p", Kind: store.KindPage, Depth: 1,
				Referrer: "http://a.test/set.xml", Lastmod: "2024-01-02"},
		}
		for sm, w := range want {
			got := found[sm]
			if len(got) != 1 {
				t.Errorf("%s queued %d items, want 1", sm, len(got))
				continue
			}
			g := got[0]
			if g.URL != w.URL || g.Kind != w.Kind || g.Depth != w.Depth || g.Referrer != w.Referrer || g.Lastmod != w.Lastmod {
				t.Errorf("%s queued %+v, want %+v", sm, g, w)
			}
		}
		if got := r.results()["http://a.test/index.xml"]; got.Depth != 1 {
			t.Errorf("index.xml recorded at depth %d, want 1", got.Depth)
		}
	})
}

// --sitemaps is a stored setting: a later run without the flag keeps the
// stored value, the flag given again changes it, and a file stored before
// the setting existed takes the default, on.
func TestSitemapsSetting(t *testing.T) {
	off := DefaultFlagValues()
	off.Options.Sitemaps = false
	merged, _, err := mergeSettings(nil, &off, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := json.Marshal(merged)
	tests := []struct {
		name   string
		stored []byte
		given  bool
		want   bool
	}{
		{"stored off, not given", stored, false, false},
		{"stored off, given on", stored, true, true},
		{"older file without it", []byte(`{"scope":"seeds"}`), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			on := DefaultFlagValues()
			_, _, err := mergeSettings(tt.stored, &on, func(f string) bool { return tt.given && f == "sitemaps" })
			if err != nil {
				t.Fatal(err)
			}
			if on.Options.Sitemaps != tt.want {
				t.Errorf("sitemaps = %v, want %v", on.Options.Sitemaps, tt.want)
			}
		})
	}
}
