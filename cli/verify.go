package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"breakwater/backend"
	"breakwater/crawl"
	"breakwater/store"
	"breakwater/verify"
	"breakwater/warc"
)

// errVerifyProblems makes verify exit 1 after its report: the file (or
// the archive) is damaged.
var errVerifyProblems = errors.New("verify found problems")

// verifyReport is what verify prints with --json.
type VerifyReport struct {
	DB       string   `json:"db"`
	WARC     string   `json:"warc,omitempty"`
	OK       bool     `json:"ok"`
	Problems []string `json:"problems"`
	// Omitted counts the problems found beyond those listed.
	Omitted     int   `json:"omitted"`
	Seen        int64 `json:"seen"`
	Queued      int64 `json:"queued"`
	Deferred    int64 `json:"deferred"`
	Staged      int64 `json:"staged"`
	Pages       int64 `json:"pages"`
	Failed      int64 `json:"failed"`
	Hosts       int   `json:"hosts"`
	Breakers    int   `json:"breakers"`
	Transitions int   `json:"transitions"`
	Cases       int   `json:"cases"`
	// ArchivedURLs counts the URLs with a response or revisit record.
	ArchivedURLs int `json:"archived_urls,omitempty"`
	// PagesDamaged says the file's pages are damaged: the problems say
	// how, and no record (nor the archive) was checked.
	PagesDamaged bool `json:"pages_damaged,omitempty"`
	// NotChecked names the checks this kind of store keeps no record for.
	NotChecked []string `json:"not_checked,omitempty"`
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", "verify --db FILE [--warc DIR] [--json]", stdout)
	dbPath := fs.String("db", "", "database file to check (this or --store is required); it is only read")
	storeURL := fs.String("store", "", "a fleet crawl's store to check instead of --db: redis://HOST:PORT[/DB]; it is only read")
	warcDir := fs.String("warc", "", "also check the crawl's WARC files in this directory: every page done is archived, once")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	maxProblems := fs.Int("max-problems", verify.DefaultMaxProblems, "problems listed; the rest are counted")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("verify takes no arguments, got %q", fs.Args())
	case *maxProblems < 1:
		return usagef("--max-problems must be at least 1, got %d", *maxProblems)
	case *storeURL != "" && *dbPath != "":
		return usagef("verify: give --db or --store, not both")
	case *storeURL != "" && *warcDir != "":
		return usagef("verify: --warc checks a file's archive; with --store, each process's WARC files are checked with warc-check")
	case *storeURL == "" && *dbPath == "":
		return usagef("verify: --db FILE or --store URL is required")
	}
	// A file's every page is walked before bbolt reads it: a damaged one is
	// reported, never a fault.
	src, err := backend.Target{DB: *dbPath, Store: *storeURL}.OpenReadOnly(ctx)
	var damaged *backend.DamageError
	switch {
	case errors.Is(err, backend.ErrTarget):
		return usageError{err}
	case errors.As(err, &damaged):
		rep := verify.NewReport(*maxProblems)
		rep.PagesDamaged = true
		for _, p := range damaged.Problems {
			rep.Addf("bbolt pages: %s", p)
		}
		rep.Omitted += damaged.Omitted
		return reportVerify(VerifyReport{DB: *dbPath}, rep, *asJSON, stdout)
	case errors.Is(err, backend.ErrLocked):
		// bbolt lets no reader in beside a writer: a running crawl's file
		// can be verified only once it stops.
		return fmt.Errorf("verify %s: the file is locked, a crawl is running on it: verify it once the crawl has stopped", *dbPath)
	case err != nil:
		return err
	}
	defer src.Close()
	out := VerifyReport{DB: src.Path(), WARC: *warcDir}
	opts := verify.Options{MaxProblems: *maxProblems}
	var archiveProblems []string
	if *warcDir != "" {
		archiveProblems, err = readArchive(src, *warcDir, &opts)
		if err != nil {
			return err
		}
		out.ArchivedURLs = len(opts.Archive)
	}
	rep, err := src.Verify(ctx, opts)
	if err != nil {
		return err
	}
	for _, p := range archiveProblems {
		rep.Addf("%s", p)
	}
	return reportVerify(out, rep, *asJSON, stdout)
}

// reportVerify prints rep and tells its verdict by the error.
func reportVerify(out VerifyReport, rep *verify.Report, asJSON bool, stdout io.Writer) error {
	out.Problems = rep.Problems
	out.Omitted = rep.Omitted
	out.OK = len(out.Problems) == 0 && out.Omitted == 0
	out.Seen, out.Queued, out.Deferred, out.Staged = rep.Seen, rep.Queued, rep.Deferred, rep.Staged
	out.Pages, out.Failed, out.Hosts, out.Breakers = rep.Pages, rep.Failed, rep.Hosts, rep.Breakers
	out.Transitions, out.Cases = rep.Transitions, rep.Cases
	out.PagesDamaged = rep.PagesDamaged
	out.NotChecked = rep.NotChecked
	if out.Problems == nil {
		out.Problems = []string{}
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		printVerify(stdout, out)
	}
	if !out.OK {
		return errVerifyProblems
	}
	return nil
}

func printVerify(w io.Writer, r VerifyReport) {
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if r.Omitted > 0 {
		fmt.Fprintf(w, "... and %d more problems (--max-problems lists more)\n", r.Omitted)
	}
	if r.PagesDamaged {
		fmt.Fprintf(w, "%s: its bbolt pages are damaged, so its records were not read\n", r.DB)
	} else {
		fmt.Fprintf(w, "%s: %d URLs seen: %d queued, %d deferred, %d staged for a refresh, %d pages, %d failed; "+
			"%d hosts, %d breakers, %d transitions, %d cases\n",
			r.DB, r.Seen, r.Queued, r.Deferred, r.Staged, r.Pages, r.Failed, r.Hosts, r.Breakers, r.Transitions, r.Cases)
	}
	if r.WARC != "" {
		fmt.Fprintf(w, "%s: %d URLs archived\n", r.WARC, r.ArchivedURLs)
	}
	for _, c := range r.NotChecked {
		fmt.Fprintf(w, "not checked on this store: %s\n", c)
	}
	if r.OK {
		fmt.Fprintln(w, "ok")
		return
	}
	fmt.Fprintf(w, "%d problems\n", len(r.Problems)+r.Omitted)
}

// readArchive reads the WARC files in dir into opts and returns what is
// wrong with the archive itself: warc-check's problems, unfinished files,
// and a file the database names that is not there.
func readArchive(db backend.ReadOnly, dir string, opts *verify.Options) ([]string, error) {
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() {
		return nil, usagef("--warc %s: not a directory", dir)
	}
	rep, err := warc.Check(dir)
	if err != nil {
		return nil, fmt.Errorf("verify --warc %s: %w", dir, err)
	}
	opts.Archive, opts.ArchiveRedirects = rep.Responses, rep.Redirects
	var problems []string
	for _, p := range rep.Problems {
		problems = append(problems, "archive: "+p)
	}
	for _, name := range rep.Unfinished {
		problems = append(problems, fmt.Sprintf("archive: %s is unfinished (a crawl crashed writing it): "+
			"resume the crawl to finish it; the pages in it count as not archived", name))
	}
	state, ok, err := db.ArchiveState()
	if err != nil {
		return nil, err
	}
	// A new file's name is committed before the file is made: a crash or a
	// failed create between the two leaves a name with nothing accounted
	// for in it, which the next run starts afresh.
	if ok && state.File != "" && state.Committed > 0 && !fileExists(filepath.Join(dir, state.File)) && !fileExists(filepath.Join(dir, state.File+".open")) {
		where := "is --warc the crawl's directory?"
		if abs, _ := filepath.Abs(dir); state.Dir != "" && filepath.Clean(state.Dir) != abs {
			where = "it was begun in " + state.Dir
		}
		problems = append(problems, fmt.Sprintf("archive: the database names %s as its last WARC file, and %s holds no such file "+
			"(%s)", state.File, dir, where))
	}
	if ok && rep.Files == 0 && len(rep.Unfinished) == 0 {
		problems = append(problems, fmt.Sprintf("archive: %s holds no WARC files", dir))
	}
	if settings, err := db.Settings(); err == nil {
		// Each refresh archives its answer again: a refreshed page is in
		// several records.
		if v, err := crawl.StoredFlagValues(settings); err == nil && v.Options.RecrawlAfter != 0 {
			opts.ArchiveRepeats = true
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	return problems, nil
}
