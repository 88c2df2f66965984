package cli

import (
	"bufio"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"breakwater/control"
	"breakwater/store"
)

// csvColumns are export --format csv's columns, in order; failedColumns
// are --failed's, what a user needs to rerun a failure, report it, or fix
// the page holding a broken link.
var (
	CSVColumns = []string{"url", "status", "error_class", "error", "attempts", "referrer", "final_url", "location",
		"content_type", "length", "truncated", "fetched_at", "duration_ms", "depth", "title", "outlinks", "sha256",
		"etag", "last_modified", "lastmod", "host", "kind"}
	FailedColumns = []string{"url", "error_class", "status", "error", "attempts", "referrer", "depth", "fetched_at", "kind"}
)

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("export", "export [flags] > results.jsonl", stdout)
	dbPath := targetFlags(fs, "database file (a running crawl on it answers through its control socket)")
	format := fs.String("format", "jsonl", "jsonl (one JSON object a line) or csv (RFC 4180, a header row, one row per URL; columns: "+
		"the --failed ones with --failed; a text cell starting with = + - @ ' a tab or a carriage return gets a leading ' so that "+
		"a spreadsheet shows it rather than runs it as a formula)")
	failedOnly := fs.Bool("failed", false, "export only failed URLs (csv columns: url, error_class, status, error, attempts, referrer, depth, fetched_at, kind)")
	links := fs.Bool("links", false, "export the link graph instead: one link a line, every link of every page fetched, "+
		"with the status of the page holding it and of its target (csv columns: "+strings.Join(LinkColumns, ", ")+")")
	inlinks := fs.String("inlinks", "", "export the links to this `URL` instead, every page linking to it with its anchor text "+
		"(the columns of --links)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *links || *inlinks != "" {
		if *failedOnly || *links && *inlinks != "" {
			return usagef("--links, --inlinks and --failed are three different exports: give one")
		}
		if *format != "jsonl" && *format != "csv" {
			return usagef("--format %q: want jsonl or csv", *format)
		}
		err := dbPath.withAPI(func(a control.API) error { return exportLinks(a, *format, *inlinks, stdout) })
		if err != nil {
			return fmt.Errorf("export %s: %w", dbPath.name(), err)
		}
		return nil
	}
	var write func(*store.Result) error
	w := bufio.NewWriterSize(stdout, 64<<10)
	var flush func() error
	switch *format {
	case "jsonl":
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		write = func(r *store.Result) error { return enc.Encode(r) }
		flush = w.Flush
	case "csv":
		cols := CSVColumns
		if *failedOnly {
			cols = FailedColumns
		}
		var err error
		if write, flush, err = csvExporter(w, cols); err != nil {
			return err
		}
	default:
		return usagef("--format %q: want jsonl or csv", *format)
	}
	err := dbPath.withAPI(func(a control.API) error { return a.Results(*failedOnly, write) })
	if err != nil {
		return fmt.Errorf("export %s: %w", dbPath.name(), err)
	}
	return flush()
}

// csvExporter writes the header row of cols to w and returns the writer of
// one result's row and the flush that ends the export.
func csvExporter(w *bufio.Writer, cols []string) (write func(*store.Result) error, flush func() error, err error) {
	cw := csv.NewWriter(w)
	if err := cw.Write(cols); err != nil {
		return nil, nil, fmt.Errorf("csv header: %w", err)
	}
	row := make([]string, len(cols))
	write = func(r *store.Result) error {
		for i, c := range cols {
			row[i] = csvField(r, c)
			if !numericColumns[c] {
				row[i] = defuseFormula(row[i])
			}
		}
		return cw.Write(row)
	}
	return write, csvFlush(cw, w), nil
}

// csvFlush returns the flush that ends a CSV export: the CSV writer's
// buffer, its first error, then the output's buffer.
func csvFlush(cw *csv.Writer, w *bufio.Writer) func() error {
	return func() error {
		cw.Flush()
		if err := cw.Error(); err != nil {
			return err
		}
		return w.Flush()
	}
}

// numericColumns are written by us from numbers, times and booleans, never
// from what a server sent: they are left alone, so a negative duration
// stays a number a spreadsheet can sum.
var numericColumns = map[string]bool{"status": true, "attempts": true, "length": true, "truncated": true,
	"fetched_at": true, "duration_ms": true, "depth": true, "outlinks": true}

// defuseFormula makes a text cell inert in a spreadsheet (CSV injection,
// as OWASP describes it): a title, ETag or error a server controls that
// starts with =, +, -, @, a tab or a carriage return would be read as a
// formula, so it gets a leading single quote, shown as text and not run. A
// cell already starting with a quote gets one too, so a reader may strip
// exactly one leading quote from every cell that has one and get the value
// back.
func defuseFormula(cell string) string {
	if cell == "" {
		return cell
	}
	switch cell[0] {
	case '=', '+', '-', '@', '\t', '\r', '\'':
		return "'" + cell
	}
	return cell
}

// csvField is column c of r, as the JSON export writes it.
func csvField(r *store.Result, c string) string {
	switch c {
	case "url":
		return r.URL
	case "kind":
		return r.Kind.String()
	case "status":
		return strconv.Itoa(r.Status)
	case "error_class":
		return r.ErrorClass
	case "error":
		return r.Error
	case "attempts":
		return strconv.Itoa(r.Attempts)
	case "referrer":
		return r.Referrer
	case "final_url":
		return r.FinalURL
	case "location":
		return r.Location
	case "content_type":
		return r.ContentType
	case "length":
		return strconv.FormatInt(r.Length, 10)
	case "truncated":
		return strconv.FormatBool(r.Truncated)
	case "fetched_at":
		if r.FetchedAt.IsZero() {
			return ""
		}
		return r.FetchedAt.UTC().Format(time.RFC3339Nano)
	case "duration_ms":
		return strconv.FormatInt(r.DurationMS, 10)
	case "depth":
		return strconv.Itoa(r.Depth)
	case "title":
		return r.Title
	case "outlinks":
		return strconv.Itoa(r.Outlinks)
	case "sha256":
		return r.SHA256
	case "etag":
		return r.ETag
	case "last_modified":
		return r.LastModified
	case "lastmod":
		return r.Lastmod
	case "host":
		return r.Host
	}
	panic("export: unknown csv column " + c)
}
