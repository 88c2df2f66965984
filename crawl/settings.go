package crawl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"time"

	"breakwater/control"
	"breakwater/store"
)

// Settings is the stored form of a crawl's own settings: the first run
// stores them in the file and every later run uses them unless its flags
// say otherwise. The JSON keys are the flags' names, so a change can be
// logged, and shown by `status`, under the name the user typed. Limits of
// one run (--max-duration, --max-pages, --retry-failed) and the machine's
// own resources (--workers) are not settings of the crawl.
type Settings struct {
	// SeedHosts are the hosts of every seed ever given: the crawl's scope
	// when Scope is ScopeSeeds or ScopeDomain.
	SeedHosts []string `json:"seed_hosts,omitempty"`

	Scope            string   `json:"scope"`
	Include          []string `json:"include"`
	Exclude          []string `json:"exclude"`
	MaxDepth         int      `json:"max-depth"`
	MaxPagesPerHost  int      `json:"max-pages-per-host"`
	UserAgent        string   `json:"user-agent"`
	Header           []string `json:"header"`
	Cookies          string   `json:"cookies"`
	HeaderHosts      string   `json:"header-hosts"`
	Proxy            string   `json:"proxy"`
	Delay            Duration `json:"delay"`
	HostConcurrency  int      `json:"host-concurrency"`
	Timeout          Duration `json:"timeout"`
	ConnectTimeout   Duration `json:"connect-timeout"`
	MaxBody          int64    `json:"max-body"`
	AllowPrivate     bool     `json:"allow-private"`
	Breaker          bool     `json:"breaker"`
	BreakerThreshold int      `json:"breaker-threshold"`
	BreakerRest      Duration `json:"breaker-rest"`
	BreakerRestMax   Duration `json:"breaker-rest-max"`
	BreakerProbes    int      `json:"breaker-probes"`
	GiveUpAfter      Duration `json:"give-up-after"`
	Retries          int      `json:"retries"`
	RetryBase        Duration `json:"retry-base"`
	RetryMax         Duration `json:"retry-max"`
	RetryBudget      float64  `json:"retry-budget"`
	RecrawlAfter     Duration `json:"recrawl-after"`
	Sitemaps         bool     `json:"sitemaps"`
	WARC             string   `json:"warc"`
	WARCSize         int64    `json:"warc-size"`
	WARCPrefix       string   `json:"warc-prefix"`
	WARCMaxRecord    int64    `json:"warc-max-record"`
	WARCDedupe       bool     `json:"warc-dedupe"`
	WARCSecrets      string   `json:"warc-secrets"`
}

// Duration is a time.Duration stored as its text ("1m30s"), readable in
// `status --json` and in the file.
type Duration time.Duration

// MarshalJSON writes d as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	*d = Duration(v)
	return err
}

// SettingsOf returns o's crawl settings (SeedHosts aside).
func SettingsOf(o Options) Settings {
	return Settings{Scope: o.Scope, Include: patterns(o.Include), Exclude: patterns(o.Exclude),
		MaxDepth: o.MaxDepth, MaxPagesPerHost: o.MaxPagesPerHost, UserAgent: o.UserAgent, Header: o.Header, Cookies: o.Cookies, Proxy: o.Proxy,
		HeaderHosts: o.HeaderHosts, Delay: Duration(o.Delay), HostConcurrency: o.HostConcurrency, Timeout: Duration(o.Timeout),
		ConnectTimeout: Duration(o.ConnectTimeout), MaxBody: o.MaxBody, AllowPrivate: o.AllowPrivate,
		Breaker: o.BreakerEnabled, BreakerThreshold: o.Breaker.Threshold, BreakerRest: Duration(o.Breaker.Rest),
		BreakerRestMax: Duration(o.Breaker.RestMax), BreakerProbes: o.Breaker.Probes,
		GiveUpAfter: Duration(o.GiveUpAfter), Retries: o.Retries, RetryBase: Duration(o.RetryBase),
		RetryMax: Duration(o.RetryMax), RetryBudget: o.RetryBudget, RecrawlAfter: Duration(o.RecrawlAfter),
		Sitemaps: o.Sitemaps, WARC: o.WARC.Dir, WARCSize: o.WARC.Size, WARCPrefix: o.WARC.Prefix,
		WARCMaxRecord: o.WARC.MaxRecord, WARCDedupe: o.WARC.Dedupe, WARCSecrets: o.WARC.Secrets}
}

// applyTo sets o's crawl settings to s.
func (s Settings) applyTo(o *Options) error {
	var err error
	if o.Include, err = compilePatterns("include", s.Include); err != nil {
		return err
	}
	if o.Exclude, err = compilePatterns("exclude", s.Exclude); err != nil {
		return err
	}
	o.Scope, o.MaxDepth, o.UserAgent, o.Header, o.Cookies, o.Proxy = s.Scope, s.MaxDepth, s.UserAgent, s.Header, s.Cookies, s.Proxy
	o.MaxPagesPerHost, o.HeaderHosts = s.MaxPagesPerHost, s.HeaderHosts
	o.Delay, o.HostConcurrency = time.Duration(s.Delay), s.HostConcurrency
	o.Timeout, o.ConnectTimeout = time.Duration(s.Timeout), time.Duration(s.ConnectTimeout)
	o.MaxBody, o.AllowPrivate = s.MaxBody, s.AllowPrivate
	o.BreakerEnabled, o.Breaker.Threshold, o.Breaker.Probes = s.Breaker, s.BreakerThreshold, s.BreakerProbes
	o.Breaker.Rest, o.Breaker.RestMax = time.Duration(s.BreakerRest), time.Duration(s.BreakerRestMax)
	o.GiveUpAfter, o.Retries = time.Duration(s.GiveUpAfter), s.Retries
	o.RetryBase, o.RetryMax, o.RetryBudget = time.Duration(s.RetryBase), time.Duration(s.RetryMax), s.RetryBudget
	o.RecrawlAfter, o.Sitemaps = time.Duration(s.RecrawlAfter), s.Sitemaps
	o.WARC = WARCOptions{Dir: s.WARC, Size: s.WARCSize, Prefix: s.WARCPrefix, MaxRecord: s.WARCMaxRecord,
		Dedupe: s.WARCDedupe, Secrets: s.WARCSecrets}
	return nil
}

func patterns(res []*regexp.Regexp) []string {
	out := []string{}
	for _, re := range res {
		out = append(out, re.String())
	}
	return out
}

func compilePatterns(flag string, exprs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, x := range exprs {
		re, err := regexp.Compile(x)
		if err != nil {
			return nil, fmt.Errorf("stored --%s %q: %w", flag, x, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// SettingChange is one stored setting a run's flag changed.
type SettingChange struct {
	Flag     string
	Old, New json.RawMessage
}

// ResolveSettings merges the settings stored in db with opts. A setting
// whose flag was given (given(flag) is true) comes from opts and replaces
// the stored one from now on; every other setting the file has comes from
// the file. Settings the file does not have yet (a new crawl, or a file
// older than them) come from opts. It returns the options in force and the
// stored settings the flags changed. Nothing is written: New stores the
// merged settings, with the seeds' hosts, in one write once every check
// has passed, so a run refused for bad input changes nothing and a kill
// cannot leave half of them stored.
func ResolveSettings(db interface{ Settings() ([]byte, error) }, opts Options, given func(flag string) bool) (Options, []SettingChange, error) {
	stored, err := db.Settings()
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return opts, nil, fmt.Errorf("read stored crawl settings: %w", err)
	}
	merged, changes, err := mergeSettings(stored, SettingsOf(opts), given)
	if err != nil {
		return opts, nil, err
	}
	if err := merged.applyTo(&opts); err != nil {
		return opts, nil, err
	}
	if err := opts.Validate(); err != nil {
		return opts, nil, fmt.Errorf("the crawl's settings, stored and given: %w", err)
	}
	opts.settings = &merged
	return opts, changes, nil
}

// mergeSettings merges key by key, the keys being the flags' names.
func mergeSettings(stored []byte, current Settings, given func(string) bool) (Settings, []SettingChange, error) {
	old := map[string]json.RawMessage{}
	if len(stored) > 0 {
		if err := json.Unmarshal(stored, &old); err != nil {
			return Settings{}, nil, fmt.Errorf("read stored crawl settings: %w", err)
		}
	}
	cur := map[string]json.RawMessage{}
	data, _ := json.Marshal(&current)
	json.Unmarshal(data, &cur)
	merged := map[string]json.RawMessage{}
	var changes []SettingChange
	for _, k := range slices.Sorted(maps.Keys(cur)) {
		v := cur[k]
		ov, was := old[k]
		switch {
		case was && !given(k):
			merged[k] = ov
		case was && !bytes.Equal(ov, v):
			changes = append(changes, SettingChange{Flag: k, Old: ov, New: v})
			merged[k] = v
		default:
			merged[k] = v
		}
	}
	if hosts, ok := old["seed_hosts"]; ok {
		merged["seed_hosts"] = hosts
	}
	var out Settings
	data, _ = json.Marshal(merged)
	if err := json.Unmarshal(data, &out); err != nil {
		return Settings{}, nil, fmt.Errorf("read stored crawl settings: %w", err)
	}
	return out, changes, nil
}

// LogSettingChanges logs each change as old -> new, secret values masked.
func LogSettingChanges(log *slog.Logger, changes []SettingChange) {
	for _, c := range changes {
		log.Info("crawl setting changed", "setting", c.Flag,
			"old", string(control.MaskSetting(c.Flag, c.Old)), "new", string(control.MaskSetting(c.Flag, c.New)))
	}
}
