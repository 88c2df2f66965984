package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"breakwater/demosite"
	"breakwater/storage"
)

// TailConfig is the tail section: healthy hosts and one flaky host crawled
// at a politeness delay, to see how long the flaky host's last retries keep
// the crawl alive once every URL has had its first attempt.
type TailConfig struct {
	Site       Size          `json:"site"`        // the healthy hosts: 59 x 20
	FlakyPages int           `json:"flaky_pages"` // pages of the flaky host: 200
	FlakyRate  float64       `json:"flaky_rate"`  // its share of 500s: 0.3
	Delay      time.Duration `json:"delay"`       // --delay, every host's pace: 50ms
	// Cap is the crawl's --max-duration: a budget that starves the
	// retries would otherwise keep the section going for a quarter of an
	// hour. A capped tail is a lower bound.
	Cap time.Duration `json:"cap"` // 5m
}

// DefaultTailConfig is the full run's tail section.
func DefaultTailConfig() TailConfig {
	return TailConfig{Site: Size{59, 20}, FlakyPages: 200, FlakyRate: 0.3, Delay: 50 * time.Millisecond, Cap: 5 * time.Minute}
}

// QuickTailConfig is the quick run's.
func QuickTailConfig() TailConfig {
	return TailConfig{Site: Size{19, 10}, FlakyPages: 60, FlakyRate: 0.3, Delay: 20 * time.Millisecond, Cap: time.Minute}
}

// TailResult is the tail section's one crawl, from the site's logs.
type TailResult struct {
	Config TailConfig    `json:"config"`
	Wall   time.Duration `json:"wall_ns"`
	// LastFirst is when the last URL of any host was first asked for, from
	// the crawl's start; Tail from then to the end of the crawl.
	LastFirst time.Duration `json:"last_first_ns"`
	Tail      time.Duration `json:"tail_ns"`
	// TailRetries are the flaky host's requests after LastFirst: retries
	// all. Need is what they take at the host's pace, at least one interval.
	TailRetries int           `json:"tail_retries"`
	Need        time.Duration `json:"need_ns"`
	// FlakyRequests and FlakyErrors are the flaky host's page requests and
	// the 500s among them; FlakyPages its distinct pages answered 200.
	FlakyRequests int   `json:"flaky_requests"`
	FlakyErrors   int   `json:"flaky_errors"`
	FlakyPages    int   `json:"flaky_pages"`
	Fetched       int64 `json:"fetched"`
	Failed        int64 `json:"failed"`
	Exhausted     bool  `json:"exhausted"`
}

// tailFlaky names the tail section's flaky host.
const tailFlaky = "tail-flaky"

func (r *runner) tail(ctx context.Context) error {
	tc := r.cfg.Tail
	specs := append([]demosite.HostSpec{{Name: tailFlaky, Pages: tc.FlakyPages, Behavior: demosite.Flaky, FlakyRate: tc.FlakyRate}},
		demosite.BenchSpecs(tc.Site.Hosts, tc.Site.Pages, false, 0)...)
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1})
	if err != nil {
		return fmt.Errorf("start tail site: %w", err)
	}
	defer site.Close()
	opts := r.crawlOptions(site)
	opts.Delay = tc.Delay
	// A retry's backoff no longer than a pace interval or two: the budget,
	// not the backoff, is what the section measures.
	opts.RetryBase, opts.RetryMax = tc.Delay, 2*tc.Delay
	opts.MaxDuration = tc.Cap
	r.cfg.logf("tail: %s plus a %.0f%%-flaky host of %d pages, --delay %s", tc.Site, tc.FlakyRate*100, tc.FlakyPages, tc.Delay)
	db, err := storage.Open(filepath.Join(r.dir, "tail.db"), nil)
	if err != nil {
		return err
	}
	start := r.cfg.now()
	sum, err := crawlDB(ctx, opts, db)
	end := r.cfg.now()
	if err = errors.Join(err, db.Close()); err != nil {
		return fmt.Errorf("tail run: %w", err)
	}
	res := &TailResult{Config: tc, Wall: end.Sub(start), Fetched: sum.Counts.Fetched, Failed: sum.Counts.Failed, Exhausted: sum.Exhausted}
	res.measure(site, start, end)
	r.report.Tail = res
	return nil
}

// measure reads the site's logs: when each URL was first asked for, and
// what the flaky host saw after the last of those.
func (res *TailResult) measure(site *demosite.Site, start, end time.Time) {
	lastFirst := start
	for _, h := range site.Hosts() {
		seen := make(map[string]bool)
		for _, req := range h.Requests() {
			if req.Path == "/robots.txt" || seen[req.Path] {
				continue
			}
			seen[req.Path] = true
			if req.Time.After(lastFirst) {
				lastFirst = req.Time
			}
		}
	}
	flaky := site.Host(tailFlaky)
	served := make(map[string]bool)
	for _, req := range flaky.Requests() {
		if req.Path == "/robots.txt" {
			continue
		}
		res.FlakyRequests++
		switch {
		case req.Status == 200:
			served[req.Path] = true
		case req.Status >= 500:
			res.FlakyErrors++
		}
		if req.Time.After(lastFirst) {
			res.TailRetries++
		}
	}
	res.FlakyPages = len(served)
	res.LastFirst, res.Tail = lastFirst.Sub(start), end.Sub(lastFirst)
	res.Need = time.Duration(max(res.TailRetries, 1)) * res.Config.Delay
}

// Stretch is the tail over what its retries need at the host's pace.
func (res *TailResult) Stretch() float64 { return res.Tail.Seconds() / res.Need.Seconds() }

// TargetTailStretch: the tail within twice what its retries need at the
// host's pace.
const TargetTailStretch = 2.0

func (r *Report) tailSection() *Section {
	t := r.Tail
	if t == nil {
		return nil
	}
	c := t.Config
	figs := []Figure{
		secsOf("wall", t.Wall, meansWall),
		secsOf("last first attempt", t.LastFirst, "when the last URL of any host was first asked for, from the crawl's start"),
		secsOf("tail: last first attempt to the end", t.Tail, "from then to the end of the crawl").lower(!t.Exhausted),
		num("tail: flaky host's retries", Count, t.TailRetries, "the flaky host's requests after the last first attempt"),
		secsOf("tail: those retries at the host's pace", t.Need, "the retries times --delay, at least one interval"),
		num("tail: time over the pace's", Times, t.Stretch(), "the tail over what its retries need at the host's pace").
			want(AtMost, TargetTailStretch).lower(!t.Exhausted),
		num("flaky host: page requests", Count, t.FlakyRequests, "its requests, robots.txt aside"),
		num("flaky host: answered 500", Count, t.FlakyErrors, "the failures its retries made up for"),
		num("flaky host: pages served", Count, t.FlakyPages, "distinct pages answered 200").of(int64(c.FlakyPages)),
		num("pages stored / failed", Count, t.Fetched, "pages stored; the listing: URLs failed after their retries").
			listing(fmt.Sprintf("%d failed", t.Failed)),
	}
	return &Section{Name: SectionTail,
		Method: "healthy hosts and one flaky host crawled from their roots at a politeness delay, the retry backoff " +
			"at the pace; from the site's logs, the time from the last URL's first request to the end of the crawl, " +
			"against the flaky host's requests in that time at its pace.",
		Settings: []Setting{set("healthy site", c.Site), set("flaky pages", c.FlakyPages), set("flaky rate", c.FlakyRate),
			set("delay", c.Delay), set("retry-base", c.Delay), set("retry-max", 2*c.Delay), set("max-duration", c.Cap)},
		Figures: figs,
	}
}
