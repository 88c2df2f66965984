package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Section is one section's figures and how they were taken.
type Section struct {
	Name string `json:"name"`
	// Method says in a line or two how the section measures; the
	// settings it ran with are data beside it.
	Method   string    `json:"method"`
	Settings []Setting `json:"settings,omitempty"`
	Figures  []Figure  `json:"figures"`
}

// Setting is one setting a section ran with.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// set is a Setting of any printable value, a duration as "10m", not "10m0s".
func set(name string, value any) Setting {
	if d, ok := value.(time.Duration); ok {
		s := d.String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return Setting{Name: name, Value: s}
	}
	return Setting{Name: name, Value: fmt.Sprint(value)}
}

// Sections returns the figures of every section that ran, in run order,
// each figure named after its section and held against its target.
func (r *Report) Sections() []Section {
	var out []Section
	for _, build := range []func() *Section{r.ceilingSection, r.crawlSection, r.peersSection, r.recrawlSection, r.tailSection, r.deadSection,
		r.frontierSection, r.memorySection, r.hostsSection, r.fleetSection, r.soakSection} {
		s := build()
		if s == nil {
			continue
		}
		for i := range s.Figures {
			f := &s.Figures[i]
			f.Section, f.Verdict = s.Name, f.verdict(r.Quick)
			if math.IsInf(f.Value, 0) || math.IsNaN(f.Value) { // JSON has no such numbers
				f.Text, f.Value = fmt.Sprint(f.Value), 0
			}
		}
		out = append(out, *s)
	}
	return out
}

// Figures lists every section's figures, in the table's order.
func (r *Report) Figures() []Figure {
	var out []Figure
	for _, s := range r.Sections() {
		out = append(out, s.Figures...)
	}
	return out
}

// WriteJSON prints the report as one JSON object: the measurements as
// they were taken, and the sections' figures as the table shows them.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*Report
		Sections []Section `json:"sections"`
	}{r, r.Sections()})
}

// WriteTable prints the machine, the table of figures, and for each
// section how it was measured, its settings and what its figures mean.
func (r *Report) WriteTable(w io.Writer) error {
	m := r.Machine
	mode := "full configuration"
	if r.Quick {
		mode = "quick configuration"
	}
	fmt.Fprintf(w, "breakwater bench, %s, %s, took %s\n", m.Date.Format("2006-01-02 15:04 MST"), mode, r.Took.Round(time.Second))
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs, GOMAXPROCS %d, %s", m.OS, m.Arch, m.CPUs, m.GOMAXPROCS, m.GoVersion)
	if m.CPUModel != "" {
		fmt.Fprintf(w, ", %s", m.CPUModel)
	}
	fmt.Fprint(w, "\n")
	if r.Quick {
		fmt.Fprint(w, "quick configuration: a fraction of the full sizes, so a verdict in brackets only hints; run without --quick to check the targets\n")
	}
	fmt.Fprint(w, "\n")
	sections := r.Sections()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SECTION\tFIGURE\tVALUE\tTARGET\tVERDICT")
	for _, s := range sections {
		for _, f := range s.Figures {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, f.Name, f.value(), f.target(), f.Verdict)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.Baseline != nil {
		writeBaseline(w, r.Baseline)
	}
	for _, s := range sections {
		writeMethod(w, s)
	}
	return nil
}

// writeMethod prints a section's method, settings and the meaning of each
// of its figures, a meaning shared by several (the same figure of another
// run) once, under the name of the first without its run.
func writeMethod(w io.Writer, s Section) {
	fmt.Fprintf(w, "\n%s", wrap(s.Name+": "+s.Method, 100, ""))
	if len(s.Settings) > 0 {
		parts := make([]string, len(s.Settings))
		for i, st := range s.Settings {
			parts[i] = st.Name + " " + st.Value
		}
		fmt.Fprint(w, wrap("settings: "+strings.Join(parts, ", "), 100, "  "))
	}
	seen := map[string]bool{}
	for _, f := range s.Figures {
		if f.Meaning == "" || seen[f.Meaning] {
			continue
		}
		seen[f.Meaning] = true
		name := f.Name
		if i := strings.LastIndex(name, ": "); i >= 0 {
			name = name[i+2:]
		}
		fmt.Fprint(w, wrap(name+": "+f.Meaning, 100, "  "))
	}
}

// value prints the figure's value in its unit: "1,899 pages/s",
// ">= 20.0 s", "1195 / 1200", "19,998 pages/s (median of 3: 11,100-25,818)".
func (f Figure) value() string {
	if f.Unit == Text || f.Value == 0 && (f.Text == "+Inf" || f.Text == "-Inf" || f.Text == "NaN") {
		return f.Text // no number JSON can carry: Sections put it in Text
	}
	s := format(f.Unit, f.Value)
	if f.Of != nil {
		s += " / " + format(f.Unit, *f.Of)
	}
	switch f.Bound {
	case Lower:
		s = ">= " + s
	case Estimate:
		s = "~" + s + " (estimate)"
	}
	if len(f.Runs) > 1 {
		lo, hi := f.Runs[0], f.Runs[0]
		for _, v := range f.Runs {
			lo, hi = min(lo, v), max(hi, v)
		}
		bound := func(v float64) string { return format(f.Unit, v) }
		if f.Unit == PagesPerSec || f.Unit == URLsPerSec {
			bound = thousands // the unit is read once, after the median
		}
		s += fmt.Sprintf(" (median of %d: %s-%s)", len(f.Runs), bound(lo), bound(hi))
	}
	if f.Text != "" {
		s += " (" + f.Text + ")"
	}
	return s
}

// target prints the target in the figure's unit: ">= 50.0%", "all".
func (f Figure) target() string {
	t := f.Target
	switch {
	case t == nil:
		return ""
	case t.Op == All:
		return "all"
	case t.Op == Within:
		return "within " + format(f.Unit, t.Value)
	}
	return string(t.Op) + " " + format(f.Unit, t.Value)
}

// format prints v in unit u.
func format(u Unit, v float64) string {
	switch u {
	case PagesPerSec, URLsPerSec:
		return thousands(v) + " " + string(u)
	case Seconds:
		return fmt.Sprintf("%.2f s", v)
	case Bytes:
		return fmt.Sprintf("%.1f MB", v/1e6)
	case PageBytes:
		return fmt.Sprintf("%.2f KB", v/1e3)
	case EdgeBytes:
		return fmt.Sprintf("%.1f B", v)
	case HostBytes:
		return fmt.Sprintf("%.0f B", v)
	case Share:
		return fmt.Sprintf("%.1f%%", v*100)
	case Times:
		return fmt.Sprintf("%.2fx", v)
	case Change:
		return fmt.Sprintf("%+.1f%%", v*100)
	case PerPage:
		return fmt.Sprintf("%.2f", v)
	case PerSecond:
		return fmt.Sprintf("%.1f /s", v)
	}
	return thousands(v)
}

// thousands rounds v and groups its digits by three: "212,345".
func thousands(v float64) string {
	s := strconv.FormatInt(int64(v+0.5), 10)
	if v < 0 {
		s = strconv.FormatInt(int64(v-0.5), 10)
	}
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// wrap breaks a paragraph into lines of at most width bytes, the second
// and later indented by indent plus two spaces, the first by indent.
func wrap(s string, width int, indent string) string {
	var b strings.Builder
	b.WriteString(indent)
	line := len(indent)
	for i, word := range strings.Fields(s) {
		if i > 0 && line+1+len(word) > width {
			b.WriteString("\n" + indent + "  ")
			line = len(indent) + 2
		} else if i > 0 {
			b.WriteByte(' ')
			line++
		}
		b.WriteString(word)
		line += len(word)
	}
	b.WriteByte('\n')
	return b.String()
}
