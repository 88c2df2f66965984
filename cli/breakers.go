package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"breakwater/backend"
	"breakwater/control"
	"breakwater/store"
)

func runHosts(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("hosts", "hosts [flags]", stdout)
	dbPath := targetFlags(fs, "database file (a running crawl on it answers through its control socket)")
	state := fs.String("state", "", "only hosts in this state: open, half-open, closed, paused or case")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return dbPath.withAPI(func(a control.API) error {
		rows, err := a.Hosts(*state)
		if err != nil {
			return usageError{err}
		}
		if *asJSON {
			return writeJSON(stdout, rows)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "HOST\tSTATE\tHOLD\tFAILS\tOPENED\tREST LEFT\tQUEUED\tDEFERRED\tFETCHED\tFAILED\tPACE\t429s\tRETRIES/FIRST (1m)")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\t%d/%d\n", r.Host, r.State, dash(r.Hold),
				r.Failures, timeOrDash(r.OpenedAt), durOrDash(r.RestRemaining), r.Queued, r.Deferred, r.Fetched,
				r.Failed, durOrDash(r.Interval), r.Throttles, r.Retries, r.FirstAttempts)
		}
		return tw.Flush()
	})
}

func runTransitions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("transitions", "transitions [flags]", stdout)
	dbPath := targetFlags(fs, "database file")
	host := fs.String("host", "", "only this host")
	since := fs.Duration("since", 0, "only transitions within this long ago (0: all)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	var from time.Time
	if *since > 0 {
		from = time.Now().Add(-*since)
	}
	return dbPath.withAPI(func(a control.API) error {
		ts, err := a.Transitions(*host, from)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, ts)
		}
		printTransitions(stdout, ts)
		return nil
	})
}

func printTransitions(w io.Writer, ts []store.Transition) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tHOST\tFROM\tTO\tHOLD\tCAUSE")
	for _, t := range ts {
		cause := t.Reason
		if t.Class != "" {
			cause = t.Class + ": " + t.Detail
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.At.Format(time.RFC3339Nano), t.Host, t.From, t.To, dash(t.Hold), dash(cause))
	}
	tw.Flush()
}

func runCases(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cases", "cases [resolve HOST] [flags]", stdout)
	dbPath := targetFlags(fs, "database file")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	if len(rest) > 0 {
		if rest[0] != "resolve" || len(rest) != 2 {
			return usagef("cases: want no arguments, or 'resolve HOST'")
		}
		return dbPath.withAPI(func(a control.API) error {
			if err := a.ResolveCase(rest[1]); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "case of %s resolved: the host is half-open and will be probed\n", rest[1])
			return nil
		})
	}
	return dbPath.withAPI(func(a control.API) error {
		cases, err := a.Cases()
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(stdout, cases)
		}
		for _, c := range cases {
			state := "OPEN"
			if !c.Resolved.IsZero() {
				state = "resolved " + c.Resolved.Format(time.RFC3339)
			}
			fmt.Fprintf(stdout, "%s  %s  [%s]\n  url:     %s\n  status:  %d\n  excerpt: %s\n",
				c.At.Format(time.RFC3339), c.Host, state, c.URL, c.Status, c.Excerpt)
		}
		if len(cases) == 0 {
			fmt.Fprintln(stdout, "no cases")
		}
		return nil
	})
}

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("pause", "pause HOST --reason TEXT [flags]", stdout)
	dbPath := targetFlags(fs, "database file")
	reason := fs.String("reason", "", "why (recorded in the transition log; required)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *reason == "" {
		return usagef("pause: want exactly one HOST and a --reason")
	}
	return dbPath.withAPI(func(a control.API) error {
		if err := a.Pause(fs.Arg(0), *reason); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s paused: held open until 'breakwater unpause %s'\n", fs.Arg(0), fs.Arg(0))
		return nil
	})
}

func runUnpause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("unpause", "unpause HOST [flags]", stdout)
	dbPath := targetFlags(fs, "database file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("unpause: want exactly one HOST")
	}
	return dbPath.withAPI(func(a control.API) error {
		if err := a.Unpause(fs.Arg(0)); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s unpaused: half-open, it will be probed\n", fs.Arg(0))
		return nil
	})
}

// target is the crawl a command reads: a file (--db), or a fleet's store
// (--store).
type target struct{ db, store *string }

func targetFlags(fs *pflag.FlagSet, dbHelp string) target {
	return target{db: fs.String("db", "breakwater.db", dbHelp),
		store: fs.String("store", "", "a fleet crawl's store instead of --db: redis://[:PASSWORD@]HOST:PORT[/DB] (password also from $"+backend.PasswordEnv+")")}
}

func (t target) backend() backend.Target { return backend.Target{DB: *t.db, Store: *t.store} }

func (t target) name() string { return t.backend().Name() }

// withAPI calls fn with the target's API; a --store that is no store URL,
// or a --db that does not exist, is a usage error.
func (t target) withAPI(fn func(control.API) error) error { return withAPI(t.backend(), fn) }

// withAPI calls fn with the API of the target's crawl: the running crawl
// through its control socket, or else the file; or a fleet's store, which
// every process of the fleet reads and writes.
func withAPI(t backend.Target, fn func(control.API) error) (err error) {
	api, closeFn, err := t.API(context.Background())
	if errors.Is(err, backend.ErrTarget) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeFn()) }()
	return fn(api)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}

func durOrDash(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return d.Round(time.Millisecond).String()
}
