package crawl

import (
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"breakwater/breaker"
)

// Scope values: which discovered links are followed.
const (
	ScopeSeeds  = "seeds"  // only the hosts of the seed URLs
	ScopeDomain = "domain" // the registrable domains of the seeds (public suffix list)
	ScopeAny    = "any"    // everything
)

// Options configure a crawl. DefaultOptions documents every default; main
// binds its flags to a copy of it.
type Options struct {
	DB              string
	Seeds           []string
	SeedsFile       string // one URL a line, streamed (see ReadSeeds)
	Workers         int
	HostConcurrency int
	Delay           time.Duration // minimum gap between request starts to one host
	Scope           string
	MaxDepth        int // -1: unlimited; 0: seeds only
	MaxPages        int // 0: unlimited
	Include         []*regexp.Regexp
	Exclude         []*regexp.Regexp
	UserAgent       string
	Timeout         time.Duration // whole request including body
	ConnectTimeout  time.Duration
	MaxBody         int64
	AllowPrivate    bool
	MaxDuration     time.Duration // 0: no limit
	// StopGrace is how long in-flight requests may run after a stop before
	// they are cancelled and their URLs returned to the queue.
	StopGrace time.Duration

	BreakerEnabled bool
	Breaker        breaker.Config
	GiveUpAfter    time.Duration
	RetryFailed    bool

	Retries     int
	RetryBase   time.Duration
	RetryMax    time.Duration
	RetryBudget float64

	// Fetcher makes the requests; nil means a fetch.Fetcher built from
	// these options. Tests pass a fake.
	Fetcher Fetcher

	Now    func() time.Time
	Rand   func() float64
	Logger *slog.Logger

	// housekeepEvery is how often breakers are persisted and due hosts given
	// up on by the sweep; zero means 500ms. Tests lengthen it to show that
	// the request path alone gives hosts up on time.
	housekeepEvery time.Duration
}

// Version is the crawler's version, used in the default User-Agent.
const Version = "0.1.0"

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		DB:              "breakwater.db",
		Workers:         32,
		HostConcurrency: 1,
		Delay:           time.Second,
		Scope:           ScopeSeeds,
		MaxDepth:        -1,
		UserAgent:       "breakwater/" + Version,
		Timeout:         30 * time.Second,
		ConnectTimeout:  10 * time.Second,
		MaxBody:         10 << 20,
		StopGrace:       5 * time.Second,
		BreakerEnabled:  true,
		Breaker:         breaker.Config{Threshold: 8, Rest: 5 * time.Minute, Probes: 2},
		GiveUpAfter:     30 * time.Minute,
		Retries:         3,
		RetryBase:       2 * time.Second,
		RetryMax:        10 * time.Minute,
		RetryBudget:     0.2,
	}
}

// Validate reports the first option that cannot work, naming it.
func (o *Options) Validate() error {
	switch {
	case o.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", o.Workers)
	case o.HostConcurrency < 1:
		return fmt.Errorf("--host-concurrency must be at least 1, got %d", o.HostConcurrency)
	case o.Delay < 0:
		return fmt.Errorf("--delay must not be negative, got %s", o.Delay)
	case o.Scope != ScopeSeeds && o.Scope != ScopeDomain && o.Scope != ScopeAny:
		return fmt.Errorf("--scope must be seeds, domain or any, got %q", o.Scope)
	case o.MaxPages < 0:
		return fmt.Errorf("--max-pages must not be negative, got %d", o.MaxPages)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	case o.ConnectTimeout <= 0:
		return fmt.Errorf("--connect-timeout must be positive, got %s", o.ConnectTimeout)
	case o.MaxBody <= 0:
		return fmt.Errorf("--max-body must be positive, got %d", o.MaxBody)
	case o.MaxDuration < 0:
		return fmt.Errorf("--max-duration must not be negative, got %s", o.MaxDuration)
	case o.UserAgent == "" || productToken(o.UserAgent) == "":
		return fmt.Errorf("--user-agent %q has no product token (the word before the first /)", o.UserAgent)
	case o.Retries < 0:
		return fmt.Errorf("--retries must not be negative, got %d", o.Retries)
	case o.RetryBase <= 0 || o.RetryMax < o.RetryBase:
		return fmt.Errorf("--retry-base (%s) must be positive and at most --retry-max (%s)", o.RetryBase, o.RetryMax)
	case o.RetryBudget < 0 || o.RetryBudget > 1:
		return fmt.Errorf("--retry-budget must be between 0 and 1, got %g", o.RetryBudget)
	case o.Breaker.Threshold < 1 || o.Breaker.Probes < 1 || o.Breaker.Rest <= 0:
		return fmt.Errorf("--breaker-threshold and --breaker-probes must be at least 1 and --breaker-rest positive")
	case o.Breaker.RestMax != 0 && o.Breaker.RestMax < o.Breaker.Rest:
		return fmt.Errorf("--breaker-rest-max (%s) must be at least --breaker-rest (%s)", o.Breaker.RestMax, o.Breaker.Rest)
	case o.GiveUpAfter <= 0:
		return fmt.Errorf("--give-up-after must be positive, got %s", o.GiveUpAfter)
	}
	return nil
}

// productToken is the first word of the User-Agent before "/", lower-cased:
// the name robots.txt groups and refusals are matched against.
func productToken(userAgent string) string {
	tok := userAgent
	for i, c := range userAgent {
		if c == '/' || c == ' ' {
			tok = userAgent[:i]
			break
		}
	}
	return toLowerASCII(tok)
}

func toLowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
