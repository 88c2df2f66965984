package control

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"breakwater/frontier"
	"breakwater/store"
)

// API is what the inspection and control commands ask of a crawl, running
// or not. Host arguments are host keys ("example.com", "127.0.0.1:8080")
// or URLs.
type API interface {
	// Status reports the crawl's counters.
	Status() (*Status, error)
	// Hosts lists every host with its breaker and counters; state filters
	// by "open", "half-open", "closed", "paused" or "case" (empty: all).
	Hosts(state string) ([]HostRow, error)
	// Transitions lists the logged breaker transitions, oldest first, of
	// host (empty: all hosts) at or after since.
	Transitions(host string, since time.Time) ([]store.Transition, error)
	// Cases lists the recorded refusals, oldest first.
	Cases() ([]store.Case, error)
	// Pause holds host open (no probes, no automatic close) until
	// Unpause; reason is required and logged. There is deliberately no
	// force-close.
	Pause(host, reason string) error
	// Unpause releases a paused host to half-open: it is probed again.
	Unpause(host string) error
	// ResolveCase releases a host held by a refusal case to half-open and
	// marks its open cases resolved, in the write that stores the released
	// breaker: if that write fails, the cases stay open.
	ResolveCase(host string) error
	// Results calls fn with every result stored when the call began, or
	// only the failures, each URL once; fn's error stops it. A running
	// crawl streams them, so an export never waits for the crawl to end.
	Results(failedOnly bool, fn func(*store.Result) error) error
	// Edges calls fn with every link of the link graph, page by page; a
	// running crawl streams them as it writes. A store without the graph
	// (store.Capabilities.LinkGraph) refuses with store.ErrUnsupported.
	Edges(fn func(store.Edge) error) error
	// Inlinks calls fn with every link to url (any spelling of it with
	// the same canonical form), as Edges gives them.
	Inlinks(url string, fn func(store.Edge) error) error
}

// Args are the arguments of a command on the wire; each command reads the
// fields it needs.
type Args struct {
	Host   string    `json:"host,omitempty"`
	State  string    `json:"state,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	Failed bool      `json:"failed,omitempty"`
	URL    string    `json:"url,omitempty"`
}

// Status is what `breakwater status` shows.
type Status struct {
	store.Counts
	Running       bool           `json:"running"`
	InFlight      int            `json:"in_flight"`
	Hosts         int            `json:"hosts"`
	HostsQueued   int            `json:"hosts_with_queued"`
	FailedByClass map[string]int `json:"failed_by_class"`
	StatusCodes   map[int]int    `json:"status_codes"`
	// Settings are the crawl's stored settings, by flag name, secret
	// values masked (see MaskSetting).
	Settings map[string]json.RawMessage `json:"settings,omitempty"`
	// LocalFault is set while a running crawl is paused by its local-fault
	// guard: many hosts failed at once, so the fault is likely ours.
	LocalFault *LocalFault `json:"local_fault,omitempty"`
}

// DescribeKinds lists error kinds with their counts, by kind: "dns 1,
// timeout 6", as the incident's log line and `status` show them.
func DescribeKinds(kinds map[string]int) string {
	parts := make([]string, 0, len(kinds))
	for _, k := range slices.Sorted(maps.Keys(kinds)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	return strings.Join(parts, ", ")
}

// LocalFault describes a local-fault incident under way.
type LocalFault struct {
	Since        time.Time      `json:"since"`      // the first failure of the evidence
	TrippedAt    time.Time      `json:"tripped_at"` // when fetching was paused
	FailingHosts int            `json:"failing_hosts"`
	ActiveHosts  int            `json:"active_hosts"` // hosts with an outcome in the window
	ErrorKinds   map[string]int `json:"error_kinds"`  // the failing hosts' last errors, by kind
	Probing      []string       `json:"probing"`      // the hosts asked, until one answers
	NextProbe    time.Time      `json:"next_probe"`
	ProbeRounds  int            `json:"probe_rounds"`
}

// HostRow is one line of `breakwater hosts`.
type HostRow struct {
	Host          string        `json:"host"`
	State         string        `json:"state"`
	Hold          string        `json:"hold,omitempty"`         // "paused", "case" or "case+paused"
	HoldReason    string        `json:"hold_reason,omitempty"`  // the case's refusal
	PauseReason   string        `json:"pause_reason,omitempty"` // the operator's reason
	Failures      int           `json:"consecutive_failures"`
	OpenedAt      time.Time     `json:"opened_at,omitzero"`
	RestRemaining time.Duration `json:"rest_remaining"`
	Queued        int64         `json:"queued"`
	Deferred      int64         `json:"deferred"`
	Fetched       int64         `json:"fetched"`
	Failed        int64         `json:"failed"`
	Interval      time.Duration `json:"pace_interval"`
	Throttles     int           `json:"throttled_429"`
	Retries       int           `json:"retries_in_window"`
	FirstAttempts int           `json:"first_attempts_in_window"`
}

// LiveHost is what only a running crawl knows of a host: its pace and its
// retry budget's window. The file alone leaves it zero.
type LiveHost struct {
	Interval      time.Duration
	Throttles     int
	Retries       int
	FirstAttempts int
}

// ResultScanner reads a crawl's results: every result, or only failures,
// each URL once. The file reads them in short transactions, so that a
// slow reader at the far end of the socket never holds one open: a
// running crawl's commit that grows the file would wait for it.
type ResultScanner interface {
	ScanResults(failedOnly bool, fn func(*store.Result) error) error
}

// ForEachResult is Results over a store.
func ForEachResult(db ResultScanner, failedOnly bool, fn func(*store.Result) error) error {
	return db.ScanResults(failedOnly, fn)
}

// LinkReader reads a crawl's link graph (store.Capabilities.LinkGraph).
// Both scan the whole graph in short read transactions; Inlinks decodes
// only the links to target.
type LinkReader interface {
	ForEachEdge(fn func(store.Edge) error) error
	Inlinks(target store.Hash, fn func(store.Edge) error) error
}

// InlinksOf is Inlinks over a store: url is named by the hash of its
// canonical form, as the crawl named the links it stored.
func InlinksOf(db LinkReader, url string, fn func(store.Edge) error) error {
	canonical, err := frontier.Canonicalize(url)
	if err != nil {
		return fmt.Errorf("inlinks of %q: not a URL the crawl could have found: %w", url, err)
	}
	return db.Inlinks(store.HashOf(canonical), fn)
}

// wireEdge is an edge on the socket: kind and rel as numbers, which
// store.Edge's JSON (names, for exports) does not read back.
type wireEdge struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Kind    uint8  `json:"kind"`
	Rel     uint8  `json:"rel,omitempty"`
	Text    string `json:"text,omitempty"`
	Element string `json:"element,omitempty"`
	Attr    string `json:"attr,omitempty"`
}

func toWire(e store.Edge) wireEdge {
	return wireEdge{From: e.From, To: e.To, Kind: uint8(e.Kind), Rel: uint8(e.Rel), Text: e.Text,
		Element: e.Element, Attr: e.Attr}
}

func (w wireEdge) edge() store.Edge {
	return store.Edge{From: w.From, To: w.To, Kind: store.LinkKind(w.Kind), Rel: store.LinkRel(w.Rel), Text: w.Text,
		Element: w.Element, Attr: w.Attr}
}
