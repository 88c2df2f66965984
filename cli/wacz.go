package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"strings"
	"time"

	"breakwater/backend"
	"breakwater/control"
	"breakwater/store"
	"breakwater/wacz"
	"breakwater/warc"
)

// errWACZDamaged makes wacz --verify exit non-zero after its list.
var errWACZDamaged = errors.New("the WACZ does not match its manifest")

// waczRefusalShown is how many of warc-check's problems a refusal names.
const waczRefusalShown = 10

const waczHelp = `
Writes a WACZ 1.1.1 package (a ZIP that ReplayWeb.page opens as a file):
archive/ with the finished WARC files as they are, indexes/index.cdxj,
pages/pages.jsonl (the crawl's HTML pages with a 2xx status, seeds first),
datapackage.json (every file's sha256 and size) and datapackage-digest.json.
It works while the crawl runs: files still being written (.open) are left
out, and so are the pages fetched since the first of them was begun. An
archive in which warc-check finds a problem is not packaged.

Exit codes:
  0  written; with --verify: every hash and size matches
  1  an error: the archive has problems (the first are listed), the WACZ cannot be
     written; with --verify: a hash, size or file that does not match (all are listed),
     or the file cannot be read
  2  bad usage
`

func runWACZ(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("wacz", "wacz --db FILE [--warc DIR] -o crawl.wacz | wacz --verify FILE", stdout)
	t := targetFlags(fs, "database file of the crawl (a running crawl on it answers through its control socket)")
	warcDir := fs.String("warc", "", "the crawl's WARC files (default: the --warc directory the crawl was run with; "+
		"a fleet's files gathered in one directory)")
	out := fs.StringP("output", "o", "", "the WACZ file to write (written beside it under a temporary name, then renamed)")
	title := fs.String("title", "", "the collection's title in datapackage.json (default: none; replay tools show the file name)")
	verifyPath := fs.String("verify", "", "instead of writing, check the WACZ file: every file's sha256 and size against "+
		"datapackage.json, and datapackage.json against datapackage-digest.json")
	usage := fs.Usage
	fs.Usage = func() { usage(); fmt.Fprint(stdout, waczHelp) }
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usagef("wacz takes no arguments, got %q", fs.Args())
	case *verifyPath != "" && *out != "":
		return usagef("wacz: give -o to write a WACZ or --verify to check one, not both")
	case *verifyPath != "":
		return verifyWACZ(*verifyPath, stdout)
	case *out == "":
		return usagef("wacz: -o FILE (the WACZ to write) is required")
	}
	sum, err := writeWACZ(ctx, t.backend(), *warcDir, *out, *title, time.Now())
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d WARC files, %d index lines, %d pages (%d seeds)\n",
		*out, sum.WARCs, sum.IndexLines, sum.Pages, sum.Seeds)
	return nil
}

// verifyWACZ prints every problem Verify finds in the WACZ at path.
func verifyWACZ(path string, stdout io.Writer) error {
	rep, err := wacz.Verify(path)
	if err != nil {
		return err
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", p)
	}
	if !rep.OK() {
		fmt.Fprintf(stdout, "%s: %d problems in %d files checked\n", path, len(rep.Problems), rep.Checked)
		return errWACZDamaged
	}
	fmt.Fprintf(stdout, "%s: ok, %d files match their sha256 and size\n", path, rep.Checked)
	return nil
}

// writeWACZ packages the crawl of target, with the WARC files of warcDir
// ("" for the directory the crawl was run with), as the WACZ file out.
// now is when the package is made. The crawl command calls it at the end
// of a run (--wacz), once its store is closed.
func writeWACZ(ctx context.Context, target backend.Target, warcDir, out, title string, now time.Time) (*wacz.Summary, error) {
	var sum *wacz.Summary
	err := withAPI(target, func(a control.API) error {
		var err error
		sum, err = packageCrawl(ctx, a, warcDir, out, title, now)
		return err
	})
	if err != nil {
		return nil, err // each names what it is about: the directory, the file written
	}
	return sum, nil
}

// packageCrawl writes the WACZ of the crawl a answers for.
func packageCrawl(ctx context.Context, a control.API, warcDir, out, title string, now time.Time) (*wacz.Summary, error) {
	if warcDir == "" {
		dir, err := storedWARCDir(a)
		if err != nil {
			return nil, err
		}
		warcDir = dir
	}
	// The files are listed before they are checked: every file packaged
	// has been checked, whatever the crawl finishes meanwhile.
	listing, err := wacz.ListWARCs(warcDir)
	if err != nil {
		return nil, err
	}
	if err := checkBeforePackaging(warcDir); err != nil {
		return nil, err
	}
	// A page fetched after the listing, or after an unfinished file was
	// begun, may be in no file packaged.
	cutoff := now
	if s := listing.UnfinishedSince; !s.IsZero() && s.Before(cutoff) {
		cutoff = s
	}
	return wacz.WriteFile(out, wacz.Source{
		WARCs: listing.Finished,
		Index: func(w io.Writer) error {
			// The files' own indexes, merged: the package holds the index of
			// what it holds, whatever index.cdxj says.
			_, err := warc.MergeIndex(warcDir, w)
			return err
		},
		Pages:    func(emit func(wacz.Page) error) error { return crawlPages(ctx, a, cutoff, emit) },
		Title:    title,
		Software: "breakwater/" + version,
		Created:  now,
	})
}

// storedWARCDir is the --warc directory the crawl was run with.
func storedWARCDir(a control.API) (string, error) {
	st, err := a.Status()
	if err != nil {
		return "", err
	}
	var dir string
	if raw, ok := st.Settings["warc"]; ok {
		if err := json.Unmarshal(raw, &dir); err != nil {
			return "", fmt.Errorf("the stored --warc setting %s: %w", raw, err)
		}
	}
	if dir == "" {
		return "", usagef("the crawl was run without --warc: give --warc DIR, the directory of its WARC files")
	}
	return dir, nil
}

// checkBeforePackaging refuses an archive in which warc-check finds a
// problem; unfinished files are not one, they are left out.
func checkBeforePackaging(dir string) error {
	rep, err := warc.Check(dir)
	if err != nil {
		return err
	}
	if len(rep.Problems) == 0 {
		return nil
	}
	shown := rep.Problems[:min(len(rep.Problems), waczRefusalShown)]
	more := ""
	if n := len(rep.Problems) - len(shown); n > 0 {
		more = fmt.Sprintf("\n  ... and %d more (breakwater warc-check %s lists them all)", n, dir)
	}
	return fmt.Errorf("not packaging %s: warc-check finds %d problems:\n  %s%s",
		dir, len(rep.Problems), strings.Join(shown, "\n  "), more)
}

// crawlPages emits the crawl's HTML pages fetched before cutoff, seeds
// first: the results are read twice, seeds, then the rest, so that none
// is held.
func crawlPages(ctx context.Context, a control.API, cutoff time.Time, emit func(wacz.Page) error) error {
	for _, seeds := range []bool{true, false} {
		err := a.Results(false, func(r *store.Result) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			if isSeed(r) != seeds || !isHTMLPage(r) || !r.FetchedAt.Before(cutoff) {
				return nil
			}
			return emit(wacz.Page{URL: r.URL, Title: r.Title, TS: r.FetchedAt, Seed: seeds})
		})
		if err != nil {
			return fmt.Errorf("read the results: %w", err)
		}
	}
	return nil
}

// isSeed reports whether r is a URL the crawl started from.
func isSeed(r *store.Result) bool { return r.Depth == 0 && r.Referrer == "" }

// isHTMLPage reports whether r is a page a replay tool lists: fetched
// with a 2xx status as HTML or XHTML.
func isHTMLPage(r *store.Result) bool {
	if r.Failed() || r.Status < 200 || r.Status > 299 || r.Kind != store.KindPage {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.ContentType)
	return err == nil && (mt == "text/html" || mt == "application/xhtml+xml")
}
