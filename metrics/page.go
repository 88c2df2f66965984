package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"breakwater/control"
	"breakwater/store"
)

// PageData is what the status page and /status.json show.
type PageData struct {
	Now         time.Time          `json:"now"`
	Started     time.Time          `json:"started"`
	Status      *control.Status    `json:"status"`
	PagesPerSec float64            `json:"pages_per_sec"`
	Hosts       []PageHost         `json:"hosts_not_closed"`
	Cases       []store.Case       `json:"open_cases"`
	Transitions []store.Transition `json:"transitions"`
}

// PageHost is a host that is not closed, with what last moved it.
type PageHost struct {
	control.HostRow
	Cause string `json:"cause,omitempty"`
}

// maxTransitions bounds the timeline: the newest are kept.
const maxTransitions = 2000

// ReadPage gathers the page's data from api, transitions since started.
func ReadPage(api control.API, started, now time.Time) (*PageData, error) {
	st, err := api.Status()
	if err != nil {
		return nil, err
	}
	rows, err := api.Hosts("")
	if err != nil {
		return nil, err
	}
	trans, err := api.Transitions("", started)
	if err != nil {
		return nil, err
	}
	if len(trans) > maxTransitions {
		trans = trans[len(trans)-maxTransitions:]
	}
	cases, err := api.Cases()
	if err != nil {
		return nil, err
	}
	d := &PageData{Now: now, Started: started, Status: st, Transitions: trans}
	if el := now.Sub(started).Seconds(); el > 0 {
		d.PagesPerSec = float64(st.Fetched) / el
	}
	cause := map[string]string{}
	for _, t := range trans {
		if t.Detail != "" {
			cause[t.Host] = t.Detail
		}
	}
	for _, r := range rows {
		if r.State != "closed" || r.Hold != "" {
			d.Hosts = append(d.Hosts, PageHost{HostRow: r, Cause: cause[r.Host]})
		}
	}
	for _, c := range cases {
		if c.Resolved.IsZero() {
			d.Cases = append(d.Cases, c)
		}
	}
	return d, nil
}

// bar is one stretch of a host's state on the timeline chart.
type bar struct {
	X, Y, W float64
	State   string
	Title   string
}

type chart struct {
	Width, Height float64
	Rows          []chartRow
	Bars          []bar
}

type chartRow struct {
	Y    float64
	Host string
}

const (
	chartWidth  = 900.0
	chartLeft   = 180.0
	rowHeight   = 18.0
	chartMargin = 4.0
)

// timeline lays the transitions out as bars: one row a host, time across,
// each stretch coloured by the state the host was in.
func timeline(d *PageData) chart {
	var hosts []string
	byHost := map[string][]store.Transition{}
	for _, t := range d.Transitions {
		if _, ok := byHost[t.Host]; !ok {
			hosts = append(hosts, t.Host)
		}
		byHost[t.Host] = append(byHost[t.Host], t)
	}
	slices.Sort(hosts)
	span := d.Now.Sub(d.Started).Seconds()
	if span <= 0 {
		span = 1
	}
	x := func(t time.Time) float64 {
		return chartLeft + (chartWidth-chartLeft)*min(max(t.Sub(d.Started).Seconds()/span, 0), 1)
	}
	c := chart{Width: chartWidth, Height: float64(len(hosts))*rowHeight + chartMargin}
	for i, h := range hosts {
		y := float64(i) * rowHeight
		c.Rows = append(c.Rows, chartRow{Y: y + rowHeight - 5, Host: h})
		ts := byHost[h]
		for j, t := range ts {
			end := d.Now
			if j+1 < len(ts) {
				end = ts[j+1].At
			}
			x0, x1 := x(t.At), x(end)
			c.Bars = append(c.Bars, bar{X: x0, Y: y + 2, W: max(x1-x0, 1), State: t.To,
				Title: fmt.Sprintf("%s: %s from %s (%s)", h, t.To, t.At.Format(time.TimeOnly), t.Detail)})
		}
	}
	return c
}

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"dur":  func(d time.Duration) string { return d.Round(time.Second).String() },
	"when": func(t time.Time) string { return t.Format(time.TimeOnly) },
	"kinds": func(kinds map[string]int) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			parts = append(parts, fmt.Sprintf("%s: %d", k, kinds[k]))
		}
		return strings.Join(parts, ", ")
	},
}).Parse(`<!doctype html>
<html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<title>breakwater: {{.Data.Status.Fetched}} fetched</title>
<style>
body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border-bottom:1px solid #ddd;padding:3px 8px;text-align:left}
.open{fill:#d33}.half-open{fill:#e90}.closed{fill:#3a3}
</style></head><body>
<h1>breakwater</h1>
<p id="totals">{{with .Data.Status}}{{if .Running}}running, {{.InFlight}} in flight{{else}}not running{{end}};
fetched <b>{{.Fetched}}</b> ({{printf "%.1f" $.Data.PagesPerSec}}/s), failed {{.Failed}}, queued {{.Queued}},
deferred {{.Deferred}}, {{.Hosts}} hosts{{end}}; updated {{when .Data.Now}}</p>
{{with .Data.Status.LocalFault}}<p id="local-fault" style="background:#fdd;border:2px solid #d33;padding:.6em">
<b>Local fault suspected: all fetching is paused.</b> {{.FailingHosts}} of {{.ActiveHosts}} recently active hosts
started failing at once (since {{when .Since}}; {{kinds .ErrorKinds}}), so the fault is likely ours: DNS, egress,
certificates, the network. Probing {{range $i, $h := .Probing}}{{if $i}}, {{end}}{{$h}}{{end}}; {{.ProbeRounds}} rounds so far,
next at {{when .NextProbe}}. No host is given up on meanwhile.</p>{{end}}
<h2>Hosts not closed</h2>
{{if .Data.Hosts}}<table id="hosts"><tr><th>host</th><th>state</th><th>hold</th><th>since</th><th>rest left</th><th>cause</th><th>queued</th></tr>
{{range .Data.Hosts}}<tr class="host"><td>{{.Host}}</td><td>{{.State}}</td><td>{{.Hold}} {{.HoldReason}} {{.PauseReason}}</td>
<td>{{if not .OpenedAt.IsZero}}{{when .OpenedAt}}{{end}}</td><td>{{dur .RestRemaining}}</td><td>{{.Cause}}</td><td>{{.Queued}}</td></tr>
{{end}}</table>{{else}}<p id="hosts">every host is closed</p>{{end}}
<h2>Open cases</h2>
{{if .Data.Cases}}<table id="cases"><tr><th>host</th><th>at</th><th>status</th><th>the server said</th></tr>
{{range .Data.Cases}}<tr class="case"><td>{{.Host}}</td><td>{{when .At}}</td><td>{{.Status}}</td><td>{{.Excerpt}}</td></tr>
{{end}}</table>{{else}}<p id="cases">none</p>{{end}}
<h2>Breaker transitions</h2>
<svg id="timeline" width="{{.Chart.Width}}" height="{{.Chart.Height}}" role="img" aria-label="breaker states over the run">
{{range .Chart.Rows}}<text x="0" y="{{.Y}}" font-size="12">{{.Host}}</text>
{{end}}{{range .Chart.Bars}}<rect class="{{.State}}" x="{{printf "%.1f" .X}}" y="{{.Y}}" width="{{printf "%.1f" .W}}" height="14"><title>{{.Title}}</title></rect>
{{end}}</svg>
<p><a href="/status.json">status.json</a> · <a href="/metrics">metrics</a></p>
</body></html>
`))

// PageHandler serves the status page at / and its data at /status.json.
func PageHandler(api control.API, started time.Time, now func() time.Time) http.Handler {
	// page reads the data afresh for each request and lets write show it.
	page := func(write func(http.ResponseWriter, *PageData) error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			d, err := ReadPage(api, started, now())
			if err == nil {
				err = write(w, d)
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/status.json", page(func(w http.ResponseWriter, d *PageData) error {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(d)
	}))
	mux.Handle("/{$}", page(func(w http.ResponseWriter, d *PageData) error {
		var buf bytes.Buffer // rendered whole first: a failure is an error page, not half a page
		if err := pageTemplate.Execute(&buf, struct {
			Data  *PageData
			Chart chart
		}{d, timeline(d)}); err != nil {
			return err
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, err := w.Write(buf.Bytes())
		return err
	}))
	return mux
}
