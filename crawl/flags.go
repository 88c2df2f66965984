package crawl

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"breakwater/control"
)

// The settings table: every flag of the crawl command is one Flag in
// flagTable, and everything about a flag comes from its entry: the flag
// binding (Bind), whether the crawl stores it (Stored, merged on resume by
// ResolveFlags), whether status masks it (Secret), where crawl --help
// shows it (Group) and docs/flags.md (FlagsMarkdown). A flag's type and
// default come from the field it is bound to and DefaultFlagValues, so
// they cannot disagree with the code.

// Group is a topic of the crawl command's flags; crawl --help and
// docs/flags.md show a heading per group, in this order.
type Group int

// The groups, in the order they are shown.
const (
	GroupRun Group = iota
	GroupScope
	GroupPoliteness
	GroupRequests
	GroupBreakers
	GroupArchive
	GroupWatching
	GroupFleet
	groupCount
)

var groupTitles = [groupCount]string{
	GroupRun:        "The crawl and this run",
	GroupScope:      "Scope",
	GroupPoliteness: "Politeness",
	GroupRequests:   "Requests",
	GroupBreakers:   "Breakers and retries",
	GroupArchive:    "Archive",
	GroupWatching:   "Watching",
	GroupFleet:      "Fleet",
}

// String is the group's heading.
func (g Group) String() string { return groupTitles[g] }

// Groups returns every group, in the order they are shown.
func Groups() []Group {
	out := make([]Group, groupCount)
	for g := range groupCount {
		out[g] = g
	}
	return out
}

// Flag is one flag of the crawl command: one entry of the settings table.
type Flag struct {
	Name  string
	Group Group
	Help  string
	// Stored says the flag is a setting of the crawl: the first run
	// stores it with the crawl (the --db file or the --store), and a later
	// run uses the stored value unless it gives the flag again, which
	// changes it from then on. Otherwise the flag belongs to the run that
	// gives it.
	Stored bool
	// Why says why the flag is stored or not, where that is a decision.
	Why string
	// Secret, if set, masks the stored value wherever it is shown (status,
	// the "crawl setting changed" log line); the crawl keeps it as given.
	Secret control.Mask
	// field is where the flag's value goes in v: a *string, *int, *int64,
	// *float64, *bool, *time.Duration, *[]string or *[]*regexp.Regexp.
	field func(v *FlagValues) any
}

// FlagValues are the values of every flag of the crawl command: the
// crawl's Options and the command's own.
type FlagValues struct {
	Options Options
	Command CommandOptions
}

// CommandOptions are the crawl command's flags that are not Options: where
// the crawl is kept, and how a run is watched and judged. The engine reads
// none of them; the command does.
type CommandOptions struct {
	DB    string // --db: the database file
	Store string // --store: a fleet's Redis store instead of DB
	Seeds string // --seeds: a file of seed URLs, "-" for standard input
	// FailRatio makes a run exit 4 above this share of failed URLs; 0 off.
	FailRatio   float64
	Progress    string // --progress: auto, always or never
	Listen      string // --listen: serve status and metrics there; "" off
	MetricsFile string // --metrics-file: write the metrics there; "" off
	Notify      string // --notify: POST events to this URL; "" off
	WACZ        string // --wacz: package the archive there when the run ends; "" off
	LogFormat   string // --log-format: auto, text or json
	LogLevel    string // --log-level: debug, info, warn or error
}

// DefaultFlagValues returns every flag's default.
func DefaultFlagValues() FlagValues {
	return FlagValues{Options: DefaultOptions(), Command: CommandOptions{
		DB: "breakwater.db", Progress: "auto", LogFormat: "auto", LogLevel: "info"}}
}

// Flags returns the settings table: every flag of the crawl command, in
// the order crawl --help shows them within their groups.
func Flags() []Flag { return flagTable }

// LookupFlag returns the table's entry for the flag name.
func LookupFlag(name string) (Flag, bool) {
	for _, f := range flagTable {
		if f.Name == name {
			return f, true
		}
	}
	return Flag{}, false
}

// Why texts shared by several entries.
const (
	whyWhere      = "it says where the crawl is kept"
	whyLimit      = "a limit of one run; the next run has its own"
	whyMachine    = "it fits the machine a run is on, not the crawl"
	whyTerminal   = "it is about where one run's output goes"
	whyLocalFault = "tuned to how the crawl's hosts and network fail, it should hold for every run, as the breaker's settings do"
	listHelp      = ` (repeatable; an empty one, %s "", clears the list so far and the stored one)`
)

var flagTable = []Flag{
	// The crawl and this run.
	{Name: "db", Group: GroupRun, Why: whyWhere,
		Help:  "database file (created if missing; resumed if it exists)",
		field: func(v *FlagValues) any { return &v.Command.DB }},
	{Name: "seeds", Group: GroupRun, Why: "seeds are queued once; their hosts are stored as the crawl's scope",
		Help:  "file of seed URLs, one a line (# comments and blank lines allowed; - reads standard input)",
		field: func(v *FlagValues) any { return &v.Command.Seeds }},
	{Name: "workers", Group: GroupRun, Why: whyMachine,
		Help:  "concurrent fetches in all",
		field: func(v *FlagValues) any { return &v.Options.Workers }},
	{Name: "memory-limit", Group: GroupRun, Why: whyMachine,
		Help:  "soft limit in bytes on the crawler's memory (heap, stacks, runtime): past it the garbage collector works harder instead of letting the heap double; below it, a small heap may grow by 32 MiB (or a quarter of the limit) between collections, unless GOGC is set; 0, or GOMEMLIMIT in the environment, leaves the Go runtime's own",
		field: func(v *FlagValues) any { return &v.Options.MemoryLimit }},
	{Name: "max-pages", Group: GroupRun, Why: whyLimit,
		Help:  "stop after attempting this many pages this run (0: unlimited); on a --store, between the processes crawling it together",
		field: func(v *FlagValues) any { return &v.Options.MaxPages }},
	{Name: "max-duration", Group: GroupRun, Why: whyLimit,
		Help:  "stop cleanly after this long (0: no limit); exit code 3 if work is left",
		field: func(v *FlagValues) any { return &v.Options.MaxDuration }},
	{Name: "retry-failed", Group: GroupRun, Why: "it acts once, on the run that gives it",
		Help:  "put URLs recorded as failed back in the queue first",
		field: func(v *FlagValues) any { return &v.Options.RetryFailed }},
	{Name: "recrawl-after", Group: GroupRun, Stored: true,
		Help:  "fetch again, conditionally and after new URLs, pages fetched longer ago than this (0: never; at least 1s); with --warc a page not yet archived in full is fetched unconditionally",
		field: func(v *FlagValues) any { return &v.Options.RecrawlAfter }},
	{Name: "fail-ratio", Group: GroupRun, Why: "it judges one run's outcome",
		Help:  "exit 4 when more than this share of the URLs this run finished failed (0: off)",
		field: func(v *FlagValues) any { return &v.Command.FailRatio }},

	// Scope.
	{Name: "scope", Group: GroupScope, Stored: true,
		Help:  "links to follow: seeds (the seeds' hosts), domain (their registrable domains) or any",
		field: func(v *FlagValues) any { return &v.Options.Scope }},
	{Name: "max-depth", Group: GroupScope, Stored: true,
		Why:   "it is part of the crawl's scope. Its default, 20 hops as Heritrix's, is deeper than real sites' pages lie from their home page (the demo's hosts of thousands of pages are at most 10 hops deep), yet ends a trap no --trap rule sees",
		Help:  "link hops from a seed to follow (-1: unlimited, 0: seeds only)",
		field: func(v *FlagValues) any { return &v.Options.MaxDepth }},
	{Name: "trap-repeats", Group: GroupScope, Stored: true,
		Help:  "hold back, as class trap, a URL whose path has one segment more than this many times, as /a/b/a/b/a/b/a (0: off)",
		field: func(v *FlagValues) any { return &v.Options.Traps.Repeats }},
	{Name: "trap-segments", Group: GroupScope, Stored: true,
		Help:  "hold back, as class trap, a URL whose path has more segments than this (0: off)",
		field: func(v *FlagValues) any { return &v.Options.Traps.Segments }},
	{Name: "trap-query-params", Group: GroupScope, Stored: true,
		Help:  "hold back, as class trap, a link to its page's own path whose query keeps all the page's parameters, adds more, and has more than this many (a query growing each hop; 0: off)",
		field: func(v *FlagValues) any { return &v.Options.Traps.QueryParams }},
	{Name: "trap-future-years", Group: GroupScope, Stored: true,
		Help:  "hold back, as class trap, a URL with a date (/2031/05, 2031-05-17, ?year=2031&month=5) more than this many years after today: an endless calendar (0: off)",
		field: func(v *FlagValues) any { return &v.Options.Traps.FutureYears }},
	{Name: "max-pages-per-host", Group: GroupScope, Stored: true,
		Help:  "fetch at most this many pages of any one host over the whole crawl; the rest are recorded as failed, class host-page-cap (0: unlimited)",
		field: func(v *FlagValues) any { return &v.Options.MaxPagesPerHost }},
	{Name: "include", Group: GroupScope, Stored: true,
		Help:  "follow only URLs matching this regexp" + fmt.Sprintf(listHelp, "--include"),
		field: func(v *FlagValues) any { return &v.Options.Include }},
	{Name: "exclude", Group: GroupScope, Stored: true,
		Help:  "never follow URLs matching this regexp" + fmt.Sprintf(listHelp, "--exclude"),
		field: func(v *FlagValues) any { return &v.Options.Exclude }},
	{Name: "page-requisites", Group: GroupScope, Stored: true,
		Help:  "also fetch what each page needs to be shown (images, stylesheets and their imports, scripts, fonts, frames), on any host, once each; --page-requisites=false for pages only",
		field: func(v *FlagValues) any { return &v.Options.PageRequisites }},
	{Name: "requisite-hops", Group: GroupScope, Stored: true,
		Help:  "longest chain of requisites from a page: its stylesheet 1, the stylesheet's @import 2, the font that names 3",
		field: func(v *FlagValues) any { return &v.Options.RequisiteHops }},
	{Name: "skip-rel-nofollow", Group: GroupScope, Stored: true,
		Help:  `do not follow links marked rel="nofollow" (they are followed by default, and recorded as nofollow)`,
		field: func(v *FlagValues) any { return &v.Options.SkipRelNofollow }},
	{Name: "sitemaps", Group: GroupScope, Stored: true,
		Help:  "queue the URLs of the sitemaps robots.txt names (else /sitemap.xml) of hosts in scope; --sitemaps=false for none",
		field: func(v *FlagValues) any { return &v.Options.Sitemaps }},

	// Politeness.
	{Name: "delay", Group: GroupPoliteness, Stored: true,
		Help:  "minimum gap between request starts to one host (robots.txt Crawl-delay wins when larger)",
		field: func(v *FlagValues) any { return &v.Options.Delay }},
	{Name: "host-concurrency", Group: GroupPoliteness, Stored: true,
		Help:  "in-flight requests per host",
		field: func(v *FlagValues) any { return &v.Options.HostConcurrency }},
	{Name: "user-agent", Group: GroupPoliteness, Stored: true,
		Help:  "User-Agent header; the word before the first / is the robots.txt product token",
		field: func(v *FlagValues) any { return &v.Options.UserAgent }},
	{Name: "robots-meta", Group: GroupPoliteness, Stored: true,
		Help:  `obey the robots directives of pages (<meta name="robots">, <meta name="PRODUCT-TOKEN">, X-Robots-Tag): the links of a nofollow page are not followed, its requisites still fetched; --robots-meta=false follows them (the directives are recorded either way)`,
		field: func(v *FlagValues) any { return &v.Options.RobotsMeta }},

	// Requests.
	{Name: "header", Group: GroupRequests, Stored: true, Secret: control.MaskHeaders,
		Help:  `extra request header "Name: value" (Host and framing headers are refused)` + fmt.Sprintf(listHelp, "--header"),
		field: func(v *FlagValues) any { return &v.Options.Header }},
	{Name: "cookies", Group: GroupRequests, Stored: true,
		Help:  "Netscape cookies.txt file (as curl and wget write) to send; cookies servers set are kept for the run",
		field: func(v *FlagValues) any { return &v.Options.Cookies }},
	{Name: "header-hosts", Group: GroupRequests, Stored: true,
		Help:  "which hosts get the credentials you give (secret --header values such as Authorization, Cookie or tokens, and --cookies): seeds (the seeds' hosts only) or all (every host the crawl reaches)",
		field: func(v *FlagValues) any { return &v.Options.HeaderHosts }},
	{Name: "proxy", Group: GroupRequests, Stored: true, Secret: control.MaskURLPassword,
		Help:  "send requests through this proxy: http://, https://, socks5:// or socks5h:// URL (socks5h needs --allow-private), or env for HTTPS_PROXY/HTTP_PROXY/NO_PROXY",
		field: func(v *FlagValues) any { return &v.Options.Proxy }},
	{Name: "timeout", Group: GroupRequests, Stored: true,
		Help:  "whole request timeout, body included",
		field: func(v *FlagValues) any { return &v.Options.Timeout }},
	{Name: "connect-timeout", Group: GroupRequests, Stored: true,
		Help:  "TCP connect timeout",
		field: func(v *FlagValues) any { return &v.Options.ConnectTimeout }},
	{Name: "max-body", Group: GroupRequests, Stored: true,
		Help:  "bytes of body kept per response (after decompression); longer bodies are truncated",
		field: func(v *FlagValues) any { return &v.Options.MaxBody }},
	{Name: "allow-private", Group: GroupRequests, Stored: true,
		Help:  "allow loopback, private and link-local addresses (local sites, tests)",
		field: func(v *FlagValues) any { return &v.Options.AllowPrivate }},

	// Breakers and retries.
	{Name: "breaker", Group: GroupBreakers, Stored: true,
		Help:  "per-host circuit breakers (--breaker=false for comparison runs)",
		field: func(v *FlagValues) any { return &v.Options.BreakerEnabled }},
	{Name: "breaker-threshold", Group: GroupBreakers, Stored: true,
		Help:  "consecutive failures that open a host's circuit",
		field: func(v *FlagValues) any { return &v.Options.Breaker.Threshold }},
	{Name: "breaker-rest", Group: GroupBreakers, Stored: true,
		Help:  "how long an open circuit rests before a probe",
		field: func(v *FlagValues) any { return &v.Options.Breaker.Rest }},
	{Name: "breaker-rest-max", Group: GroupBreakers, Stored: true,
		Help:  "cap for the rest, doubled by each failed probe (default: --breaker-rest, i.e. no escalation)",
		field: func(v *FlagValues) any { return &v.Options.Breaker.RestMax }},
	{Name: "breaker-probes", Group: GroupBreakers, Stored: true,
		Help:  "consecutive probe successes, one at a time, that close a circuit",
		field: func(v *FlagValues) any { return &v.Options.Breaker.Probes }},
	{Name: "give-up-after", Group: GroupBreakers, Stored: true,
		Help:  "record a host's queued URLs as failed (host-down) once it has been open this long",
		field: func(v *FlagValues) any { return &v.Options.GiveUpAfter }},
	{Name: "local-fault-hosts", Group: GroupBreakers, Stored: true, Why: whyLocalFault,
		Help:  "pause all fetching when at least this many hosts that were answering fail at once (our network, not theirs, is likely at fault); 0 turns the guard off",
		field: func(v *FlagValues) any { return &v.Options.LocalFault.Hosts }},
	{Name: "local-fault-share", Group: GroupBreakers, Stored: true, Why: whyLocalFault,
		Help:  "... and they are at least this share of the hosts active in --local-fault-window",
		field: func(v *FlagValues) any { return &v.Options.LocalFault.Share }},
	{Name: "local-fault-window", Group: GroupBreakers, Stored: true, Why: whyLocalFault,
		Help:  "how close together the local-fault guard's failures must be",
		field: func(v *FlagValues) any { return &v.Options.LocalFault.Window }},
	{Name: "retries", Group: GroupBreakers, Stored: true,
		Help:  "further attempts after a transient failure",
		field: func(v *FlagValues) any { return &v.Options.Retries }},
	{Name: "retry-base", Group: GroupBreakers, Stored: true,
		Help:  "first retry backoff (exponential, full jitter)",
		field: func(v *FlagValues) any { return &v.Options.RetryBase }},
	{Name: "retry-max", Group: GroupBreakers, Stored: true,
		Help:  "longest retry backoff and longest Retry-After honoured",
		field: func(v *FlagValues) any { return &v.Options.RetryMax }},
	{Name: "retry-budget", Group: GroupBreakers, Stored: true,
		Help:  "retries per host as a fraction of its first attempts over a minute, plus a few a minute and those its healthy answers earn",
		field: func(v *FlagValues) any { return &v.Options.RetryBudget }},

	// Archive.
	{Name: "warc", Group: GroupArchive, Stored: true,
		Help:  "write every fetch, as it crossed the wire, to WARC/1.1 files in this directory (created if missing)",
		field: func(v *FlagValues) any { return &v.Options.WARC.Dir }},
	{Name: "warc-size", Group: GroupArchive, Stored: true,
		Help:  "bytes after which a WARC file is finished and the next begun",
		field: func(v *FlagValues) any { return &v.Options.WARC.Size }},
	{Name: "warc-prefix", Group: GroupArchive, Stored: true,
		Help:  "WARC file names: PREFIX-TIMESTAMP-SERIAL-HOSTNAME.warc.gz",
		field: func(v *FlagValues) any { return &v.Options.WARC.Prefix }},
	{Name: "warc-max-record", Group: GroupArchive, Stored: true,
		Help:  "wire bytes kept of one response; a longer one is cut and marked WARC-Truncated",
		field: func(v *FlagValues) any { return &v.Options.WARC.MaxRecord }},
	{Name: "warc-dedupe", Group: GroupArchive, Stored: true,
		Help:  "write a payload archived before in this crawl as a revisit record of its first capture",
		field: func(v *FlagValues) any { return &v.Options.WARC.Dedupe }},
	{Name: "warc-secrets", Group: GroupArchive, Stored: true,
		Help:  "secret request header values (Authorization, Cookie, tokens) in WARC request records: mask (replaced by a marker) or keep (as sent, for a private archive); a proxy's credentials are never kept",
		field: func(v *FlagValues) any { return &v.Options.WARC.Secrets }},
	{Name: "wacz", Group: GroupArchive,
		Why:   "packaging copies the whole archive: a run asks for it, a resume from cron does not redo it unasked",
		Help:  "when the run ends, package the archive (the --warc files, their index and the crawl's pages) as a WACZ file here, as the wacz command does",
		field: func(v *FlagValues) any { return &v.Command.WACZ }},

	// Watching.
	{Name: "progress", Group: GroupWatching, Why: whyTerminal,
		Help:  "a live progress line on stderr: auto (on a terminal), always or never; off it, a progress log line every 30s",
		field: func(v *FlagValues) any { return &v.Command.Progress }},
	{Name: "notify", Group: GroupWatching, Stored: true, Secret: control.MaskURLPath,
		Why:   "a resume from cron that gives no flags must still tell someone; status shows only its host, as the path of a webhook is often its credential",
		Help:  `POST a JSON event to this URL when a host refuses us by name, a host is given up on, the local-fault guard pauses or resumes the crawl, or a run ends with a non-zero exit code; --notify "" stops it`,
		field: func(v *FlagValues) any { return &v.Command.Notify }},
	{Name: "metrics-file", Group: GroupWatching, Stored: true,
		Why:   "a resume without it would leave the file's figures stale while node_exporter kept serving them as current",
		Help:  `write the metrics in node_exporter textfile format to this file every 15s and when the run ends (atomic rename; a new file is 0600, an existing one keeps its mode); --metrics-file "" stops it`,
		field: func(v *FlagValues) any { return &v.Command.MetricsFile }},
	{Name: "listen", Group: GroupWatching, Why: "a port belongs to one process; a stored one would be bound, and perhaps exposed, by runs that did not ask for it",
		Help:  "serve the status page, Prometheus /metrics and /healthz on this address while the crawl runs, e.g. 127.0.0.1:9150; a port alone (:9150) is loopback, and any other host (0.0.0.0:9150) must be named and is warned about (off by default)",
		field: func(v *FlagValues) any { return &v.Command.Listen }},
	{Name: "log-format", Group: GroupWatching, Why: whyTerminal,
		Help:  "log format: auto (text on a terminal, JSON otherwise), text or json",
		field: func(v *FlagValues) any { return &v.Command.LogFormat }},
	{Name: "log-level", Group: GroupWatching, Why: whyTerminal,
		Help:  "log level: debug, info, warn or error",
		field: func(v *FlagValues) any { return &v.Command.LogLevel }},

	// Fleet.
	{Name: "store", Group: GroupFleet, Why: whyWhere,
		Help:  "crawl on a fleet's shared store instead of --db: redis://[:PASSWORD@]HOST:PORT[/DB] or rediss:// (password also from $BREAKWATER_REDIS_PASSWORD; ?addr=HOST:PORT for more Redis Cluster nodes); every process given the same store is one crawl",
		field: func(v *FlagValues) any { return &v.Command.Store }},
	{Name: "fleet-id", Group: GroupFleet, Why: "it names one process of the fleet, unique to it",
		Help:  "with --store: this process's name in the fleet (default HOSTNAME-SUFFIX, SUFFIX random and kept in the --warc directory or ~/.local/state/breakwater); a second process given a live one's ID exits 2",
		field: func(v *FlagValues) any { return &v.Options.Fleet.ID }},
	{Name: "fleet-lease", Group: GroupFleet,
		Why:   "each process sets the expiry of the hosts it holds, so processes with different leases share a store; like --workers it fits the process's machine and its distance to Redis",
		Help:  "with --store: how long a process holds a host unrenewed (at least 4/3 x (--timeout + 250ms)); a process that dies gives its hosts back within this",
		field: func(v *FlagValues) any { return &v.Options.Fleet.Lease }},
}

func init() {
	masks := map[string]control.Mask{}
	for _, f := range flagTable {
		if f.Secret != nil {
			masks[f.Name] = f.Secret
		}
	}
	control.SetSecretSettings(masks)
}

// Bind returns where the flag's value goes in v, for a flag library to
// set: a *string, *int, *int64, *float64, *bool or *time.Duration, or for
// a repeatable flag a *ListValue.
func (f Flag) Bind(v *FlagValues) any {
	switch p := f.field(v).(type) {
	case *[]string:
		return &ListValue{strings: p}
	case *[]*regexp.Regexp:
		return &ListValue{patterns: p}
	default:
		return p
	}
}

// Type names the kind of value the flag takes.
func (f Flag) Type() string {
	var v FlagValues
	switch f.field(&v).(type) {
	case *string:
		return "string"
	case *int, *int64:
		return "int"
	case *float64:
		return "float"
	case *bool:
		return "bool"
	case *time.Duration:
		return "duration"
	case *[]string:
		return "list"
	case *[]*regexp.Regexp:
		return "regexp list"
	}
	panic(fmt.Sprintf("--%s: a field of unknown kind", f.Name))
}

// Default is the flag's default as the command line writes it; "" for an
// empty string or list.
func (f Flag) Default() string {
	v := DefaultFlagValues()
	switch p := f.Bind(&v).(type) {
	case *string:
		return *p
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *float64:
		return strconv.FormatFloat(*p, 'g', -1, 64)
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return p.String()
	case *ListValue:
		return p.String()
	}
	panic(fmt.Sprintf("--%s: a field of unknown kind", f.Name))
}

// ListValue is a repeatable flag's value: each use adds one item, the
// first replaces the default, and an empty one clears what came before,
// so a given empty list replaces the stored one. It has the methods of
// pflag.Value.
type ListValue struct {
	strings  *[]string
	patterns *[]*regexp.Regexp // compiled as they are given
	used     bool
}

// Set adds s to the list, or with s empty clears it.
func (l *ListValue) Set(s string) error {
	if !l.used || s == "" {
		l.used = true
		l.clear()
	}
	switch {
	case s == "":
	case l.patterns != nil:
		re, err := regexp.Compile(s)
		if err != nil {
			return err
		}
		*l.patterns = append(*l.patterns, re)
	default:
		*l.strings = append(*l.strings, s)
	}
	return nil
}

func (l *ListValue) clear() {
	if l.patterns != nil {
		*l.patterns = []*regexp.Regexp{}
	} else {
		*l.strings = []string{}
	}
}

// Items returns the list's items as given.
func (l *ListValue) Items() []string {
	if l.patterns != nil {
		return patterns(*l.patterns)
	}
	return append([]string{}, *l.strings...)
}

// String writes the items quoted, space-separated; "" when there are none.
func (l *ListValue) String() string {
	var b strings.Builder
	for i, it := range l.Items() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%q", it)
	}
	return b.String()
}

// Type is the name flag libraries show for a repeatable string flag.
func (l *ListValue) Type() string { return "stringArray" }

func patterns(res []*regexp.Regexp) []string {
	out := []string{}
	for _, re := range res {
		out = append(out, re.String())
	}
	return out
}
