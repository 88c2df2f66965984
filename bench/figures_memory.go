package bench

import (
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/crawl"
)

// Targets of the memory and hosts sections.
const (
	TargetPeakBytes = 150_000_000 // peak RSS of a crawl with a million URLs queued, or of many hosts
	TargetGrowth    = 0.20        // RSS at the end of a crawl within 20% of RSS at a quarter of it
)

const (
	meansPeak = "the larger of VmHWM sampled every 20 ms and the child's own as it exits; RSS counts the " +
		"bbolt file's pages mapped in"
	meansAnon = "the largest RssAnon sampled: the heap and stacks alone, what the kernel cannot reclaim"
)

// peakFigures are a child's peak RSS (held to target when it is one) and
// peak anonymous RSS.
func peakFigures(g string, run *MemoryRun, target *Target) []Figure {
	peak := num(g+"peak RSS", Bytes, kib(run.PeakKB), meansPeak).lower(run.Capped)
	peak.Target = target
	return []Figure{peak, num(g+"peak anonymous RSS", Bytes, kib(run.PeakAnonKB), meansAnon).lower(run.Capped)}
}

func (r *Report) memorySection() *Section {
	m := r.Memory
	if m == nil {
		return nil
	}
	peakTarget := &Target{Op: AtMost, Value: TargetPeakBytes}
	var figs []Figure
	if run := m.Seeded; run != nil {
		const g = "crawl --seeds: "
		figs = append(figs, peakFigures(g, run, peakTarget)...)
		figs = append(figs,
			secsOf(g+"all seeds queued at", time.Duration(run.Child.AllSeededNS), "0 when the run was stopped first"),
			num(g+"queued at stop", Count, run.Child.Queued, ""),
			secsOf(g+"wall", run.Wall, "the child's start to its exit"))
	}
	if run := m.Filled; run != nil {
		const g = "frontier.Add: "
		figs = append(figs, peakFigures(g, run, nil)...)
		figs = append(figs, secsOf(g+"wall", run.Wall, "the child's start to its exit"))
	}
	if run := m.Queued; run != nil {
		const g = "crawl of the filled file: "
		figs = append(figs, peakFigures(g, run, peakTarget)...)
		figs = append(figs,
			num(g+"queued at stop", Count, run.Child.Queued, ""),
			num(g+"pages fetched", Count, run.Child.Fetched, ""),
			secsOf(g+"wall", run.Wall, "the child's start to its exit"))
	}
	if run := m.Growth; run != nil {
		const g = "growth crawl: "
		for _, s := range run.Samples {
			at := fmt.Sprintf(" at %d%%", s.Percent)
			figs = append(figs,
				num(g+"RSS"+at, Bytes, kib(s.RSSKB), "VmRSS when the site had served that share of the pages"),
				num(g+"anonymous RSS"+at, Bytes, kib(s.AnonKB), ""),
				num(g+"pages served"+at, Count, s.Pages, ""))
		}
		if ratio, ok := m.GrowthRatio(); ok {
			figs = append(figs, num(g+"RSS growth from 25% to 100%", Change, ratio,
				"memory must follow the hosts being crawled, not the pages crawled").want(Within, TargetGrowth))
		}
		figs = append(figs, peakFigures(g, run, nil)...)
		figs = append(figs, num(g+"pages fetched", Count, run.Child.Fetched, ""))
	}
	for i, l := range m.Large {
		g := fmt.Sprintf("large pages %d: ", i+1)
		figs = append(figs, peakFigures(g, l.Run, peakTarget)...)
		figs = append(figs,
			num(g+"pages fetched", Count, l.Run.Child.Fetched, ""),
			secsOf(g+"wall", l.Run.Wall, "the child's start to its exit"))
	}
	settings := []Setting{set("queued site", m.QueuedSite), set("URLs queued", m.QueuedSite.URLs()),
		set("pages fetched once queued", m.QueuedPages), set("seeds cap", m.SeedsCap), set("growth site", m.GrowthSite)}
	for i, l := range m.Large {
		settings = append(settings, set(fmt.Sprintf("large pages %d", i+1), l.Size))
	}
	return &Section{Name: SectionMemory,
		Method: "each crawl runs in a child process (this binary's hidden internal-bench-child command: the seeds " +
			"file checked, then streamed into crawl.New and Run, as `crawl --seeds` does), the sites served by this " +
			"process. The URLs are queued two ways: as a seeds file, stopped that many pages after every seed is " +
			"queued or at the cap, and through frontier.Add a hundred a call, then a crawl of that file from the " +
			"roots. The growth crawl runs to the end; large pages are crawled at the default body cap. MB is 10^6 bytes.",
		Settings: settings,
		Figures:  figs,
	}
}

func (r *Report) hostsSection() *Section {
	h := r.Hosts
	if h == nil {
		return nil
	}
	var figs []Figure
	if run := h.Many; run != nil {
		const g = "many hosts: "
		figs = append(figs, hostsPeakFigures(g, run, h.ManySite.Hosts)...)
		figs = append(figs,
			num(g+"pages fetched", Count, run.Child.Fetched, ""),
			num(g+"requests served", Count, h.ManyServed, "page and robots.txt requests the site answered"),
			secsOf(g+"wall", run.Wall, "the child's start to its exit"),
			secsOf(g+"CPU", run.CPU, "the child's user and system time (rusage): what a tighter heap costs shows here"))
	}
	for _, f := range []struct {
		g    string
		run  *MemoryRun
		size Size
	}{{"failing hosts: ", h.Failing, h.FailingSite}, {"refusing hosts: ", h.Refusing, h.RefusingSite}} {
		if f.run == nil {
			continue
		}
		figs = append(figs, hostsPeakFigures(f.g, f.run, f.size.Hosts)...)
		figs = append(figs,
			num(f.g+"URLs failed", Count, f.run.Child.Failed, ""),
			secsOf(f.g+"wall", f.run.Wall, "the child's start to its exit"),
			secsOf(f.g+"CPU", f.run.CPU, "the child's user and system time (rusage)"))
	}
	threshold := breaker.DefaultThreshold
	if h.FailingThreshold > 0 {
		threshold = h.FailingThreshold
	}
	d := crawl.DefaultOptions()
	return &Section{Name: SectionHosts,
		Method: "child crawls as in the memory section, whose memory must follow the hosts being crawled, not every " +
			"host seen. The many hosts are demosite.VirtualHosts behind one SOCKS5 front (--proxy socks5h://...), so " +
			"that the crawl dials and pools a connection per host while the machine holds one listening socket; " +
			"every URL is a seed, crawled to the end. The failing and refusing hosts are loopback addresses where " +
			"nothing listens, crawled with the default politeness until each circuit opens and its host is given up. " +
			"The target holds the anonymous RSS (what a user must provision); the file-backed part, the bbolt " +
			"file's pages mapped in, is shown apart: the kernel reclaims it under pressure. Bytes per host are the " +
			"child's heap at its peak by the code that allocated it (its heap profile, scaled for sampling) over " +
			"the hosts of the run. --hosts-full runs 100,000 x 2, 50,000 x 3 and 40,000 x 1 with 2m.",
		Settings: []Setting{set("many hosts", h.ManySite), set("failing hosts", h.FailingSite), set("refusing hosts", h.RefusingSite),
			set("failing: delay", d.Delay), set("failing: retries", d.Retries), set("failing: breaker threshold", threshold),
			set("failing: rest", d.Breaker.Rest), set("failing: workers", failingWorkers), set("failing: give-up-after", h.FailingGiveUp)},
		Figures: figs,
	}
}

// hostsPeakFigures are a hosts child's peak RSS, its anonymous part held
// to the target, its file-backed part, and what held its heap at the
// peak, per host.
func hostsPeakFigures(g string, run *MemoryRun, hosts int) []Figure {
	figs := []Figure{
		num(g+"peak RSS", Bytes, kib(run.PeakKB), meansPeak).lower(run.Capped),
		num(g+"peak anonymous RSS", Bytes, kib(run.PeakAnonKB), meansAnon).lower(run.Capped).want(AtMost, TargetPeakBytes),
		num(g+"peak file-backed RSS", Bytes, kib(run.PeakFileKB), "the largest RssFile sampled: the bbolt file's "+
			"pages mapped in (and the binary's), clean pages the kernel drops under memory pressure").lower(run.Capped),
	}
	if m := run.Child.DB; m != nil {
		figs = append(figs,
			num(g+"database file at the end", Bytes, kib(m.FileKB), fmt.Sprintf("mapped %.1f MB: bbolt maps ahead of the file", float64(kib(m.SizeKB))/1e6)),
			num(g+"database pages resident at the end", Bytes, kib(m.RSSKB), "the file's mapping as the crawl ends (smaps)"),
			num(g+"of them dirty", Bytes, kib(m.DirtyKB), "bbolt writes with pwrite and maps read-only: every resident page is clean, "+
				"dropped by the kernel under pressure and read back from the page cache or the disk"))
	}
	hp := run.Child.Heap
	if hp == nil || hosts <= 0 {
		return figs
	}
	perHost := func(kb int64) float64 { return float64(kib(kb)) / float64(hosts) }
	figs = append(figs,
		num(g+"heap in use at its peak", Bytes, kib(hp.HeapInuseKB), "the runtime's HeapInuse when the heap was largest"),
		num(g+"heap free but kept at its peak", Bytes, kib(hp.HeapFreeKB), "HeapIdle - HeapReleased: GC headroom"),
		num(g+"goroutine stacks at the heap's peak", Bytes, kib(hp.StackKB), fmt.Sprintf("%d goroutines", hp.Goroutines)),
		num(g+"runtime structures at the heap's peak", Bytes, kib(hp.RuntimeKB), "spans, GC metadata, profiling buckets"),
		num(g+"live heap per host", HostBytes, perHost(hp.ProfiledKB), "the heap profile's live bytes over the hosts"))
	for _, p := range hp.Parts {
		if float64(p.Bytes)/float64(hosts) < 1 {
			continue
		}
		figs = append(figs, num(g+"per host: "+p.Name, HostBytes, float64(p.Bytes)/float64(hosts), ""))
	}
	return figs
}

// kib converts the KiB of /proc to bytes.
func kib(n int64) int64 { return n * 1024 }
