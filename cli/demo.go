package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"breakwater/backend"
	"breakwater/control"
	"breakwater/crawl"
	"breakwater/demosite"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "demo [flags]", stdout)
	dbPath := fs.String("db", "", "database file to crawl into (default: a temporary file, removed afterwards)")
	serve := fs.String("serve", "", "only serve the demo site, its first host on this loopback address (e.g. 127.0.0.1:8080), until interrupted")
	var lf logFlags
	lf.addFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := lf.logger(stderr)
	if err != nil {
		return err
	}
	specs := demosite.DemoSpecs()
	specs[0].Addr = *serve
	site, err := demosite.Start(specs, demosite.DemoOptions(1))
	if err != nil {
		return usagef("demo: start the demo site: %v", err)
	}
	defer site.Close()
	if *serve != "" {
		fmt.Fprintf(stdout, "demo site: %d hosts on loopback; %s is %s. Ctrl-C stops it.\n",
			len(site.Roots()), specs[0].Name, site.Roots()[0])
		<-ctx.Done()
		return nil
	}
	keep := *dbPath != ""
	if !keep {
		dir, err := os.MkdirTemp("", "breakwater-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dbPath = filepath.Join(dir, "demo.db")
	}
	fmt.Fprintf(stdout, "demo site: %d hosts on loopback (healthy, dead, recovering, refusing, flaky, throttling)\n", len(site.Roots()))
	for _, h := range demosite.DemoSpecs() {
		if host := site.Host(h.Name); host != nil {
			fmt.Fprintf(stdout, "  %-11s %-10s %s\n", h.Name, h.Behavior, host.BaseURL())
		}
	}
	opts := demoOptions(site)
	opts.Logger = logger
	// The status page, on a free loopback port, shows the breakers open and close.
	target := backend.Target{DB: *dbPath}
	vals := crawl.FlagValues{Options: opts, Command: crawl.CommandOptions{Listen: "127.0.0.1:0"}}
	err = crawlInto(ctx, target, vals, func(string) bool { return true }, nil, stdout)
	if err != nil && err != errWorkLeft {
		return err
	}
	crawlErr := err
	return withAPI(target, func(admin control.API) error { return showDemo(ctx, admin, crawlErr, *dbPath, keep, stdout) })
}

// showDemo shows what the demo's crawl did, read from the file it left;
// err is how the crawl ended.
func showDemo(ctx context.Context, admin control.API, err error, dbPath string, keep bool, stdout io.Writer) error {
	st, serr := admin.Status()
	if serr != nil {
		return serr
	}
	fmt.Fprintln(stdout)
	printStatus(stdout, st)
	ts, terr := admin.Transitions("", time.Time{})
	if terr != nil {
		return terr
	}
	fmt.Fprintln(stdout, "\nbreaker transitions:")
	printTransitions(stdout, ts)
	cases, cerr := admin.Cases()
	if cerr != nil {
		return cerr
	}
	for _, c := range cases {
		fmt.Fprintf(stdout, "\ncase: %s refused us by name (status %d at %s): %q\n", c.Host, c.Status, c.URL, c.Excerpt)
		if keep {
			fmt.Fprintf(stdout, "  release it with: breakwater cases resolve %s --db %s\n", c.Host, dbPath)
		} else {
			fmt.Fprintln(stdout, "  (run the demo with --db FILE to keep the database, then try 'breakwater cases resolve HOST --db FILE')")
		}
	}
	if err == errWorkLeft && ctx.Err() == nil {
		// Expected: the refusing host's URLs wait for a human. A real crawl
		// would exit 3 here; the demo has shown what it came to show.
		fmt.Fprintln(stdout, "\nthe crawl ended with work left: the refusing host's URLs wait for a human (a real crawl exits 3 here).")
		return nil
	}
	return err
}

// demoOptions are crawl settings that show the whole product in about a
// minute: short rests and give-up so the dead host is handled quickly.
func demoOptions(site *demosite.Site) crawl.Options {
	o := crawl.DefaultOptions()
	for _, spec := range demosite.DemoSpecs() {
		if spec.Behavior != demosite.Dead {
			o.Seeds = append(o.Seeds, site.Host(spec.Name).BaseURL()+"/")
		}
	}
	o.Scope = crawl.ScopeDomain
	o.AllowPrivate = true
	o.Workers = 16
	o.Delay = 100 * time.Millisecond
	o.Timeout = 2 * time.Second
	o.ConnectTimeout = time.Second
	o.Breaker.Rest = 8 * time.Second
	o.GiveUpAfter = 45 * time.Second
	o.RetryBase = 500 * time.Millisecond
	o.RetryMax = 5 * time.Second
	return o
}
