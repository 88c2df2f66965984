package bench

import (
	"fmt"
	"strings"
)

// Notes explains, for each section that ran, how its figures were taken:
// the parts of the method a reader needs to trust or question them.
func (r *Report) Notes() []string {
	var notes []string
	if r.Ceiling != nil {
		notes = append(notes, "Ceiling: net/http with keep-alive, the crawl's worker count as goroutines and "+
			"its host concurrency as MaxConnsPerHost, each URL of the site fetched once with its body read "+
			"and dropped; URLs are taken page by page across hosts so goroutines do not queue behind one host. "+
			"The set is fetched three times and the median pass is the figure.")
	}
	if r.Crawl != nil {
		notes = append(notes, "Crawl: crawl.New + Run in this process from every host's root, --delay 0, "+
			"default persistence into a fresh file; wall time runs from opening the file to the end of Run. "+
			"Requests are counted from the site's own logs.")
		if w := r.Crawl.WARC; w != nil {
			notes = append(notes, warcNote(w)...)
		}
	}
	if r.Recrawl != nil {
		notes = append(notes, r.recrawlNote())
	}
	if d := r.Dead; d != nil {
		notes = append(notes, r.deadNote(d)...)
	}
	if f := r.Frontier; f != nil {
		notes = append(notes, "Frontier: frontier.Open, Add in batches, Close (every URL committed) for "+
			"enqueue; then reopen and Next + Started + Complete with a page-sized result from the crawl's "+
			"worker count until exhausted. Group commits as the crawl makes them; URLs are canonicalized "+
			"before the clock starts. Each rate is the median of "+fmt.Sprint(f.Passes)+" such passes, each over a fresh file.")
	}
	if m := r.Memory; m != nil {
		notes = append(notes, fmt.Sprintf("Memory: each crawl runs in a child process (this binary's hidden "+
			"internal-bench-child command: the seeds file checked, then streamed through Options.SeedsFile "+
			"into crawl.New and Run, as `crawl --seeds` does), "+
			"serving sites from this process. Peak is the larger of VmHWM sampled from /proc/PID/status every "+
			"20 ms and the child's own VmHWM as it exits. A million URLs are queued two ways: as a seeds file "+
			"(stopped after %s if still running), and through frontier.Add a hundred at a time in one child, "+
			"then a crawl of that file from the site's roots in another. Each million-URL crawl stops after "+
			"%d pages; the seeds run counts them from the moment every seed is queued. Growth samples VmRSS when the site has served 25, 50 and 100%% of the pages. RSS counts "+
			"the pages of the bbolt file mapped in as well as the heap; \"anon\" is the heap and stacks "+
			"alone (RssAnon), the part the kernel cannot reclaim. MB is 10^6 bytes.",
			m.SeedsCap, m.QueuedPages))
	}
	if h := r.Hosts; h != nil {
		notes = append(notes, h.note())
	}
	if r.Soak != nil {
		notes = append(notes, r.soakNote())
	}
	return notes
}

func (r *Report) deadNote(d *DeadResult) []string {
	notes := []string{fmt.Sprintf("Dead host: %s plus one host that accepts connections and never answers, "+
		"with %d distinct URLs, each live page linking %d of them; crawled from every root (the dead one "+
		"included) with timeout %s, --retries %d for all three runs, breaker threshold %d, probes %d, rest %s, "+
		"--give-up-after %s. The crawl cannot end until the dead host is given up (its URLs stay queued), so "+
		"give-up-after must be short for a sweep. The baseline is a separate site of the same live hosts "+
		"with no dead links on its pages.", d.Site, d.DeadURLs, d.DeadLinksPerPage, d.Timeout, d.Retries,
		d.Threshold, d.Probes, d.Rest, d.GiveUpAfter)}
	notes = append(notes, "Worker-seconds are measured by the dead host: how long the crawler kept each of "+
		"its connections open, summed. That counts every attempt, those cut short when the circuit opens "+
		"included; in brackets, the sum of duration_ms of the dead host's stored results, the crawler's own "+
		"account. Requests are connections accepted by the dead host (it never answers, so each request is "+
		"one connection).")
	if d.Off != nil && d.Off.Capped {
		notes = append(notes, fmt.Sprintf("The breaker-off run was stopped at %s with %d dead URLs left: "+
			"its wall time, worker-seconds and the ratios built on them are lower bounds. The projection "+
			"(an estimate, not a measurement) charges each URL left the mean worker-seconds of the dead URLs "+
			"the run did record; the default full run (--breaker-off-cap 40m) measures it instead.",
			d.Off.Wall.Round(1e9), d.Off.DeadLeft))
	}
	return notes
}

// The reference measurement of GNU wget 1.21 with --warc-file on a
// 200-host x 60-page local site; not measured by the bench.
const (
	wgetWARCPagesPerSec  = 170
	wgetWARCBytesPerPage = 1900
	wgetWARCDuplicates   = 3200
)

func warcNote(w *WARCRun) []string {
	notes := []string{"Crawl with --warc: right after the crawl above, on the same site, the same " +
		"options with WARC.Dir set to an empty directory (dedupe on, the default file size, prefix and record " +
		"cap), into a fresh database file; the wall time is measured the same way. WARC bytes are the " +
		"finished .warc.gz files' sizes summed, divided by the pages fetched (warcinfo and robots.txt records " +
		"included; KB is 10^3 bytes). The archive is then read back with warc.Check (not timed): every record " +
		"parsed, digests recomputed, requests paired with responses; each fetched page must be in exactly " +
		"one response or revisit record."}
	notes = append(notes, fmt.Sprintf("For reference, the issue's measurement, not taken here: GNU wget 1.21 "+
		"with --warc-file on a 200-host x 60-page local site fetched about %d distinct pages/s (and %s "+
		"duplicate fetches of the same pages) and wrote about %s of WARC per page. This run with --warc: %s "+
		"(%.1fx wget's), %s per page, %d duplicate fetches.", wgetWARCPagesPerSec, rate(wgetWARCDuplicates, ""),
		kb(wgetWARCBytesPerPage), rate(w.PagesPerSec, "pages/s"), w.PagesPerSec/wgetWARCPagesPerSec,
		kb(w.BytesPerPage), w.Traffic.Duplicates()))
	if !w.Clean() {
		n := fmt.Sprintf("THE ARCHIVE IS NOT CLEAN: warc.Check OK %v, %d problems, unfinished files %v; "+
			"%d fetched pages in exactly one response or revisit record of %d, %d in more than one.",
			w.CheckOK, w.NProblems, w.Unfinished, w.PagesArchived, w.Fetched, w.PagesArchivedTwice)
		if len(w.Problems) > 0 {
			n += " First problems: " + strings.Join(w.Problems, "; ")
		}
		notes = append(notes, n)
	}
	return notes
}
