package bench

import (
	"math"
	"os"
	"strings"
	"testing"
)

func TestParseBaselineValue(t *testing.T) {
	tests := []struct {
		cell string
		want float64
		ok   bool
	}{
		{"36,802 (passes 30,375-37,651) [15,612-23,802]", 36802, true},
		{"29.1% [37.1%, 45.4%]", 0.291, true},
		{"1.45x (1.23 s / 0.85 s) [1.3-2.1x]", 1.45, true},
		{"0.0 MB against 33.5 MB", 0, true},
		{"142.0 MB (anon 88.7)", 142e6, true},
		{"1.91 KB", 1910, true},
		{"12,000 / 12,000; 12,000 / 12,000", 12000, true},
		{"0.31 s / 6.48 s / 11.48 s", 0.31, true},
		{"+21.5% (anon -5.7%); met in 6 of 8 runs", 0.215, true},
		{"-4.9%", -0.049, true},
		{"~5 s", 5, true},
		{"134 ms", 0.134, true},
		{"41.3 MiB", 41.3 * (1 << 20), true},
		{"`host-down` 492, transient 8", 0, false},
		{"clean, 100,000 / 100,000; clean", 0, false},
		{"met", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseBaselineValue(tt.cell)
		if ok != tt.ok || (ok && math.Abs(got-tt.want) > 1e-9*math.Max(1, math.Abs(tt.want))) {
			t.Errorf("parseBaselineValue(%q) = %v, %v; want %v, %v", tt.cell, got, ok, tt.want, tt.ok)
		}
	}
}

const sampleBaseline = "# Benchmarks\n\n" +
	"Some text | with a bar.\n\n" +
	"## Crawl speed\n\n" +
	"| figure | value | target |\n" +
	"|---|---|---|\n" +
	"| ceiling: pages/s | 36,802 (passes 30,375-37,651) | - |\n" +
	"| crawl: ratio to ceiling | 29.1% [37.1%] | >= 50%: missed |\n" +
	"| `crawl --seeds` of 1,000,000 URLs | 142.0 MB (anon 88.7) | <= 150 MB: met |\n" +
	"| dead URLs recorded | `host-down` 492 | - |\n\n" +
	"## Refreshes\n\n" +
	"| figure | value | target |\n" +
	"|---|---|---|\n" +
	"| nothing changed: time, first crawl / this | 1.45x (1.23 s / 0.85 s) | >= 3x: missed |\n" +
	"| ceiling: pages/s | 1 | a later row of the same name is not the figure |\n"

func TestParseBaseline(t *testing.T) {
	rows, err := ParseBaseline(strings.NewReader(sampleBaseline))
	if err != nil {
		t.Fatal(err)
	}
	want := []BaselineRow{
		{Line: 9, Heading: "Crawl speed", Name: "ceiling: pages/s", Value: 36802},
		{Line: 10, Heading: "Crawl speed", Name: "crawl: ratio to ceiling", Value: 0.291},
		{Line: 11, Heading: "Crawl speed", Name: "crawl --seeds of 1,000,000 URLs", Value: 142e6},
		{Line: 18, Heading: "Refreshes", Name: "nothing changed: time, first crawl / this", Value: 1.45},
		{Line: 19, Heading: "Refreshes", Name: "ceiling: pages/s", Value: 1},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		g := rows[i]
		if g.Line != w.Line || g.Heading != w.Heading || g.Name != w.Name || math.Abs(g.Value-w.Value) > 1e-9*w.Value {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
}

func TestParseBaselineWithoutFigures(t *testing.T) {
	for _, in := range []string{"", "# Benchmarks\n\nno tables here\n", "| figure | value |\n|---|---|\n| a | met |\n"} {
		if _, err := ParseBaseline(strings.NewReader(in)); err == nil {
			t.Errorf("ParseBaseline(%q) = nil error, want one naming the missing table", in)
		}
	}
}

// TestParseBaselineOfTheRepository keeps the parser in step with the
// BENCHMARKS.md the project keeps: its figures are found by the bench's
// names.
func TestParseBaselineOfTheRepository(t *testing.T) {
	f, err := os.Open("../BENCHMARKS.md")
	if err != nil {
		t.Skipf("no BENCHMARKS.md: %v", err)
	}
	defer f.Close()
	rows, err := ParseBaseline(f)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, r := range rows {
		names[r.Name] = true
	}
	for _, name := range []string{"ceiling: pages/s", "crawl: distinct pages/s", "crawl: ratio to ceiling"} {
		if !names[name] {
			t.Errorf("BENCHMARKS.md has no figure %q (rows: %d)", name, len(rows))
		}
	}
}

func TestCompare(t *testing.T) {
	rows := []BaselineRow{
		{Line: 1, Name: "crawl: distinct pages/s", Value: 10000},
		{Line: 2, Name: "ceiling: pages/s", Value: 30000},
		{Line: 3, Name: "crawl: wall", Value: 1.0},
		{Line: 4, Name: "nothing changed: time, first crawl / this", Value: 1.45},
		{Line: 5, Name: "frontier: database file", Value: 100e6},
		{Line: 6, Name: "wall", Value: 2.0},
		{Line: 7, Name: "crawl: failed URLs", Value: 3},
		{Line: 8, Name: "crawl: ratio to ceiling", Value: 0},
	}
	fig := func(section, name string, unit Unit, v float64) Figure {
		return Figure{Section: section, Name: name, Unit: unit, Value: v}
	}
	figures := []Figure{
		fig("crawl", "distinct pages/s", PagesPerSec, 8500),                                         // -15%: a drop
		fig("ceiling", "pages/s", PagesPerSec, 28000),                                               // -6.7%: no drop
		fig("crawl", "wall", Seconds, 1.2),                                                          // 20% longer: a drop
		fig("recrawl", "nothing changed: time, first crawl / this", Times, 5.1).want(AtLeast, 3),    // by its bare name, better
		fig("frontier", "database file", Bytes, 105e6),                                              // 5% larger: no drop
		fig("recrawl", "wall", Seconds, 9),                                                          // "wall" is in two sections: unmatched
		fig("crawl", "failed URLs", Count, 30),                                                      // a count has no better side
		fig("crawl", "ratio to ceiling", Share, 0.2).want(AtLeast, 0.5),                             // a zero baseline: skipped
		fig("tail", "tail: time over the pace's", Times, 1.5).want(AtMost, 2),                       // not in the baseline
		fig("crawl", "pages fetched twice", Count, 4).want(Equal, 0),                                // a check: skipped
		fig("memory", "RSS growth", Change, 0.3).want(Within, 0.2),                                  // within: no side
		fig("crawl", "robots.txt", Text, 0),                                                         // text: skipped
		fig("ceiling", "errors", Count, 0).check(Equal, 0),                                          // a check: skipped
		fig("crawl", "with --warc: distinct pages/s", PagesPerSec, 5000).want(AtLeast, math.Inf(1)), // not in the baseline
	}
	got := Compare("B.md", figures, rows)
	type key struct{ section, figure string }
	wantChange := map[key]float64{
		{"crawl", "distinct pages/s"}: -0.15,
		{"ceiling", "pages/s"}:        -2000.0 / 30000,
		{"crawl", "wall"}:             -0.2,
		{"recrawl", "nothing changed: time, first crawl / this"}: 5.1/1.45 - 1,
		{"frontier", "database file"}:                            -0.05,
	}
	if len(got.Compared) != len(wantChange) {
		t.Fatalf("compared %+v, want %d figures", got.Compared, len(wantChange))
	}
	for _, c := range got.Compared {
		w, ok := wantChange[key{c.Section, c.Figure}]
		if !ok || math.Abs(c.Change-w) > 1e-9 {
			t.Errorf("%s: %s: change %v, want %v (listed: %v)", c.Section, c.Figure, c.Change, w, ok)
		}
	}
	if got.Unmatched != 3 {
		t.Errorf("unmatched %d, want 3 (recrawl wall, the tail's figure, --warc pages/s)", got.Unmatched)
	}
	var drops []string
	for _, d := range got.Drops() {
		drops = append(drops, d.Section+": "+d.Figure)
	}
	if strings.Join(drops, "; ") != "crawl: distinct pages/s; crawl: wall" {
		t.Errorf("drops %q, want the crawl's rate and wall", drops)
	}
	var out strings.Builder
	writeBaseline(&out, got)
	for _, s := range []string{"against B.md: 5 figures compared", "2 worse by more than 10%",
		"DROP crawl: distinct pages/s: 8,500 pages/s, was 10,000 pages/s (-15.0%)", "DROP crawl: wall: 1.20 s, was 1.00 s (-20.0%)"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("report lacks %q:\n%s", s, out.String())
		}
	}
}
