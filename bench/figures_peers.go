package bench

import "fmt"

// Targets of the peers section.
const (
	TargetPeersRate    = 1.5 // breakwater's distinct pages/s over wget2's
	TargetPeersCPU     = 1.0 // breakwater's CPU per page over wget2's, at most
	TargetPeersCeiling = 0.5 // breakwater's pages/s over the raw fetch loop's
)

func (r *Report) peersSection() *Section {
	p := r.Peers
	if p == nil {
		return nil
	}
	s := &Section{Name: SectionPeers,
		Method: fmt.Sprintf("GNU wget2 (-r -l inf --max-threads %d --robots=on --wait 0 --delete-after, every host's root "+
			"from -i, not spanning hosts) and `breakwater crawl --workers %d --host-concurrency %d --delay 0` as child "+
			"processes over one loopback site, in rounds that alternate which goes first, each round ending with a pass "+
			"of the raw fetch loop at the same concurrency; distinct pages from the site's own logs, CPU (user + system) "+
			"and peak RSS from each process's VmHWM; medians over the runs.", p.Workers, p.Workers, p.HostConcurrency),
		Settings: []Setting{set("site", p.Site), set("threads / workers", p.Workers),
			set("host concurrency", p.HostConcurrency), set("runs each", len(p.Tool(ToolBreakwater)))},
	}
	if p.Skipped != "" {
		s.Figures = []Figure{text("not run", p.Skipped, "the section needs GNU wget2")}
		return s
	}
	if p.Wget2Version != "" {
		s.Settings = append(s.Settings, set("wget2", p.Wget2Version))
	}
	w, b := summarize(p.Tool(ToolWget2)), summarize(p.Tool(ToolBreakwater))
	ceil := medianFloat(p.CeilingRates)
	urls := int64(p.Site.URLs())
	var figs []Figure
	for _, t := range []struct {
		name string
		s    peerSummary
	}{{ToolWget2, w}, {ToolBreakwater, b}} {
		g := t.name + ": "
		figs = append(figs,
			num(g+"distinct pages/s", PagesPerSec, t.s.rate, "distinct pages the site served over the process's wall time").over(t.s.rates),
			num(g+"CPU µs per page", PerPage, t.s.cpuPerPage, "user + system microseconds of the process (rusage) per distinct page").over(t.s.cpus),
			num(g+"peak RSS", Bytes, t.s.maxRSSKB*1024, "the tool's own VmHWM, read while it ran, the highest of its runs"),
			num(g+"distinct pages served", Count, t.s.served, "the fewest of its runs, from the site's logs").of(urls).check(All, 0),
			secsOf(g+"start-up", t.s.leadIn, "from the process's start to the site's first request (median)"),
			secsOf(g+"shutdown", t.s.tail, "from the site's last request to the process's exit (median)"),
			num(g+"pages fetched twice", Count, t.s.duplicates, "the most of its runs; wget2 counts /p/3 and /p/3? (an empty query) as two URLs"),
		)
	}
	if w.rate > 0 {
		figs = append(figs, num("breakwater over wget2: pages/s", Times, b.rate/w.rate,
			"the medians' ratio: how much faster Breakwater crawls the same site").want(AtLeast, TargetPeersRate))
	}
	if w.cpuPerPage > 0 {
		figs = append(figs, num("breakwater over wget2: CPU per page", Times, b.cpuPerPage/w.cpuPerPage,
			"the medians' ratio: Breakwater spends no more CPU on a page than wget2").want(AtMost, TargetPeersCPU))
	}
	if w.maxRSSKB > 0 {
		figs = append(figs, num("breakwater over wget2: peak RSS", Times, float64(b.maxRSSKB)/float64(w.maxRSSKB), ""))
	}
	if ceil > 0 {
		figs = append(figs,
			num("ceiling pages/s", PagesPerSec, ceil, "the raw fetch loop at the same concurrency, one pass a round").over(p.CeilingRates),
			num("breakwater: ratio to ceiling", Share, b.rate/ceil, "Breakwater's median pages/s over the ceiling's median").
				want(AtLeast, TargetPeersCeiling))
	}
	s.Figures = figs
	return s
}
