package report

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"breakwater/control"
	"breakwater/store"
)

// fakeSource is a crawl held in memory.
type fakeSource struct {
	results     []store.Result
	transitions []store.Transition
	hosts       []control.HostRow
	running     bool
	passes      int // full passes over the results
}

var _ Source = (*fakeSource)(nil)

func (f *fakeSource) Status() (*control.Status, error) {
	return &control.Status{Running: f.running, Hosts: len(f.hosts)}, nil
}

func (f *fakeSource) Hosts(string) ([]control.HostRow, error) { return f.hosts, nil }

func (f *fakeSource) Transitions(string, time.Time) ([]store.Transition, error) {
	return f.transitions, nil
}

func (f *fakeSource) Results(failedOnly bool, fn func(*store.Result) error) error {
	if !failedOnly {
		f.passes++
	}
	for i := range f.results {
		r := f.results[i] // a copy: Build must not keep pointers into the stream
		if failedOnly && !r.Failed() {
			continue
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
	return nil
}

// edges is a Graph of fixed edges.
type edges []store.Edge

func (e edges) Edges(fn func(store.Edge) error) error {
	for _, x := range e {
		if err := fn(x); err != nil {
			return err
		}
	}
	return nil
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func ok(url string, extra ...func(*store.Result)) store.Result {
	r := store.Result{URL: url, FinalURL: url, Host: "a.test", Status: 200, FetchedAt: t0, SHA256: sha(url), Title: "title of " + url}
	for _, f := range extra {
		f(&r)
	}
	return r
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func status(code int) func(*store.Result) { return func(r *store.Result) { r.Status = code } }
func from(ref string) func(*store.Result) { return func(r *store.Result) { r.Referrer = ref } }
func failedAs(class string) func(*store.Result) {
	return func(r *store.Result) { r.ErrorClass, r.SHA256, r.Title = class, "", "" }
}
func requisite(r *store.Result)          { r.Kind = store.KindRequisite }
func took(ms int64) func(*store.Result)  { return func(r *store.Result) { r.DurationMS = ms } }
func title(s string) func(*store.Result) { return func(r *store.Result) { r.Title = s } }

// body gives a result the sha256 of 32 times the byte pair s: "aa".
func body(s string) func(*store.Result) {
	return func(r *store.Result) { r.SHA256 = strings.Repeat(s, 64/len(s)) }
}

func redirectTo(loc string) func(*store.Result) {
	return func(r *store.Result) { r.Status, r.Location, r.FinalURL, r.SHA256, r.Title = 301, loc, loc, "", "" }
}

func build(t *testing.T, src *fakeSource, opt Options) *Report {
	t.Helper()
	opt.Now = t0.Add(time.Hour)
	rep, err := Build(src, opt)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return rep
}

func chainURLs(c Chain) string {
	var parts []string
	for _, h := range c.Hops {
		parts = append(parts, h.URL)
	}
	return strings.Join(append(parts, c.Final), " -> ")
}

func TestRedirectChainsAndLoops(t *testing.T) {
	tests := []struct {
		name            string
		results         []store.Result
		chains, loops   []string
		finalStatus     []int
		chainsTotal     int
		loopsTotalFound int
	}{
		{name: "one hop is no chain",
			results: []store.Result{ok("/a", redirectTo("/b")), ok("/b")}},
		{name: "two hops to a page",
			results: []store.Result{ok("/c"), ok("/a", redirectTo("/b")), ok("/b", redirectTo("/c"))},
			chains:  []string{"/a -> /b -> /c"}, finalStatus: []int{200}},
		{name: "a chain to a broken page",
			results: []store.Result{ok("/a", redirectTo("/b")), ok("/b", redirectTo("/c")), ok("/c", status(404), failedAs("permanent"))},
			chains:  []string{"/a -> /b -> /c"}, finalStatus: []int{404}},
		{name: "a chain to a URL never fetched",
			results: []store.Result{ok("/a", redirectTo("/b")), ok("/b", redirectTo("/x"))},
			chains:  []string{"/a -> /b -> /x"}, finalStatus: []int{0}},
		{name: "a loop of two with nothing leading in",
			results: []store.Result{ok("/b", redirectTo("/a")), ok("/a", redirectTo("/b"))},
			loops:   []string{"/a -> /b -> /a"}},
		{name: "a loop with a tail is one loop",
			results: []store.Result{ok("/s", redirectTo("/a")), ok("/a", redirectTo("/b")), ok("/b", redirectTo("/a"))},
			loops:   []string{"/s -> /a -> /b -> /a"}},
		{name: "a self redirect",
			results: []store.Result{ok("/a", redirectTo("/a"))},
			loops:   []string{"/a -> /a"}},
		{name: "two chains sharing a tail, longest first",
			results: []store.Result{ok("/x", redirectTo("/y")), ok("/y", redirectTo("/a")), ok("/a", redirectTo("/b")),
				ok("/b", redirectTo("/c")), ok("/p", redirectTo("/b")), ok("/c")},
			chains: []string{"/x -> /y -> /a -> /b -> /c", "/p -> /b -> /c"}, finalStatus: []int{200, 200}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := build(t, &fakeSource{results: tt.results}, Options{})
			var chains, loops []string
			var finals []int
			for _, c := range rep.RedirectChains.Items {
				chains, finals = append(chains, chainURLs(c)), append(finals, c.FinalStatus)
			}
			for _, c := range rep.RedirectLoops.Items {
				loops = append(loops, chainURLs(c))
				if !c.Loop {
					t.Errorf("loop %s not marked as one", chainURLs(c))
				}
			}
			if !slices.Equal(chains, tt.chains) || !slices.Equal(finals, tt.finalStatus) {
				t.Errorf("chains %q ending %v, want %q ending %v", chains, finals, tt.chains, tt.finalStatus)
			}
			if !slices.Equal(loops, tt.loops) {
				t.Errorf("loops %q, want %q", loops, tt.loops)
			}
			if rep.RedirectChains.Total != len(tt.chains) || rep.RedirectLoops.Total != len(tt.loops) {
				t.Errorf("totals %d chains %d loops, want %d and %d", rep.RedirectChains.Total, rep.RedirectLoops.Total,
					len(tt.chains), len(tt.loops))
			}
		})
	}
}

func TestBrokenTargetsAndTheirReferrers(t *testing.T) {
	results := []store.Result{
		ok("/"), ok("/p1", from("/")), ok("/p2", from("/")),
		ok("/gone", status(404), failedAs("permanent"), from("/p1")),
		ok("/down", status(503), failedAs("transient"), from("/p2")),
		ok("/img.png", status(404), failedAs("permanent"), requisite, from("/p1")),
		ok("/private", failedAs("robots"), from("/")),
		ok("/deep", failedAs("out-of-scope"), from("/")),
		ok("/loop/loop/loop", failedAs("trap"), from("/")),
	}
	t.Run("from the graph", func(t *testing.T) {
		g := edges{
			{From: "/p1", To: "/gone", Text: "old page", Element: "a", Attr: "href"},
			{From: "/p2", To: "/gone", Text: "see <also>", Element: "a", Attr: "href", Rel: store.RelNofollow},
			{From: "/", To: "/gone", Text: "gone"},
			{From: "/p2", To: "/down"},
			{From: "/p1", To: "/img.png", Kind: store.LinkRequisite, Text: "a picture", Element: "img", Attr: "src"},
			{From: "/p2", To: "/img.png", Kind: store.LinkRequisite, Element: "img", Attr: "src"},
			{From: "/", To: "/p1"},
		}
		rep := build(t, &fakeSource{results: results}, Options{Graph: g})
		if rep.LinkGraph != "edges" {
			t.Errorf("link graph %q, want edges", rep.LinkGraph)
		}
		want := map[string][]string{"/gone": {"/", "/p1", "/p2"}, "/down": {"/p2"}}
		assertTargets(t, rep.BrokenLinks, want)
		assertTargets(t, rep.BrokenRequisites, map[string][]string{"/img.png": {"/p1", "/p2"}})
		gone := rep.BrokenLinks.Items[0]
		if gone.URL != "/gone" || gone.Referrers[2].Text != "see <also>" || !slices.Equal(gone.Referrers[2].Rel, []string{"nofollow"}) {
			t.Errorf("the most linked target first, with text and rel: %+v", gone)
		}
	})
	t.Run("from referrers", func(t *testing.T) {
		rep := build(t, &fakeSource{results: results}, Options{})
		if rep.LinkGraph != "referrer" {
			t.Errorf("link graph %q, want referrer", rep.LinkGraph)
		}
		assertTargets(t, rep.BrokenLinks, map[string][]string{"/gone": {"/p1"}, "/down": {"/p2"}})
		assertTargets(t, rep.BrokenRequisites, map[string][]string{"/img.png": {"/p1"}})
	})
	rep := build(t, &fakeSource{results: results}, Options{})
	s := rep.Summary
	if s.Results != 9 || s.Pages != 3 || s.Failed != 3 || s.Skipped != 3 {
		t.Errorf("summary %+v: want 9 results, 3 pages, 3 failed, 3 skipped", s)
	}
	if s.ByClass["permanent"] != 2 || s.ByClass["robots"] != 1 || s.ByClass["trap"] != 1 {
		t.Errorf("by class %v", s.ByClass)
	}
	if rep.RobotsBlocked.Total != 1 || rep.RobotsBlocked.Items[0].URL != "/private" || rep.Trapped.Total != 1 ||
		rep.Trapped.Items[0].Referrer != "/" {
		t.Errorf("held back: robots %+v, trap %+v", rep.RobotsBlocked, rep.Trapped)
	}
	for _, f := range Findings() {
		if _, known := rep.Count(f); !known {
			t.Errorf("finding %q unknown to Count", f)
		}
	}
	if n, _ := rep.Count(FindingBrokenLinks); n != 2 {
		t.Errorf("broken-links count %d, want 2", n)
	}
	if _, known := rep.Count("broken-dreams"); known {
		t.Error("an unknown finding counted")
	}
}

func assertTargets(t *testing.T, got Targets, want map[string][]string) {
	t.Helper()
	if got.Total != len(want) || len(got.Items) != len(want) {
		t.Errorf("%d targets (%d listed), want %d", got.Total, len(got.Items), len(want))
	}
	for _, tg := range got.Items {
		var froms []string
		for _, r := range tg.Referrers {
			froms = append(froms, r.From)
		}
		if !slices.Equal(froms, want[tg.URL]) || tg.ReferrersTotal != len(want[tg.URL]) {
			t.Errorf("%s linked from %q (total %d), want %q", tg.URL, froms, tg.ReferrersTotal, want[tg.URL])
		}
	}
}

func TestDuplicatesAndSlowest(t *testing.T) {
	results := []store.Result{
		ok("/a", title("Home"), body("aa"), took(30)), ok("/b", title("Home"), body("aa"), took(500)),
		ok("/c", title("Home"), body("cc"), took(10)), ok("/d", title("Other"), body("aa"), took(500)),
		ok("/e", title("Other"), body("ee"), took(900)), ok("/f", title("Alone"), body("ff"), took(1)),
		ok("/g", status(404), failedAs("permanent"), took(5000)), // not a page: never slowest or duplicate
		ok("/h", redirectTo("/a"), took(4000)),
	}
	rep := build(t, &fakeSource{results: results}, Options{Caps: Caps{Slowest: 3}})
	wantTitles := []Group{{Key: "Home", Count: 3, URLs: []string{"/a", "/b", "/c"}}, {Key: "Other", Count: 2, URLs: []string{"/d", "/e"}}}
	assertGroups(t, "titles", rep.DuplicateTitles, wantTitles, 5)
	assertGroups(t, "content", rep.DuplicateContent, []Group{{Key: strings.Repeat("aa", 32), Count: 3, URLs: []string{"/a", "/b", "/d"}}}, 3)
	var slow []string
	for _, p := range rep.Slowest {
		slow = append(slow, p.URL)
	}
	if want := []string{"/e", "/b", "/d"}; !slices.Equal(slow, want) {
		t.Errorf("slowest %q, want %q (ties by URL)", slow, want)
	}
}

func assertGroups(t *testing.T, name string, got Groups, want []Group, pages int) {
	t.Helper()
	if got.Total != len(want) || got.Pages != pages || len(got.Items) != len(want) {
		t.Fatalf("%s: %d groups of %d pages, listed %+v; want %d of %d", name, got.Total, got.Pages, got.Items, len(want), pages)
	}
	for i, g := range got.Items {
		if g.Key != want[i].Key || g.Count != want[i].Count || !slices.Equal(g.URLs, want[i].URLs) {
			t.Errorf("%s group %d: %+v, want %+v", name, i, g, want[i])
		}
	}
}

func TestCapsListSomeAndCountAll(t *testing.T) {
	var results []store.Result
	var g edges
	for i := range 50 {
		u := fmt.Sprintf("/gone/%02d", i)
		results = append(results, ok(u, status(404), failedAs("permanent")))
		for j := range i % 7 {
			g = append(g, store.Edge{From: fmt.Sprintf("/page/%d", j), To: u})
		}
		results = append(results, ok(fmt.Sprintf("/blocked/%d", i), failedAs("robots")))
		results = append(results, ok(fmt.Sprintf("/dup/%d", i), title(fmt.Sprintf("T%d", i%10)), body(fmt.Sprintf("%064d", i%5))))
		results = append(results, ok(fmt.Sprintf("/r%d/1", i), redirectTo(fmt.Sprintf("/r%d/2", i))),
			ok(fmt.Sprintf("/r%d/2", i), redirectTo(fmt.Sprintf("/r%d/3", i))))
	}
	caps := Caps{Targets: 10, Referrers: 3, Rows: 4, Groups: 2, GroupURLs: 2}
	rep := build(t, &fakeSource{results: results}, Options{Graph: g, Caps: caps})
	if rep.BrokenLinks.Total != 50 || len(rep.BrokenLinks.Items) != 10 {
		t.Errorf("broken: total %d listed %d, want 50 and 10", rep.BrokenLinks.Total, len(rep.BrokenLinks.Items))
	}
	for _, tg := range rep.BrokenLinks.Items {
		if len(tg.Referrers) > 3 || tg.ReferrersTotal < len(tg.Referrers) {
			t.Errorf("%s: %d referrers listed of %d, cap 3", tg.URL, len(tg.Referrers), tg.ReferrersTotal)
		}
	}
	if rep.RobotsBlocked.Total != 50 || len(rep.RobotsBlocked.Items) != 4 {
		t.Errorf("robots: total %d listed %d", rep.RobotsBlocked.Total, len(rep.RobotsBlocked.Items))
	}
	if rep.RedirectChains.Total != 50 || len(rep.RedirectChains.Items) != 4 {
		t.Errorf("chains: total %d listed %d", rep.RedirectChains.Total, len(rep.RedirectChains.Items))
	}
	for name, gs := range map[string]Groups{"titles": rep.DuplicateTitles, "content": rep.DuplicateContent} {
		if len(gs.Items) != 2 || gs.Items[0].Count != gs.Pages/gs.Total || len(gs.Items[0].URLs) != 2 {
			t.Errorf("%s: %+v, want 2 groups listed of 2 URLs each", name, gs)
		}
	}
	if rep.DuplicateTitles.Total != 10 || rep.DuplicateContent.Total != 5 {
		t.Errorf("groups total: titles %d content %d, want 10 and 5", rep.DuplicateTitles.Total, rep.DuplicateContent.Total)
	}
}

func TestDirectives(t *testing.T) {
	dirs := map[string]Directives{
		"/hidden":   {Robots: []string{"noindex", "nofollow"}},
		"/none":     {Robots: []string{"none"}},
		"/follow":   {Robots: []string{"nofollow"}},
		"/copy":     {Canonical: "/orig"},
		"/self":     {Canonical: "/self"},
		"/to-gone":  {Canonical: "/gone"},
		"/to-moved": {Canonical: "/moved"},
		"/to-void":  {Canonical: "/void"},
	}
	results := []store.Result{ok("/hidden"), ok("/none"), ok("/follow"), ok("/copy"), ok("/orig"), ok("/self"),
		ok("/to-gone"), ok("/gone", status(404), failedAs("permanent")), ok("/to-moved"), ok("/moved", redirectTo("/orig")),
		ok("/to-void")}
	read := func(r *store.Result) Directives { return dirs[r.URL] }
	rep := build(t, &fakeSource{results: results}, Options{Directives: read})
	var noindex []string
	for _, p := range rep.Noindex.Items {
		noindex = append(noindex, p.URL)
	}
	if !slices.Equal(noindex, []string{"/hidden", "/none"}) || rep.Noindex.Total != 2 {
		t.Errorf("noindex %q (total %d), want /hidden and /none", noindex, rep.Noindex.Total)
	}
	problems := map[string]string{}
	for _, c := range rep.Canonicals.Items {
		problems[c.URL] = c.Problem
	}
	want := map[string]string{"/copy": "elsewhere", "/to-gone": "broken", "/to-moved": "redirected", "/to-void": "not-crawled"}
	if fmt.Sprint(problems) != fmt.Sprint(want) {
		t.Errorf("canonical problems %v, want %v", problems, want)
	}
	if off := build(t, &fakeSource{results: results}, Options{}); off.Directives || off.Noindex.Total != 0 {
		t.Errorf("without a directives reader: directives %v, noindex %d", off.Directives, off.Noindex.Total)
	}
}

func TestBreakerTroubleAndTimeline(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	src := &fakeSource{
		running: true,
		results: []store.Result{ok("/"), ok("/x", failedAs(hostDown), func(r *store.Result) { r.Host = "dead.test"; r.FetchedAt = at(50) })},
		transitions: []store.Transition{
			{At: at(1), Host: "flaky.test", From: "closed", To: "open"},
			{At: at(6), Host: "flaky.test", From: "open", To: "half-open"},
			{At: at(7), Host: "flaky.test", From: "half-open", To: "closed"},
			{At: at(10), Host: "dead.test", From: "closed", To: "open"},
			{At: at(20), Host: "flaky.test", From: "closed", To: "open"},
		},
		hosts: []control.HostRow{{Host: "a.test", State: "closed"}, {Host: "held.test", State: "open", Hold: "paused", PauseReason: "asked to stop"},
			{Host: "flaky.test", State: "open"}, {Host: "dead.test", State: "open"}},
	}
	rep := build(t, src, Options{})
	var got []string
	for _, h := range rep.Summary.Troubled {
		got = append(got, fmt.Sprintf("%s opened %d given up %d %s %s", h.Host, h.Opened, h.GivenUp, h.State, h.HoldReason))
	}
	want := []string{"flaky.test opened 2 given up 0 open ", "dead.test opened 1 given up 1 open ",
		"held.test opened 0 given up 0 open asked to stop"}
	if !slices.Equal(got, want) {
		t.Errorf("troubled hosts:\n%q\nwant\n%q", got, want)
	}
	tl := rep.Charts.Timeline
	end := t0.Add(time.Hour) // running: the timeline runs to now
	if !tl.Start.Equal(t0) || !tl.End.Equal(end) || len(tl.Hosts) != 2 || tl.Hosts[0].Host != "flaky.test" {
		t.Fatalf("timeline %v to %v hosts %+v", tl.Start, tl.End, tl.Hosts)
	}
	wantSpans := []Span{{From: at(1), To: at(6), State: "open"}, {From: at(6), To: at(7), State: "half-open"}, {From: at(20), To: end, State: "open"}}
	if !slices.Equal(tl.Hosts[0].Spans, wantSpans) {
		t.Errorf("spans %+v, want %+v", tl.Hosts[0].Spans, wantSpans)
	}
}

func TestHistograms(t *testing.T) {
	results := []store.Result{ok("/a", took(99)), ok("/b", took(100), func(r *store.Result) { r.Depth = 2 }),
		ok("/c", status(404), failedAs("permanent"), took(10000)), ok("/d", failedAs("transient"), status(0)),
		ok("/e", redirectTo("/a"), took(1000)), ok("/f", status(503), failedAs("transient"), func(r *store.Result) { r.Depth = 40 }),
		ok("/g", failedAs("robots"))}
	rep := build(t, &fakeSource{results: results}, Options{})
	counts := func(bs []Bucket) string {
		var parts []string
		for _, b := range bs {
			if b.Count > 0 {
				parts = append(parts, fmt.Sprintf("%s:%d", b.Label, b.Count))
			}
		}
		return strings.Join(parts, " ")
	}
	for name, tt := range map[string]struct {
		got  []Bucket
		want string
	}{
		"status": {rep.Charts.StatusClasses, "2xx:2 3xx:1 4xx:1 5xx:1 none:1"},
		"times":  {rep.Charts.ResponseTimes, "<100ms:2 100-250ms:1 1-2s:1 ≥10s:1"},
		"depths": {rep.Charts.Depths, "0:4 2:1 30+:1"},
	} {
		if got := counts(tt.got); got != tt.want {
			t.Errorf("%s: %s, want %s", name, got, tt.want)
		}
	}
	if n := len(rep.Charts.Depths); n != maxDepthBucket+1 {
		t.Errorf("depth buckets %d, want up to the last counted one (%d)", n, maxDepthBucket+1)
	}
}
