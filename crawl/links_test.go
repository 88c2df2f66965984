package crawl

import (
	"regexp"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"breakwater/storage"
	"breakwater/store"
)

// edgesFrom returns the stored links of each page, by page URL, in page
// order.
func edgesFrom(t *testing.T, db *storage.DB) map[string][]store.Edge {
	t.Helper()
	out := map[string][]store.Edge{}
	err := db.ForEachEdge(func(e store.Edge) error {
		out[e.From] = append(out[e.From], e)
		return nil
	})
	if err != nil {
		t.Fatalf("ForEachEdge: %v", err)
	}
	return out
}

type target struct {
	to   string
	kind store.LinkKind
}

func targetsOf(edges []store.Edge) []target {
	out := make([]target, len(edges))
	for i, e := range edges {
		out[i] = target{e.To, e.Kind}
	}
	return out
}

// Every link of a page is in the graph, in page order: those queued and
// those the scope refused (out of scope, excluded), with their kinds and
// where they were written; a stylesheet's links are its own.
func TestCrawlStoresEveryLinkOfAPage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := rigOptions("http://a.test/")
		opts.Exclude = []*regexp.Regexp{regexp.MustCompile(`/about$`)}
		r := newRig(t, opts, siteFetcher(requisiteSite()))
		r.run()
		edges := edgesFrom(t, r.db)
		nav, req, frame := store.LinkNavigation, store.LinkRequisite, store.LinkFrame
		want := []target{
			{"http://a.test/s.css", req}, {"http://a.test/favicon.ico", req},
			{"http://a.test/logo.png", req}, {"http://a.test/logo-2x.png", req}, {"http://cdn.test/photo.png", req},
			{"http://a.test/missing.png", req}, {"http://a.test/frame.html", frame}, {"http://cdn.test/ad.html", frame},
			{"http://a.test/about", nav}, {"http://cdn.test/page", nav},
		}
		if got := targetsOf(edges["http://a.test/"]); !slices.Equal(got, want) {
			t.Errorf("links of the home page:\n got %v\nwant %v", got, want)
		}
		home := edges["http://a.test/"]
		if e := home[3]; e.Element != "img" || e.Attr != "srcset" {
			t.Errorf("%s: written in %s %s, want img srcset", e.To, e.Element, e.Attr)
		}
		if e := home[9]; e.Element != "a" || e.Attr != "href" {
			t.Errorf("%s: written in %s %s, want a href", e.To, e.Element, e.Attr)
		}
		wantCSS := []target{{"http://a.test/deep/t.css", req}, {"http://a.test/bg.png", req}}
		if got := targetsOf(edges["http://a.test/s.css"]); !slices.Equal(got, wantCSS) {
			t.Errorf("links of the stylesheet: got %v, want %v", got, wantCSS)
		}
		if e := edges["http://a.test/s.css"][0]; e.Element != "@import" {
			t.Errorf("the stylesheet's import written in %q, want @import", e.Element)
		}
		for _, page := range []string{"http://a.test/about", "http://cdn.test/page", "http://a.test/logo.png"} {
			if _, ok := edges[page]; ok {
				t.Errorf("%s has links stored: it was never fetched, or has none", page)
			}
		}
		var in []string
		err := r.db.Inlinks(store.HashOf("http://a.test/logo.png"), func(e store.Edge) error {
			in = append(in, e.From)
			return nil
		})
		if err != nil || !slices.Equal(in, []string{"http://a.test/"}) {
			t.Errorf("Inlinks of the logo: %v, %v; want the home page (/about, which has it too, is excluded)", in, err)
		}
	})
}

// A refresh replaces the links of a page that changed, keeps those of a
// page answered 304, and drops those of a page now gone.
func TestRefreshReplacesLinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := site{
			aRootURL:     validated(`"root-1"`, "", "home", "/p/1", "/p/2"),
			aURL("/p/1"): validated(`"one-1"`, "", "one", "/p/2"),
			aURL("/p/2"): validated(`"two-1"`, "", "two", "/"),
			aURL("/p/3"): validated(`"three-1"`, "", "three"),
		}
		r := newRefreshRig(t, s)
		opts := refreshOptions(aRootURL)
		r.run(opts, nil)
		before := edgesFrom(t, r.db)
		if got := targetsOf(before[aRootURL]); len(got) != 2 || got[0].to != aURL("/p/1") {
			t.Fatalf("links of the home page after the first run: %v", got)
		}

		time.Sleep(2 * time.Hour)
		r.set(aRootURL, validated(`"root-2"`, "", "home, changed", "/p/3"))
		r.set(aURL("/p/2"), page{status: 410})
		r.run(opts, nil)
		after := edgesFrom(t, r.db)
		if got := targetsOf(after[aRootURL]); !slices.Equal(got, []target{{aURL("/p/3"), store.LinkNavigation}}) {
			t.Errorf("links of the changed home page: %v, want only /p/3", got)
		}
		if got, want := after[aURL("/p/1")], before[aURL("/p/1")]; !slices.Equal(got, want) || len(got) != 1 {
			t.Errorf("links of the page answered 304: %v, want those stored before: %v", got, want)
		}
		if got := after[aURL("/p/2")]; len(got) != 0 {
			t.Errorf("links of the page now gone: %v, want none", got)
		}
	})
}
