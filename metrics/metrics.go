// Package metrics is the crawl's Prometheus metrics: counters the request
// path bumps as it goes (cheap atomics, no lock on the hot path), and
// gauges read from a snapshot of the crawl at scrape time, so that a crawl
// nobody scrapes pays nothing for them. Names are breakwater_..., counters
// end in _total, durations are seconds and sizes bytes.
package metrics

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// Snapshot is what the gauges show, read when scraped.
type Snapshot struct {
	Queued, Deferred, Leased, Done, Failed int64
	// Hosts counts hosts by breaker state ("closed", "half-open", "open");
	// Paused and Cases count the holds apart, a host may have both.
	Hosts         map[string]int
	Paused, Cases int
	// NotClosed is each host whose circuit is not closed, with the design
	// reference's level: 1 half-open, 2 open. Closed hosts have no series,
	// so a crawl of many hosts keeps few.
	NotClosed map[string]int
	// LocalFault is set while the local-fault guard pauses the crawl.
	LocalFault bool
}

// Crawl holds one crawl's metrics.
type Crawl struct {
	reg         *prometheus.Registry
	responses   *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	transitions *prometheus.CounterVec
	deferrals   *prometheus.CounterVec
	localFaults prometheus.Counter
	bytes       prometheus.Counter
	duration    prometheus.Histogram
}

// New returns the metrics of a crawl whose gauges read snapshot.
func New(snapshot func() (Snapshot, error)) *Crawl {
	c := &Crawl{
		reg: prometheus.NewRegistry(),
		responses: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "breakwater_responses_total",
			Help: "Answers by outcome class (ok, transient, permanent, throttled, refused) and status class (2xx..5xx, none)."},
			[]string{"class", "status_class"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "breakwater_requests_total",
			Help: "Requests sent: first attempts and retries."}, []string{"kind"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "breakwater_breaker_transitions_total",
			Help: "Circuit breaker transitions by from and to state."}, []string{"from", "to"}),
		deferrals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "breakwater_deferrals_total",
			Help: "URLs put back in the time-ordered bucket, by reason (retry-backoff, retry-budget, archive-failed: the page's WARC records could not be made, so it is fetched again)."}, []string{"reason"}),
		localFaults: prometheus.NewCounter(prometheus.CounterOpts{Name: "breakwater_local_fault_incidents_total",
			Help: "Times the local-fault guard paused the crawl: many hosts failed at once, so the fault was likely ours."}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "breakwater_received_body_bytes_total",
			Help: "Response body bytes received (as kept, after decompression)."}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "breakwater_fetch_duration_seconds",
			Help: "Time from a request's start to its body read.", Buckets: prometheus.ExponentialBuckets(0.001, 4, 9)}),
	}
	c.reg.MustRegister(c.responses, c.attempts, c.transitions, c.deferrals, c.localFaults, c.bytes, c.duration,
		&gauges{snapshot: snapshot})
	return c
}

// Fetched counts one answered or failed request.
func (c *Crawl) Fetched(class string, status int, retry bool, bodyBytes int, seconds float64) {
	if c == nil {
		return
	}
	c.responses.WithLabelValues(class, statusClass(status)).Inc()
	kind := "first"
	if retry {
		kind = "retry"
	}
	c.attempts.WithLabelValues(kind).Inc()
	c.bytes.Add(float64(bodyBytes))
	c.duration.Observe(seconds)
}

// Deferred counts one URL deferred for reason.
func (c *Crawl) Deferred(reason string) {
	if c == nil {
		return
	}
	c.deferrals.WithLabelValues(reason).Inc()
}

// LocalFault counts one local-fault incident.
func (c *Crawl) LocalFault() {
	if c == nil {
		return
	}
	c.localFaults.Inc()
}

// Transition counts one breaker transition.
func (c *Crawl) Transition(from, to string) {
	if c == nil {
		return
	}
	c.transitions.WithLabelValues(from, to).Inc()
}

// WriteTextfile writes the metrics to path in the text format
// node_exporter's textfile collector reads, through a temporary file
// renamed over path, so a collector never reads half a file. A new file
// is its owner's only (0600), as every file a crawl makes; a file already
// at path keeps its mode across the rename, so one made readable for a
// collector running as another user stays so. (prometheus.WriteToTextfile
// would make it 0644 every time.)
func (c *Crawl) WriteTextfile(path string) error {
	if err := writeTextfile(path, c.reg); err != nil {
		return fmt.Errorf("--metrics-file %s: %w", path, err)
	}
	return nil
}

func writeTextfile(path string, g prometheus.Gatherer) error {
	mfs, err := g.Gather()
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*") // 0600
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone by then once renamed
	w := bufio.NewWriter(tmp)
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(w, mf); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return err
	}
	if info, err := os.Stat(path); err == nil && info.Mode().Perm() != 0o600 {
		if err := tmp.Chmod(info.Mode().Perm()); err != nil {
			tmp.Close()
			return err
		}
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// Handler serves the metrics in the Prometheus text format.
func (c *Crawl) Handler() http.Handler {
	return promhttp.HandlerFor(c.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func statusClass(status int) string {
	if status < 100 || status > 599 {
		return "none"
	}
	return strconv.Itoa(status/100) + "xx"
}

var (
	descFrontier = prometheus.NewDesc("breakwater_frontier_urls", "URLs by where they are: queued, deferred, leased, done, failed.",
		[]string{"state"}, nil)
	descHosts = prometheus.NewDesc("breakwater_hosts", "Hosts by breaker state; paused and case holds counted apart.",
		[]string{"state"}, nil)
	descLocalFault = prometheus.NewDesc("breakwater_local_fault", "1 while the local-fault guard pauses all fetching, else 0.",
		nil, nil)
	descHostState = prometheus.NewDesc("breakwater_host_breaker_state", "A host's circuit: 1 half-open, 2 open (closed hosts have no series).",
		[]string{"host"}, nil)
)

// gauges reads a snapshot when scraped.
type gauges struct {
	snapshot func() (Snapshot, error)
}

func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- descFrontier
	ch <- descHosts
	ch <- descHostState
	ch <- descLocalFault
}

func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	s, err := g.snapshot()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descFrontier, err)
		return
	}
	for state, n := range map[string]int64{"queued": s.Queued, "deferred": s.Deferred, "leased": s.Leased,
		"done": s.Done, "failed": s.Failed} {
		ch <- prometheus.MustNewConstMetric(descFrontier, prometheus.GaugeValue, float64(n), state)
	}
	for _, state := range []string{"closed", "half-open", "open"} {
		ch <- prometheus.MustNewConstMetric(descHosts, prometheus.GaugeValue, float64(s.Hosts[state]), state)
	}
	ch <- prometheus.MustNewConstMetric(descHosts, prometheus.GaugeValue, float64(s.Paused), "paused")
	ch <- prometheus.MustNewConstMetric(descHosts, prometheus.GaugeValue, float64(s.Cases), "case")
	paused := 0.0
	if s.LocalFault {
		paused = 1
	}
	ch <- prometheus.MustNewConstMetric(descLocalFault, prometheus.GaugeValue, paused)
	for host, level := range s.NotClosed {
		ch <- prometheus.MustNewConstMetric(descHostState, prometheus.GaugeValue, float64(level), host)
	}
}
