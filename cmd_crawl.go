package main

import (
	"breakwater/backend"
	"breakwater/metrics"
	"breakwater/notify"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/pflag"

	"breakwater/control"
	"breakwater/crawl"
	"breakwater/fetch"
)

// crawlFlags binds the crawl command's flags to crawl.Options.
type crawlFlags struct {
	opts        crawl.Options
	db          string
	seedsFile   string
	include     []string
	exclude     []string
	failRatio   float64
	listen      string
	metricsFile string
	notify      string
	progress    string      // --progress: auto, always or never
	line        *lineWriter // stderr shared with the progress line; nil when it is not shown
	log         logFlags
	// given says whether a flag was on the command line: only those change
	// the crawl's stored settings.
	given func(flag string) bool
	// cleanup removes what reading the seeds made (standard input's copy).
	cleanup func()
	store   string // --store: a fleet's Redis store instead of --db
}

func (c *crawlFlags) addFlags(fs *pflag.FlagSet) {
	o := &c.opts
	fs.StringVar(&c.db, "db", "breakwater.db", "database file (created if missing; resumed if it exists)")
	fs.StringVar(&c.store, "store", "", "crawl on a fleet's shared store instead of --db: redis://[:PASSWORD@]HOST:PORT[/DB] or rediss:// (password also from $"+backend.PasswordEnv+"; ?addr=HOST:PORT for more Redis Cluster nodes); every process given the same store is one crawl")
	fs.StringVar(&o.Fleet.ID, "fleet-id", "", "with --store: this process's name in the fleet (default HOSTNAME-PID); unique per process")
	fs.DurationVar(&o.Fleet.Lease, "fleet-lease", 10*time.Second, "with --store: how long a process holds a host unrenewed; a process that dies gives its hosts back within this")
	fs.StringVar(&c.seedsFile, "seeds", "", "file of seed URLs, one a line (# comments and blank lines allowed; - reads standard input)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "concurrent fetches in all")
	fs.IntVar(&o.HostConcurrency, "host-concurrency", o.HostConcurrency, "in-flight requests per host")
	fs.DurationVar(&o.Delay, "delay", o.Delay, "minimum gap between request starts to one host (robots.txt Crawl-delay wins when larger)")
	fs.StringVar(&o.Scope, "scope", o.Scope, "links to follow: seeds (the seeds' hosts), domain (their registrable domains) or any")
	fs.IntVar(&o.MaxDepth, "max-depth", o.MaxDepth, "link hops from a seed to follow (-1: unlimited, 0: seeds only)")
	fs.IntVar(&o.MaxPages, "max-pages", o.MaxPages, "stop after attempting this many pages this run (0: unlimited)")
	fs.IntVar(&o.MaxPagesPerHost, "max-pages-per-host", o.MaxPagesPerHost, "fetch at most this many pages of any one host over the whole crawl; the rest are recorded as failed, class host-page-cap (0: unlimited)")
	fs.StringArrayVar(&c.include, "include", nil, "follow only URLs matching this regexp (repeatable)")
	fs.StringArrayVar(&c.exclude, "exclude", nil, "never follow URLs matching this regexp (repeatable)")
	fs.StringVar(&o.UserAgent, "user-agent", o.UserAgent, "User-Agent header; the word before the first / is the robots.txt product token")
	fs.StringArrayVar(&o.Header, "header", nil, `extra request header "Name: value" (repeatable; Host and framing headers are refused)`)
	fs.StringVar(&o.Cookies, "cookies", "", "Netscape cookies.txt file (as curl and wget write) to send; cookies servers set are kept for the run")
	fs.StringVar(&o.HeaderHosts, "header-hosts", o.HeaderHosts, "which hosts get the credentials you give (secret --header values such as Authorization, Cookie or tokens, and --cookies): seeds (the seeds' hosts only) or all (every host the crawl reaches)")
	fs.StringVar(&o.Proxy, "proxy", "", "send requests through this proxy: http://, https://, socks5:// or socks5h:// URL (socks5h needs --allow-private), or env for HTTPS_PROXY/HTTP_PROXY/NO_PROXY")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "whole request timeout, body included")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", o.ConnectTimeout, "TCP connect timeout")
	fs.Int64Var(&o.MaxBody, "max-body", o.MaxBody, "bytes of body kept per response (after decompression); longer bodies are truncated")
	fs.BoolVar(&o.AllowPrivate, "allow-private", o.AllowPrivate, "allow loopback, private and link-local addresses (local sites, tests)")
	fs.DurationVar(&o.MaxDuration, "max-duration", o.MaxDuration, "stop cleanly after this long (0: no limit); exit code 3 if work is left")
	fs.BoolVar(&o.RetryFailed, "retry-failed", o.RetryFailed, "put URLs recorded as failed back in the queue first")
	fs.DurationVar(&o.RecrawlAfter, "recrawl-after", o.RecrawlAfter, "fetch again, conditionally and after new URLs, pages fetched longer ago than this (0: never; at least 1s); with --warc a page not yet archived in full is fetched unconditionally")
	fs.StringVar(&o.WARC.Dir, "warc", "", "write every fetch, as it crossed the wire, to WARC/1.1 files in this directory (created if missing)")
	fs.Int64Var(&o.WARC.Size, "warc-size", o.WARC.Size, "bytes after which a WARC file is finished and the next begun")
	fs.StringVar(&o.WARC.Prefix, "warc-prefix", o.WARC.Prefix, "WARC file names: PREFIX-TIMESTAMP-SERIAL-HOSTNAME.warc.gz")
	fs.Int64Var(&o.WARC.MaxRecord, "warc-max-record", o.WARC.MaxRecord, "wire bytes kept of one response; a longer one is cut and marked WARC-Truncated")
	fs.BoolVar(&o.WARC.Dedupe, "warc-dedupe", o.WARC.Dedupe, "write a payload archived before in this crawl as a revisit record of its first capture")
	fs.StringVar(&o.WARC.Secrets, "warc-secrets", o.WARC.Secrets, "secret request header values (Authorization, Cookie, tokens) in WARC request records: mask (replaced by a marker) or keep (as sent, for a private archive); a proxy's credentials are never kept")
	fs.BoolVar(&o.Sitemaps, "sitemaps", o.Sitemaps, "queue the URLs of the sitemaps robots.txt names (else /sitemap.xml) of hosts in scope; --sitemaps=false for none")
	fs.BoolVar(&o.BreakerEnabled, "breaker", o.BreakerEnabled, "per-host circuit breakers (--breaker=false for comparison runs)")
	fs.IntVar(&o.Breaker.Threshold, "breaker-threshold", o.Breaker.Threshold, "consecutive failures that open a host's circuit")
	fs.DurationVar(&o.Breaker.Rest, "breaker-rest", o.Breaker.Rest, "how long an open circuit rests before a probe")
	fs.DurationVar(&o.Breaker.RestMax, "breaker-rest-max", o.Breaker.RestMax, "cap for the rest, doubled by each failed probe (default: --breaker-rest, i.e. no escalation)")
	fs.IntVar(&o.Breaker.Probes, "breaker-probes", o.Breaker.Probes, "consecutive probe successes, one at a time, that close a circuit")
	fs.DurationVar(&o.GiveUpAfter, "give-up-after", o.GiveUpAfter, "record a host's queued URLs as failed (host-down) once it has been open this long")
	fs.IntVar(&o.LocalFault.Hosts, "local-fault-hosts", o.LocalFault.Hosts, "pause all fetching when at least this many hosts that were answering fail at once (our network, not theirs, is likely at fault); 0 turns the guard off")
	fs.Float64Var(&o.LocalFault.Share, "local-fault-share", o.LocalFault.Share, "... and they are at least this share of the hosts active in --local-fault-window")
	fs.DurationVar(&o.LocalFault.Window, "local-fault-window", o.LocalFault.Window, "how close together the local-fault guard's failures must be")
	fs.IntVar(&o.Retries, "retries", o.Retries, "further attempts after a transient failure")
	fs.DurationVar(&o.RetryBase, "retry-base", o.RetryBase, "first retry backoff (exponential, full jitter)")
	fs.DurationVar(&o.RetryMax, "retry-max", o.RetryMax, "longest retry backoff and longest Retry-After honoured")
	fs.Float64Var(&o.RetryBudget, "retry-budget", o.RetryBudget, "retries per host as a fraction of its first attempts over a minute (plus a few a minute)")
	fs.Float64Var(&c.failRatio, "fail-ratio", 0, "exit 4 when more than this share of the URLs this run finished failed (0: off)")
	fs.StringVar(&c.metricsFile, "metrics-file", "", "write the metrics in node_exporter textfile format to this file every 15s and when the run ends (atomic rename; a new file is 0600, an existing one keeps its mode)")
	fs.StringVar(&c.progress, "progress", "auto", "a live progress line on stderr: auto (on a terminal), always or never; off it, a progress log line every 30s")
	fs.StringVar(&c.notify, "notify", "", "POST a JSON event to this URL when a host refuses us by name, a host is given up on, the local-fault guard pauses or resumes the crawl, or a run ends with a non-zero exit code")
	fs.StringVar(&c.listen, "listen", "", "serve the status page, Prometheus /metrics and /healthz on this address while the crawl runs, e.g. 127.0.0.1:9150; a port alone (:9150) is loopback, and any other host (0.0.0.0:9150) must be named and is warned about (off by default)")
	c.log.addFlags(fs)
}

func runCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &crawlFlags{opts: crawl.DefaultOptions(), cleanup: func() {}}
	fs := newFlagSet("crawl", "crawl [flags] [SEED_URL...]", stdout)
	c.addFlags(fs)
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stdout, crawlExitCodes) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c.given = fs.Changed
	showLine, err := progressShown(c.progress, stderr)
	if err != nil {
		return err
	}
	logTo := stderr
	if showLine {
		c.line = &lineWriter{w: stderr}
		logTo = c.line
		c.opts.ProgressEvery = -1 // the line shows it
	}
	logger, err := c.log.loggerTo(logTo, stderr)
	if err != nil {
		return err
	}
	c.opts.Logger = logger
	defer func() { c.cleanup() }()
	if err = c.toOptions(fs.Args()); err == nil {
		policy := runPolicy{failRatio: c.failRatio, listen: c.listen, metricsFile: c.metricsFile, notify: c.notify, line: c.line}
		switch {
		case c.store != "" && c.given("db"):
			err = usagef("give --db (a file) or --store (a fleet's Redis), not both")
		default:
			err = crawlInto(ctx, backend.Target{DB: c.db, Store: c.store}, c.opts, c.given, policy, stdout)
		}
	}
	if err != nil && c.log.isJSON(stderr) {
		// In a JSON log the last word is JSON too.
		level := slog.LevelError
		if codeOf(err) == exitWorkLeft {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, "crawl ended", "exit", codeOf(err), "err", err.Error())
		return loggedError{err}
	}
	return err
}

// crawlExitCodes ends crawl --help: what a cron job can tell from the code.
const crawlExitCodes = `
Settings (everything above but --db, --seeds, --workers, --max-duration, --max-pages,
--retry-failed, --fail-ratio and the log flags) are stored in the file by the first run;
a later run uses them unless it gives the flag again, which changes them from then on.

Exit codes:
  0  the frontier is exhausted: nothing left to fetch
  1  an error, named with its cause: e.g. the database or the --warc directory cannot be
     written (full, read-only) or the archive keeps failing; no page is left done without
     its records, so once the cause is fixed the same command resumes
  2  bad usage (bad flag, seed, header or file; every seed refused by the address guard)
  3  stopped with work left: run again to resume
  4  finished but failed: every seed failed or was blocked by robots.txt, nothing fetched, or above --fail-ratio
`

// toOptions turns the raw flag values into options and validates them.
func (c *crawlFlags) toOptions(args []string) error {
	var err error
	if c.db == "" {
		return usagef("--db: the database file's path is empty")
	}
	if c.failRatio < 0 || c.failRatio > 1 {
		return usagef("--fail-ratio must be between 0 and 1, got %g", c.failRatio)
	}
	if c.opts.Include, err = compileAll("--include", c.include); err != nil {
		return err
	}
	if c.opts.Exclude, err = compileAll("--exclude", c.exclude); err != nil {
		return err
	}
	for _, arg := range args {
		if _, _, err := crawl.NormalizeSeed(arg); err != nil {
			return usagef("seed argument %q: %v", arg, err)
		}
	}
	c.opts.Seeds = append(c.opts.Seeds, args...)
	if c.opts.Cookies != "" {
		// Read now, so a bad line is a usage error before anything is made;
		// stored absolute, so a resume from another directory finds it.
		if _, err := fetch.LoadCookiesFile(c.opts.Cookies); err != nil {
			return usagef("--cookies: %v", err)
		}
		if abs, err := filepath.Abs(c.opts.Cookies); err == nil {
			c.opts.Cookies = abs
		}
	}
	if c.opts.WARC.Dir != "" {
		if abs, err := filepath.Abs(c.opts.WARC.Dir); err == nil { // a resume from elsewhere writes to the same place
			c.opts.WARC.Dir = abs
		}
	}
	if c.seedsFile != "" {
		path, cleanup, err := readSeedsFlag(c.seedsFile, c.db, c.opts.Logger)
		if err != nil {
			return err
		}
		c.opts.SeedsFile, c.cleanup = path, cleanup
	}
	if err := c.opts.Validate(); err != nil {
		return usageError{err}
	}
	return nil
}

// listenStatus listens for the status server on addr. A port without a
// host means loopback, not net.Listen's every interface: the page shows
// the crawl's hosts and the servers' own words, and a cron line copied
// with ":9150" must not publish them. Any other address is the user's
// explicit choice, and is logged as exposed once bound, judged by the
// address bound, so a name that resolves beyond loopback is caught too.
func listenStatus(addr string, log *slog.Logger) (net.Listener, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, usagef("--listen %s: want host:port or :port, e.g. 127.0.0.1:9150: %v", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, usagef("--listen %s: %v", addr, err)
	}
	if ta, ok := ln.Addr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
		if log == nil {
			log = slog.Default()
		}
		log.Warn("the status page and metrics are exposed beyond this machine: anyone who can reach the address can read them; use 127.0.0.1 or :PORT for loopback only",
			"listen", ln.Addr().String())
	}
	return ln, nil
}

func compileAll(flag string, exprs []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, x := range exprs {
		re, err := regexp.Compile(x)
		if err != nil {
			return nil, usagef("%s %q: %v", flag, x, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// runPolicy is what one run of the crawl command adds to the crawl: how its
// end is judged, and how it is watched (metrics, notifications, progress).
type runPolicy struct {
	failRatio float64 // exit 4 above this share of failed URLs; 0 off
	listen    string  // --listen: serve /metrics and /healthz there; "" off
	// metricsFile: write the metrics there every metricsEvery and when
	// the run ends; "" off.
	metricsFile string
	notify      string // --notify: POST events there; "" off
	// line, if set, is where the progress line is drawn while the crawl runs.
	line *lineWriter
}

// notifyGrace bounds how long a run's end waits for its notifications.
const notifyGrace = 15 * time.Second

// metricsEvery is how often --metrics-file is rewritten while a crawl runs.
const metricsEvery = 15 * time.Second

// crawlInto runs one crawl over the target's store and reports how it
// ended. given says which flags were on the command line: those change the
// crawl's stored settings, and the store's settings fill in the rest. The
// options the store cannot carry out are refused before it is opened.
func crawlInto(ctx context.Context, target backend.Target, opts crawl.Options, given func(string) bool, policy runPolicy, stdout io.Writer) (err error) {
	if err := opts.ValidateFor(target.Capabilities()); err != nil {
		return usageError{err}
	}
	db, err := target.Open(ctx)
	if err != nil {
		return err
	}
	started := false
	defer func() {
		if started {
			db.Close()
		} else {
			db.Discard() // a run refused before it began leaves no file behind
		}
	}()
	if !db.HoldsCrawl() && len(opts.Seeds) == 0 && opts.SeedsFile == "" {
		return usagef("no seed URLs: %s holds no crawl to resume; give them as arguments or with --seeds", db.Path())
	}
	if db.Capabilities().SoleWriter {
		// No other run of this --db is using a copy: this one holds the store.
		removeStaleSeedCopies(target.DB, opts.SeedsFile)
	}
	err = runEngine(ctx, db, opts, given, policy, stdout, &started)
	db.LogUsage(opts.Logger)
	return err
}

// runEngine runs the crawl on an opened store; started is set once the
// engine exists (the run was not refused).
func runEngine(ctx context.Context, db backend.Backend, opts crawl.Options, given func(string) bool, policy runPolicy, stdout io.Writer, started *bool) (err error) {
	opts, changes, err := crawl.ResolveSettings(db, opts, given)
	if err != nil {
		return usageError{err}
	}
	if policy.metricsFile != "" {
		if info, err := os.Stat(filepath.Dir(policy.metricsFile)); err != nil || !info.IsDir() {
			return usagef("--metrics-file %s: its directory does not exist", policy.metricsFile)
		}
	}
	if policy.notify != "" {
		target, perr := notify.ParseURL(policy.notify)
		if perr != nil {
			return usageError{perr}
		}
		opts.Notify = notify.New(target, db.Path(), notify.Options{Logger: opts.Logger})
		defer func() {
			if err != nil && !errors.Is(err, pflag.ErrHelp) {
				opts.Notify.Send("run-ended", map[string]any{"exit": codeOf(err), "err": err.Error()})
			}
			// A webhook that is down delays the exit a little, never its code.
			ctx, cancel := context.WithTimeout(context.Background(), notifyGrace)
			defer cancel()
			opts.Notify.Close(ctx)
		}()
	}
	var engine *crawl.Engine
	var ln net.Listener
	if policy.listen != "" {
		if ln, err = listenStatus(policy.listen, opts.Logger); err != nil {
			return err
		}
		defer ln.Close()
	}
	if policy.listen != "" || policy.metricsFile != "" {
		opts.Metrics = metrics.New(func() (metrics.Snapshot, error) { return engine.MetricsSnapshot() })
	}
	engine, err = crawl.New(opts, db)
	var blocked *crawl.SeedsBlockedError
	switch {
	case errors.As(err, &blocked):
		return usageError{err}
	case err != nil:
		return err
	}
	*started = true
	crawl.LogSettingChanges(opts.Logger, changes)
	serveCtx, stopServing := context.WithCancel(ctx)
	var served <-chan struct{}
	if socket := db.SocketPath(); socket != "" {
		served, err = control.Serve(serveCtx, socket, engine.Control(), opts.Logger)
		if err != nil {
			opts.Logger.Warn("control socket unavailable; status and pause work only after the crawl", "err", err)
		}
	}
	if ln != nil {
		stopMetrics := serveMetrics(ln, opts.Metrics, engine, opts.Logger)
		defer stopMetrics()
		fmt.Fprintf(stdout, "status page: http://%s/ (metrics at /metrics)\n", ln.Addr())
	}
	stopWriting := func() {}
	if policy.metricsFile != "" {
		stopWriting = writeMetricsEvery(policy.metricsFile, opts.Metrics, metricsEvery, opts.Logger)
	}
	stopLine := func() {}
	if policy.line != nil {
		stopLine = showProgress(policy.line, engine, opts.MaxPages, 250*time.Millisecond)
	}
	sum, err := engine.Run(ctx)
	stopLine()
	stopWriting()
	if policy.metricsFile != "" {
		// Cron runs end before any scrape: the last figures are the run's.
		if werr := opts.Metrics.WriteTextfile(policy.metricsFile); werr != nil {
			opts.Logger.Error("write metrics", "err", werr)
		}
	}
	stopServing()
	if served != nil {
		<-served
	}
	if err != nil {
		return err
	}
	verdict := judge(sum, policy)
	logSummary(opts.Logger, db, engine, sum, codeOf(verdict))
	fmt.Fprintf(stdout, "crawl %s after %s: this run %d fetched, %d failed; in all %d fetched, %d failed, %d queued, %d deferred, %d held: %s\n",
		map[bool]string{true: "finished", false: "stopped"}[sum.Exhausted], sum.Duration.Round(1e6),
		sum.Fetched, sum.Failed, sum.Counts.Fetched, sum.Counts.Failed, sum.Counts.Queued, sum.Counts.Deferred,
		sum.HeldWork, sum.Why)
	if sum.ArchiveRetries > 0 {
		fmt.Fprintf(stdout, "archive: %d times a page's records could not be made; each was put back and fetched again (see the log)\n",
			sum.ArchiveRetries)
	}
	return verdict
}

// judge turns how a run ended into the error its exit code tells: none
// (0), work left (3), or a finished run that failed (4), for cron to hear.
func judge(sum crawl.Summary, policy runPolicy) error {
	finished := sum.Fetched + sum.Failed
	switch {
	case !sum.Exhausted:
		return errWorkLeft
	case sum.SeedsFetched == 0 && sum.SeedsFailed == 0 && sum.SeedsBlocked > 0 && sum.Fetched == 0:
		return runFailed("every seed is blocked by robots.txt (%d): nothing was fetched; see 'breakwater export --failed' for the URLs",
			sum.SeedsBlocked)
	case sum.SeedsFetched == 0 && sum.SeedsFailed > 0:
		return runFailed("every seed failed (%d); see 'breakwater status' for the failures by class", sum.SeedsFailed)
	case sum.Fetched == 0 && sum.Failed > 0:
		return runFailed("nothing was fetched: all %d URLs this run finished failed", sum.Failed)
	case policy.failRatio > 0 && finished > 0 && float64(sum.Failed)/float64(finished) > policy.failRatio:
		return runFailed("%d of the %d URLs this run finished failed (%.1f%%), more than --fail-ratio %g",
			sum.Failed, finished, 100*float64(sum.Failed)/float64(finished), policy.failRatio)
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// readSeedsFlag checks the --seeds file before anything is created, so a
// bad line is a usage error that names the file and line, and an empty
// file is refused. "-" reads standard input; it, a pipe or a device is
// read once, as it streams, into a copy next to the database (the crawl
// reads its seeds twice: for their hosts, then to queue them), which
// cleanup removes.
func readSeedsFlag(path, dbPath string, log *slog.Logger) (seedsPath string, cleanup func(), err error) {
	cleanup = func() {}
	var copyTo *os.File
	name, in := path, io.Reader(os.Stdin)
	if path == "-" {
		name = "standard input"
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", nil, usagef("--seeds: %v", err)
		}
		defer f.Close()
		in, seedsPath = f, path
	}
	if !isRegular(path) {
		// Standard input, a pipe or a device can be read only once. The
		// copy is 0600 (os.CreateTemp), as the database beside it: seeds
		// may carry credentials.
		copyTo, err = os.CreateTemp(filepath.Dir(dbPath), seedsCopyPrefix(dbPath)+"*")
		if err != nil {
			return "", nil, fmt.Errorf("--seeds %s: keep a copy of %s: %w", path, name, err)
		}
		cleanup = func() { os.Remove(copyTo.Name()) }
		seedsPath = copyTo.Name()
	}
	var w *bufio.Writer
	if copyTo != nil {
		defer copyTo.Close()
		w = bufio.NewWriter(copyTo)
	}
	// The crawl reads a file's seeds again and logs what it reads then;
	// standard input's copy holds them as read, so they are logged here.
	var logTo *slog.Logger
	if copyTo != nil {
		logTo = log
	}
	n := 0
	err = crawl.ForEachSeed(in, name, logTo, func(url string) error {
		n++
		if w != nil {
			_, err := fmt.Fprintln(w, url)
			return err
		}
		return nil
	})
	if err == nil && w != nil {
		err = w.Flush()
	}
	switch {
	case err != nil:
		cleanup()
		return "", nil, usagef("--seeds: %v", err)
	case n == 0:
		cleanup()
		return "", nil, usagef("--seeds %s: no seed URLs in it", path)
	}
	return seedsPath, cleanup, nil
}

// isRegular reports whether path is a regular file (not a pipe, a device
// or standard input's "-"): one that can be read twice.
func isRegular(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// seedsCopyPrefix names the copies of piped seeds kept next to dbPath.
func seedsCopyPrefix(dbPath string) string { return "." + filepath.Base(dbPath) + ".seeds-" }

// removeStaleSeedCopies removes the copies of piped seeds that a crawl of
// dbPath killed before its cleanup left behind. Only the crawl holding the
// file's lock calls it, so no other run of dbPath is using one; keep is
// this run's own.
func removeStaleSeedCopies(dbPath, keep string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(dbPath), seedsCopyPrefix(dbPath)+"*"))
	for _, p := range stale {
		if p != keep {
			os.Remove(p)
		}
	}
}

// logSummary logs how the run ended as one structured line, beside the
// human one on stdout: a log collector gets the figures without parsing.
func logSummary(log *slog.Logger, db crawl.Store, engine *crawl.Engine, sum crawl.Summary, exit int) {
	attrs := []any{"exit", exit, "exhausted", sum.Exhausted, "why", sum.Why,
		"fetched", sum.Fetched, "failed", sum.Failed, "wall_s", sum.Duration.Seconds(),
		"total_fetched", sum.Counts.Fetched, "total_failed", sum.Counts.Failed,
		"queued", sum.Counts.Queued, "deferred", sum.Counts.Deferred, "held", sum.HeldWork,
		"archive_retries", sum.ArchiveRetries}
	if t, err := db.Tallies(); err == nil {
		attrs = append(attrs, "failed_by_class", t.Failed)
	}
	if rows, err := engine.Control().Hosts(""); err == nil {
		states := map[string]int{}
		for _, r := range rows {
			if r.State != "closed" {
				states[r.State]++
			}
			if r.Hold != "" {
				states[r.Hold]++
			}
		}
		attrs = append(attrs, "hosts_not_closed", states)
	}
	log.Info("run summary", attrs...)
}

// serveMetrics serves the status page (/ and /status.json), /metrics and
// /healthz on ln until the returned function is called.
func serveMetrics(ln net.Listener, m *metrics.Crawl, engine *crawl.Engine, log *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.Handler())
	mux.Handle("/", metrics.PageHandler(engine.Control(), time.Now(), time.Now))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("metrics server stopped", "err", err)
		}
	}()
	return func() {
		srv.Close()
		<-done
	}
}

// writeMetricsEvery rewrites path with m's metrics every interval until the
// returned function is called.
func writeMetricsEvery(path string, m *metrics.Crawl, every time.Duration, log *slog.Logger) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				if err := m.WriteTextfile(path); err != nil {
					log.Warn("write metrics", "err", err)
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}
