package cli

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
	"strings"
	"time"

	"github.com/spf13/pflag"

	"breakwater/control"
	"breakwater/crawl"
	"breakwater/fetch"
)

// crawlFlags binds the crawl command's flags, every one an entry of the
// settings table (crawl.Flags), to their values.
type crawlFlags struct {
	vals crawl.FlagValues
	line *lineWriter // stderr shared with the progress line; nil when it is not shown
	log  logFlags
	// given says whether a flag was on the command line: only those change
	// the crawl's stored settings.
	given func(flag string) bool
	// cleanup removes what reading the seeds made (standard input's copy).
	cleanup func()
}

func (c *crawlFlags) addFlags(fs *pflag.FlagSet) {
	for _, f := range crawl.Flags() {
		bindFlag(fs, f, &c.vals)
	}
}

// bindFlag binds the table's flag f to its field in v, its default the
// field's value now.
func bindFlag(fs *pflag.FlagSet, f crawl.Flag, v *crawl.FlagValues) {
	switch p := f.Bind(v).(type) {
	case *string:
		fs.StringVar(p, f.Name, *p, f.Help)
	case *int:
		fs.IntVar(p, f.Name, *p, f.Help)
	case *int64:
		fs.Int64Var(p, f.Name, *p, f.Help)
	case *float64:
		fs.Float64Var(p, f.Name, *p, f.Help)
	case *bool:
		fs.BoolVar(p, f.Name, *p, f.Help)
	case *time.Duration:
		fs.DurationVar(p, f.Name, *p, f.Help)
	case pflag.Value:
		fs.Var(p, f.Name, f.Help)
	default:
		panic(fmt.Sprintf("--%s: no flag kind for %T", f.Name, p))
	}
}

// crawlUsage writes crawl --help: the flags under a heading per topic, as
// the settings table groups them, then which are stored and the exit codes.
func crawlUsage(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "Usage: breakwater crawl [flags] [SEED_URL...]\n")
	for _, g := range crawl.Groups() {
		group := pflag.NewFlagSet(g.String(), pflag.ContinueOnError)
		group.SortFlags = false
		for _, f := range crawl.Flags() {
			if f.Group == g {
				group.AddFlag(fs.Lookup(f.Name))
			}
		}
		fmt.Fprintf(w, "\n%s:\n%s", g, group.FlagUsages())
	}
	var perRun []string
	for _, f := range crawl.Flags() {
		if !f.Stored {
			perRun = append(perRun, "--"+f.Name)
		}
	}
	perRun[len(perRun)-1] = "and " + perRun[len(perRun)-1]
	fmt.Fprintf(w, "\n%s\n%s", wrap(fmt.Sprintf("Settings: every flag but %s is a setting of the crawl: the first run "+
		"stores it with the crawl (the --db file or the --store); a later run uses the stored value unless it gives "+
		"the flag again, which changes it from then on. An empty --include, --exclude or --header (\"\") clears the "+
		"stored list. docs/flags.md lists every flag and why it is stored or not.",
		strings.Join(perRun, ", ")), 90), crawlExitCodes)
}

// wrap breaks text into lines of at most width bytes, at spaces.
func wrap(text string, width int) string {
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
		case n+1+len(word) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}

func runCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &crawlFlags{vals: crawl.DefaultFlagValues(), cleanup: func() {}}
	fs := newFlagSet("crawl", "crawl [flags] [SEED_URL...]", stdout)
	c.addFlags(fs)
	fs.Usage = func() { crawlUsage(stdout, fs) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	c.given = fs.Changed
	cmd := &c.vals.Command
	c.log = logFlags{format: cmd.LogFormat, level: cmd.LogLevel}
	showLine, err := progressShown(cmd.Progress, stderr)
	if err != nil {
		return err
	}
	logTo := stderr
	if showLine {
		c.line = &lineWriter{w: stderr}
		logTo = c.line
		c.vals.Options.ProgressEvery = -1 // the line shows it
	}
	logger, err := c.log.loggerTo(logTo, stderr)
	if err != nil {
		return err
	}
	c.vals.Options.Logger = logger
	defer func() { c.cleanup() }()
	if err = c.toOptions(fs.Args()); err == nil {
		switch {
		case cmd.Store != "" && c.given("db"):
			err = usagef("give --db (a file) or --store (a fleet's Redis), not both")
		default:
			err = crawlInto(ctx, backend.Target{DB: cmd.DB, Store: cmd.Store}, c.vals, c.given, c.line, stdout)
		}
	}
	if err != nil && c.log.isJSON(stderr) {
		// In a JSON log the last word is JSON too.
		level := slog.LevelError
		if codeOf(err) == ExitWorkLeft {
			level = slog.LevelWarn
		}
		logger.Log(ctx, level, "crawl ended", "exit", codeOf(err), "err", err.Error())
		return loggedError{err}
	}
	return err
}

// crawlExitCodes ends crawl --help: what a cron job can tell from the code.
const crawlExitCodes = `
Exit codes:
  0  the frontier is exhausted: nothing left to fetch
  1  an error, named with its cause: e.g. the database or the --warc directory cannot be
     written (full, read-only) or the archive keeps failing; no page is left done without
     its records, so once the cause is fixed the same command resumes
  2  bad usage (bad flag, seed, header or file; every seed refused by the address guard)
  3  stopped with work left: run again to resume
  4  finished but failed: every seed failed or was blocked by robots.txt, nothing fetched, or above --fail-ratio
`

// toOptions checks the flag values and completes the options from them:
// the seed arguments, and paths made absolute, so that a resume from
// another directory finds what the first run named.
func (c *crawlFlags) toOptions(args []string) error {
	o, cmd := &c.vals.Options, &c.vals.Command
	if cmd.DB == "" {
		return usagef("--db: the database file's path is empty")
	}
	if cmd.FailRatio < 0 || cmd.FailRatio > 1 {
		return usagef("--fail-ratio must be between 0 and 1, got %g", cmd.FailRatio)
	}
	for _, arg := range args {
		if _, _, err := crawl.NormalizeSeed(arg); err != nil {
			return usagef("seed argument %q: %v", arg, err)
		}
	}
	o.Seeds = append(o.Seeds, args...)
	if o.Cookies != "" {
		// Read now, so a bad line is a usage error before anything is made.
		if _, err := fetch.LoadCookiesFile(o.Cookies); err != nil {
			return usagef("--cookies: %v", err)
		}
	}
	for _, path := range []*string{&o.Cookies, &o.WARC.Dir, &cmd.MetricsFile, &cmd.WACZ} {
		if *path == "" {
			continue
		}
		if abs, err := filepath.Abs(*path); err == nil {
			*path = abs
		}
	}
	if cmd.Seeds != "" {
		path, cleanup, err := readSeedsFlag(cmd.Seeds, cmd.DB, o.Logger)
		if err != nil {
			return err
		}
		o.SeedsFile, c.cleanup = path, cleanup
	}
	if err := o.Validate(); err != nil {
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

// runPolicy is what the crawl command adds to the crawl: how a run's end is
// judged, and how it is watched (metrics, notifications, progress). It is
// made from the flag values in force, stored and given.
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
// line, if set, is where the progress line is drawn.
func crawlInto(ctx context.Context, target backend.Target, vals crawl.FlagValues, given func(string) bool, line *lineWriter, stdout io.Writer) (err error) {
	opts := vals.Options
	if err := opts.ValidateFor(target.Capabilities()); err != nil {
		return usageError{err}
	}
	db, err := target.Open(ctx)
	if err != nil {
		return err
	}
	started, closed := false, false
	defer func() {
		switch {
		case closed:
		case started:
			db.Close()
		default:
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
	err = runEngine(ctx, db, vals, given, line, stdout, &started)
	db.LogUsage(opts.Logger)
	if out := vals.Command.WACZ; out != "" && started && ranToAnEnd(err) {
		// The package reads the crawl as any command does: the run lets go first.
		closed = true
		if cerr := db.Close(); cerr != nil {
			return errors.Join(err, cerr)
		}
		sum, werr := writeWACZ(ctx, target, "", out, "", time.Now())
		if werr != nil {
			return fmt.Errorf("--wacz %s: %w", out, werr)
		}
		fmt.Fprintf(stdout, "wrote %s: %d WARC files, %d pages (%d seeds), %d index lines\n",
			out, sum.WARCs, sum.Pages, sum.Seeds, sum.IndexLines)
	}
	return err
}

// ranToAnEnd reports whether a run ended as a crawl ends (done, work left,
// or failed by its own measure) rather than on an error: only then is
// there an archive worth packaging.
func ranToAnEnd(err error) bool {
	switch codeOf(err) {
	case ExitOK, ExitWorkLeft, ExitFailed:
		return true
	}
	return false
}

// runEngine runs the crawl on an opened store; started is set once the
// engine exists (the run was not refused).
func runEngine(ctx context.Context, db backend.Backend, vals crawl.FlagValues, given func(string) bool, line *lineWriter, stdout io.Writer, started *bool) (err error) {
	changes, err := crawl.ResolveFlags(db, &vals, given)
	if err != nil {
		return usageError{err}
	}
	opts, cmd := vals.Options, vals.Command
	if cmd.WACZ != "" && opts.WARC.Dir == "" {
		return usagef("--wacz %s: the crawl has no archive to package; give --warc DIR too", cmd.WACZ)
	}
	policy := runPolicy{failRatio: cmd.FailRatio, listen: cmd.Listen, metricsFile: cmd.MetricsFile, notify: cmd.Notify, line: line}
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
	held := fmt.Sprintf("%d hosts held", sum.HeldWork)
	if sum.HeldWork == 1 {
		held = "1 host held"
	}
	fmt.Fprintf(stdout, "crawl %s after %s: this run %d fetched, %d failed; in all %d fetched, %d failed, %d queued, %d deferred, %s: %s\n",
		map[bool]string{true: "finished", false: "stopped"}[sum.Exhausted], sum.Duration.Round(1e6),
		sum.Fetched, sum.Failed, sum.Counts.Fetched, sum.Counts.Failed, sum.Counts.Queued, sum.Counts.Deferred,
		held, sum.Why)
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
		copyTo, err = os.CreateTemp(filepath.Dir(dbPath), SeedsCopyPrefix(dbPath)+"*")
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
func SeedsCopyPrefix(dbPath string) string { return "." + filepath.Base(dbPath) + ".seeds-" }

// removeStaleSeedCopies removes the copies of piped seeds that a crawl of
// dbPath killed before its cleanup left behind. Only the crawl holding the
// file's lock calls it, so no other run of dbPath is using one; keep is
// this run's own.
func removeStaleSeedCopies(dbPath, keep string) {
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(dbPath), SeedsCopyPrefix(dbPath)+"*"))
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
		"queued", sum.Counts.Queued, "deferred", sum.Counts.Deferred, "held_hosts", sum.HeldWork,
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
