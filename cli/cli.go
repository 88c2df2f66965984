// Package cli is the breakwater command line: one function per command
// (crawl.go, status.go, ...), the exit codes and the help.
package cli

import (
	"breakwater/backend"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"breakwater/crawl"
)

// Exit codes.
const (
	ExitOK       = 0 // frontier exhausted
	ExitError    = 1
	ExitUsage    = 2
	ExitWorkLeft = 3 // stopped with work left: run again to resume
	ExitFailed   = 4 // finished, but failed in a way cron must hear about
	ExitFindings = 5 // report: a finding --fail-on lists exists
)

// usageError marks errors that are the caller's (bad flags, bad seeds): exit 2.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errWorkLeft is returned by a crawl that stopped before the frontier ran dry.
var errWorkLeft = errors.New("stopped with work left; run the same command again to resume")

// runFailedError is a crawl that finished but failed: nothing fetched,
// every seed failed, or more failures than --fail-ratio allows.
type runFailedError struct{ msg string }

func (e runFailedError) Error() string { return "the crawl failed: " + e.msg }

func runFailed(format string, args ...any) error {
	return runFailedError{fmt.Sprintf(format, args...)}
}

type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"crawl", "crawl from seed URLs into a database file, or resume one", runCrawl},
		{"status", "frontier counts, hosts, pages and failures", runStatus},
		{"export", "write stored results (jsonl or csv; --failed for failures only), also while a crawl runs", runExport},
		{"report", "write the site audit (broken links and who links to them, redirects, noindex, duplicates, charts) as HTML, JSON or CSV; --fail-on for CI", runReport},
		{"verify", "check a database file (and with --warc its archive) for damage and broken invariants; read-only", runVerify},
		{"warc-check", "read WARC files back: records by type, digests, pairs, unfinished files", runWARCCheck},
		{"wacz", "package the crawl's archive as a WACZ file for ReplayWeb.page, also while it runs; --verify checks one", runWACZ},
		{"index", "write DIR/index.cdxj, the CDXJ index of a directory's WARC files, for replay tools", runIndex},
		{"hosts", "hosts with breaker state, counts and pace", runHosts},
		{"transitions", "the log of breaker transitions", runTransitions},
		{"cases", "refusals that name the crawler; 'cases resolve HOST' releases one", runCases},
		{"pause", "hold a host open until unpaused (there is no force-close)", runPause},
		{"unpause", "release a paused host to half-open", runUnpause},
		{"demo", "serve a small local site and crawl it", runDemo},
		{"bench", "measure throughput, dead-host cost and memory on a local site (see BENCHMARKS.md)", runBench},
		{benchChildCommand, "the bench's memory child process (internal)", runBenchChild},
	}
}

func ExitCode(err error, stderr io.Writer) int {
	code := codeOf(err)
	if err != nil && !errors.Is(err, pflag.ErrHelp) && !errors.As(err, new(loggedError)) {
		fmt.Fprintln(stderr, "breakwater:", err)
	}
	return code
}

// codeOf is the exit code err tells.
func codeOf(err error) int {
	var ue usageError
	switch {
	case err == nil, errors.Is(err, pflag.ErrHelp):
		return ExitOK
	case errors.Is(err, errWorkLeft):
		return ExitWorkLeft
	case errors.As(err, new(runFailedError)):
		return ExitFailed
	case errors.As(err, new(findingsError)):
		return ExitFindings
	case errors.As(err, &ue), errors.Is(err, backend.ErrFleetIDInUse):
		return ExitUsage
	default:
		return ExitError
	}
}

// loggedError is an error already told through the command's logger (a
// JSON log, whose every line must be JSON): exitCode only turns it into
// the exit code.
type loggedError struct{ error }

func (e loggedError) Unwrap() error { return e.error }

// Run runs the command line args (without the program name) as the
// breakwater binary does, writing to stdout and stderr.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout)
		if len(args) == 0 {
			return usagef("no command given")
		}
		return nil
	}
	if args[0] == "--version" || args[0] == "version" {
		fmt.Fprintln(stdout, "breakwater", version)
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			// A developer's knob, not a flag: the peers section runs
			// `breakwater crawl` as a child, which has no other way to be
			// profiled as it runs there.
			stopProfile, err := startCPUProfile(profilePath(os.Getenv(cpuProfileEnv), os.Getpid()))
			if err != nil {
				return err
			}
			err = c.run(ctx, args[1:], stdout, stderr)
			return errors.Join(err, stopProfile())
		}
	}
	printUsage(stderr)
	return usagef("unknown command %q", args[0])
}

// cpuProfileEnv names the file any command writes a CPU profile of itself
// to, when set. A "%p" in it is the process ID, so the several crawl
// processes a bench section starts each keep their own profile.
const cpuProfileEnv = "BREAKWATER_CPUPROFILE"

func profilePath(pattern string, pid int) string {
	return strings.ReplaceAll(pattern, "%p", strconv.Itoa(pid))
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "Usage: breakwater COMMAND [flags]\n\nCommands:")
	for _, c := range commands() {
		if strings.HasPrefix(c.name, "internal-") {
			continue
		}
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'breakwater COMMAND --help' for a command's flags.")
}

// newFlagSet makes a subcommand's flag set whose --help prints every flag
// with its default.
func newFlagSet(name, usage string, out io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(out)
	fs.SortFlags = false
	fs.Usage = func() {
		fmt.Fprintf(out, "Usage: breakwater %s\n\nFlags:\n%s", usage, fs.FlagUsages())
	}
	return fs
}

// parseFlags parses args, turning flag errors into usage errors.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usageError{fmt.Errorf("%s: %w", fs.Name(), err)}
	}
	return nil
}

const version = crawl.Version
