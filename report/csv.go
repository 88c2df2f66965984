package report

import (
	"encoding/csv"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// csvTable is one CSV file of the report: its name, header and rows.
type csvTable struct {
	name   string
	header []string
	rows   func(add func(cells ...any))
}

// CSVFiles lists the files WriteCSV writes, in order.
func CSVFiles() []string {
	var out []string
	for _, t := range csvTables(&Report{}) {
		out = append(out, t.name)
	}
	return out
}

// WriteCSV writes the report as one CSV file per table (CSVFiles) in dir,
// made if missing. A text cell starting with = + - @ ' a tab or a
// carriage return gets a leading ', as export's CSV does, so that a
// spreadsheet shows it rather than runs it.
func WriteCSV(dir string, rep *Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("csv directory: %w", err)
	}
	for _, t := range csvTables(rep) {
		if err := writeTable(filepath.Join(dir, t.name), t); err != nil {
			return err
		}
	}
	return nil
}

func writeTable(path string, t csvTable) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	w := csv.NewWriter(f)
	if err := w.Write(t.header); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	var werr error
	t.rows(func(cells ...any) {
		if werr == nil {
			werr = w.Write(csvRow(cells))
		}
	})
	w.Flush()
	if err := errors.Join(werr, w.Error()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// csvRow formats cells: numbers and times as they are, strings defused.
func csvRow(cells []any) []string {
	out := make([]string, len(cells))
	for i, c := range cells {
		switch v := c.(type) {
		case string:
			out[i] = defuseFormula(v)
		case []string:
			out[i] = defuseFormula(strings.Join(v, " "))
		case int:
			out[i] = strconv.Itoa(v)
		case int64:
			out[i] = strconv.FormatInt(v, 10)
		case bool:
			out[i] = strconv.FormatBool(v)
		case time.Time:
			out[i] = v.UTC().Format(time.RFC3339Nano)
		default:
			panic(fmt.Sprintf("report: csv cell of type %T", c))
		}
	}
	return out
}

// defuseFormula makes a text cell inert in a spreadsheet (see WriteCSV).
func defuseFormula(cell string) string {
	if cell != "" && strings.ContainsRune("=+-@\t\r'", rune(cell[0])) {
		return "'" + cell
	}
	return cell
}

func csvTables(rep *Report) []csvTable {
	s := rep.Summary
	return []csvTable{
		{"summary.csv", []string{"key", "value"}, func(add func(...any)) {
			add("source", rep.Source)
			add("generated_at", rep.GeneratedAt)
			add("running", rep.Running)
			add("link_graph", rep.LinkGraph)
			for _, kv := range []struct {
				k string
				v int
			}{{"results", s.Results}, {"pages", s.Pages}, {"requisites", s.Requisites}, {"failed", s.Failed},
				{"skipped", s.Skipped}, {"hosts", s.Hosts}, {"broken_links", rep.BrokenLinks.Total},
				{"broken_requisites", rep.BrokenRequisites.Total}, {"redirect_chains", rep.RedirectChains.Total},
				{"redirect_loops", rep.RedirectLoops.Total}, {"noindex", rep.Noindex.Total},
				{"canonical_conflicts", rep.Canonicals.Total}} {
				add(kv.k, kv.v)
			}
			add("queued", s.Queued)
		}},
		{"failed_by_class.csv", []string{"class", "results"}, func(add func(...any)) {
			for _, c := range slices.Sorted(maps.Keys(s.ByClass)) {
				add(c, s.ByClass[c])
			}
		}},
		{"troubled_hosts.csv", []string{"host", "state", "opened", "given_up", "hold", "hold_reason"}, func(add func(...any)) {
			for _, h := range s.Troubled {
				add(h.Host, h.State, h.Opened, h.GivenUp, h.Hold, h.HoldReason)
			}
		}},
		targetTable("broken_links.csv", rep.BrokenLinks),
		targetTable("broken_requisites.csv", rep.BrokenRequisites),
		chainTable("redirect_chains.csv", rep.RedirectChains),
		chainTable("redirect_loops.csv", rep.RedirectLoops),
		{"noindex.csv", []string{"url", "status", "robots", "title", "referrer"}, func(add func(...any)) {
			for _, p := range rep.Noindex.Items {
				add(p.URL, p.Status, p.Robots, p.Title, p.Referrer)
			}
		}},
		{"canonical_conflicts.csv", []string{"url", "canonical", "problem", "target_status"}, func(add func(...any)) {
			for _, c := range rep.Canonicals.Items {
				add(c.URL, c.Canonical, c.Problem, c.TargetStatus)
			}
		}},
		groupTable("duplicate_titles.csv", "title", rep.DuplicateTitles),
		groupTable("duplicate_content.csv", "sha256", rep.DuplicateContent),
		{"slowest.csv", []string{"url", "status", "duration_ms", "title"}, func(add func(...any)) {
			for _, p := range rep.Slowest {
				add(p.URL, p.Status, p.DurationMS, p.Title)
			}
		}},
		pageTable("robots_blocked.csv", rep.RobotsBlocked),
		pageTable("trapped.csv", rep.Trapped),
		bucketTable("status_classes.csv", rep.Charts.StatusClasses),
		bucketTable("response_times.csv", rep.Charts.ResponseTimes),
		bucketTable("depths.csv", rep.Charts.Depths),
		{"breaker_timeline.csv", []string{"host", "state", "from", "to"}, func(add func(...any)) {
			for _, h := range rep.Charts.Timeline.Hosts {
				for _, sp := range h.Spans {
					add(h.Host, sp.State, sp.From, sp.To)
				}
			}
		}},
	}
}

// targetTable has a row per referrer of each broken URL, or one row with
// no referrer for a URL nothing known links to.
func targetTable(name string, ts Targets) csvTable {
	return csvTable{name, []string{"url", "status", "error_class", "error", "referrers_total", "from", "text", "element", "attr", "rel"},
		func(add func(...any)) {
			for _, t := range ts.Items {
				if len(t.Referrers) == 0 {
					add(t.URL, t.Status, t.ErrorClass, t.Error, t.ReferrersTotal, "", "", "", "", "")
				}
				for _, r := range t.Referrers {
					add(t.URL, t.Status, t.ErrorClass, t.Error, t.ReferrersTotal, r.From, r.Text, r.Element, r.Attr, r.Rel)
				}
			}
		}}
}

// chainTable has a row per hop of each chain, numbered from 1, and a last
// row for where it ends.
func chainTable(name string, cs Chains) csvTable {
	return csvTable{name, []string{"chain", "step", "url", "status", "error_class"}, func(add func(...any)) {
		for i, c := range cs.Items {
			for j, h := range c.Hops {
				add(i+1, j+1, h.URL, h.Status, "")
			}
			add(i+1, len(c.Hops)+1, c.Final, c.FinalStatus, c.FinalClass)
		}
	}}
}

func groupTable(name, key string, gs Groups) csvTable {
	return csvTable{name, []string{key, "count", "url"}, func(add func(...any)) {
		for _, g := range gs.Items {
			for _, u := range g.URLs {
				add(g.Key, g.Count, u)
			}
		}
	}}
}

func pageTable(name string, ps Pages) csvTable {
	return csvTable{name, []string{"url", "referrer", "depth", "error"}, func(add func(...any)) {
		for _, p := range ps.Items {
			add(p.URL, p.Referrer, p.Depth, p.Error)
		}
	}}
}

func bucketTable(name string, bs []Bucket) csvTable {
	return csvTable{name, []string{"label", "count"}, func(add func(...any)) {
		for _, b := range bs {
			add(b.Label, b.Count)
		}
	}}
}
