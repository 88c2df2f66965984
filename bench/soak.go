package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/demosite"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
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

// DefaultSoakConfig is the soak: 100,000 pages on 1,000 hosts.
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

// soakNoFile is how many descriptors each side may need: the site a
// listener a host, and both sides the connections of the child's idle pool
// (8 a worker) and its workers, with room for files and the runtime.
func soakNoFile(hosts, workers int) (parent, child uint64) {
	conns := uint64(16*workers + 256)
	return uint64(hosts) + conns, conns
}

// soak runs the soak's crawl in a child process and reads what it left:
// the site's logs, the file, the archive.
func (r *runner) soak(ctx context.Context) error {
	cfg, sc := r.cfg, r.cfg.Soak
	res := &SoakResult{Config: sc, Workers: cfg.Workers, HostConcurrency: cfg.HostConcurrency}
	r.report.Soak = res
	specs := soakSpecs(sc)
	parentFDs, childFDs := soakNoFile(len(specs), cfg.Workers)
	var err error
	if res.NoFile, err = raiseNoFile(parentFDs); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1, DeadLinksPerPage: 1})
	if err != nil {
		return fmt.Errorf("soak: start the site (%d hosts): %w", len(specs), err)
	}
	defer site.Close()
	seeds := filepath.Join(r.dir, "soak-seeds.txt")
	warcDir := filepath.Join(r.dir, "soak-warc")
	dbPath := filepath.Join(r.dir, "soak.db")
	logPath := filepath.Join(r.dir, "soak-log.jsonl")
	if err := writeLines(seeds, site.Roots()); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if err := os.Mkdir(warcDir, 0o755); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	args := []string{"--db", dbPath, "--seeds", seeds, "--warc", warcDir, "--log", logPath,
		"--workers", strconv.Itoa(cfg.Workers), "--host-concurrency", strconv.Itoa(cfg.HostConcurrency),
		"--timeout", sc.Timeout.String(), "--breaker-threshold", strconv.Itoa(sc.Breaker.Threshold),
		"--breaker-rest", sc.Breaker.Rest.String(), "--breaker-probes", strconv.Itoa(sc.Breaker.Probes),
		"--give-up-after", sc.GiveUpAfter.String(), "--retry-base", sc.RetryBase.String(),
		"--retry-max", sc.RetryMax.String(), "--retry-budget", strconv.FormatFloat(sc.RetryBudget, 'g', -1, 64),
		"--settle", sc.Settle.String(),
		"--nofile", strconv.FormatUint(childFDs, 10)}
	healthy, unhealthy := splitHosts(site)
	cfg.logf("soak: %s healthy plus a dead, a flaky, a throttling, a recovering and a refusing host, --warc, in a child process", sc.Site)
	run, err := r.runChild(ctx, childRun{name: "soak", args: args, sample: soakSampler(healthy, sc.Site), limit: sc.Cap})
	if err != nil {
		return err
	}
	res.Run = run
	if len(run.Samples) < 3 && run.last.RSSKB > 0 {
		run.Samples = append(run.Samples, run.last)
	}
	if l := run.Child.Leaks; l != nil && l.GoroutineDump != "" {
		res.GoroutineDump = r.keep("soak-goroutines", []byte(l.GoroutineDump))
		l.GoroutineDump = "" // in the file, not in every report
	}
	res.Healthy = hostsTraffic(healthy)
	res.HealthyDone = lastRequest(healthy).Sub(run.start)
	res.Refetched = askedTwice(healthy, run.start, maxRefetched)
	if res.Logged, err = countLogged(logPath); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	// Warnings are expected (the dead host given up, the refusing host's
	// case); an error is not, and its lines are kept for whoever reads why.
	if loggedErrors(res.Logged) {
		if data, err := os.ReadFile(logPath); err == nil {
			res.LogFile = r.keep("soak-log", data)
		}
	}
	for _, h := range unhealthy {
		res.Unhealthy = append(res.Unhealthy, soakHostTraffic(h, run.start))
	}
	if err := site.Close(); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if st, err := os.Stat(dbPath); err == nil {
		res.DBBytes = st.Size()
	}
	if err := res.inspectFile(dbPath, healthy, unhealthy, run); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	cfg.logf("soak: reading the archive back (warc.Check) and verifying the database against it")
	var archived map[string]int
	if res.WARC, archived, err = soakArchive(warcDir, healthy); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	if res.Verify, err = verifyFile(dbPath, archived); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// SoakVerify is storage's Verify of the crawl's file against its archive,
// the check `breakwater verify --db --warc` runs: bbolt's own, the crawl's
// invariants, every page done archived.
type SoakVerify struct {
	OK       bool     `json:"ok"`
	Problems []string `json:"problems,omitempty"` // the first few
	Omitted  int      `json:"omitted,omitempty"`
	Seen     int64    `json:"seen"`
}

func verifyFile(path string, archived map[string]int) (SoakVerify, error) {
	db, err := storage.Open(path, &storage.Options{ReadOnly: true})
	if err != nil {
		return SoakVerify{}, err
	}
	defer db.Close()
	rep, err := db.Verify(storage.VerifyOptions{Archive: archived})
	if err != nil {
		return SoakVerify{}, fmt.Errorf("verify %s: %w", path, err)
	}
	return SoakVerify{OK: rep.OK(), Problems: rep.Problems[:min(len(rep.Problems), maxProblems)],
		Omitted: rep.Omitted + max(len(rep.Problems)-maxProblems, 0), Seen: rep.Seen}, nil
}

// splitHosts separates the healthy hosts from the others.
func splitHosts(site *demosite.Site) (healthy, unhealthy []*demosite.Host) {
	for _, h := range site.Hosts() {
		if h.Spec().Behavior == demosite.Healthy {
			healthy = append(healthy, h)
		} else {
			unhealthy = append(unhealthy, h)
		}
	}
	return healthy, unhealthy
}

// soakSampler records RSS when the healthy hosts have served 25, 50 and
// 100% of their pages (one robots.txt request a host discounted): the
// unhealthy hosts' pages come at their own pace and would blur the marks.
func soakSampler(healthy []*demosite.Host, size Size) sampler {
	return percentSampler(size.URLs(), func() int {
		n := -len(healthy)
		for _, h := range healthy {
			n += h.RequestCount()
		}
		return n
	})
}

// hostsTraffic counts what hosts saw, as trafficSince does for live hosts.
func hostsTraffic(hosts []*demosite.Host) Traffic {
	var t Traffic
	for _, h := range hosts {
		seen := make(map[string]bool)
		for _, r := range h.Requests() {
			if r.Path == "/robots.txt" {
				t.RobotsRequests++
				continue
			}
			t.PageRequests++
			if r.Status == 200 && !seen[r.Path] {
				seen[r.Path] = true
				t.DistinctPages++
			}
		}
	}
	return t
}

// lastRequest is the time of the latest request any of hosts received.
func lastRequest(hosts []*demosite.Host) time.Time {
	var last time.Time
	for _, h := range hosts {
		reqs := h.Requests()
		for _, r := range reqs {
			if r.Time.After(last) {
				last = r.Time
			}
		}
	}
	return last
}

// askedTwice names up to limit pages of hosts asked more than once, each
// with its requests' statuses and times from start.
func askedTwice(hosts []*demosite.Host, start time.Time, limit int) []string {
	var out []string
	for _, h := range hosts {
		byPath := map[string][]demosite.Request{}
		var order []string
		for _, r := range h.Requests() {
			if r.Path == "/robots.txt" {
				continue
			}
			if byPath[r.Path] == nil {
				order = append(order, r.Path)
			}
			byPath[r.Path] = append(byPath[r.Path], r)
		}
		for _, p := range order {
			reqs := byPath[p]
			if len(reqs) < 2 {
				continue
			}
			if len(out) == limit {
				return out
			}
			var at []string
			for _, r := range reqs {
				at = append(at, fmt.Sprintf("%d at %.2fs", r.Status, r.Time.Sub(start).Seconds()))
			}
			out = append(out, h.Name+p+": "+strings.Join(at, ", "))
		}
	}
	return out
}

func loggedErrors(counts map[string]int) bool {
	for msg := range counts {
		if strings.HasPrefix(msg, slog.LevelError.String()) {
			return true
		}
	}
	return false
}

// countLogged counts the child's log lines by message; a missing file is
// no line.
func countLogged(path string) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for line := range bytes.Lines(data) {
		var rec struct {
			Level, Msg string
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("child log %s: %w", path, err)
		}
		counts[rec.Level+": "+rec.Msg]++
	}
	return counts, nil
}

func soakHostTraffic(h *demosite.Host, start time.Time) SoakHost {
	out := SoakHost{Name: h.Name, Behavior: h.Spec().Behavior.String(), Statuses: map[int]int{}}
	reqs := h.Requests()
	var times []time.Time
	for _, r := range reqs {
		times = append(times, r.Time)
		if h.Spec().Behavior != demosite.Dead {
			out.Statuses[r.Status]++
		}
		if r.Path == "/robots.txt" {
			out.Robots++
		} else {
			out.Requests++
		}
	}
	if len(times) > 0 {
		first, last := timeRange(times)
		out.First, out.Last = first.Sub(start), last.Sub(start)
	}
	return out
}

// inspectFile reads, from the child's file, each unhealthy host's counts
// and transitions and the dead host's results and timeline.
func (s *SoakResult) inspectFile(path string, healthy, unhealthy []*demosite.Host, run *MemoryRun) error {
	db, err := storage.Open(path, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	healthyKeys := make(map[string]bool, len(healthy))
	for _, h := range healthy {
		key, err := frontier.HostKey(h.BaseURL() + "/")
		if err != nil {
			return err
		}
		healthyKeys[key] = true
	}
	err = db.ForEachResult(func(res *store.Result) error {
		if healthyKeys[res.Host] && res.Attempts > 1 {
			s.HealthyRetried++
		}
		return nil
	})
	if err != nil {
		return err
	}
	byKey := make(map[string]*SoakHost, len(unhealthy))
	var deadKey string
	var deadTimes []time.Time
	for i, h := range unhealthy {
		key, err := frontier.HostKey(h.BaseURL() + "/")
		if err != nil {
			return err
		}
		byKey[key] = &s.Unhealthy[i]
		if h.Spec().Behavior == demosite.Dead {
			deadKey = key
			for _, r := range h.Requests() {
				deadTimes = append(deadTimes, r.Time)
			}
		}
	}
	err = db.ForEachHost(func(host string, c store.HostCounts) error {
		if h := byKey[host]; h != nil {
			h.Stored = c
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = db.ForEachTransition(func(t store.Transition) error {
		if h := byKey[t.Host]; h != nil {
			if h.Transitions == nil {
				h.Transitions = map[string]int{}
			}
			h.Transitions[t.To]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	dead := &DeadRun{DeadResults: map[string]int64{}}
	if err := inspectDead(db, deadKey, dead); err != nil {
		return err
	}
	d := &s.Dead
	d.Results, d.Left = dead.DeadResults, dead.DeadLeft
	d.Connections = len(deadTimes)
	if len(deadTimes) > 0 {
		first, last := timeRange(deadTimes)
		d.FirstTried, d.LastTried = first.Sub(run.start), last.Sub(run.start)
	}
	d.Opened, d.GivenUp = sinceOrZero(dead.opened, run.start), sinceOrZero(dead.firstDown, run.start)
	d.OpenSpan, d.Probes, d.Bound = deadBound(s.Config.Breaker, s.HostConcurrency, d.Opened, max(d.GivenUp, d.LastTried))
	return nil
}

// deadBound is the most connections the dead host may see: threshold +
// host concurrency before and as the circuit opens, then one probe per
// rest period from the opening until the circuit's last use.
func deadBound(b breaker.Config, hostConcurrency int, opened, until time.Duration) (span time.Duration, probes, bound int) {
	if opened > 0 {
		span = max(until-opened, 0)
		probes = int(math.Ceil(span.Seconds() / b.Rest.Seconds()))
	}
	return span, probes, b.Threshold + hostConcurrency + probes
}

func timeRange(ts []time.Time) (first, last time.Time) {
	first, last = ts[0], ts[0]
	for _, t := range ts[1:] {
		if t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// soakArchive reads the archive back and finds each healthy page in it. It
// also returns the archive's count of response and revisit records by URL.
func soakArchive(dir string, healthy []*demosite.Host) (SoakWARC, map[string]int, error) {
	var w SoakWARC
	var err error
	if w.Files, w.Bytes, err = warcFiles(dir); err != nil {
		return w, nil, err
	}
	rep, err := warc.Check(dir)
	if err != nil {
		return w, nil, err
	}
	w.Records, w.CheckOK, w.NProblems, w.Unfinished = rep.Records, rep.OK(), len(rep.Problems), rep.Unfinished
	w.Problems = rep.Problems[:min(len(rep.Problems), maxProblems)]
	for _, h := range healthy {
		for i := range h.Spec().Pages {
			switch n := rep.Responses[h.PageURL(i)]; {
			case n == 0:
				w.HealthyMissing++
			case n == 1:
				w.HealthyOnce++
			default:
				w.HealthyTwice++
			}
		}
	}
	return w, rep.Responses, nil
}

func (r *Report) soakRows() []Row {
	s := r.Soak
	if s == nil || s.Run == nil {
		return nil
	}
	var rows []Row
	add := func(fig, val, target, v string) { rows = append(rows, Row{"soak", fig, val, target, v}) }
	c, sc := s.Run.Child, s.Config
	add(fmt.Sprintf("pages/s over the whole crawl (%d fetched, %d failed in %s)", c.Fetched, c.Failed,
		secs(time.Duration(c.CrawlNS))), rate(s.PagesPerSec(), "pages/s"), "", "")
	add("the crawl ended", c.Why, "", "")
	add(fmt.Sprintf("healthy pages/s until the last was served (%d in %s)", s.Healthy.DistinctPages, secs(s.HealthyDone)),
		rate(s.HealthyPerSec(), "pages/s"), "", "")
	t := s.Healthy
	add("healthy pages: page requests / distinct served / pages", fmt.Sprintf("%d / %d / %d", t.PageRequests, t.DistinctPages, sc.Site.URLs()),
		"all, once", verdict(t.Duplicates() == 0 && t.DistinctPages == sc.Site.URLs()))
	if len(s.Refetched) > 0 || s.HealthyRetried > 0 {
		add("healthy pages stored after more than one attempt / asked more than once (first few)",
			fmt.Sprintf("%d / %d: %s", s.HealthyRetried, t.Duplicates(), strings.Join(s.Refetched[:min(len(s.Refetched), 3)], "; ")), "", "")
	}
	for _, smp := range s.Run.Samples {
		add(fmt.Sprintf("peak RSS at %d%% of the healthy pages (%d served)", smp.Percent, smp.Pages),
			fmt.Sprintf("%s (RSS %s, anon %s)", mb(kib(smp.HWMKB)), mb(kib(smp.RSSKB)), mb(kib(smp.AnonKB))), "", "")
	}
	if s.DBBytes > 0 {
		add("database file at the end (its pages mapped in count in RSS, not in anon)", mb(s.DBBytes), "", "")
	}
	// The verdict is on VmRSS, as the memory section's growth is: a peak
	// cannot fall, so its growth measures the largest passing spike, shown
	// beside it with the anonymous part.
	if peak, rss, anon, ok := s.Growth(); ok {
		add("RSS at 100% within 20% of RSS at 25%", fmt.Sprintf("%+.1f%% (peak %+.1f%%, anon %+.1f%%)", rss*100, peak*100, anon*100),
			"within 20%", verdict(rss <= TargetGrowth && rss >= -TargetGrowth))
	}
	add("peak RSS of the whole run (its VmHWM as it exits)", fmt.Sprintf("%s (RSS at the end %s, anon %s)",
		mb(kib(s.Run.PeakKB)), mb(kib(c.RSSKB)), mb(kib(c.AnonKB))), "", "")
	if l := c.Leaks; l != nil {
		settled := fmt.Sprintf("after %dms", time.Duration(l.SettleNS).Milliseconds())
		add("goroutines: before the crawl / as Run returned / "+settled,
			fmt.Sprintf("%d / %d / %d", l.GoroutinesBefore, l.GoroutinesAtEnd, l.GoroutinesSettled), "back to baseline", verdict(l.GoroutinesBack()))
		add("open descriptors: before the crawl / as Run returned / "+settled,
			fmt.Sprintf("%d / %d / %d", l.FDsBefore, l.FDsAtEnd, l.FDsSettled), "back to baseline", verdict(l.FDsBack()))
		if len(l.ExtraFDs) > 0 {
			add("descriptors left open (first few)", strings.Join(l.ExtraFDs[:min(len(l.ExtraFDs), 5)], ", "), "", "")
		}
	}
	if s.GoroutineDump != "" {
		add("goroutines left: their stacks", s.GoroutineDump, "", "")
	}
	d := s.Dead
	add(fmt.Sprintf("dead host: connections (first / circuit opened / given up / last at %.2fs / %.2fs / %.2fs / %.2fs)",
		d.FirstTried.Seconds(), d.Opened.Seconds(), d.GivenUp.Seconds(), d.LastTried.Seconds()), strconv.Itoa(d.Connections),
		fmt.Sprintf("<= %d = %d + %d + %d probes (%s open / %s rest)", d.Bound,
			sc.Breaker.Threshold, s.HostConcurrency, d.Probes, secs(d.OpenSpan), sc.Breaker.Rest),
		verdict(d.Connections <= d.Bound))
	add("dead host: URLs recorded / left", deadOutcome(&DeadRun{DeadResults: d.Results, DeadLeft: d.Left}), "", "")
	for _, h := range s.Unhealthy {
		if h.Behavior == demosite.Dead.String() {
			continue
		}
		add(fmt.Sprintf("%s host: requests + robots.txt (statuses) / fetched, failed, left / transitions / first, last at", h.Behavior), h.summary(), "", "")
	}
	if len(s.Logged) > 0 {
		var parts []string
		for _, msg := range slices.Sorted(maps.Keys(s.Logged)) {
			parts = append(parts, fmt.Sprintf("%dx %s", s.Logged[msg], shorten(msg, 60)))
		}
		fig := "crawl warnings and errors logged"
		if s.LogFile != "" {
			fig += " (kept in " + s.LogFile + ")"
		}
		add(fig, strings.Join(parts, "; "), "", "")
	}
	w := s.WARC
	check := "clean"
	if !w.CheckOK {
		check = fmt.Sprintf("NOT CLEAN: %d problems, %d unfinished files", w.NProblems, len(w.Unfinished))
	}
	v := verdict(w.Clean())
	if !w.Clean() {
		v = verdictFailed
	}
	add(fmt.Sprintf("WARC (%d files, %s, %d responses, %d revisits): warc.Check; healthy pages in one response or revisit",
		w.Files, mb(w.Bytes), w.Records["response"], w.Records["revisit"]),
		fmt.Sprintf("%s; %d / %d (%d in more, %d in none)", check, w.HealthyOnce, sc.Site.URLs(), w.HealthyTwice, w.HealthyMissing),
		"clean, all once", v)
	vv, verdictV := fmt.Sprintf("clean (%d URLs seen)", s.Verify.Seen), "met"
	if !s.Verify.OK {
		vv = fmt.Sprintf("%d problems: %s", len(s.Verify.Problems)+s.Verify.Omitted, strings.Join(s.Verify.Problems[:min(len(s.Verify.Problems), 3)], "; "))
		verdictV = verdictFailed
	}
	add("verify: the database's invariants, every page done in the archive", vv, "clean", verdictV)
	childLimit := "not raised"
	if c.Leaks != nil && c.Leaks.NoFile > 0 {
		childLimit = strconv.FormatUint(c.Leaks.NoFile, 10)
	}
	add("RLIMIT_NOFILE: this process / the child", fmt.Sprintf("%d / %s", s.NoFile, childLimit), "", "")
	return rows
}

// summary reads "312 + 1 (200: 221, 500: 92) / 98, 2, 0 / closed 2, half-open 2, open 3 / 0.3s, 41.2s".
func (h SoakHost) summary() string {
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
	return fmt.Sprintf("%d + %d (%s) / %d, %d, %d / %s / %s, %s", h.Requests, h.Robots, strings.Join(st, ", "), c.Fetched, c.Failed,
		c.Queued+c.Deferred, strings.Join(tr, ", "), secs(h.First), secs(h.Last))
}

func (r *Report) soakNote() string {
	s := r.Soak
	sc := s.Config
	return fmt.Sprintf("Soak: %d healthy hosts of %d pages plus a dead host (%d URLs, one linked from each live page), a flaky "+
		"(30%% 500s), a throttling (429 with Retry-After: 1 above %g requests/s), a recovering (503 for the site's "+
		"first %s) and a refusing host (403 naming the crawler: a case, its URLs held for a person), %d pages each, "+
		"all served by this process. The crawl runs in a child process as the memory section's do, from every root, "+
		"with --warc into an empty directory, %d workers, %d per host, --delay 0, timeout %s, retries 3 (backoff "+
		"%s-%s, retry budget %g), breaker threshold %d, rest %s, probes %d, --give-up-after %s. RSS is sampled from /proc every "+
		"20 ms and taken when the healthy hosts have served 25, 50 and 100%% of their pages; peak is VmHWM, the "+
		"high-water mark so far; the growth verdict is on VmRSS, as the memory section's. Goroutines and open descriptors are read by the child before the crawl (the "+
		"database open) and again as Run returns, then every 10 ms for up to %s until both are back. The dead "+
		"host's connections are counted by the host; its bound (threshold + host concurrency + probes) is the "+
		"breaker's threshold plus the host concurrency, plus one probe per rest period from the circuit's opening to the give-up or the last "+
		"connection, whichever is later (the circuit never closes, and a URL found after the give-up may still "+
		"be let through as a probe). The crawl's length is mostly the "+
		"unhealthy hosts': the retry budget lets a host retry %g of its first attempts of the last minute "+
		"plus three a minute, so once the flaky host's first attempts are a minute old its last retries go "+
		"three a minute. The archive is read back with warc.Check after the child exits (not timed), and the "+
		"database checked against it by storage's Verify, the check `breakwater verify --db --warc` runs.",
		sc.Site.Hosts, sc.Site.Pages, sc.DeadURLs, sc.ThrottleRPS, sc.RecoverAfter, sc.UnhealthyPages, s.Workers, s.HostConcurrency,
		sc.Timeout, sc.RetryBase, sc.RetryMax, sc.RetryBudget, sc.Breaker.Threshold, sc.Breaker.Rest, sc.Breaker.Probes,
		sc.GiveUpAfter, sc.Settle, sc.RetryBudget)
}

// shorten cuts s to at most n bytes, marking the cut.
func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
