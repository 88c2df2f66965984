package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"

	"breakwater/warc"
)

// errArchiveProblems makes warc-check exit non-zero after its report.
var errArchiveProblems = errors.New("the archive has problems")

func runWARCCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("warc-check", "warc-check DIR", stdout)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usagef("warc-check takes one directory of WARC files, got %d arguments", fs.NArg())
	}
	dir := fs.Arg(0)
	rep, err := warc.Check(dir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d files, %d URLs with a response or revisit\n", dir, rep.Files, len(rep.Responses))
	for _, typ := range slices.Sorted(maps.Keys(rep.Records)) {
		fmt.Fprintf(stdout, "  %-9s %d\n", typ, rep.Records[typ])
	}
	for _, name := range rep.Unfinished {
		fmt.Fprintf(stdout, "unfinished: %s (a crawl is writing it, or crashed: resume it to finish the file)\n", name)
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(stdout, "problem: %s\n", p)
	}
	if !rep.OK() {
		fmt.Fprintf(stdout, "%d problems, %d unfinished files\n", len(rep.Problems), len(rep.Unfinished))
		return errArchiveProblems
	}
	fmt.Fprintln(stdout, "ok")
	return nil
}
