package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/pflag"

	"breakwater/control"
	"breakwater/crawl"
	"breakwater/storage"
)

// crawlFlags binds the crawl command's flags to crawl.Options.
type crawlFlags struct {
	opts      crawl.Options
	db        string
	seedsFile string
	include   []string
	exclude   []string
	log       logFlags
}

func (c *crawlFlags) addFlags(fs *pflag.FlagSet) {
	o := &c.opts
	fs.StringVar(&c.db, "db", "breakwater.db", "database file (created if missing; resumed if it exists)")
	fs.StringVar(&c.seedsFile, "seeds", "", "file of seed URLs, one a line (# comments and blank lines allowed)")
	fs.IntVar(&o.Workers, "workers", o.Workers, "concurrent fetches in all")
	fs.IntVar(&o.HostConcurrency, "host-concurrency", o.HostConcurrency, "in-flight requests per host")
	fs.DurationVar(&o.Delay, "delay", o.Delay, "minimum gap between request starts to one host (robots.txt Crawl-delay wins when larger)")
	fs.StringVar(&o.Scope, "scope", o.Scope, "links to follow: seeds (the seeds' hosts), domain (their registrable domains) or any")
	fs.IntVar(&o.MaxDepth, "max-depth", o.MaxDepth, "link hops from a seed to follow (-1: unlimited, 0: seeds only)")
	fs.IntVar(&o.MaxPages, "max-pages", o.MaxPages, "stop after attempting this many pages this run (0: unlimited)")
	fs.StringArrayVar(&c.include, "include", nil, "follow only URLs matching this regexp (repeatable)")
	fs.StringArrayVar(&c.exclude, "exclude", nil, "never follow URLs matching this regexp (repeatable)")
	fs.StringVar(&o.UserAgent, "user-agent", o.UserAgent, "User-Agent header; the word before the first / is the robots.txt product token")
	fs.DurationVar(&o.Timeout, "timeout", o.Timeout, "whole request timeout, body included")
	fs.DurationVar(&o.ConnectTimeout, "connect-timeout", o.ConnectTimeout, "TCP connect timeout")
	fs.Int64Var(&o.MaxBody, "max-body", o.MaxBody, "bytes of body kept per response (after decompression); longer bodies are truncated")
	fs.BoolVar(&o.AllowPrivate, "allow-private", o.AllowPrivate, "allow loopback, private and link-local addresses (local sites, tests)")
	fs.DurationVar(&o.MaxDuration, "max-duration", o.MaxDuration, "stop cleanly after this long (0: no limit); exit code 3 if work is left")
	fs.BoolVar(&o.RetryFailed, "retry-failed", o.RetryFailed, "put URLs recorded as failed back in the queue first")
	fs.DurationVar(&o.RecrawlAfter, "recrawl-after", o.RecrawlAfter, "fetch again, conditionally and after new URLs, pages fetched longer ago than this (0: never; at least 1s)")
	fs.BoolVar(&o.BreakerEnabled, "breaker", o.BreakerEnabled, "per-host circuit breakers (--breaker=false for comparison runs)")
	fs.IntVar(&o.Breaker.Threshold, "breaker-threshold", o.Breaker.Threshold, "consecutive failures that open a host's circuit")
	fs.DurationVar(&o.Breaker.Rest, "breaker-rest", o.Breaker.Rest, "how long an open circuit rests before a probe")
	fs.DurationVar(&o.Breaker.RestMax, "breaker-rest-max", o.Breaker.RestMax, "cap for the rest, doubled by each failed probe (default: --breaker-rest, i.e. no escalation)")
	fs.IntVar(&o.Breaker.Probes, "breaker-probes", o.Breaker.Probes, "consecutive probe successes, one at a time, that close a circuit")
	fs.DurationVar(&o.GiveUpAfter, "give-up-after", o.GiveUpAfter, "record a host's queued URLs as failed (host-down) once it has been open this long")
	fs.IntVar(&o.Retries, "retries", o.Retries, "further attempts after a transient failure")
	fs.DurationVar(&o.RetryBase, "retry-base", o.RetryBase, "first retry backoff (exponential, full jitter)")
	fs.DurationVar(&o.RetryMax, "retry-max", o.RetryMax, "longest retry backoff and longest Retry-After honoured")
	fs.Float64Var(&o.RetryBudget, "retry-budget", o.RetryBudget, "retries per host as a fraction of its first attempts over a minute (plus a few a minute)")
	c.log.addFlags(fs)
}

func runCrawl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c := &crawlFlags{opts: crawl.DefaultOptions()}
	fs := newFlagSet("crawl", "crawl [flags] [SEED_URL...]", stdout)
	c.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := c.toOptions(fs.Args()); err != nil {
		return err
	}
	logger, err := c.log.logger(stderr)
	if err != nil {
		return err
	}
	c.opts.Logger = logger
	return crawlInto(ctx, c.db, c.opts, stdout)
}

// toOptions turns the raw flag values into options and validates them.
func (c *crawlFlags) toOptions(args []string) error {
	var err error
	if c.opts.Include, err = compileAll("--include", c.include); err != nil {
		return err
	}
	if c.opts.Exclude, err = compileAll("--exclude", c.exclude); err != nil {
		return err
	}
	c.opts.Seeds = append(c.opts.Seeds, args...)
	if _, err := crawl.ReadSeeds(strings.NewReader(strings.Join(args, "\n")), "seed argument"); err != nil {
		return usageError{err}
	}
	if c.seedsFile != "" {
		if err := checkSeedsFile(c.seedsFile); err != nil {
			return err
		}
		c.opts.SeedsFile = c.seedsFile
	}
	if err := c.opts.Validate(); err != nil {
		return usageError{err}
	}
	return nil
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

// crawlInto runs one crawl over the database at dbPath and reports how it
// ended.
func crawlInto(ctx context.Context, dbPath string, opts crawl.Options, stdout io.Writer) error {
	fresh := !fileExists(dbPath)
	db, err := storage.Open(dbPath, nil)
	if err != nil {
		return err
	}
	if fresh && len(opts.Seeds) == 0 && opts.SeedsFile == "" {
		db.Close()
		os.Remove(dbPath)
		return usagef("no seed URLs: give them as arguments or with --seeds (or resume an existing --db)")
	}
	defer db.Close()
	engine, err := crawl.New(opts, db)
	if err != nil {
		return err
	}
	serveCtx, stopServing := context.WithCancel(ctx)
	served, err := control.Serve(serveCtx, control.SocketPath(dbPath), engine.Control(), opts.Logger)
	if err != nil {
		opts.Logger.Warn("control socket unavailable; status and pause work only after the crawl", "err", err)
	}
	sum, err := engine.Run(ctx)
	stopServing()
	if served != nil {
		<-served
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "crawl %s after %s: %d fetched, %d failed, %d queued, %d deferred, %d held\n",
		map[bool]string{true: "finished", false: "stopped"}[sum.Exhausted], sum.Duration.Round(1e6),
		sum.Counts.Fetched, sum.Counts.Failed, sum.Counts.Queued, sum.Counts.Deferred, sum.HeldWork)
	if !sum.Exhausted {
		return errWorkLeft
	}
	return nil
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// checkSeedsFile reads the seeds file once before anything is created, so a
// bad line is a usage error that names the file and line.
func checkSeedsFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return usagef("--seeds: %v", err)
	}
	defer f.Close()
	if err := crawl.ForEachSeed(f, path, func(string) error { return nil }); err != nil {
		return usagef("--seeds: %v", err)
	}
	return nil
}
