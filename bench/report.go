package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets of issue 5; the crawl's ratio to the ceiling raised by issue 16,
// once pages streamed.
const (
	TargetCrawlRatio     = 0.50
	TargetDeadTimeRatio  = 1.15
	TargetWorkerSecRatio = 50.0
	TargetEnqueuePerSec  = 200_000.0
	TargetLeasePerSec    = 100_000.0
	TargetPeakBytes      = 150_000_000
	TargetGrowth         = 0.20
)

// Targets of issue 14: the crawl with --warc against the ceiling (the
// crawl's own target) and against the same crawl without --warc.
const (
	TargetWARCRatio   = 0.30
	TargetWARCToCrawl = 0.80
)

// verdictFailed marks a result that is wrong rather than slow (an archive
// that does not read back clean): shown as is in every configuration.
const verdictFailed = "FAILED"

// Row is one line of the table. Verdict is "met", "MISSED", "unknown"
// (a lower bound that cannot settle the target) or "" (no target).
type Row struct {
	Section, Figure, Value, Target, Verdict string
}

func verdict(met bool) string {
	if met {
		return "met"
	}
	return "MISSED"
}

// Rows returns the table's lines, section by section.
func (r *Report) Rows() []Row {
	var rows []Row
	rows = append(rows, r.ceilingRows()...)
	rows = append(rows, r.crawlRows()...)
	rows = append(rows, r.recrawlRows()...)
	rows = append(rows, r.deadRows()...)
	rows = append(rows, r.frontierRows()...)
	rows = append(rows, r.memoryRows()...)
	rows = append(rows, r.hostsRows()...)
	rows = append(rows, r.fleetRows()...)
	rows = append(rows, r.soakRows()...)
	if r.Quick {
		// The targets are for the sizes: at a fraction of them a
		// verdict only hints, and must not read like the real one.
		for i := range rows {
			if rows[i].Verdict != "" && rows[i].Verdict != verdictFailed {
				rows[i].Verdict = "(" + strings.ToLower(rows[i].Verdict) + ")"
			}
		}
	}
	return rows
}

func (r *Report) ceilingRows() []Row {
	c := r.Ceiling
	if c == nil {
		return nil
	}
	rows := []Row{{"ceiling", fmt.Sprintf("raw fetch loop, %s (%d URLs, median of %d passes, %s-%s)", c.Site, c.Pages,
		c.Passes, rate(c.MinPerSec, ""), rate(c.MaxPerSec, "")), rate(c.PagesPerSec, "pages/s"), "", ""}}
	if c.Errors > 0 {
		rows = append(rows, Row{"ceiling", "errors (transport or non-200)", strconv.Itoa(c.Errors), "0", verdict(false)})
	}
	return rows
}

func (r *Report) crawlRows() []Row {
	c := r.Crawl
	if c == nil {
		return nil
	}
	t := c.Traffic
	rows := []Row{
		{"crawl", fmt.Sprintf("distinct pages/s (%d fetched in %s)", c.Fetched, secs(c.Wall)), rate(c.PagesPerSec, "pages/s"), "", ""},
	}
	if c.RatioToCeiling > 0 {
		rows = append(rows, Row{"crawl", "ratio to ceiling", pct(c.RatioToCeiling), ">= " + pct(TargetCrawlRatio),
			verdict(c.RatioToCeiling >= TargetCrawlRatio)})
	}
	rows = append(rows,
		Row{"crawl", "page requests / distinct pages served", fmt.Sprintf("%d / %d", t.PageRequests, t.DistinctPages),
			"no refetch", verdict(t.Duplicates() == 0 && t.DistinctPages == c.Site.URLs())},
		Row{"crawl", "robots.txt requests (not counted above)", strconv.Itoa(t.RobotsRequests), "", ""},
		Row{"crawl", "failed URLs / database file", fmt.Sprintf("%d / %s", c.Failed, mb(c.DBBytes)), "", ""},
	)
	if l := c.Listen; l != nil {
		rows = append(rows,
			Row{"crawl", fmt.Sprintf("with --listen, scraped every second: distinct pages/s (%d fetched in %s, %d scrapes)",
				l.Fetched, secs(l.Wall), l.Scrapes), rate(l.PagesPerSec, "pages/s"), "", ""},
			Row{"crawl", "with --listen: ratio to the crawl without it", pct(l.RatioToCrawl),
				">= " + pct(TargetListenToCrawl), verdict(l.RatioToCrawl >= TargetListenToCrawl)})
	}
	if c.WARC != nil {
		rows = append(rows, c.warcRows()...)
	}
	return rows
}

func (c *CrawlResult) warcRows() []Row {
	w := c.WARC
	var rows []Row
	add := func(fig, val, target, v string) {
		rows = append(rows, Row{"crawl", "with --warc: " + fig, val, target, v})
	}
	add(fmt.Sprintf("distinct pages/s (%d fetched in %s)", w.Fetched, secs(w.Wall)), rate(w.PagesPerSec, "pages/s"), "", "")
	if w.RatioToCeiling > 0 {
		add("ratio to ceiling", pct(w.RatioToCeiling), ">= "+pct(TargetWARCRatio), verdict(w.RatioToCeiling >= TargetWARCRatio))
	}
	add("ratio to the crawl without --warc", pct(w.RatioToCrawl), ">= "+pct(TargetWARCToCrawl), verdict(w.RatioToCrawl >= TargetWARCToCrawl))
	t := w.Traffic
	add("page requests / distinct pages served", fmt.Sprintf("%d / %d", t.PageRequests, t.DistinctPages),
		"no refetch", verdict(t.Duplicates() == 0 && t.DistinctPages == c.Site.URLs()))
	add(fmt.Sprintf("WARC bytes per page (%d files, %s)", w.Files, mb(w.Bytes)), kb(w.BytesPerPage), "", "")
	add("records: warcinfo / request / response / revisit", fmt.Sprintf("%d / %d / %d / %d",
		w.Records["warcinfo"], w.Records["request"], w.Records["response"], w.Records["revisit"]), "", "")
	check := "clean"
	if !w.CheckOK {
		check = fmt.Sprintf("NOT CLEAN: %d problems, %d unfinished files", w.NProblems, len(w.Unfinished))
	}
	v := verdict(w.Clean())
	if !w.Clean() {
		v = verdictFailed
	}
	add("warc.Check; pages in one response or revisit / fetched", fmt.Sprintf("%s; %d / %d", check, w.PagesArchived, w.Fetched), "clean, all", v)
	if w.PagesArchivedTwice > 0 {
		add("pages archived more than once", strconv.Itoa(w.PagesArchivedTwice), "0", verdictFailed)
	}
	if w.Failed > 0 {
		add("failed URLs", strconv.FormatInt(w.Failed, 10), "", "")
	}
	return rows
}

func (r *Report) deadRows() []Row {
	d := r.Dead
	if d == nil {
		return nil
	}
	var rows []Row
	add := func(fig, val, target, v string) { rows = append(rows, Row{"dead", fig, val, target, v}) }
	if b := d.Baseline; b != nil {
		add(fmt.Sprintf("without dead host: wall (%d fetched)", b.Fetched), secs(b.Wall), "", "")
	}
	for _, run := range []*DeadRun{d.On, d.Off} {
		if run != nil {
			rows = append(rows, d.runRows(run)...)
		}
	}
	if d.On != nil && d.Off != nil {
		ratio := d.WorkerSecondsRatio()
		v := verdict(ratio >= TargetWorkerSecRatio)
		val := fmt.Sprintf("%.1fx", ratio)
		if d.Off.Capped {
			val = ">= " + val
			if ratio < TargetWorkerSecRatio {
				v = "unknown"
			}
		}
		add("worker-seconds on dead host, off / on", val, fmt.Sprintf(">= %.0fx", TargetWorkerSecRatio), v)
		if p := d.ProjectedOffSeconds(); p > 0 && d.On.DeadWorkerSeconds > 0 {
			add("  the same, breaker off projected to its end (estimate)",
				fmt.Sprintf("%.0f s, %.1fx", p, p/d.On.DeadWorkerSeconds), "", "")
		}
	}
	return rows
}

func (d *DeadResult) runRows(run *DeadRun) []Row {
	label := "breaker on"
	if !run.Breaker {
		label = "breaker off"
	}
	lower := ""
	if run.Capped {
		lower = ">= "
	}
	rows := []Row{
		{"dead", fmt.Sprintf("%s: wall (%d fetched)", label, run.Fetched), lower + secs(run.Wall), "", ""},
		{"dead", label + ": time ratio to no dead host", lower + fmt.Sprintf("%.2fx", d.TimeRatio(run)), "", ""},
	}
	// What the dead host may cost is the live pages' time: the crawl itself
	// cannot end before the host is given up on, by design.
	if run.Breaker && run.LiveDone > 0 {
		live := d.LiveRatio(run)
		rows = append(rows, Row{"dead", label + ": live pages all fetched at (ratio to no dead host)",
			fmt.Sprintf("%s (%.2fx)", secs(run.LiveDone), live),
			fmt.Sprintf("<= %.2fx", TargetDeadTimeRatio), verdict(live <= TargetDeadTimeRatio)})
	}
	if run.Breaker && run.DeadFirstTried > 0 {
		rows = append(rows, Row{"dead", label + ": dead host first tried / circuit opened / given up at",
			fmt.Sprintf("%.2fs / %.2fs / %.2fs", run.DeadFirstTried.Seconds(), run.DeadOpened.Seconds(), run.DeadGivenUp.Seconds()), "", ""})
	}
	connTarget, connVerdict := "", ""
	if run.Breaker {
		connTarget, connVerdict = fmt.Sprintf("<= %d", d.ConnLimit), verdict(run.DeadMaxPerRest <= d.ConnLimit)
	}
	rows = append(rows,
		Row{"dead", label + ": dead-host requests (max in one rest)",
			fmt.Sprintf("%d (%d)", run.Traffic.DeadConnections, run.DeadMaxPerRest), connTarget, connVerdict},
		Row{"dead", label + ": worker-seconds on dead host (as stored in results)",
			lower + fmt.Sprintf("%.1f s (%.1f s)", run.DeadWorkerSeconds, run.DeadRecordedSeconds), "", ""},
		Row{"dead", label + ": dead URLs recorded / left", deadOutcome(run), "", ""},
	)
	if dup := run.Traffic.Duplicates(); dup != 0 {
		rows = append(rows, Row{"dead", label + ": live pages fetched twice", strconv.Itoa(dup), "0", verdict(false)})
	}
	return rows
}

// deadOutcome lists the dead host's stored results by class and what is left.
func deadOutcome(run *DeadRun) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(run.DeadResults)) {
		name := k
		if name == "" {
			name = "ok"
		}
		parts = append(parts, fmt.Sprintf("%s %d", name, run.DeadResults[k]))
	}
	if len(parts) == 0 {
		parts = append(parts, "none")
	}
	return fmt.Sprintf("%s / %d", strings.Join(parts, ", "), run.DeadLeft)
}

func (r *Report) frontierRows() []Row {
	f := r.Frontier
	if f == nil {
		return nil
	}
	return []Row{
		{"frontier", fmt.Sprintf("enqueue %d URLs over %d hosts, %d per Add (%s%s)", f.URLs, f.Hosts, f.AddBatch,
			secs(f.EnqueueWall), f.spread(f.EnqueueMinPerSec, f.EnqueueMaxPerSec)),
			rate(f.EnqueuePerSec, "URLs/s"), ">= " + rate(TargetEnqueuePerSec, "/s"), verdict(f.EnqueuePerSec >= TargetEnqueuePerSec)},
		{"frontier", fmt.Sprintf("lease+complete, %d workers, %d per host (%s%s)", f.Workers, f.HostConcurrency,
			secs(f.LeaseWall), f.spread(f.LeaseMinPerSec, f.LeaseMaxPerSec)),
			rate(f.LeasePerSec, "URLs/s"), ">= " + rate(TargetLeasePerSec, "/s"), verdict(f.LeasePerSec >= TargetLeasePerSec)},
		{"frontier", "file size: all queued / all completed", mb(f.QueuedBytes) + " / " + mb(f.FileBytes), "", ""},
		{"frontier", fmt.Sprintf("frontier.NewItem, not in the rates (%s)", secs(f.PrepareWall)),
			rate(float64(f.URLs)/f.PrepareWall.Seconds(), "URLs/s"), "", ""},
	}
}

// spread describes the passes behind a median rate, as the ceiling does.
func (f *FrontierResult) spread(lowest, highest float64) string {
	if f.Passes < 2 {
		return ""
	}
	return fmt.Sprintf(", median of %d passes, %s-%s", f.Passes, rate(lowest, ""), rate(highest, ""))
}

func (r *Report) memoryRows() []Row {
	m := r.Memory
	if m == nil {
		return nil
	}
	var rows []Row
	add := func(fig, val, target, v string) { rows = append(rows, Row{"memory", fig, val, target, v}) }
	target := "<= " + mb(TargetPeakBytes)
	n := m.QueuedSite.URLs()
	if run := m.Seeded; run != nil {
		fig := fmt.Sprintf("peak RSS, crawl --seeds of %d URLs (all queued at %s, %d queued at stop, %s)",
			n, secs(time.Duration(run.Child.AllSeededNS)), run.Child.Queued, secs(run.Wall))
		val, v := peakValue(run), verdict(kib(run.PeakKB) <= TargetPeakBytes)
		if run.Capped {
			fig = fmt.Sprintf("peak RSS, crawl --seeds of %d URLs (not done seeding at the %s cap)", n, secs(m.SeedsCap))
			val = ">= " + val
			if kib(run.PeakKB) <= TargetPeakBytes {
				v = "unknown"
			}
		}
		add(fig, val, target, v)
	}
	if run := m.Filled; run != nil {
		add(fmt.Sprintf("peak RSS, frontier.Add of %d URLs, 100 a call (%s)", n, secs(run.Wall)), peakValue(run), "", "")
	}
	if run := m.Queued; run != nil {
		add(fmt.Sprintf("peak RSS, crawl of that file (%d queued at stop, %d fetched, %s)", run.Child.Queued, run.Child.Fetched, secs(run.Wall)),
			peakValue(run), target, verdict(kib(run.PeakKB) <= TargetPeakBytes))
	}
	if g := m.Growth; g != nil {
		for _, s := range g.Samples {
			add(fmt.Sprintf("RSS at %d%% of a %d-page crawl (%d pages served)", s.Percent, m.GrowthSite.URLs(), s.Pages),
				fmt.Sprintf("%s (anon %s)", mb(kib(s.RSSKB)), mb(kib(s.AnonKB))), "", "")
		}
		if ratio, ok := m.GrowthRatio(); ok {
			add("RSS growth from 25% to 100%", fmt.Sprintf("%+.1f%%", ratio*100), "within 20%",
				verdict(ratio <= TargetGrowth && ratio >= -TargetGrowth))
		}
		add(fmt.Sprintf("peak RSS of that crawl (%d fetched)", g.Child.Fetched), peakValue(g), "", "")
	}
	return append(rows, r.largePageRows(m)...)
}

// peakValue shows a run's peak RSS and the largest anonymous RSS sampled.
func peakValue(run *MemoryRun) string {
	return fmt.Sprintf("%s (anon %s)", mb(kib(run.PeakKB)), mb(kib(run.PeakAnonKB)))
}

// kib converts the KiB of /proc to bytes.
func kib(n int64) int64 { return n * 1024 }

// WriteTable prints the machine, the table and the notes on method.
func (r *Report) WriteTable(w io.Writer) error {
	m := r.Machine
	mode := "full configuration"
	if r.Quick {
		mode = "quick configuration"
	}
	fmt.Fprintf(w, "breakwater bench, %s, %s, took %s\n", m.Date.Format("2006-01-02 15:04 MST"), mode, r.Took.Round(time.Second))
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs, GOMAXPROCS %d, %s", m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion)
	if m.CPUModel != "" {
		fmt.Fprintf(w, ", %s", m.CPUModel)
	}
	fmt.Fprint(w, "\n")
	if r.Quick {
		fmt.Fprint(w, "quick configuration: a fraction of the issue's sizes, so a verdict in brackets only hints; run without --quick to check the targets\n")
	}
	fmt.Fprint(w, "\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tFIGURE\tVALUE\tTARGET\tVERDICT")
	for _, row := range r.Rows() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Section, row.Figure, row.Value, row.Target, row.Verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range append(r.Notes(), r.fleetNote()...) {
		fmt.Fprintf(w, "\n%s", wrap(n, 100))
	}
	return nil
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func pct(f float64) string { return fmt.Sprintf("%.1f%%", f*100) }

func kb(bytes float64) string { return fmt.Sprintf("%.2f KB", bytes/1e3) }

func mb(bytes int64) string { return fmt.Sprintf("%.1f MB", float64(bytes)/1e6) }

// rate formats v with thousands separators, e.g. "212,345 URLs/s".
func rate(v float64, unit string) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if unit == "" || strings.HasPrefix(unit, "/") {
		return b.String() + unit
	}
	return b.String() + " " + unit
}

// wrap breaks a paragraph into lines of at most width bytes, plus a newline.
func wrap(s string, width int) string {
	var b strings.Builder
	line := 0
	for i, word := range strings.Fields(s) {
		if i > 0 && line+1+len(word) > width {
			b.WriteByte('\n')
			line = 0
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	b.WriteByte('\n')
	return b.String()
}
