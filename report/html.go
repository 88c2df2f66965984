package report

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"
)

//go:embed report.html.tmpl
var templates embed.FS

var page = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"more":  func(total, listed int) int { return total - listed },
	"join":  func(s []string) string { return strings.Join(s, ", ") },
	"when":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 MST") },
	"dash":  func(s string) string { return cmpOr(s, "-") },
	"chart": barChart,
}).ParseFS(templates, "report.html.tmpl"))

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// WriteHTML writes the report as one HTML file: no script, no external
// resource, the charts inline SVG.
func WriteHTML(w io.Writer, rep *Report) error {
	view := struct {
		*Report
		Timeline timelineChart
	}{rep, timelineSVG(rep.Charts.Timeline)}
	if err := page.Execute(w, view); err != nil {
		return fmt.Errorf("render html: %w", err)
	}
	return nil
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 640.0
	chartHeight = 200.0
	chartLeft   = 48.0 // room for the count axis
	chartBottom = 36.0 // room for the labels
	chartTop    = 16.0
)

// bars is a bar chart laid out for the template.
type bars struct {
	Title         string
	Width, Height float64
	Base          float64 // y of the x axis
	Max           int
	Bars          []bar
}

type bar struct {
	X, Y, W, H float64
	LabelX     float64
	Label      string
	Count      int
}

func barChart(title string, buckets []Bucket) bars {
	c := bars{Title: title, Width: chartWidth, Height: chartHeight, Base: chartHeight - chartBottom}
	for _, b := range buckets {
		c.Max = max(c.Max, b.Count)
	}
	if len(buckets) == 0 {
		return c
	}
	slot := (chartWidth - chartLeft) / float64(len(buckets))
	plot := c.Base - chartTop
	for i, b := range buckets {
		h := 0.0
		if c.Max > 0 {
			h = plot * float64(b.Count) / float64(c.Max)
		}
		x := chartLeft + float64(i)*slot
		c.Bars = append(c.Bars, bar{X: x + slot*0.1, Y: c.Base - h, W: slot * 0.8, H: h,
			LabelX: x + slot/2, Label: b.Label, Count: b.Count})
	}
	return c
}

// timelineChart is the breaker timeline laid out for the template.
type timelineChart struct {
	Width, Height float64
	Left, Plot    float64 // where the lanes start, and their width
	Start, End    string
	Rows          []timelineRow
}

type timelineRow struct {
	Y, TextY float64
	Host     string
	Opens    int
	Spans    []timelineSpan
}

type timelineSpan struct {
	X, W     float64
	State    string
	From, To string
}

const (
	timelineLeft      = 200.0
	timelineRowHeight = 22.0
)

func timelineSVG(tl Timeline) timelineChart {
	c := timelineChart{Width: chartWidth + timelineLeft - chartLeft, Left: timelineLeft,
		Height: timelineRowHeight*float64(max(len(tl.Hosts), 1)) + 28}
	if tl.Start.IsZero() {
		return c
	}
	c.Start, c.End = tl.Start.UTC().Format(time.RFC3339), tl.End.UTC().Format(time.RFC3339)
	span := tl.End.Sub(tl.Start)
	plot := c.Width - timelineLeft - 8
	c.Plot = plot
	x := func(t time.Time) float64 {
		if span <= 0 {
			return timelineLeft
		}
		return timelineLeft + plot*float64(t.Sub(tl.Start))/float64(span)
	}
	for i, h := range tl.Hosts {
		y := float64(i) * timelineRowHeight
		row := timelineRow{Y: y + 3, TextY: y + 15, Host: h.Host, Opens: h.Opens}
		for _, s := range h.Spans {
			// A span too short to see at this scale still gets a sliver.
			row.Spans = append(row.Spans, timelineSpan{X: x(s.From), W: max(x(s.To)-x(s.From), 1.5), State: s.State,
				From: s.From.UTC().Format(time.RFC3339), To: s.To.UTC().Format(time.RFC3339)})
		}
		c.Rows = append(c.Rows, row)
	}
	return c
}
