package bench

// Targets of the dead-host and frontier sections.
const (
	TargetDeadTimeRatio  = 1.15      // the live pages, with a dead host, within 15% of the time without it
	TargetWorkerSecRatio = 50.0      // the breaker saves at least 50x the worker-seconds a dead host costs
	TargetEnqueuePerSec  = 200_000.0 // frontier enqueue, URLs/s
	TargetLeasePerSec    = 100_000.0 // frontier lease+complete, URLs/s
)

func (r *Report) deadSection() *Section {
	d := r.Dead
	if d == nil {
		return nil
	}
	var figs []Figure
	if b := d.Baseline; b != nil {
		figs = append(figs,
			secsOf("without dead host: wall", b.Wall, meansWall),
			num("without dead host: pages fetched", Count, b.Fetched, meansFetched))
	}
	for _, run := range []*DeadRun{d.On, d.Off} {
		if run != nil {
			figs = append(figs, d.runFigures(run)...)
		}
	}
	if d.On != nil && d.Off != nil {
		figs = append(figs, num("worker-seconds on dead host, off / on", Times, d.WorkerSecondsRatio(),
			"what the breaker saves of the time workers spend on a dead host").lower(d.Off.Capped).
			want(AtLeast, TargetWorkerSecRatio))
		if p := d.ProjectedOffSeconds(); p > 0 && d.On.DeadWorkerSeconds > 0 {
			proj := "each dead URL the capped breaker-off run left charged the mean worker-seconds of those it recorded"
			figs = append(figs,
				Figure{Name: "breaker off: worker-seconds projected to its end", Unit: Seconds, Value: p, Bound: Estimate, Meaning: proj},
				Figure{Name: "worker-seconds off / on, projected", Unit: Times, Value: p / d.On.DeadWorkerSeconds, Bound: Estimate})
		}
	}
	return &Section{Name: SectionDead,
		Method: "the crawl over a bigger site plus one host that accepts connections and never answers, its URLs " +
			"linked from the live pages, crawled from every root with the breaker on and off, against a baseline " +
			"site of the same live hosts with no dead links. The crawl cannot end before the dead host is given up, " +
			"so give-up-after is short. Worker-seconds are how long the crawler held the dead host's connections " +
			"open, measured by the host; each of its requests is a connection.",
		Settings: []Setting{set("site", d.Site), set("dead URLs", d.DeadURLs), set("dead links per page", d.DeadLinksPerPage),
			set("timeout", d.Timeout), set("retries", d.Retries), set("breaker threshold", d.Threshold),
			set("probes", d.Probes), set("rest", d.Rest), set("give-up-after", d.GiveUpAfter)},
		Figures: figs,
	}
}

func (d *DeadResult) runFigures(run *DeadRun) []Figure {
	g := "breaker on: "
	if !run.Breaker {
		g = "breaker off: "
	}
	capped := run.Capped
	recorded, classes := outcomes(run.DeadResults)
	figs := []Figure{
		secsOf(g+"wall", run.Wall, meansWall).lower(capped),
		num(g+"pages fetched", Count, run.Fetched, meansFetched),
		num(g+"time ratio to no dead host", Times, d.TimeRatio(run), "its wall time over the baseline's").lower(capped),
	}
	// What the dead host may cost is the live pages' time: the crawl itself
	// cannot end before the host is given up on, by design.
	if run.Breaker && run.LiveDone > 0 {
		figs = append(figs,
			secsOf(g+"live pages all fetched at", run.LiveDone, "the last live page request, from the crawl's start"),
			num(g+"live pages' time ratio to no dead host", Times, d.LiveRatio(run), "when the live pages were done, "+
				"over the baseline's wall time: what the dead host cost them").want(AtMost, TargetDeadTimeRatio))
	}
	if run.Breaker && run.DeadFirstTried > 0 {
		figs = append(figs,
			secsOf(g+"dead host first tried at", run.DeadFirstTried, "from the crawl's start"),
			secsOf(g+"circuit opened at", run.DeadOpened, "its first opening, from the file's transitions"),
			secsOf(g+"dead host given up at", run.DeadGivenUp, "its last URL recorded host-down"))
	}
	most := num(g+"most dead-host requests in one rest", Count, run.DeadMaxPerRest,
		"within any span of one breaker rest; at most threshold + probes + host concurrency with the breaker on")
	if run.Breaker {
		most = most.want(AtMost, float64(d.ConnLimit))
	}
	return append(figs,
		num(g+"dead-host requests", Count, run.Traffic.DeadConnections, "connections the dead host accepted"),
		most,
		num(g+"worker-seconds on dead host", Seconds, run.DeadWorkerSeconds, "every attempt, those cut short "+
			"when the circuit opened included").lower(capped),
		num(g+"worker-seconds stored in results", Seconds, run.DeadRecordedSeconds,
			"duration_ms of the dead host's stored results summed: the crawler's own account"),
		num(g+"dead URLs recorded", Count, recorded, "the dead host's stored results, by error class").listing(classes),
		num(g+"dead URLs left", Count, run.DeadLeft, "still queued or deferred at the end"),
		num(g+"live pages fetched twice", Count, run.Traffic.Duplicates(), meansTwice).want(Equal, 0),
	)
}

func (r *Report) frontierSection() *Section {
	f := r.Frontier
	if f == nil {
		return nil
	}
	return &Section{Name: SectionFrontier,
		Method: "the bbolt frontier alone, no network and no politeness: Open, Add in batches, Close (every URL " +
			"committed) for enqueue; then reopen and Next + Started + Complete with a page-sized result from the " +
			"workers until exhausted. URLs are canonicalized before the clock starts; each pass is a fresh file.",
		Settings: []Setting{set("URLs", f.URLs), set("hosts", f.Hosts), set("URLs per Add", f.AddBatch),
			set("workers", f.Workers), set("host concurrency", f.HostConcurrency), set("passes", f.Passes)},
		Figures: []Figure{
			num("enqueue", URLsPerSec, f.EnqueuePerSec, "URLs made durable per second, the median pass").
				over(f.EnqueueRuns).want(AtLeast, TargetEnqueuePerSec),
			secsOf("enqueue wall", f.EnqueueWall, "the median pass"),
			num("lease+complete", URLsPerSec, f.LeasePerSec, "URLs leased and completed per second, group "+
				"commits as the crawl makes them").over(f.LeaseRuns).want(AtLeast, TargetLeasePerSec),
			secsOf("lease+complete wall", f.LeaseWall, "the median pass"),
			num("file, all queued", Bytes, f.QueuedBytes, ""),
			num("file, all completed", Bytes, f.FileBytes, ""),
			num("frontier.NewItem", URLsPerSec, float64(f.URLs)/f.PrepareWall.Seconds(), "canonicalizing the URLs, not in the rates"),
		},
	}
}
