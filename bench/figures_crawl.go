package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"breakwater/robots"
)

// Targets of the ceiling, crawl and recrawl sections.
const (
	TargetCrawlRatio        = 0.50 // the crawl's pages/s over the ceiling's
	TargetWARCRatio         = 0.30 // the same with --warc
	TargetWARCToCrawl       = 0.80 // the crawl with --warc over the crawl without
	TargetListenToCrawl     = 0.97 // serving metrics, scraped every second, costs at most 3%
	TargetRecrawlTimeRatio  = 3.0  // an unchanged recrawl at least 3x faster than the first crawl
	TargetRecrawlBytesRatio = 10.0 // and receiving at least 10x fewer body bytes
)

// wgetWARCPagesPerSec is a reference measurement, not taken by the bench:
// GNU wget 1.21 with --warc-file on a 200-host x 60-page local site.
const wgetWARCPagesPerSec = 170

const (
	meansWall    = "from opening the database file to the end of Run: everything a user waits for"
	meansFetched = "pages the crawl stored as fetched"
	meansTwice   = "page requests beyond the first of each page, from the site's logs: refetches"
	meansServed  = "distinct pages the site answered 200, of the site's pages"
)

func (r *Report) ceilingSection() *Section {
	c := r.Ceiling
	if c == nil {
		return nil
	}
	return &Section{Name: SectionCeiling,
		Method: "net/http with keep-alive fetches each URL of the site once, its body read and dropped, page by page " +
			"across hosts so that goroutines do not queue behind one host; the median pass is the figure.",
		Settings: []Setting{set("site", c.Site), set("URLs", c.Pages), set("goroutines", r.Workers),
			set("MaxConnsPerHost", r.HostConcurrency), set("passes", c.Passes)},
		Figures: []Figure{
			num("pages/s", PagesPerSec, c.PagesPerSec, "how fast this machine fetches the site at all, "+
				"with no parsing and no storage: what the crawl is held against").over(c.PassRates),
			num("errors", Count, c.Errors, "transport errors and answers other than 200, all passes").check(Equal, 0),
		},
	}
}

func (r *Report) crawlSection() *Section {
	c := r.Crawl
	if c == nil {
		return nil
	}
	t := c.Traffic
	figs := []Figure{
		num("pages fetched", Count, c.Fetched, meansFetched),
		secsOf("wall", c.Wall, meansWall),
		num("distinct pages/s", PagesPerSec, c.PagesPerSec, "pages fetched over the wall time"),
	}
	if c.RatioToCeiling > 0 {
		figs = append(figs, num("ratio to ceiling", Share, c.RatioToCeiling,
			"the crawl's pages/s over the ceiling's: the share of the machine's raw fetch rate the engine keeps").
			want(AtLeast, TargetCrawlRatio))
	}
	figs = append(figs,
		num("pages fetched twice", Count, t.Duplicates(), meansTwice).want(Equal, 0),
		num("distinct pages served", Count, t.DistinctPages, meansServed).of(int64(c.Site.URLs())).want(All, 0),
		num("robots.txt requests", Count, t.RobotsRequests, "one a host is the most a crawl should ask"),
		num("failed URLs", Count, c.Failed, ""),
		num("database file", Bytes, c.DBBytes, "the file's size at the end"),
	)
	if l := c.Listen; l != nil {
		const g = "with --listen: "
		figs = append(figs,
			num(g+"pages fetched", Count, l.Fetched, meansFetched),
			secsOf(g+"wall", l.Wall, meansWall),
			num(g+"distinct pages/s", PagesPerSec, l.PagesPerSec, "the same crawl with its metrics served and scraped every second"),
			num(g+"ratio to the crawl without it", Share, l.RatioToCrawl, "what serving metrics costs the crawl").
				want(AtLeast, TargetListenToCrawl),
			num(g+"scrapes answered", Count, l.Scrapes, "GET /metrics answered 200 while the crawl ran"),
		)
	}
	if g := c.Graph; g != nil {
		figs = append(figs, graphFigures(g)...)
	}
	if q := c.Requisites; q != nil {
		figs = append(figs, requisiteFigures(q)...)
	}
	if w := c.WARC; w != nil {
		figs = append(figs, warcFigures(w, c.Site)...)
		figs = append(figs, warcRatioFigures(w.Ratios)...)
	}
	return &Section{Name: SectionCrawl,
		Method: "crawl.New + Run in this process from every host's root into a fresh file, the ceiling's site; " +
			"requests are counted from the site's own logs. Then the same crawl with metrics served (--listen), " +
			"the same crawl into a file that keeps no link graph (the graph's cost; its size is the first crawl's file's), " +
			"then a site of the same size whose pages have a stylesheet and two images, with and without --page-requisites, " +
			"and with --warc into an empty directory (the archive then read back with warc.Check, not timed).",
		Settings: []Setting{set("site", c.Site), set("workers", r.Workers), set("host concurrency", r.HostConcurrency),
			set("delay", 0), set("sitemaps", false)},
		Figures: figs,
	}
}

func warcFigures(w *WARCRun, site Size) []Figure {
	const g = "with --warc: "
	t := w.Traffic
	figs := []Figure{
		num(g+"pages fetched", Count, w.Fetched, meansFetched),
		secsOf(g+"wall", w.Wall, meansWall),
		num(g+"distinct pages/s", PagesPerSec, w.PagesPerSec, "the same crawl writing a WARC archive"),
	}
	if w.RatioToCeiling > 0 {
		figs = append(figs, num(g+"ratio to ceiling", Share, w.RatioToCeiling, "").want(AtLeast, TargetWARCRatio))
	}
	return append(figs,
		num(g+"ratio to the crawl without --warc", Share, w.RatioToCrawl, "what archiving costs the crawl").
			want(AtLeast, TargetWARCToCrawl),
		num(g+"pages/s against wget's", Times, w.PagesPerSec/wgetWARCPagesPerSec, fmt.Sprintf("GNU wget 1.21 with "+
			"--warc-file fetched about %d distinct pages/s of a 200-host x 60-page local site, with 3,200 duplicate "+
			"fetches, and wrote about 1.9 KB of WARC a page (a reference measured by hand, not here)", wgetWARCPagesPerSec)),
		num(g+"pages fetched twice", Count, t.Duplicates(), meansTwice).want(Equal, 0),
		num(g+"distinct pages served", Count, t.DistinctPages, meansServed).of(int64(site.URLs())).want(All, 0),
		num(g+"WARC files", Count, w.Files, "finished .warc.gz files"),
		num(g+"WARC bytes", Bytes, w.Bytes, "their sizes summed"),
		num(g+"WARC bytes per page", PageBytes, w.BytesPerPage, "WARC bytes over pages fetched, warcinfo and robots.txt records included"),
		num(g+"warcinfo records", Count, w.Records["warcinfo"], "warc.Check's count of records by WARC-Type"),
		num(g+"request records", Count, w.Records["request"], "warc.Check's count of records by WARC-Type"),
		num(g+"response records", Count, w.Records["response"], "warc.Check's count of records by WARC-Type"),
		num(g+"revisit records", Count, w.Records["revisit"], "warc.Check's count of records by WARC-Type"),
		num(g+"warc.Check problems", Count, w.NProblems, "every record parsed, digests recomputed, requests "+
			"paired with responses").listing(strings.Join(w.Problems, "; ")).check(Equal, 0),
		num(g+"unfinished WARC files", Count, len(w.Unfinished), "").listing(strings.Join(w.Unfinished, ", ")).check(Equal, 0),
		num(g+"pages in one response or revisit record", Count, w.PagesArchived,
			"each fetched page must be archived exactly once").of(w.Fetched).check(All, 0),
		num(g+"pages archived more than once", Count, w.PagesArchivedTwice, "").check(Equal, 0),
		num(g+"failed URLs", Count, w.Failed, ""),
		num(g+"index.cdxj lines", Count, w.IndexRecords, "the index the crawl wrote as it ended (in its wall time): "+
			"a line for each response and revisit record").of(int64(w.Records["response"]+w.Records["revisit"])).check(All, 0),
		num(g+"index.cdxj written again", Seconds, w.IndexWall.Seconds(), "merged from the files' own indexes, "+
			"which the crawl keeps as it writes them"),
		num(g+"index.cdxj of files without indexes", Seconds, w.IndexReadWall.Seconds(), "each file read to index it, "+
			"as for an archive made before indexes were"),
	)
}

func (r *Report) recrawlSection() *Section {
	c := r.Recrawl
	if c == nil {
		return nil
	}
	f, u, ch := c.First, c.Unchanged, c.Changed
	const (
		meansRequests = "page requests the site saw, robots.txt aside"
		meansBytes    = "response body bytes the site sent, robots.txt included"
		meansTime     = "the first crawl's wall time over this one's"
	)
	figs := []Figure{
		secsOf("first crawl: wall", f.Wall, meansWall),
		num("first crawl: pages fetched", Count, f.Fetched, meansFetched),
		num("first crawl: page requests", Count, f.PageRequests, meansRequests),
		num("first crawl: body bytes received", Bytes, f.BodyBytes, meansBytes),
		secsOf("nothing changed: wall", u.Wall, meansWall),
		num("nothing changed: page requests", Count, u.PageRequests, "every page asked once").of(f.Fetched).want(All, 0),
		num("nothing changed: answered 304", Count, u.NotModified, "every page answered 304 Not Modified").of(f.Fetched).want(All, 0),
		num("nothing changed: time, first crawl / this", Times, c.TimeRatio(u), meansTime).want(AtLeast, TargetRecrawlTimeRatio),
		num("nothing changed: body bytes received", Bytes, u.BodyBytes, "at most a tenth of the first crawl's").
			want(AtMost, float64(f.BodyBytes)/TargetRecrawlBytesRatio),
		num("nothing changed: body bytes, first crawl / this", Times, c.BytesRatio(u),
			"the first crawl's body bytes over this one's (+Inf: none received)").want(AtLeast, TargetRecrawlBytesRatio),
		secsOf("a tenth changed: wall", ch.Wall, meansWall),
		num("a tenth changed: page requests", Count, ch.PageRequests, meansRequests),
		num("a tenth changed: answered 304", Count, ch.NotModified, "the pages that did not change"),
		num("a tenth changed: time, first crawl / this", Times, c.TimeRatio(ch), meansTime),
		num("a tenth changed: body bytes received", Bytes, ch.BodyBytes, meansBytes),
		num("a tenth changed: changed pages fetched again", Count, c.ChangedRefetched,
			"changed pages answered 200, from the site's logs").of(int64(c.ChangedPages)).want(All, 0),
		num("raw fetch loop: 200s", PagesPerSec, c.RawOK, "the ceiling's loop asking for every page plainly"),
		num("raw fetch loop: 304s", PagesPerSec, c.RawNotModified, "the same asking with each page's ETag"),
		num("raw fetch loop: 304s / 200s", Times, c.RawNotModified/c.RawOK, "what a 304 saves on this machine before any crawler runs"),
	}
	return &Section{Name: SectionRecrawl,
		Method: "the crawl section's site and settings crawled from its roots into one file, then twice more with " +
			"--recrawl-after, each run's clock further on so that every page is stale and robots.txt is not: once " +
			"with no page changed, once with every tenth page of each host given a new revision. Requests, 304s " +
			"and body bytes are counted from the site's own logs; the raw loop is the ceiling's, run after the crawls.",
		Settings: []Setting{set("site", c.Site), set("page bytes", RecrawlPageBytes), set("recrawl-after", recrawlAfter), set("clock step", recrawlStep),
			set("robots.txt cached", robots.DefaultTTL), set("pages changed", c.ChangedPages)},
		Figures: figs,
	}
}

// outcomes lists stored results by error class, "ok" for none: "host-down 36, transient 4".
func outcomes(byClass map[string]int64) (total int64, list string) {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(byClass)) {
		name := k
		if name == "" {
			name = "ok"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, byClass[k]))
		total += byClass[k]
	}
	return total, strings.Join(parts, ", ")
}
