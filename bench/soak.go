package bench

import (
	"errors"
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/demosite"
	"breakwater/store"
)

// SoakConfig is the soak section's site and crawl settings. The crawl runs
// with Config.Workers and Config.HostConcurrency, --delay 0 and --warc.
type SoakConfig struct {
	Site Size `json:"site"` // the healthy hosts: 1000 x 100
	// UnhealthyPages is the page count of each of the flaky, throttling,
	// recovering and refusing hosts: 100.
	UnhealthyPages int `json:"unhealthy_pages"`
	// DeadURLs is the dead host's distinct URLs, one of which each live
	// page links to: 500.
	DeadURLs int `json:"dead_urls"`
	// Timeout is the request timeout, what an attempt on the dead host
	// costs: 2s.
	Timeout time.Duration `json:"timeout_ns"`
	// Breaker opens after 8 failures and rests 5s, so that the dead host
	// is probed while the crawl runs.
	Breaker breaker.Config `json:"breaker"`
	// GiveUpAfter ends the dead host's open circuit, and with it the crawl:
	// 15s. RecoverAfter is how long the recovering host answers 503 from
	// the site's start: 10s, well within it.
	GiveUpAfter  time.Duration `json:"give_up_after_ns"`
	RecoverAfter time.Duration `json:"recover_after_ns"`
	// ThrottleRPS is the rate above which the throttling host answers 429
	// with Retry-After: 1: 10/s.
	ThrottleRPS float64 `json:"throttle_rps"`
	// RetryBase and RetryMax are the crawl's backoff bounds (RetryMax caps
	// Retry-After too), RetryBudget its per-host retry budget: the crawl's
	// defaults, 2s, 10m and 0.2. Retries stay at the default, 3. The budget
	// sets the soak's length: once a host's first attempts are a minute
	// old it may retry a few URLs a minute, and the flaky host's last
	// retries wait for that.
	RetryBase   time.Duration `json:"retry_base_ns"`
	RetryMax    time.Duration `json:"retry_max_ns"`
	RetryBudget float64       `json:"retry_budget"`
	// Cap is how long the child may run before it is taken for stuck: 10m.
	Cap time.Duration `json:"cap_ns"`
	// Settle is how long after Run returns the child's goroutines and
	// descriptors may take to fall back to their baselines: 5s.
	Settle time.Duration `json:"settle_ns"`
}

// DefaultSoakConfig is the full soak: 100,000 pages on 1,000 hosts.
func DefaultSoakConfig() SoakConfig {
	return SoakConfig{Site: Size{1000, 100}, UnhealthyPages: 100, DeadURLs: 500,
		Timeout: 2 * time.Second, Breaker: breaker.Config{Threshold: 8, Rest: 5 * time.Second, Probes: 2},
		GiveUpAfter: 15 * time.Second, RecoverAfter: 10 * time.Second, ThrottleRPS: 10,
		RetryBase: 2 * time.Second, RetryMax: 10 * time.Minute, RetryBudget: 0.2,
		Cap: 15 * time.Minute, Settle: 5 * time.Second}
}

// QuickSoakConfig is the soak at a tenth of the hosts and short times. Its
// retry budget allows a retry per first attempt, so that the flaky host's
// retries do not wait minutes for room.
func QuickSoakConfig() SoakConfig {
	return SoakConfig{Site: Size{100, 50}, UnhealthyPages: 50, DeadURLs: 50,
		Timeout: 500 * time.Millisecond, Breaker: breaker.Config{Threshold: 4, Rest: time.Second, Probes: 2},
		GiveUpAfter: 3 * time.Second, RecoverAfter: 2 * time.Second, ThrottleRPS: 20,
		RetryBase: 100 * time.Millisecond, RetryMax: time.Second, RetryBudget: 1,
		Cap: 2 * time.Minute, Settle: 5 * time.Second}
}

func (sc *SoakConfig) validate() error {
	switch {
	case sc.Site.Hosts < 2 || sc.Site.Pages < 1 || sc.UnhealthyPages < 1 || sc.DeadURLs < 1:
		return fmt.Errorf("bench: soak site %s, %d unhealthy pages, %d dead URLs: too small", sc.Site, sc.UnhealthyPages, sc.DeadURLs)
	case sc.Timeout <= 0 || sc.GiveUpAfter <= 0 || sc.RecoverAfter <= 0 || sc.ThrottleRPS <= 0 ||
		sc.RetryBase <= 0 || sc.RetryMax < sc.RetryBase || sc.RetryBudget < 0 || sc.RetryBudget > 1 ||
		sc.Cap <= 0 || sc.Settle <= 0:
		return errors.New("bench: soak times and rates must be positive, retry max at least retry base, the retry budget within [0,1]")
	case sc.Breaker.Threshold < 1 || sc.Breaker.Probes < 1 || sc.Breaker.Rest <= 0:
		return errors.New("bench: soak breaker threshold and probes must be at least 1, rest positive")
	}
	return nil
}

// The soak's unhealthy hosts, beside a dead host and BenchSpecs' healthy ones.
const (
	soakFlaky      = "soak-flaky"
	soakThrottling = "soak-throttling"
	soakRecovering = "soak-recovering"
	soakRefusing   = "soak-refusing"
)

// soakSpecs puts the unhealthy hosts first: the crawl takes its seeds'
// hosts in roughly their order, a few hundred at a time, so a host seeded
// last is first asked for tens of seconds into the crawl, after the
// recovering host's 503s would be over.
func soakSpecs(sc SoakConfig) []demosite.HostSpec {
	n := sc.UnhealthyPages
	return append([]demosite.HostSpec{
		{Name: "bench-dead", Pages: sc.DeadURLs, Behavior: demosite.Dead},
		{Name: soakFlaky, Pages: n, Behavior: demosite.Flaky},
		{Name: soakThrottling, Pages: n, Behavior: demosite.Throttling, MaxRPS: sc.ThrottleRPS, RetryAfterSeconds: 1},
		{Name: soakRecovering, Pages: n, Behavior: demosite.Recovering, RecoverAfter: sc.RecoverAfter},
		// The default token is the crawler's product name: a case, held for a person.
		{Name: soakRefusing, Pages: n, Behavior: demosite.Refusing},
	}, demosite.BenchSpecs(sc.Site.Hosts, sc.Site.Pages, false, 0)...)
}

// SoakResult is the soak section.
type SoakResult struct {
	Config          SoakConfig `json:"config"`
	Workers         int        `json:"workers"`
	HostConcurrency int        `json:"host_concurrency"`
	NoFile          uint64     `json:"nofile"` // this process's RLIMIT_NOFILE soft limit
	// Run is the child: RSS samples at 25, 50 and 100% of the healthy
	// pages served (VmHWM in each, the peak so far), its peak and report.
	Run *MemoryRun `json:"run"`
	// Healthy is what the healthy hosts saw; HealthyDone when the last of
	// their requests arrived, from the child's start.
	Healthy     Traffic       `json:"healthy"`
	HealthyDone time.Duration `json:"healthy_done_ns"`
	// Unhealthy are the other hosts, the dead one included, in spec order.
	Unhealthy []SoakHost `json:"unhealthy"`
	Dead      SoakDead   `json:"dead"`
	DBBytes   int64      `json:"db_bytes"` // the child's database file at the end
	WARC      SoakWARC   `json:"warc"`
	Verify    SoakVerify `json:"verify"`
	// HealthyRetried is the healthy pages whose stored result took more
	// than one attempt; Refetched the first few healthy pages asked more
	// than once, with each request's status and time from the child's start.
	HealthyRetried int      `json:"healthy_retried"`
	Refetched      []string `json:"refetched,omitempty"`
	// Logged counts the crawl's warnings and errors by message; LogFile is
	// where they were kept when there were any.
	Logged  map[string]int `json:"logged,omitempty"`
	LogFile string         `json:"log_file,omitempty"`
	// GoroutineDump is the file the child's goroutine profile was kept in
	// when its goroutines did not fall back; "" otherwise.
	GoroutineDump string `json:"goroutine_dump,omitempty"`
}

// maxRefetched is how many refetched pages a report names.
const maxRefetched = 10

// SoakHost is what one unhealthy host saw and what the crawl stored for it.
type SoakHost struct {
	Name     string `json:"name"`
	Behavior string `json:"behavior"`
	// Requests are its requests other than robots.txt (the dead host's:
	// connections accepted); Statuses counts all of them, robots.txt
	// included, by status.
	Requests int         `json:"requests"`
	Robots   int         `json:"robots"`
	Statuses map[int]int `json:"statuses,omitempty"`
	// Stored are its URLs' counts in the file at the end.
	Stored store.HostCounts `json:"stored"`
	// Transitions counts its breaker transitions by the state entered.
	Transitions map[string]int `json:"transitions,omitempty"`
	// First and Last are when its first and last requests (robots.txt
	// included) arrived, from the child's start: Last tells what kept the
	// crawl running after the healthy pages.
	First time.Duration `json:"first_ns"`
	Last  time.Duration `json:"last_ns"`
}

// SoakDead is the dead host's account: how often it was tried against the
// bound its breaker sets.
type SoakDead struct {
	Connections int `json:"connections"`
	// From the child's start: the first connection, the circuit's first
	// opening, the give-up (its first URL recorded host-down) and the last
	// connection. Zero for what did not happen.
	FirstTried time.Duration `json:"first_tried_ns"`
	Opened     time.Duration `json:"opened_ns"`
	GivenUp    time.Duration `json:"given_up_ns"`
	LastTried  time.Duration `json:"last_tried_ns"`
	// OpenSpan runs from the opening to the give-up or the last
	// connection, whichever is later: a dead host's circuit never closes,
	// and after the give-up a URL of it found later may still be let
	// through as a half-open probe. Probes is the rest periods in it, one
	// probe each at most, and Bound threshold + host concurrency + Probes:
	// the requests before the circuit opened, those in flight when it did,
	// and one a rest after.
	OpenSpan time.Duration    `json:"open_span_ns"`
	Probes   int              `json:"probes"`
	Bound    int              `json:"bound"`
	Results  map[string]int64 `json:"results"` // its stored results by error class
	Left     int64            `json:"left"`    // its URLs still queued or deferred
}

// SoakWARC is the archive, read back with warc.Check after the child exits.
type SoakWARC struct {
	Files      int            `json:"files"`
	Bytes      int64          `json:"bytes"`
	Records    map[string]int `json:"records"`
	CheckOK    bool           `json:"check_ok"`
	NProblems  int            `json:"n_problems"`
	Problems   []string       `json:"problems,omitempty"`
	Unfinished []string       `json:"unfinished,omitempty"`
	// Healthy pages held by exactly one response or revisit record, by
	// more than one, and by none.
	HealthyOnce, HealthyTwice, HealthyMissing int
}

// Clean is whether the archive read back clean with every healthy page in
// exactly one response or revisit record.
func (w *SoakWARC) Clean() bool { return w.CheckOK && w.HealthyTwice == 0 && w.HealthyMissing == 0 }

// PagesPerSec is the pages the crawl stored over its own wall time (crawl.New
// to Run's return), the unhealthy hosts' tail included.
func (s *SoakResult) PagesPerSec() float64 {
	if s.Run == nil || s.Run.Child.CrawlNS <= 0 {
		return 0
	}
	return float64(s.Run.Child.Fetched) / time.Duration(s.Run.Child.CrawlNS).Seconds()
}

// HealthyPerSec is the healthy pages served over the time until the last of
// them was.
func (s *SoakResult) HealthyPerSec() float64 {
	if s.HealthyDone <= 0 {
		return 0
	}
	return float64(s.Healthy.DistinctPages) / s.HealthyDone.Seconds()
}

// Growth is the peak RSS (VmHWM) at 100% of the healthy pages over the peak
// at 25%, minus one, and the same for VmRSS and anonymous RSS; ok is false
// when a sample is missing.
func (s *SoakResult) Growth() (peak, rss, anon float64, ok bool) {
	if s.Run == nil {
		return 0, 0, 0, false
	}
	var at25, at100 *RSSSample
	for i := range s.Run.Samples {
		switch smp := &s.Run.Samples[i]; smp.Percent {
		case 25:
			at25 = smp
		case 100:
			at100 = smp
		}
	}
	if at25 == nil || at100 == nil || at25.HWMKB == 0 || at25.RSSKB == 0 || at25.AnonKB == 0 {
		return 0, 0, 0, false
	}
	ratio := func(a, b int64) float64 { return float64(a)/float64(b) - 1 }
	return ratio(at100.HWMKB, at25.HWMKB), ratio(at100.RSSKB, at25.RSSKB), ratio(at100.AnonKB, at25.AnonKB), true
}
