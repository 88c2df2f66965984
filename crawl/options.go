package crawl

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/fetch"
	"breakwater/metrics"
	"breakwater/notify"
	"breakwater/robots"
	"breakwater/sitemap"
	"breakwater/warc"
)

// HeaderHosts values: where the credentials the user gave go.
const (
	HeaderHostsSeeds = "seeds" // only the seeds' hosts
	HeaderHostsAll   = "all"   // every host the crawl asks
)

// WARC Secrets values: what request records keep of secret header values.
const (
	WARCSecretsMask = "mask" // warc.SecretMarker instead
	WARCSecretsKeep = "keep" // as sent
)

// Scope values: which discovered links are followed.
const (
	ScopeSeeds  = "seeds"  // only the hosts of the seed URLs
	ScopeDomain = "domain" // the registrable domains of the seeds (public suffix list)
	ScopeAny    = "any"    // everything
)

// Options configure a crawl. DefaultOptions returns every default; main
// binds its flags to a copy of it. New rejects a zero Options: start from
// DefaultOptions. Where a field says what zero means, zero is valid.
type Options struct {
	// Seeds are seed URLs; SeedsFile is a file of them, one a line,
	// streamed (see ForEachSeed). A resumed crawl needs neither.
	Seeds     []string
	SeedsFile string
	// Workers is the number of concurrent fetches, all hosts together.
	// Default 32; at least 1.
	Workers int
	// MemoryLimit is the Go runtime's soft memory limit while Run runs
	// (runtime/debug.SetMemoryLimit), in bytes: past it the garbage
	// collector runs more often rather than let the heap grow to twice
	// what is live, as it otherwise does (GOGC). It bounds the headroom,
	// not the crawl: a crawl that needs more goes past it, paying in GC
	// CPU. Below it, while the live heap is small, the collector waits
	// for the heap to grow by DefaultHeapFloor (or a quarter of the limit)
	// between cycles, unless GOGC is in the environment. Default
	// DefaultMemoryLimit; zero leaves the runtime's own (GOMEMLIMIT) and
	// pace, and so does a GOMEMLIMIT in the environment.
	MemoryLimit int64
	// HostConcurrency caps the requests in flight to one host. Default 1.
	HostConcurrency int
	// Delay is the least time between two request starts to one host;
	// robots.txt's Crawl-delay wins when larger. Default 1s; zero means no
	// gap beyond the pace a 429 imposes.
	Delay time.Duration
	// Scope says which discovered links are followed: ScopeSeeds (the
	// default), ScopeDomain or ScopeAny.
	Scope string
	// MaxDepth is the number of link hops from a seed to follow: -1 means
	// unlimited, 0 seeds only. Default DefaultMaxDepth.
	MaxDepth int
	// Traps are the rules that hold back the URLs of crawler traps, each
	// recorded as failed, class trap (see traps.go). Defaults
	// DefaultTrapRules.
	Traps TrapRules
	// PageRequisites fetches what each page needs to be shown (images,
	// stylesheets and what they import, scripts, fonts, frames) whatever
	// the scope, ahead of new pages on their host (see requisites.go).
	// Default true.
	PageRequisites bool
	// RequisiteHops bounds the chain of requisites from a page: its
	// stylesheet is 1, that stylesheet's @import 2, the font it names 3
	// (the default). At most maxRequisiteHops.
	RequisiteHops int
	// RobotsMeta obeys the robots directives of pages (<meta
	// name="robots">, X-Robots-Tag): a page that says nofollow (or none)
	// has its navigation links left alone. Default true; false records
	// the directives and follows the links all the same.
	RobotsMeta bool
	// SkipRelNofollow leaves alone the navigation links marked
	// rel="nofollow", which are otherwise followed (and recorded as
	// such). Default false.
	SkipRelNofollow bool
	// MaxPages stops the run after this many pages were attempted; zero
	// (the default) means no limit. Retries and requisites do not count;
	// sitemaps do.
	MaxPages int
	// MaxPagesPerHost is the most pages of one host requested over the
	// whole crawl, all runs together; the host's URLs beyond it are
	// recorded as failed, class host-page-cap (see hostcap.go). Zero (the
	// default) means no limit. Retries and refreshes do not count;
	// sitemaps do.
	MaxPagesPerHost int
	// Include, if any, keeps only discovered URLs matching one of them;
	// Exclude drops those matching any. Both empty by default.
	Include []*regexp.Regexp
	Exclude []*regexp.Regexp
	// UserAgent is sent with every request; its first word, before "/", is
	// the product token robots.txt groups and refusals are matched against
	// (see robots.ProductToken). Default "breakwater/" + Version.
	UserAgent string
	// Header holds extra request headers, "Name: value" each (see
	// fetch.ParseHeader); none by default.
	Header []string
	// Cookies is a Netscape cookies.txt file loaded into the run's cookie
	// jar; "" (the default) means no jar: cookies are neither sent nor kept.
	Cookies string
	// HeaderHosts says which hosts get the credentials the user gave: the
	// secret headers of Header (fetch.IsSecretHeader) and the cookies of
	// Cookies. HeaderHostsSeeds (the default; "" means it too) sends them to the seeds'
	// hosts only (the stored seed hosts), and the file's cookies there only
	// where the file names the host; HeaderHostsAll to every host a page
	// is fetched from. A robots.txt redirect to another host never carries
	// them, nor does a local-fault probe. Cookies servers set go where
	// the jar sends them either way.
	HeaderHosts string
	// Proxy is the proxy requests go through (see fetch.ParseProxy): a
	// URL, "env" for the environment's, or "" (the default) for none.
	Proxy string
	// Timeout bounds a whole request, body included. Default
	// fetch.DefaultTimeout (30s).
	Timeout time.Duration
	// ConnectTimeout bounds the TCP connect and the TLS handshake. Default
	// fetch.DefaultConnectTimeout (10s).
	ConnectTimeout time.Duration
	// MaxBody is the number of body bytes kept per response, after
	// decompression. Default fetch.DefaultMaxBody (10 MiB).
	MaxBody int64
	// AllowPrivate permits loopback, private and link-local addresses.
	// Default false: the dialler refuses them.
	AllowPrivate bool
	// MaxDuration stops the run cleanly after this long; zero (the
	// default) means no limit.
	MaxDuration time.Duration
	// StopGrace is how long in-flight requests may run after a stop before
	// they are cancelled and their URLs returned to the queue. Default 5s;
	// zero cancels them at once.
	StopGrace time.Duration

	// BreakerEnabled turns the automatic circuit breakers on (the
	// default); off, operator pauses and refusal cases still hold hosts.
	BreakerEnabled bool
	// Breaker tunes every host's breaker; zero fields take the breaker
	// package's defaults (8 failures, 5m rest, no escalation, 2 probes).
	// Its ProbeTimeout is always Timeout + ProbeSlack: a probe outlives
	// its request only by the slack.
	Breaker breaker.Config
	// GiveUpAfter records a host's queued URLs as host-down once it has
	// been open this long while the crawl was running. Default 30m.
	GiveUpAfter time.Duration
	// RetryFailed puts URLs recorded as failed back in the queue first.
	RetryFailed bool
	// RecrawlAfter queues again the pages fetched longer ago than this, when
	// the run starts and every minute while it runs, after their hosts' new
	// URLs, and fetches them with conditional requests (see recrawl.go).
	// Zero (the default) means never; otherwise at least one second.
	RecrawlAfter time.Duration
	// Sitemaps reads the sitemaps of the hosts in scope: those robots.txt
	// names, else the host's /sitemap.xml; their URLs are queued like
	// links (see sitemaps.go). Default true.
	Sitemaps bool
	// WARC writes every fetch to WARC files (see package warc); its zero
	// Dir means none.
	WARC WARCOptions
	// LocalFault tunes the guard that pauses the crawl when many hosts
	// fail at once (see localfault.go). It is stored with the crawl, as
	// the breaker's settings are: it is tuned to how the crawl's hosts
	// and network fail.
	LocalFault LocalFaultOptions
	// Fleet tunes a crawl on a fleet's store (--store redis://...); it is
	// ignored on a file. It is not stored: it is about one process.
	Fleet FleetOptions

	// Retries is the number of further attempts after a transient
	// failure. Default 3; zero means none.
	Retries int
	// RetryBase and RetryMax bound the exponential backoff with full
	// jitter; RetryMax also caps Retry-After. Defaults 2s and 10m.
	RetryBase time.Duration
	RetryMax  time.Duration
	// RetryBudget is the retries one host may make as a fraction of its
	// first attempts over a minute, on top of a few a minute and of those
	// its healthy answers earn (see RetryBudget). Default 0.2.
	RetryBudget float64

	// Fetcher makes the requests; nil (the default) means a fetch.Fetcher
	// built from these options. Tests pass a fake.
	Fetcher Fetcher
	// Metrics, if set, counts the crawl's requests and transitions (see
	// package metrics and Engine.MetricsSnapshot); nil counts nothing.
	Metrics *metrics.Crawl
	// Notify, if set, is told of what needs a human: a case raised, a
	// host given up on (see package notify); nil tells no one.
	Notify *notify.Notifier
	// ProgressEvery is how often a progress line is logged; zero means
	// every 30s, negative never (a progress line on a terminal shows it).
	ProgressEvery time.Duration
	// Now is the clock; nil means time.Now. Rand returns numbers in [0, 1)
	// for jitter; nil means math/rand/v2's Float64. Logger receives the
	// crawl's logs; nil means slog.Default().
	Now    func() time.Time
	Rand   func() float64
	Logger *slog.Logger

	// settings, set by ResolveFlags, are the crawl's settings New stores
	// with the seeds' hosts, by flag name; nil leaves the stored ones as
	// they are.
	settings map[string]json.RawMessage
	// settingsRead are the stored settings ResolveFlags read, and
	// settingsGiven the stored ones a flag gave: a fleet's store merges
	// the settings by them (MergeSettings).
	settingsRead  map[string]json.RawMessage
	settingsGiven map[string]bool

	// sitemapLimits bound each sitemap file; zero fields take the
	// sitemaps.org limits (sitemap.DefaultMaxURLs, DefaultMaxBytes). Tests
	// lower them.
	sitemapLimits sitemap.Limits

	// housekeepEvery is how often breakers are persisted and due hosts given
	// up on by the sweep; zero means 500ms. Tests lengthen it to show that
	// the request path alone gives hosts up on time.
	housekeepEvery time.Duration

	// encodeFault, if set, is asked before each exchange is encoded for
	// the archive, and an error it returns is that encoding's: tests make
	// the archive fail without a broken disk or store.
	encodeFault func(warc.Exchange) error
}

// Version is the crawler's version, used in the default User-Agent.
const Version = "0.1.0"

// ProbeSlack is how long a half-open host's probe may outlive its request
// timeout before the probe gate lets another through.
const ProbeSlack = 15 * time.Second

// DefaultMaxDepth is --max-depth's default: deep enough for real sites,
// whose pages are a few hops from their home page (the demo site's hosts of
// thousands of pages are at most 10 deep), yet an end for traps no rule
// sees, as Heritrix's 20 hops are.
const DefaultMaxDepth = 20

// DefaultTrapRules are the trap rules' defaults.
var DefaultTrapRules = TrapRules{Repeats: 3, Segments: 30, QueryParams: 8, FutureYears: 1}

// DefaultOptions returns the documented defaults.
func DefaultOptions() Options {
	return Options{
		Workers:         32,
		MemoryLimit:     DefaultMemoryLimit,
		HostConcurrency: 1,
		Delay:           time.Second,
		Scope:           ScopeSeeds,
		MaxDepth:        DefaultMaxDepth,
		Traps:           DefaultTrapRules,
		PageRequisites:  true,
		RequisiteHops:   3,
		RobotsMeta:      true,
		UserAgent:       "breakwater/" + Version,
		Timeout:         fetch.DefaultTimeout,
		ConnectTimeout:  fetch.DefaultConnectTimeout,
		MaxBody:         fetch.DefaultMaxBody,
		StopGrace:       5 * time.Second,
		BreakerEnabled:  true,
		Breaker: breaker.Config{Threshold: breaker.DefaultThreshold, Rest: breaker.DefaultRest,
			Probes: breaker.DefaultProbes},
		GiveUpAfter: 30 * time.Minute,
		Retries:     3,
		RetryBase:   2 * time.Second,
		RetryMax:    10 * time.Minute,
		RetryBudget: 0.2,
		Sitemaps:    true,
		LocalFault:  LocalFaultOptions{Hosts: 5, Share: 0.5, Window: time.Minute},
		HeaderHosts: HeaderHostsSeeds,
		Fleet:       FleetOptions{Lease: 10 * time.Second},
		WARC: WARCOptions{Size: warc.DefaultMaxFileSize, Prefix: warc.DefaultPrefix,
			MaxRecord: fetch.DefaultRecordMax, Dedupe: true, Secrets: WARCSecretsMask},
	}
}

// WARCOptions are the archive's settings (--warc...).
type WARCOptions struct {
	Dir string // where the files go; "" writes none
	// Size is the size after which a file is finished and the next
	// begun; 0 means warc.DefaultMaxFileSize.
	Size int64
	// Prefix starts the file names; "" means warc.DefaultPrefix.
	Prefix string
	// MaxRecord caps the wire bytes kept of one response (marked
	// WARC-Truncated beyond it); 0 means fetch.DefaultRecordMax.
	MaxRecord int64
	// Dedupe writes a payload archived before as a revisit.
	Dedupe bool
	// Secrets is what request records keep of secret header values:
	// WARCSecretsMask (the default; "" means it too) or WARCSecretsKeep (see
	// warc.Options.KeepSecrets). A proxy's credentials are never kept.
	Secrets string
}

// breakerConfig is the registry's configuration: the options' with the
// probe timeout tied to the request timeout.
func (o *Options) breakerConfig() breaker.Config {
	cfg := o.Breaker
	cfg.Disabled = !o.BreakerEnabled
	cfg.ProbeTimeout = o.Timeout + ProbeSlack
	return cfg
}

// Validate reports the first option that cannot work, naming it.
func (o *Options) Validate() error {
	switch {
	case o.MemoryLimit < 0:
		return fmt.Errorf("--memory-limit must be 0 (none) or a number of bytes, got %d", o.MemoryLimit)
	case o.Workers < 1:
		return fmt.Errorf("--workers must be at least 1, got %d", o.Workers)
	case o.HostConcurrency < 1:
		return fmt.Errorf("--host-concurrency must be at least 1, got %d", o.HostConcurrency)
	case o.Delay < 0:
		return fmt.Errorf("--delay must not be negative, got %s", o.Delay)
	case o.Scope != ScopeSeeds && o.Scope != ScopeDomain && o.Scope != ScopeAny:
		return fmt.Errorf("--scope must be seeds, domain or any, got %q", o.Scope)
	case o.MaxDepth < -1:
		return fmt.Errorf("--max-depth must be -1 (unlimited) or more, got %d", o.MaxDepth)
	case o.Traps.Validate() != nil:
		return o.Traps.Validate()
	case o.MaxPages < 0:
		return fmt.Errorf("--max-pages must not be negative, got %d", o.MaxPages)
	case o.RequisiteHops < 1 || o.RequisiteHops > maxRequisiteHops:
		return fmt.Errorf("--requisite-hops must be between 1 and %d, got %d", maxRequisiteHops, o.RequisiteHops)
	case o.MaxPagesPerHost < 0:
		return fmt.Errorf("--max-pages-per-host must not be negative, got %d", o.MaxPagesPerHost)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	case o.ConnectTimeout <= 0:
		return fmt.Errorf("--connect-timeout must be positive, got %s", o.ConnectTimeout)
	case o.MaxBody <= 0:
		return fmt.Errorf("--max-body must be positive, got %d", o.MaxBody)
	case o.MaxDuration < 0:
		return fmt.Errorf("--max-duration must not be negative, got %s", o.MaxDuration)
	case checkProductToken(o.UserAgent) != nil:
		return checkProductToken(o.UserAgent)
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
	case o.RecrawlAfter < 0 || o.RecrawlAfter > 0 && o.RecrawlAfter < time.Second:
		return fmt.Errorf("--recrawl-after must be 0 (never) or at least 1s, got %s", o.RecrawlAfter)
	case o.WARC.Size < 0 || o.WARC.Size > 0 && o.WARC.Size < 1<<20:
		return fmt.Errorf("--warc-size must be at least 1MiB, got %d", o.WARC.Size)
	case o.WARC.MaxRecord < 0:
		return fmt.Errorf("--warc-max-record must not be negative, got %d", o.WARC.MaxRecord)
	case o.WARC.Secrets != "" && o.WARC.Secrets != WARCSecretsMask && o.WARC.Secrets != WARCSecretsKeep:
		return fmt.Errorf("--warc-secrets must be mask or keep, got %q", o.WARC.Secrets)
	case o.HeaderHosts != "" && o.HeaderHosts != HeaderHostsSeeds && o.HeaderHosts != HeaderHostsAll:
		return fmt.Errorf("--header-hosts must be seeds or all, got %q", o.HeaderHosts)
	case o.LocalFault.Hosts < 0:
		return fmt.Errorf("--local-fault-hosts must not be negative (0 turns the guard off), got %d", o.LocalFault.Hosts)
	case o.LocalFault.Hosts > 0 && (o.LocalFault.Share <= 0 || o.LocalFault.Share > 1):
		return fmt.Errorf("--local-fault-share must be above 0 and at most 1, got %g", o.LocalFault.Share)
	case o.LocalFault.Hosts > 0 && o.LocalFault.Window < time.Second:
		return fmt.Errorf("--local-fault-window must be at least 1s, got %s", o.LocalFault.Window)
	case strings.ContainsAny(o.WARC.Prefix, `/\`):
		return fmt.Errorf("--warc-prefix %q must not contain a path separator", o.WARC.Prefix)
	}
	if _, err := o.requestHeader(); err != nil {
		return err
	}
	if o.Proxy != "" {
		p, err := fetch.ParseProxy(o.Proxy)
		if err != nil {
			return err
		}
		if !o.AllowPrivate {
			// Every request would fail: refuse the setting before the crawl.
			if err := p.CheckGuard(); err != nil {
				return err
			}
		}
	}
	return nil
}

// requestHeader parses Header into the headers every request carries.
// User-Agent is refused: it is --user-agent's, whose product token
// robots.txt and refusals are matched against.
func (o *Options) requestHeader() (http.Header, error) {
	if len(o.Header) == 0 {
		return nil, nil
	}
	h := http.Header{}
	for _, line := range o.Header {
		name, value, err := fetch.ParseHeader(line)
		if err != nil {
			return nil, err
		}
		if strings.EqualFold(name, "User-Agent") {
			return nil, fmt.Errorf("--header %q: set the User-Agent with --user-agent (its product token is what robots.txt is matched against)", line)
		}
		h.Add(name, value)
	}
	return h, nil
}

// checkProductToken makes sure the User-Agent's first word is a product
// token as RFC 9309 defines it (letters, "-" and "_"): otherwise robots.txt
// groups would be matched against only a part of the name a host sees.
func checkProductToken(userAgent string) error {
	first, _, _ := strings.Cut(userAgent, "/")
	first, _, _ = strings.Cut(first, " ")
	tok := robots.ProductToken(userAgent)
	if first == "" || len(tok) != len(first) {
		return fmt.Errorf("--user-agent %q: its product token %q (the word before the first /) may only contain letters, '-' and '_' (RFC 9309 §2.2.1)", userAgent, first)
	}
	return nil
}
