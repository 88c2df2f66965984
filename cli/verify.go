package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

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
	// With --store and --warc: the pages found where the store placed
	// them, those placed in files not in the directories given (another
	// machine's), and the response or revisit records no result names
	// (pages fetched again after a kill or a lost host: harmless).
	ArchivePlaced     int64 `json:"archive_placed,omitempty"`
	ArchivedElsewhere int64 `json:"archived_elsewhere,omitempty"`
	ArchiveExtra      int64 `json:"archive_extra,omitempty"`
	// PagesDamaged says the file's pages are damaged: the problems say
	// how, and no record (nor the archive) was checked.
	PagesDamaged bool `json:"pages_damaged,omitempty"`
	// NotChecked names the checks this kind of store keeps no record for.
	NotChecked []string `json:"not_checked,omitempty"`
}

func runVerify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", "verify --db FILE [--warc DIR] [--json]\n       breakwater verify --store URL [--warc DIR]... [--json]", stdout)
	dbPath := fs.String("db", "", "database file to check (this or --store is required); it is only read")
	storeURL := fs.String("store", "", "a fleet crawl's store to check instead of --db: redis://HOST:PORT[/DB]; it is only read")
	warcDirs := fs.StringArray("warc", nil, "also check the crawl's WARC files in the directory `DIR`: every page done is archived, once; "+
		"with --store, give it once per directory the fleet's processes wrote to (one per machine, say): every done page "+
		"placed in a file there is checked where the store placed it")
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
	case *storeURL == "" && len(*warcDirs) > 1:
		return usagef("verify: --warc is given once with --db: a file's crawl writes one directory")
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
	out := VerifyReport{DB: src.Path(), WARC: strings.Join(*warcDirs, ", ")}
	opts := verify.Options{MaxProblems: *maxProblems}
	var archiveProblems []string
	switch {
	case len(*warcDirs) > 0 && *storeURL != "":
		archiveProblems, err = readFleetArchive(*warcDirs, &opts)
	case len(*warcDirs) > 0:
		archiveProblems, err = readArchive(src, (*warcDirs)[0], &opts)
	}
	if err != nil {
		return err
	}
	out.ArchivedURLs = len(opts.Archive)
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
	out.ArchivePlaced, out.ArchivedElsewhere, out.ArchiveExtra = rep.ArchivePlaced, rep.ArchivedElsewhere, rep.ArchiveExtra
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
	if r.ArchivePlaced+r.ArchivedElsewhere+r.ArchiveExtra > 0 {
		fmt.Fprintf(w, "%d done pages found where the store placed them; %d placed in files not in these directories (not checked); "+
			"%d records no result names (pages fetched again after a kill or a lost host: harmless)\n",
			r.ArchivePlaced, r.ArchivedElsewhere, r.ArchiveExtra)
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

// readFleetArchive reads the WARC files of a fleet's processes in dirs
// into opts and returns what is wrong with the archive itself, as
// readArchive does for a file's. Each done page is then checked where
// the store placed it (opts.Placed): its file is in one of dirs, and its
// request and response (or revisit) records start at its offset.
func readFleetArchive(dirs []string, opts *verify.Options) ([]string, error) {
	opts.Archive, opts.ArchiveRedirects = map[string]int{}, map[string][]string{}
	files := map[string]string{} // a finished file's name -> its path (.open while unfinished)
	var problems []string
	for _, dir := range dirs {
		info, err := os.Stat(dir)
		if err != nil || !info.IsDir() {
			return nil, usagef("--warc %s: not a directory", dir)
		}
		rep, err := warc.Check(dir)
		if err != nil {
			return nil, fmt.Errorf("verify --warc %s: %w", dir, err)
		}
		for u, n := range rep.Responses {
			opts.Archive[u] += n
		}
		for u, to := range rep.Redirects {
			opts.ArchiveRedirects[u] = append(opts.ArchiveRedirects[u], to...)
		}
		for _, p := range rep.Problems {
			problems = append(problems, fmt.Sprintf("archive %s: %s", dir, p))
		}
		for _, name := range rep.Unfinished {
			problems = append(problems, fmt.Sprintf("archive %s: %s is unfinished (a process crashed writing it, or is "+
				"still running): start the process again with its --fleet-id to finish it", dir, name))
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("verify --warc %s: %w", dir, err)
		}
		for _, de := range entries {
			name := strings.TrimSuffix(de.Name(), ".open")
			if de.IsDir() || !(strings.HasSuffix(name, ".warc.gz") || strings.HasSuffix(name, ".warc")) {
				continue
			}
			if other, dup := files[name]; dup {
				problems = append(problems, fmt.Sprintf("archive: %s is in both %s and %s: give each directory once",
					name, filepath.Dir(other), dir))
				continue
			}
			files[name] = filepath.Join(dir, de.Name())
		}
		if rep.Files == 0 && len(rep.Unfinished) == 0 {
			problems = append(problems, fmt.Sprintf("archive: %s holds no WARC files", dir))
		}
	}
	opts.Placed = func(url, placement string) (bool, error) {
		i := strings.LastIndexByte(placement, ' ')
		if i < 0 {
			return true, fmt.Errorf("the placement %q is not FILE OFFSET", placement)
		}
		path, ok := files[placement[:i]]
		if !ok {
			return false, nil
		}
		offset, err := strconv.ParseInt(placement[i+1:], 10, 64)
		if err != nil || offset < 0 {
			return true, fmt.Errorf("the placement %q has no offset", placement)
		}
		typ, uri, err := warc.PageAt(path, offset)
		switch {
		case err != nil:
			return true, err
		case uri != url:
			return true, fmt.Errorf("the %s record there is of %s", typ, uri)
		}
		return true, nil
	}
	return problems, nil
}
