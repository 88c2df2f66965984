package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"breakwater/demosite"
)

const soakMethod = "one crawl of the healthy hosts plus a dead host (its URLs linked from the live pages), a " +
	"flaky (30% 500s), a throttling (429 with Retry-After: 1 above its rate), a recovering (503 at first) and " +
	"a refusing host (403 naming the crawler: a case, its URLs held for a person), all served by this process, " +
	"crawled in a child process as the memory section's from every root with --warc. RSS is sampled every " +
	"20 ms and taken when the healthy hosts have served 25, 50 and 100% of their pages. Goroutines and " +
	"descriptors are read by the child before the crawl and after Run returns until they are back or the " +
	"settle time passes. The archive is read back with warc.Check after the child exits, and the database " +
	"checked against it as `breakwater verify --db --warc` does."

func (r *Report) soakSection() *Section {
	s := r.Soak
	if s == nil || s.Run == nil {
		return nil
	}
	c, sc := s.Run.Child, s.Config
	t := s.Healthy
	figs := []Figure{
		num("pages fetched", Count, c.Fetched, meansFetched),
		num("URLs failed", Count, c.Failed, ""),
		secsOf("crawl time", time.Duration(c.CrawlNS), "crawl.New to Run's return, the unhealthy hosts' tail included"),
		num("pages/s over the whole crawl", PagesPerSec, s.PagesPerSec(), ""),
		text("the crawl ended", c.Why, "the engine's own word on why Run returned"),
		secsOf("healthy pages all served at", s.HealthyDone, "the last healthy request, from the child's start"),
		num("healthy pages/s", PagesPerSec, s.HealthyPerSec(), "healthy pages over the time until the last was served"),
		num("healthy page requests", Count, t.PageRequests, ""),
		num("healthy pages served", Count, t.DistinctPages, meansServed).of(int64(sc.Site.URLs())).want(All, 0),
		num("healthy pages fetched twice", Count, t.Duplicates(), meansTwice).want(Equal, 0),
		num("healthy pages stored after more than one attempt", Count, s.HealthyRetried, "the pages asked "+
			"more than once named, with each request's status and time").listing(strings.Join(s.Refetched[:min(len(s.Refetched), 3)], "; ")),
	}
	for _, smp := range s.Run.Samples {
		at := fmt.Sprintf(" at %d%%", smp.Percent)
		figs = append(figs,
			num("peak RSS"+at, Bytes, kib(smp.HWMKB), "VmHWM, the high-water mark so far, when the healthy hosts had served that share of their pages"),
			num("RSS"+at, Bytes, kib(smp.RSSKB), ""),
			num("anonymous RSS"+at, Bytes, kib(smp.AnonKB), ""),
			num("healthy pages served"+at, Count, smp.Pages, ""))
	}
	if s.DBBytes > 0 {
		figs = append(figs, num("database file at the end", Bytes, s.DBBytes, "its pages mapped in count in RSS, not in anon"))
	}
	// The verdict is on VmRSS, as the memory section's growth is: a peak
	// cannot fall, so its growth measures the largest passing spike.
	if peak, rss, anon, ok := s.Growth(); ok {
		figs = append(figs,
			num("RSS growth from 25% to 100%", Change, rss, "memory must not follow the pages crawled").want(Within, TargetGrowth),
			num("peak RSS growth from 25% to 100%", Change, peak, ""),
			num("anonymous RSS growth from 25% to 100%", Change, anon, ""))
	}
	figs = append(figs,
		num("peak RSS of the whole run", Bytes, kib(s.Run.PeakKB), "its VmHWM as it exits"),
		num("RSS at the end", Bytes, kib(c.RSSKB), ""),
		num("anonymous RSS at the end", Bytes, kib(c.AnonKB), ""))
	figs = append(figs, s.leakFigures()...)
	figs = append(figs, s.deadFigures()...)
	for _, h := range s.Unhealthy {
		if h.Behavior != demosite.Dead.String() {
			figs = append(figs, h.figures()...)
		}
	}
	if len(s.Logged) > 0 {
		var parts []string
		for _, msg := range slices.Sorted(maps.Keys(s.Logged)) {
			parts = append(parts, fmt.Sprintf("%dx %s", s.Logged[msg], shorten(msg, 60)))
		}
		meaning := "the dead host given up and the refusing host's case are expected; an error is not"
		if s.LogFile != "" {
			meaning += "; the log is kept in " + s.LogFile
		}
		figs = append(figs, text("warnings and errors logged", strings.Join(parts, "; "), meaning))
	}
	figs = append(figs, s.archiveFigures()...)
	childLimit := 0.0
	if c.Leaks != nil {
		childLimit = float64(c.Leaks.NoFile)
	}
	figs = append(figs,
		num("RLIMIT_NOFILE of this process", Count, float64(s.NoFile), "raised for the site's listeners"),
		num("RLIMIT_NOFILE of the child", Count, childLimit, "0: not raised"))
	return &Section{Name: SectionSoak, Method: soakMethod,
		Settings: []Setting{set("healthy site", sc.Site), set("unhealthy hosts' pages", sc.UnhealthyPages),
			set("dead URLs", sc.DeadURLs), set("throttle above", fmt.Sprintf("%g/s", sc.ThrottleRPS)),
			set("recover after", sc.RecoverAfter), set("workers", s.Workers), set("host concurrency", s.HostConcurrency),
			set("delay", 0), set("timeout", sc.Timeout), set("retry base", sc.RetryBase), set("retry max", sc.RetryMax),
			set("retry budget", sc.RetryBudget), set("breaker threshold", sc.Breaker.Threshold),
			set("rest", sc.Breaker.Rest), set("probes", sc.Breaker.Probes), set("give-up-after", sc.GiveUpAfter),
			set("settle", sc.Settle)},
		Figures: figs,
	}
}

func (s *SoakResult) leakFigures() []Figure {
	l := s.Run.Child.Leaks
	if l == nil {
		return nil
	}
	figs := []Figure{
		num("goroutines before the crawl", Count, l.GoroutinesBefore, "the database open, as it still is when Run returns"),
		num("goroutines as Run returned", Count, l.GoroutinesAtEnd, ""),
		num("goroutines settled", Count, l.GoroutinesSettled, "back to the count before: nothing the crawl "+
			"started outlives it").want(AtMost, float64(l.GoroutinesBefore)),
		num("descriptors before the crawl", Count, l.FDsBefore, ""),
		num("descriptors as Run returned", Count, l.FDsAtEnd, ""),
		num("descriptors settled", Count, l.FDsSettled, "").want(AtMost, float64(l.FDsBefore)),
		secsOf("settled after", time.Duration(l.SettleNS), "until both were back, or the settle time"),
	}
	if len(l.ExtraFDs) > 0 {
		figs = append(figs, text("descriptors left open", strings.Join(l.ExtraFDs[:min(len(l.ExtraFDs), 5)], ", "), "the first few"))
	}
	if s.GoroutineDump != "" {
		figs = append(figs, text("goroutines left: their stacks", s.GoroutineDump, "the file the child's goroutine profile is kept in"))
	}
	return figs
}

func (s *SoakResult) deadFigures() []Figure {
	d := s.Dead
	recorded, classes := outcomes(d.Results)
	return []Figure{
		num("dead host: connections", Count, d.Connections, "at most the breaker's threshold + the host "+
			"concurrency + one probe a rest while its circuit was open").want(AtMost, float64(d.Bound)),
		num("dead host: probes allowed", Count, d.Probes, "rest periods from the opening to the give-up or the "+
			"last connection, whichever is later: a URL found after the give-up may still be let through"),
		secsOf("dead host: circuit open", d.OpenSpan, ""),
		secsOf("dead host: first tried at", d.FirstTried, "from the child's start"),
		secsOf("dead host: circuit opened at", d.Opened, ""),
		secsOf("dead host: given up at", d.GivenUp, "its first URL recorded host-down"),
		secsOf("dead host: last tried at", d.LastTried, ""),
		num("dead host: URLs recorded", Count, recorded, "its stored results, by error class").listing(classes),
		num("dead host: URLs left", Count, d.Left, "still queued or deferred"),
	}
}

// figures are what one unhealthy host saw and what the crawl stored for it.
func (h SoakHost) figures() []Figure {
	g := h.Behavior + " host: "
	var st []string
	for _, code := range slices.Sorted(maps.Keys(h.Statuses)) {
		st = append(st, fmt.Sprintf("%d: %d", code, h.Statuses[code]))
	}
	var tr []string
	for _, to := range slices.Sorted(maps.Keys(h.Transitions)) {
		tr = append(tr, fmt.Sprintf("%s %d", to, h.Transitions[to]))
	}
	if len(tr) == 0 {
		tr = append(tr, "none")
	}
	c := h.Stored
	return []Figure{
		num(g+"requests", Count, h.Requests, "page requests, robots.txt aside; the statuses of all").listing(strings.Join(st, ", ")),
		num(g+"robots.txt requests", Count, h.Robots, ""),
		num(g+"URLs fetched", Count, c.Fetched, "its URLs' counts in the file at the end"),
		num(g+"URLs failed", Count, c.Failed, ""),
		num(g+"URLs left", Count, c.Queued+c.Deferred, ""),
		text(g+"breaker transitions", strings.Join(tr, ", "), "by the state entered"),
		secsOf(g+"last request at", h.Last, "what kept the crawl running after the healthy pages"),
	}
}

func (s *SoakResult) archiveFigures() []Figure {
	w, v := s.WARC, s.Verify
	urls := int64(s.Config.Site.URLs())
	problems := len(v.Problems) + v.Omitted
	if !v.OK {
		problems = max(problems, 1)
	}
	return []Figure{
		num("WARC files", Count, w.Files, ""),
		num("WARC bytes", Bytes, w.Bytes, ""),
		num("response records", Count, w.Records["response"], ""),
		num("revisit records", Count, w.Records["revisit"], ""),
		num("warc.Check problems", Count, w.NProblems, "").listing(strings.Join(w.Problems, "; ")).check(Equal, 0),
		num("unfinished WARC files", Count, len(w.Unfinished), "").listing(strings.Join(w.Unfinished, ", ")).check(Equal, 0),
		num("healthy pages in one response or revisit record", Count, w.HealthyOnce, "").of(urls).check(All, 0),
		num("healthy pages archived more than once", Count, w.HealthyTwice, "").check(Equal, 0),
		num("healthy pages not archived", Count, w.HealthyMissing, "").check(Equal, 0),
		num("verify problems", Count, problems, "the database's invariants, every page done "+
			"in the archive").listing(strings.Join(v.Problems[:min(len(v.Problems), 3)], "; ")).check(Equal, 0),
		num("URLs verify saw", Count, v.Seen, ""),
	}
}

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
