package crawl

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"breakwater/store"
)

func TestParseRobotsTag(t *testing.T) {
	none := store.Noindex | store.Nofollow
	for _, tt := range []struct {
		values []string
		want   store.Directives
	}{
		{nil, 0},
		{[]string{"noindex"}, store.Noindex},
		{[]string{"noindex, nofollow"}, none},
		{[]string{"NONE"}, none},
		{[]string{"noindex", "noarchive"}, store.Noindex | store.Noarchive},
		{[]string{"breakwater: nofollow"}, store.Nofollow},
		{[]string{"BreakWater: noindex, noarchive"}, store.Noindex | store.Noarchive},
		{[]string{"googlebot: noindex, nofollow"}, 0},
		{[]string{"googlebot: noindex", "breakwater: nofollow"}, store.Nofollow},
		{[]string{"noarchive, googlebot: nofollow"}, store.Noarchive},
		{[]string{"googlebot: noindex, breakwater: noarchive"}, store.Noarchive},
		{[]string{"unavailable_after: Monday, 25-Jun-2026 15:00:00 PST, nofollow"}, store.Nofollow},
		{[]string{"max-snippet: 20, noindex"}, store.Noindex},
		{[]string{"breakwater: max-image-preview: large, noindex"}, store.Noindex},
		{[]string{"all"}, 0},
	} {
		h := http.Header{"X-Robots-Tag": tt.values}
		if got := robotsTagDirectives(h, "breakwater"); got != tt.want {
			t.Errorf("X-Robots-Tag %q = %v, want %v", tt.values, got.Names(), tt.want.Names())
		}
	}
}

func TestLinkHeaderFacts(t *testing.T) {
	const page = "http://a.test/dir/p"
	for _, tt := range []struct {
		values     []string
		canonical  string
		alternates []store.Alternate
	}{
		{nil, "", nil},
		{[]string{`<https://example.com/a>; rel="canonical"`}, "https://example.com/a", nil},
		{[]string{`</c>; rel=canonical`}, "http://a.test/c", nil},
		{[]string{`<s.css>; rel=preload; as=style, <q>; REL="Canonical"`}, "http://a.test/dir/q", nil},
		{[]string{`<x>; rel="preload"`, `<first>; rel=canonical`, `<second>; rel=canonical`}, "http://a.test/dir/first", nil},
		{[]string{`<a,b>; title="x, y"; rel="canonical"`}, "http://a.test/dir/a,b", nil},
		{[]string{`<javascript:x>; rel=canonical`}, "", nil},
		{[]string{`</de/>; rel="alternate"; hreflang="de", </en/>; rel=alternate; hreflang=en, </feed>; rel=alternate`}, "",
			[]store.Alternate{{Hreflang: "de", URL: "http://a.test/de/"}, {Hreflang: "en", URL: "http://a.test/en/"}}},
	} {
		c, alts := linkHeaderFacts(http.Header{"Link": tt.values}, page)
		if c != tt.canonical || !reflect.DeepEqual(alts, tt.alternates) {
			t.Errorf("Link %q: canonical %q, alternates %+v; want %q, %+v", tt.values, c, alts, tt.canonical, tt.alternates)
		}
	}
}

// directiveSite's home links to pages that say nofollow in each way there
// is, each linking to a page nothing else links to; the home also holds
// a rel="nofollow" link.
func directiveSite() site {
	withHeader := func(p page, kv ...string) page {
		p.header = p.header.Clone()
		for i := 0; i < len(kv); i += 2 {
			p.header.Add(kv[i], kv[i+1])
		}
		return p
	}
	return site{
		"http://a.test/": htmlBody(`<html lang="en"><head><title>home</title>
			<meta name="description" content="The  home page."><link rel="canonical" href="/">
			<link rel="alternate" hreflang="de" href="/de/"></head><body><h1>Welcome <em>home</em></h1>
			<a href="/meta">meta</a> <a href="/header">header</a> <a href="/token">token</a> <a href="/otherbot">other bot</a>
			<a href="/sponsored" rel="nofollow sponsored">a <b>sponsored</b> page</a></body></html>`),
		"http://a.test/meta": htmlBody(`<meta name="robots" content="noindex, nofollow"><img src="/meta.png">
			<a href="/only-meta">only from a nofollow page</a>`),
		"http://a.test/meta.png": imagePage(),
		"http://a.test/header": withHeader(htmlBody(`<a href="/only-header">only from a nofollow answer</a>`),
			"X-Robots-Tag", "noindex", "X-Robots-Tag", "nofollow", "Link", `<http://a.test/>; rel="canonical"`),
		"http://a.test/token":       htmlBody(`<meta name="Breakwater" content="none"><a href="/only-token">x</a>`),
		"http://a.test/otherbot":    withHeader(htmlBody(`<a href="/other-ok">x</a>`), "X-Robots-Tag", "otherbot: nofollow"),
		"http://a.test/other-ok":    htmlBody(`<title>followed</title>`),
		"http://a.test/only-meta":   htmlBody(`<title>never</title>`),
		"http://a.test/only-header": htmlBody(`<title>never</title>`),
		"http://a.test/only-token":  htmlBody(`<title>never</title>`),
		"http://a.test/sponsored":   htmlBody(`<title>sponsored</title>`),
	}
}

func TestCrawlObeysRobotsDirectives(t *testing.T) {
	base := []string{"http://a.test/", "http://a.test/header", "http://a.test/meta", "http://a.test/meta.png",
		"http://a.test/other-ok", "http://a.test/otherbot", "http://a.test/token"}
	for _, tt := range []struct {
		name string
		set  func(*Options)
		want []string
	}{
		{"default: nofollow pages' links left, rel=nofollow followed", func(*Options) {},
			append(slices.Clone(base), "http://a.test/sponsored")},
		{"--skip-rel-nofollow", func(o *Options) { o.SkipRelNofollow = true }, base},
		{"--robots-meta=false", func(o *Options) { o.RobotsMeta = false },
			append(slices.Clone(base), "http://a.test/only-header", "http://a.test/only-meta", "http://a.test/only-token",
				"http://a.test/sponsored")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := siteFetcher(directiveSite())
				opts := rigOptions("http://a.test/")
				tt.set(&opts)
				r := newRig(t, opts, f)
				r.run()
				got := fetchedOnce(t, f)
				slices.Sort(tt.want)
				if !slices.Equal(got, tt.want) {
					t.Fatalf("requested %q\nwant %q", got, tt.want)
				}
			})
		})
	}
}

// Every 2xx result carries what its page says about itself, and the
// export's JSON names it; the home's rel="nofollow" link is recorded with
// its rel and text.
func TestCrawlRecordsPageFacts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := siteFetcher(directiveSite())
		r := newRig(t, rigOptions("http://a.test/"), f)
		r.e.opts.RobotsMeta = false // the directives are recorded all the same
		r.run()
		results := r.results()
		home := results["http://a.test/"]
		want := store.Result{Canonical: "http://a.test/", Hreflang: []store.Alternate{{Hreflang: "de", URL: "http://a.test/de/"}},
			Description: "The home page.", H1: "Welcome home", Lang: "en"}
		if home.Canonical != want.Canonical || !reflect.DeepEqual(home.Hreflang, want.Hreflang) || home.Description != want.Description ||
			home.H1 != want.H1 || home.Lang != want.Lang || home.Robots != 0 {
			t.Errorf("home recorded as %+v, want %+v", home, want)
		}
		none := store.Noindex | store.Nofollow
		for u, d := range map[string]store.Directives{"http://a.test/meta": none, "http://a.test/header": none,
			"http://a.test/token": none, "http://a.test/otherbot": 0, "http://a.test/other-ok": 0} {
			if got := results[u].Robots; got != d {
				t.Errorf("%s: robots %v, want %v", u, got.Names(), d.Names())
			}
		}
		if c := results["http://a.test/header"].Canonical; c != "http://a.test/" {
			t.Errorf("canonical from the Link header %q, want http://a.test/", c)
		}
		js, err := json.Marshal(results["http://a.test/meta"])
		if err != nil || !strings.Contains(string(js), `"robots":["noindex","nofollow"]`) {
			t.Errorf("exported as %s (%v), want robots named", js, err)
		}
	})
}

// The scan of a page gives each link its rel and anchor text, for the
// crawl (--skip-rel-nofollow) and the link graph.
func TestScannedLinksCarryRelAndText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, rigOptions("http://a.test/"), siteFetcher(directiveSite()))
		r.knowRobots("a.test", "")
		r.add(0, "http://a.test/")
		x, _ := r.process(r.lease())
		for _, l := range x.links {
			if l.URL == "http://a.test/sponsored" {
				if l.Rel != store.RelNofollow|store.RelSponsored || l.Text != "a sponsored page" {
					t.Errorf("sponsored link scanned as rel %v text %q", l.Rel.Names(), l.Text)
				}
				return
			}
		}
		t.Errorf("no sponsored link among %d scanned", len(x.links))
	})
}
