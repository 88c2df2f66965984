package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"breakwater/control"
	"breakwater/report"
	"breakwater/store"
)

const reportUsage = `report [--db FILE | --store URL] [-o report.html] [--format html|json|csv] [--fail-on LIST]

Writes the crawl's audit: what is broken and every page linking to it, redirect
chains and loops, noindex pages, canonical conflicts, duplicates, the slowest
pages, what robots.txt and trap rules held back, and charts. Works on a crawl
that is still running. See docs/report.md.

Exit codes: 0 done (no listed finding with --fail-on), 1 an error, 2 bad usage,
5 a finding --fail-on lists exists (the counts are printed on stderr).`

// findingsError is a report that holds findings --fail-on lists: exit 5.
type findingsError struct{ counts string }

func (e findingsError) Error() string { return "report: findings: " + e.counts }

func runReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("report", reportUsage, stdout)
	dbPath := targetFlags(fs, "database file (a running crawl on it answers through its control socket)")
	out := fs.StringP("output", "o", "", `where to write: a file for html (default report.html) and json (default "-", stdout), a directory for csv (default report-csv)`)
	format := fs.String("format", "html", "html (one self-contained file), json (the same data) or csv (one file per table in the -o directory)")
	failOn := fs.String("fail-on", "", "exit 5 when any of these findings exists (comma-separated): "+strings.Join(report.Findings(), ", "))
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usagef("report: unexpected arguments %q", fs.Args())
	}
	findings, err := parseFailOn(*failOn)
	if err != nil {
		return err
	}
	write, dest, err := reportWriter(*format, *out, stdout)
	if err != nil {
		return err
	}
	var rep *report.Report
	err = dbPath.withAPI(func(a control.API) error {
		opt := report.Options{Source: dbPath.name(), Now: time.Now(), Directives: pageDirectives}
		// A crawl whose API reads the link graph lists every page linking
		// to a broken URL; without it, the first page it was found on.
		if g, ok := a.(report.Graph); ok {
			opt.Graph = g
		}
		var err error
		rep, err = report.Build(a, opt)
		return err
	})
	if err != nil {
		return fmt.Errorf("report %s: %w", dbPath.name(), err)
	}
	if err := write(rep); err != nil {
		return err
	}
	if dest != "-" {
		fmt.Fprintf(stderr, "report written to %s\n", dest)
	}
	return checkFindings(rep, findings, stderr)
}

// parseFailOn reads --fail-on's list; an unknown name is a usage error
// naming the known ones.
func parseFailOn(list string) ([]string, error) {
	var out []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(report.Findings(), name) {
			return nil, usagef("--fail-on %q: unknown finding; known: %s", name, strings.Join(report.Findings(), ", "))
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// checkFindings prints the count of each listed finding and fails when
// any is not zero.
func checkFindings(rep *report.Report, findings []string, stderr io.Writer) error {
	if len(findings) == 0 {
		return nil
	}
	parts := make([]string, len(findings))
	found := false
	for i, f := range findings {
		n, _ := rep.Count(f)
		parts[i] = fmt.Sprintf("%s %d", f, n)
		found = found || n > 0
	}
	if found {
		return findingsError{strings.Join(parts, ", ")}
	}
	fmt.Fprintln(stderr, "report: no findings:", strings.Join(parts, ", "))
	return nil
}

// reportWriter is the writer of format to out, and where it writes.
func reportWriter(format, out string, stdout io.Writer) (func(*report.Report) error, string, error) {
	switch format {
	case "html":
		dest := cmpOr(out, "report.html")
		return func(r *report.Report) error { return writeReportFile(dest, stdout, r, report.WriteHTML) }, dest, nil
	case "json":
		dest := cmpOr(out, "-")
		return func(r *report.Report) error { return writeReportFile(dest, stdout, r, report.WriteJSON) }, dest, nil
	case "csv":
		dest := cmpOr(out, "report-csv")
		if dest == "-" {
			return nil, "", usagef("--format csv writes a directory: -o DIR, not -")
		}
		return func(r *report.Report) error { return report.WriteCSV(dest, r) }, dest, nil
	}
	return nil, "", usagef("--format %q: want html, json or csv", format)
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// writeReportFile writes the report to dest ("-": stdout) through a
// temporary file renamed over it, so a failed report leaves no half file.
func writeReportFile(dest string, stdout io.Writer, rep *report.Report, render func(io.Writer, *report.Report) error) error {
	if dest == "-" {
		w := bufio.NewWriter(stdout)
		return errors.Join(render(w, rep), w.Flush())
	}
	f, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", dest, err)
	}
	w := bufio.NewWriter(f)
	err = errors.Join(render(w, rep), w.Flush(), f.Chmod(0o644), f.Close())
	if err == nil {
		err = os.Rename(f.Name(), dest)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", dest, err)
	}
	return nil
}

// pageDirectives is what a result says the page asked of search engines:
// the robots directives of its meta tags and X-Robots-Tag, and its
// canonical URL.
func pageDirectives(r *store.Result) report.Directives {
	return report.Directives{Robots: r.Robots.Names(), Canonical: r.Canonical}
}
