package report

import (
	"cmp"
	"container/heap"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	"breakwater/store"
)

// Options are what Build needs besides the crawl.
type Options struct {
	// Source names the crawl in the report (its --db or --store).
	Source string
	// Graph gives the referrers of broken URLs; nil reads them from the
	// results (ReferrerGraph): the first page each was found on.
	Graph Graph
	// Directives reads meta robots and canonicals from a result; nil
	// leaves the noindex and canonical sections empty.
	Directives DirectivesFunc
	// Caps bound the tables; zero fields are DefaultCaps'.
	Caps Caps
	// Now is when the report is made.
	Now time.Time
}

// Classes of failed results that are the crawl's own choice not to fetch
// a URL rather than a failure of the URL: never broken.
const (
	classRobots = "robots"
	classTrap   = "trap"
)

var skippedClasses = map[string]bool{classRobots: true, "out-of-scope": true, "host-page-cap": true, classTrap: true}

// hostDown is the class of the URLs of a host given up on.
const hostDown = "host-down"

// Build reads the crawl from src into a report.
func Build(src Source, opt Options) (*Report, error) {
	b := newBuilder(opt)
	st, err := src.Status()
	if err != nil {
		return nil, fmt.Errorf("read status: %w", err)
	}
	b.rep.Running, b.rep.Summary.Queued, b.rep.Summary.Hosts = st.Running, st.Queued, st.Hosts
	if err := src.Results(false, b.addResult); err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	graph := opt.Graph
	b.rep.LinkGraph = "edges"
	if graph == nil {
		graph, b.rep.LinkGraph = ReferrerGraph(src), "referrer"
	}
	err = graph.Edges(b.addEdge)
	if errors.Is(err, store.ErrUnsupported) && opt.Graph != nil {
		// A store that keeps no link graph (a fleet's) says so before any edge.
		b.rep.LinkGraph = "referrer"
		err = ReferrerGraph(src).Edges(b.addEdge)
	}
	if err != nil {
		return nil, fmt.Errorf("read links: %w", err)
	}
	b.walkRedirects()
	b.pickGroups()
	if b.needLookup() {
		if err := src.Results(false, b.lookup); err != nil {
			return nil, fmt.Errorf("read results again: %w", err)
		}
	}
	if err := b.breakers(src); err != nil {
		return nil, err
	}
	return b.finish(), nil
}

// ReferrerGraph is the graph a crawl without a link graph still has: one
// edge to each failed URL from the page it was first found on, without
// anchor text.
func ReferrerGraph(src Source) Graph { return referrerGraph{src} }

type referrerGraph struct{ src Source }

func (g referrerGraph) Edges(fn func(store.Edge) error) error {
	return g.src.Results(true, func(r *store.Result) error {
		if r.Referrer == "" {
			return nil
		}
		kind := store.LinkNavigation
		if r.Kind == store.KindRequisite {
			kind = store.LinkRequisite
		}
		return fn(store.Edge{From: r.Referrer, To: r.URL, Kind: kind})
	})
}

type redirect struct {
	status   int
	location string
}

// lookedUp is what the last pass learns of a URL the first pass only
// named (a chain's end, a canonical).
type lookedUp struct {
	seen   bool
	status int
	class  string
}

type builder struct {
	opt  Options
	caps Caps
	rep  *Report

	brokenLinks, brokenReqs targetSet
	redirects               map[string]redirect
	redirectsLeft           int
	givenUp                 map[string]int

	seed       maphash.Seed
	shaCount   map[[32]byte]int32
	titleCount map[uint64]int32
	shaPick    map[[32]byte]*Group
	titlePick  map[uint64]*Group

	lookups map[string]*lookedUp
	slow    slowHeap

	status, times, depths histogram
	first, last           time.Time
}

func newBuilder(opt Options) *builder {
	caps := opt.Caps.withDefaults()
	return &builder{opt: opt, caps: caps,
		rep: &Report{Schema: SchemaVersion, Source: opt.Source, GeneratedAt: opt.Now.UTC(), Caps: caps,
			Directives: opt.Directives != nil, Summary: Summary{ByClass: map[string]int{}}},
		brokenLinks: newTargetSet(caps), brokenReqs: newTargetSet(caps),
		redirects: map[string]redirect{}, givenUp: map[string]int{}, seed: maphash.MakeSeed(),
		shaCount: map[[32]byte]int32{}, titleCount: map[uint64]int32{}, lookups: map[string]*lookedUp{},
		status: newHistogram(statusLabels), times: newHistogram(timeLabels), depths: newHistogram(depthLabels())}
}

func (b *builder) addResult(r *store.Result) error {
	s := &b.rep.Summary
	s.Results++
	b.seenAt(r.FetchedAt)
	skipped := r.Failed() && skippedClasses[r.ErrorClass]
	switch {
	case skipped:
		s.Skipped++
		s.ByClass[r.ErrorClass]++
		b.held(r)
		return nil
	case r.Failed():
		s.Failed++
		s.ByClass[r.ErrorClass]++
		if r.ErrorClass == hostDown {
			b.givenUp[r.Host]++
		}
		b.broken(r)
	case r.Kind == store.KindPage:
		s.Pages++
	case r.Kind == store.KindRequisite:
		s.Requisites++
	}
	b.status.add(statusBucket(r.Status))
	if r.Status > 0 {
		b.times.add(timeBucket(r.DurationMS))
	}
	if r.Kind == store.KindPage {
		b.depths.add(min(r.Depth, maxDepthBucket))
	}
	if r.Status >= 300 && r.Status < 400 && r.Location != "" {
		b.addRedirect(r)
	}
	if !r.Failed() && r.Kind == store.KindPage && r.Status >= 200 && r.Status < 300 {
		b.page(r)
	}
	return nil
}

func (b *builder) seenAt(t time.Time) {
	if t.IsZero() {
		return
	}
	if b.first.IsZero() || t.Before(b.first) {
		b.first = t
	}
	if t.After(b.last) {
		b.last = t
	}
}

// held lists what robots.txt and the trap rules kept the crawl from.
func (b *builder) held(r *store.Result) {
	var list *Pages
	switch r.ErrorClass {
	case classRobots:
		list = &b.rep.RobotsBlocked
	case classTrap:
		list = &b.rep.Trapped
	default:
		return
	}
	list.Total++
	if len(list.Items) < b.caps.Rows {
		list.Items = append(list.Items, Page{URL: r.URL, Depth: r.Depth, Referrer: r.Referrer, Error: r.Error})
	}
}

func (b *builder) broken(r *store.Result) {
	switch r.Kind {
	case store.KindPage:
		b.brokenLinks.add(r)
	case store.KindRequisite:
		b.brokenReqs.add(r)
	}
}

func (b *builder) addRedirect(r *store.Result) {
	if len(b.redirects) >= b.caps.Redirects {
		b.redirectsLeft++
		return
	}
	b.redirects[r.URL] = redirect{status: r.Status, location: r.Location}
}

// page takes what a working page adds: duplicates, directives, slowness.
func (b *builder) page(r *store.Result) {
	if sum, err := hex.DecodeString(r.SHA256); err == nil && len(sum) == 32 {
		b.shaCount[[32]byte(sum)]++
	}
	if r.Title != "" {
		b.titleCount[maphash.String(b.seed, r.Title)]++
	}
	b.slow.push(Page{URL: r.URL, Status: r.Status, Title: r.Title, DurationMS: r.DurationMS, Depth: r.Depth}, b.caps.Slowest)
	if b.opt.Directives == nil {
		return
	}
	d := b.opt.Directives(r)
	if isNoindex(d.Robots) {
		b.rep.Noindex.Total++
		if len(b.rep.Noindex.Items) < b.caps.Rows {
			b.rep.Noindex.Items = append(b.rep.Noindex.Items, Page{URL: r.URL, Status: r.Status, Title: r.Title,
				Depth: r.Depth, Referrer: r.Referrer, Robots: d.Robots})
		}
	}
	if d.Canonical != "" && d.Canonical != r.URL && d.Canonical != r.FinalURL {
		c := &b.rep.Canonicals
		c.Total++
		if len(c.Items) < b.caps.Rows {
			c.Items = append(c.Items, Canonical{URL: r.URL, Canonical: d.Canonical})
			b.lookups[d.Canonical] = &lookedUp{}
		}
	}
}

func isNoindex(robots []string) bool {
	return slices.Contains(robots, "noindex") || slices.Contains(robots, "none")
}

func (b *builder) addEdge(e store.Edge) error {
	if t := b.brokenLinks.byURL[e.To]; t != nil {
		t.addReferrer(e, b.caps.Referrers)
	}
	if t := b.brokenReqs.byURL[e.To]; t != nil {
		t.addReferrer(e, b.caps.Referrers)
	}
	return nil
}

// pickGroups chooses the duplicate groups the last pass lists the URLs
// of: the largest first.
func (b *builder) pickGroups() {
	b.shaPick = pick(b.shaCount, b.caps.Groups, &b.rep.DuplicateContent,
		func(k [32]byte) string { return hex.EncodeToString(k[:]) }, func(a, c [32]byte) int { return slices.Compare(a[:], c[:]) })
	b.titlePick = pick(b.titleCount, b.caps.Groups, &b.rep.DuplicateTitles,
		func(uint64) string { return "" }, cmp.Compare[uint64])
	b.shaCount, b.titleCount = nil, nil
}

func pick[K comparable](counts map[K]int32, limit int, g *Groups, key func(K) string, compare func(a, b K) int) map[K]*Group {
	var dups []K
	for k, n := range counts {
		if n > 1 {
			dups = append(dups, k)
			g.Total++
			g.Pages += int(n)
		}
	}
	slices.SortFunc(dups, func(a, c K) int {
		return cmp.Or(cmp.Compare(counts[c], counts[a]), compare(a, c))
	})
	out := make(map[K]*Group, min(len(dups), limit))
	for _, k := range dups[:min(len(dups), limit)] {
		out[k] = &Group{Key: key(k), Count: int(counts[k])}
	}
	return out
}

func (b *builder) needLookup() bool {
	return len(b.lookups) > 0 || len(b.shaPick) > 0 || len(b.titlePick) > 0
}

// lookup is the last pass: the statuses of URLs named by chains and
// canonicals, and the URLs of the duplicate groups listed.
func (b *builder) lookup(r *store.Result) error {
	if l := b.lookups[r.URL]; l != nil {
		*l = lookedUp{seen: true, status: r.Status, class: r.ErrorClass}
	}
	if r.Failed() || r.Kind != store.KindPage || r.Status < 200 || r.Status >= 300 {
		return nil
	}
	if sum, err := hex.DecodeString(r.SHA256); err == nil && len(sum) == 32 {
		if g := b.shaPick[[32]byte(sum)]; g != nil && len(g.URLs) < b.caps.GroupURLs {
			g.URLs = append(g.URLs, r.URL)
		}
	}
	if r.Title != "" {
		if g := b.titlePick[maphash.String(b.seed, r.Title)]; g != nil {
			g.Key = cmp.Or(g.Key, r.Title)
			if len(g.URLs) < b.caps.GroupURLs {
				g.URLs = append(g.URLs, r.URL)
			}
		}
	}
	return nil
}

func (b *builder) finish() *Report {
	rep := b.rep
	rep.BrokenLinks = b.brokenLinks.targets()
	rep.BrokenRequisites = b.brokenReqs.targets()
	b.finishChains(&rep.RedirectChains)
	b.finishChains(&rep.RedirectLoops)
	for i := range rep.Canonicals.Items {
		c := &rep.Canonicals.Items[i]
		l := b.lookups[c.Canonical]
		c.TargetStatus = l.status
		switch _, redirects := b.redirects[c.Canonical]; {
		case redirects:
			c.Problem = "redirected"
		case !l.seen:
			c.Problem = "not-crawled"
		case l.class != "":
			c.Problem = "broken"
		default:
			c.Problem = "elsewhere"
		}
	}
	rep.DuplicateContent.Items = groups(b.shaPick)
	rep.DuplicateTitles.Items = groups(b.titlePick)
	rep.Slowest = b.slow.sorted()
	rep.Charts.StatusClasses = b.status.buckets()
	rep.Charts.ResponseTimes = b.times.buckets()
	rep.Charts.Depths = b.depths.trimmed()
	return rep
}

func groups[K comparable](picked map[K]*Group) []Group {
	out := make([]Group, 0, len(picked))
	for _, g := range picked {
		slices.Sort(g.URLs)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, c Group) int { return cmp.Or(cmp.Compare(c.Count, a.Count), cmp.Compare(a.Key, c.Key)) })
	return out
}

// targetSet is the broken URLs of one kind: up to the cap listed, every
// one counted.
type targetSet struct {
	caps  Caps
	total int
	list  []*Target
	byURL map[string]*Target
}

func newTargetSet(caps Caps) targetSet { return targetSet{caps: caps, byURL: map[string]*Target{}} }

func (s *targetSet) add(r *store.Result) {
	s.total++
	if len(s.list) >= s.caps.Targets {
		return
	}
	t := &Target{URL: r.URL, Status: r.Status, ErrorClass: r.ErrorClass, Error: r.Error}
	s.list = append(s.list, t)
	s.byURL[r.URL] = t
}

func (t *Target) addReferrer(e store.Edge, limit int) {
	t.ReferrersTotal++
	if len(t.Referrers) < limit {
		t.Referrers = append(t.Referrers, Referrer{From: e.From, Text: e.Text, Element: e.Element, Attr: e.Attr, Rel: e.Rel.Names()})
	}
}

// targets lists the broken URLs, the most linked first.
func (s *targetSet) targets() Targets {
	out := Targets{Total: s.total, Items: make([]Target, 0, len(s.list))}
	for _, t := range s.list {
		slices.SortFunc(t.Referrers, func(a, c Referrer) int { return cmp.Or(cmp.Compare(a.From, c.From), cmp.Compare(a.Text, c.Text)) })
		out.Items = append(out.Items, *t)
	}
	slices.SortFunc(out.Items, func(a, c Target) int {
		return cmp.Or(cmp.Compare(c.ReferrersTotal, a.ReferrersTotal), cmp.Compare(a.URL, c.URL))
	})
	return out
}

// slowHeap keeps the slowest pages seen: a min-heap on duration, so the
// fastest of them is the one a slower page replaces.
type slowHeap []Page

func (h slowHeap) Len() int           { return len(h) }
func (h slowHeap) Less(i, j int) bool { return slowerThan(h[j], h[i]) }
func (h slowHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *slowHeap) Push(x any)        { *h = append(*h, x.(Page)) }
func (h *slowHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	*h = old[:len(old)-1]
	return p
}

// slowerThan orders pages by duration, then URL, so ties are decided the
// same whatever order results come in.
func slowerThan(a, b Page) bool {
	if a.DurationMS != b.DurationMS {
		return a.DurationMS > b.DurationMS
	}
	return a.URL < b.URL
}

func (h *slowHeap) push(p Page, limit int) {
	switch {
	case len(*h) < limit:
		heap.Push(h, p)
	case slowerThan(p, (*h)[0]):
		(*h)[0] = p
		heap.Fix(h, 0)
	}
}

func (h slowHeap) sorted() []Page {
	out := slices.Clone(h)
	slices.SortFunc(out, func(a, b Page) int {
		return cmp.Or(cmp.Compare(b.DurationMS, a.DurationMS), cmp.Compare(a.URL, b.URL))
	})
	return out
}
