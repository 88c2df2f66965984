package bench

import (
	"context"
	"time"

	"breakwater/demosite"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
)

// DeadRun is one crawl of the dead-host section.
type DeadRun struct {
	Name    string        `json:"name"`
	Breaker bool          `json:"breaker"`
	Wall    time.Duration `json:"wall_ns"`
	// LiveDone is when the last live page request reached the site, from
	// the crawl's start: the crawl of the live hosts is over by then, and
	// what follows is the wait for the dead host to be given up.
	LiveDone  time.Duration `json:"live_done_ns"`
	Capped    bool          `json:"capped"` // stopped by BreakerOffCap: dead-host figures are lower bounds
	Exhausted bool          `json:"exhausted"`
	Fetched   int64         `json:"fetched"`
	Failed    int64         `json:"failed"`
	Traffic   Traffic       `json:"traffic"`
	// DeadMaxPerRest is the most dead-host connections within any span of
	// one breaker rest (the whole run when it is shorter than a rest).
	DeadMaxPerRest int `json:"dead_max_per_rest"`
	// DeadWorkerSeconds is measured by the dead host: how long the
	// crawler kept its connections open, summed over connections. It
	// counts every attempt, also those that ended without a stored result
	// (requests cut short when the circuit opened).
	DeadWorkerSeconds float64 `json:"dead_worker_seconds"`
	// DeadRecordedSeconds sums the duration_ms of the dead host's stored
	// results, the crawler's own account of the same time.
	DeadRecordedSeconds float64          `json:"dead_recorded_seconds"`
	DeadResults         map[string]int64 `json:"dead_results"` // dead-host results by error class
	DeadLeft            int64            `json:"dead_left"`    // dead-host URLs still queued or deferred at the end
	// The dead host's timeline from the crawl's start: its first request,
	// its circuit's first opening, and the last of its URLs recorded as
	// host-down. Zero for what did not happen.
	DeadFirstTried  time.Duration `json:"dead_first_tried_ns"`
	DeadOpened      time.Duration `json:"dead_opened_ns"`
	DeadGivenUp     time.Duration `json:"dead_given_up_ns"`
	opened, givenUp time.Time     // read from the file, made relative in deadRun
	firstDown       time.Time     // the first URL recorded host-down: the give-up itself
}

// DeadResult is the dead-host section: the same crawl without the dead
// host, with it, and with it and no breaker.
type DeadResult struct {
	Site             Size          `json:"site"`
	DeadURLs         int           `json:"dead_urls"`
	DeadLinksPerPage int           `json:"dead_links_per_page"`
	Timeout          time.Duration `json:"timeout_ns"`
	Retries          int           `json:"retries"`
	Threshold        int           `json:"threshold"`
	Probes           int           `json:"probes"`
	Rest             time.Duration `json:"rest_ns"`
	GiveUpAfter      time.Duration `json:"give_up_after_ns"`
	ConnLimit        int           `json:"conn_limit"` // threshold + probes + host concurrency
	Baseline         *DeadRun      `json:"baseline"`
	On               *DeadRun      `json:"breaker_on"`
	Off              *DeadRun      `json:"breaker_off"`
}

// TimeRatio is the wall time with the dead host over the time without it.
func (d *DeadResult) TimeRatio(run *DeadRun) float64 {
	if d.Baseline == nil || run == nil || d.Baseline.Wall <= 0 {
		return 0
	}
	return run.Wall.Seconds() / d.Baseline.Wall.Seconds()
}

// ProjectedOffSeconds extends a capped breaker-off run to its end: the
// measured worker-seconds plus, for each dead URL left, the mean
// worker-seconds of the dead URLs it did record. Zero when not capped or
// nothing was recorded. It is an estimate and is labelled as one.
func (d *DeadResult) ProjectedOffSeconds() float64 {
	off := d.Off
	if off == nil || !off.Capped {
		return 0
	}
	var recorded int64
	for _, n := range off.DeadResults {
		recorded += n
	}
	if recorded == 0 {
		return 0
	}
	return off.DeadWorkerSeconds * float64(recorded+off.DeadLeft) / float64(recorded)
}

// WorkerSecondsRatio is breaker-off worker-seconds over breaker-on ones.
func (d *DeadResult) WorkerSecondsRatio() float64 {
	if d.On == nil || d.Off == nil || d.On.DeadWorkerSeconds <= 0 {
		return 0
	}
	return d.Off.DeadWorkerSeconds / d.On.DeadWorkerSeconds
}

// dead runs the three crawls, each on a freshly started site so that no
// connection or log entry of one run reaches the next. The baseline is a
// separate site of the same live hosts whose pages carry no dead links:
// parsing and deduplicating those links is part of what the dead host costs.
func (r *runner) dead(ctx context.Context) error {
	cfg := r.cfg
	res := &DeadResult{Site: cfg.DeadSite, DeadURLs: cfg.DeadURLs, DeadLinksPerPage: cfg.DeadLinksPerPage,
		Timeout: cfg.DeadTimeout, Retries: cfg.DeadRetries, Threshold: cfg.Breaker.Threshold,
		Probes: cfg.Breaker.Probes, Rest: cfg.Breaker.Rest, GiveUpAfter: cfg.GiveUpAfter,
		ConnLimit: cfg.Breaker.Threshold + cfg.Breaker.Probes + cfg.HostConcurrency}
	r.report.Dead = res
	var err error
	cfg.logf("dead: baseline, %s without the dead host", cfg.DeadSite)
	if res.Baseline, err = r.deadRun(ctx, "dead-baseline", 0, true); err != nil {
		return err
	}
	cfg.logf("dead: %s plus a dead host of %d URLs, breaker on", cfg.DeadSite, cfg.DeadURLs)
	if res.On, err = r.deadRun(ctx, "dead-breaker-on", cfg.DeadURLs, true); err != nil {
		return err
	}
	cfg.logf("dead: the same, breaker off (capped at %s)", cfg.BreakerOffCap)
	res.Off, err = r.deadRun(ctx, "dead-breaker-off", cfg.DeadURLs, false)
	return err
}

func (r *runner) deadRun(ctx context.Context, name string, deadURLs int, breakerOn bool) (*DeadRun, error) {
	cfg := r.cfg
	links := 0
	if deadURLs > 0 {
		links = cfg.DeadLinksPerPage
	}
	site, err := startSite(cfg.DeadSite, deadURLs, links)
	if err != nil {
		return nil, err
	}
	defer site.Close()
	// Seeds are every root, the dead host's included, so its linked URLs
	// are in scope exactly as a live host's are.
	opts := r.crawlOptions(site)
	opts.Timeout = cfg.DeadTimeout
	opts.ConnectTimeout = min(opts.ConnectTimeout, cfg.DeadTimeout)
	opts.Retries = cfg.DeadRetries
	opts.Breaker = cfg.Breaker
	opts.BreakerEnabled = breakerOn
	opts.GiveUpAfter = cfg.GiveUpAfter
	opts.StopGrace = 0
	out := &DeadRun{Name: name, Breaker: breakerOn, DeadResults: map[string]int64{}}
	if !breakerOn {
		opts.MaxDuration = cfg.BreakerOffCap
	}
	deadKey := deadHostKey(site)
	start := time.Now()
	run, err := r.runEngine(ctx, name, opts, func(db *storage.DB) error {
		return inspectDead(db, deadKey, out)
	})
	if err != nil {
		return nil, err
	}
	out.Wall, out.Exhausted = run.wall, run.sum.Exhausted
	out.Capped = !breakerOn && !run.sum.Exhausted && cfg.BreakerOffCap > 0
	out.Fetched, out.Failed = run.sum.Counts.Fetched, run.sum.Counts.Failed
	out.Traffic = trafficSince(site, nil)
	out.LiveDone = lastLiveRequest(site).Sub(start)
	deadAt := deadTimes(site, nil)
	if len(deadAt) > 0 {
		out.DeadFirstTried = deadAt[0].Sub(start)
	}
	out.DeadOpened, out.DeadGivenUp = sinceOrZero(out.opened, start), sinceOrZero(out.givenUp, start)
	out.DeadMaxPerRest = maxInWindow(deadAt, cfg.Breaker.Rest)
	if err := site.Close(); err != nil { // and so every held connection is counted
		return nil, err
	}
	out.DeadWorkerSeconds = deadHeldTime(site).Seconds()
	return out, nil
}

// LiveRatio is when the live pages were all fetched, over the wall time of
// the crawl without the dead host.
func (d *DeadResult) LiveRatio(run *DeadRun) float64 {
	if d.Baseline == nil || run == nil || d.Baseline.Wall <= 0 {
		return 0
	}
	return run.LiveDone.Seconds() / d.Baseline.Wall.Seconds()
}

// lastLiveRequest is the time of the latest request to a live host.
func lastLiveRequest(site *demosite.Site) time.Time {
	var last time.Time
	for _, h := range site.Hosts() {
		if h.Spec().Behavior == demosite.Dead {
			continue
		}
		for _, r := range h.Requests() {
			if r.Time.After(last) {
				last = r.Time
			}
		}
	}
	return last
}

func deadHeldTime(site *demosite.Site) time.Duration {
	var held time.Duration
	for _, h := range site.Hosts() {
		held += h.HeldTime()
	}
	return held
}

// deadHostKey is the frontier's host key of the site's dead host, "" if none.
func deadHostKey(site *demosite.Site) string {
	for _, h := range site.Hosts() {
		if h.Spec().Behavior == demosite.Dead {
			key, _ := frontier.HostKey(h.BaseURL() + "/")
			return key
		}
	}
	return ""
}

func sinceOrZero(t, start time.Time) time.Duration {
	if t.IsZero() {
		return 0
	}
	return t.Sub(start)
}

// inspectDead reads the dead host's results, transitions and leftovers
// from the file.
func inspectDead(db *storage.DB, host string, out *DeadRun) error {
	if host == "" {
		return nil
	}
	err := db.ForEachResult(func(res *store.Result) error {
		if res.Host != host {
			return nil
		}
		out.DeadRecordedSeconds += float64(res.DurationMS) / 1000
		out.DeadResults[res.ErrorClass]++
		if res.ErrorClass == "host-down" && res.FetchedAt.After(out.givenUp) {
			out.givenUp = res.FetchedAt
		}
		if res.ErrorClass == "host-down" && (out.firstDown.IsZero() || res.FetchedAt.Before(out.firstDown)) {
			out.firstDown = res.FetchedAt
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = db.ForEachTransition(func(t store.Transition) error {
		if t.Host == host && t.To == "open" && out.opened.IsZero() {
			out.opened = t.At
		}
		return nil
	})
	if err != nil {
		return err
	}
	return db.ForEachHost(func(h string, c store.HostCounts) error {
		if h == host {
			out.DeadLeft = c.Queued + c.Deferred
		}
		return nil
	})
}
