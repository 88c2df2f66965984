package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// A baseline is the previous BENCHMARKS.md: its tables name figures by the
// bench's own names, "SECTION: FIGURE" or the bare figure name where that
// is unambiguous, with the value first in the second column ("36,802
// (passes ...)", "29.1% [37.1%]", "1.45x", "142.0 MB (anon 88.7)").

// BaselineRow is one table row of a baseline file.
type BaselineRow struct {
	Line    int     `json:"line"`
	Heading string  `json:"heading"` // the "## " heading above the table
	Name    string  `json:"name"`    // the first cell, without backticks
	Value   float64 `json:"value"`   // the second cell's first number, in base units
	Raw     string  `json:"raw"`     // the second cell as written
}

// baselineNumber is a value cell's first number and the unit that follows
// it: "36,802", "29.1%", "1.45x", "0.0 MB", "1.23 s", "1.91 KB".
var baselineNumber = regexp.MustCompile(`([-+]?[0-9][0-9,]*(?:\.[0-9]+)?|[-+]?\.[0-9]+)\s*(%|x|MB|KB|MiB|KiB|GB|ms|µs|s|B)?`)

// ParseBaseline reads the figures of a baseline's tables: every row whose
// second cell starts with a number. Other rows (headers, text-only values)
// are skipped; a file without any figure is an error, since comparing
// with it would silently compare nothing.
func ParseBaseline(r io.Reader) ([]BaselineRow, error) {
	var rows []BaselineRow
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	heading := ""
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if h, ok := strings.CutPrefix(line, "## "); ok {
			heading = strings.TrimSpace(h)
			continue
		}
		cells, ok := tableCells(line)
		if !ok || len(cells) < 2 {
			continue
		}
		v, ok := parseBaselineValue(cells[1])
		if !ok {
			continue
		}
		name := strings.TrimSpace(strings.ReplaceAll(cells[0], "`", ""))
		rows = append(rows, BaselineRow{Line: n, Heading: heading, Name: name, Value: v, Raw: cells[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read baseline: %w", err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("baseline has no table of figures (rows like | figure | value | target |)")
	}
	return rows, nil
}

// tableCells splits a Markdown table row into its trimmed cells.
func tableCells(line string) ([]string, bool) {
	if !strings.HasPrefix(line, "|") || !strings.HasSuffix(line, "|") || len(line) < 2 {
		return nil, false
	}
	parts := strings.Split(line[1:len(line)-1], "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts, true
}

// parseBaselineValue reads the number a value cell starts with, in the
// base unit the bench keeps it in: a percentage as a share, MB and KB as
// bytes, milliseconds as seconds.
func parseBaselineValue(cell string) (float64, bool) {
	cell = strings.TrimLeft(cell, "~≈<>= ")
	loc := baselineNumber.FindStringSubmatchIndex(cell)
	if loc == nil || loc[0] != 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(strings.ReplaceAll(cell[loc[2]:loc[3]], ",", ""), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	unit := ""
	if loc[4] >= 0 {
		unit = cell[loc[4]:loc[5]]
	}
	scale := map[string]float64{"%": 0.01, "MB": 1e6, "KB": 1e3, "GB": 1e9, "MiB": 1 << 20, "KiB": 1 << 10,
		"ms": 1e-3, "µs": 1e-6}
	if s, ok := scale[unit]; ok {
		v *= s
	}
	return v, true
}

// Comparison is one figure of this run against the baseline's.
type Comparison struct {
	Section  string  `json:"section"`
	Figure   string  `json:"figure"`
	Unit     Unit    `json:"unit"`
	Baseline float64 `json:"baseline"`
	Value    float64 `json:"value"`
	// Change is how much better (+) or worse (-) this run is, relative to
	// the baseline, in the figure's own direction: a rate that fell and a
	// time that rose are both negative.
	Change float64 `json:"change"`
	Line   int     `json:"line"` // the baseline row's line
}

// DropThreshold is the worsening, relative to the baseline, that a report
// names: more than 10%.
const DropThreshold = 0.10

// Drop reports whether the figure got worse by more than DropThreshold.
func (c Comparison) Drop() bool { return c.Change < -DropThreshold }

// BaselineComparison is this run's figures against a baseline file.
type BaselineComparison struct {
	File     string       `json:"file"`
	Compared []Comparison `json:"compared"`
	// Unmatched counts this run's figures with a direction that the
	// baseline does not name.
	Unmatched int `json:"unmatched"`
}

// Drops lists the compared figures that got worse by more than
// DropThreshold, in the report's order.
func (b *BaselineComparison) Drops() []Comparison {
	var out []Comparison
	for _, c := range b.Compared {
		if c.Drop() {
			out = append(out, c)
		}
	}
	return out
}

// Compare holds figures against the baseline's rows. A figure is matched
// by "SECTION: NAME", or by its bare name when no other figure of the run
// has it; it is compared only when better has a direction for it (a rate,
// a time, a size, or a target saying which way is better) and the
// baseline's value is not zero.
func Compare(file string, figures []Figure, rows []BaselineRow) *BaselineComparison {
	byName := make(map[string]BaselineRow, len(rows))
	for _, r := range rows {
		if _, dup := byName[r.Name]; !dup {
			byName[r.Name] = r // the first row of a name is the current one
		}
	}
	bare := make(map[string]int)
	for _, f := range figures {
		bare[f.Name]++
	}
	out := &BaselineComparison{File: file}
	for _, f := range figures {
		dir := f.direction()
		if dir == 0 || f.Unit == Text {
			continue
		}
		row, ok := byName[f.Section+": "+f.Name]
		if !ok && bare[f.Name] == 1 {
			row, ok = byName[f.Name]
		}
		if !ok {
			out.Unmatched++
			continue
		}
		if row.Value == 0 || math.IsInf(f.Value, 0) || math.IsNaN(f.Value) {
			continue
		}
		change := float64(dir) * (f.Value - row.Value) / math.Abs(row.Value)
		out.Compared = append(out.Compared, Comparison{Section: f.Section, Figure: f.Name, Unit: f.Unit,
			Baseline: row.Value, Value: f.Value, Change: change, Line: row.Line})
	}
	return out
}

// direction is +1 when more is better, -1 when less is, 0 when the figure
// has no better side (a count, a check, a ratio without a target).
func (f Figure) direction() int {
	if t := f.Target; t != nil {
		switch t.Op {
		case AtLeast:
			return +1
		case AtMost, Below:
			return -1
		}
		if t.Check || t.Op == Equal || t.Op == All {
			return 0
		}
	}
	switch f.Unit {
	case PagesPerSec, URLsPerSec:
		return +1
	case Seconds, Bytes, PageBytes, EdgeBytes:
		return -1
	}
	return 0
}

// writeBaseline prints the comparison under the table: how many figures
// were compared, then each drop with its section, figure, both values and
// the change.
func writeBaseline(w io.Writer, b *BaselineComparison) {
	drops := b.Drops()
	fmt.Fprintf(w, "\nagainst %s: %d figures compared (%d with no figure of that name there), %d worse by more than %.0f%%\n",
		b.File, len(b.Compared), b.Unmatched, len(drops), DropThreshold*100)
	for _, c := range drops {
		fmt.Fprintf(w, "  DROP %s: %s: %s, was %s (%+.1f%%)\n", c.Section, c.Figure,
			format(c.Unit, c.Value), format(c.Unit, c.Baseline), c.Change*100)
	}
}
