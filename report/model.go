package report

import (
	"time"

	"breakwater/control"
	"breakwater/store"
)

// SchemaVersion is the version of the JSON form of Report; it grows when
// a field changes meaning or goes away, not when one is added.
const SchemaVersion = 1

// Source is what a report reads of a crawl; control.API is one.
type Source interface {
	Status() (*control.Status, error)
	Hosts(state string) ([]control.HostRow, error)
	Transitions(host string, since time.Time) ([]store.Transition, error)
	Results(failedOnly bool, fn func(*store.Result) error) error
}

// Graph streams the crawl's links, for the referrers of broken URLs.
type Graph interface {
	Edges(fn func(store.Edge) error) error
}

// Directives is what a page says to search engines about itself.
type Directives struct {
	Robots    []string // meta robots and X-Robots-Tag values, lowercase: "noindex", "nofollow"...
	Canonical string   // the canonical URL it names, absolute; "" if none
}

// DirectivesFunc reads the directives recorded in a result.
type DirectivesFunc func(*store.Result) Directives

// Caps bound the per-finding tables; zero fields take the Default caps.
type Caps struct {
	Targets   int `json:"targets"`   // broken link and broken requisite targets listed, each
	Referrers int `json:"referrers"` // pages listed per broken target
	Rows      int `json:"rows"`      // rows of the other lists (chains, noindex, canonicals, robots, trap)
	Groups    int `json:"groups"`    // duplicate groups listed, each
	GroupURLs int `json:"group_urls"`
	Slowest   int `json:"slowest"`
	Redirects int `json:"redirects"` // redirects kept to walk chains
	Hosts     int `json:"hosts"`     // hosts in the breaker table and timeline
}

// DefaultCaps are the caps of a report.
var DefaultCaps = Caps{Targets: 1000, Referrers: 100, Rows: 1000, Groups: 1000, GroupURLs: 20,
	Slowest: 20, Redirects: 200_000, Hosts: 20}

func (c Caps) withDefaults() Caps {
	d := DefaultCaps
	for _, f := range []struct{ v, d *int }{{&c.Targets, &d.Targets}, {&c.Referrers, &d.Referrers},
		{&c.Rows, &d.Rows}, {&c.Groups, &d.Groups}, {&c.GroupURLs, &d.GroupURLs}, {&c.Slowest, &d.Slowest},
		{&c.Redirects, &d.Redirects}, {&c.Hosts, &d.Hosts}} {
		if *f.v <= 0 {
			*f.v = *f.d
		}
	}
	return c
}

// Report is the audit of one crawl; its JSON form is `report --format
// json`, documented in docs/report.md.
type Report struct {
	Schema      int       `json:"schema"`
	Source      string    `json:"source"`
	GeneratedAt time.Time `json:"generated_at"`
	// Running is set when the crawl was running as the report was read.
	Running bool `json:"running"`
	// LinkGraph says where the referrers come from: "edges" (every
	// linking page, with anchor text) or "referrer" (the first page each
	// URL was found on).
	LinkGraph string `json:"link_graph"`
	// Directives is false when the crawl's results carry no directives
	// for this report to read: noindex and canonicals are then empty.
	Directives bool `json:"directives"`
	Caps       Caps `json:"caps"`

	Summary          Summary    `json:"summary"`
	BrokenLinks      Targets    `json:"broken_links"`
	BrokenRequisites Targets    `json:"broken_requisites"`
	RedirectChains   Chains     `json:"redirect_chains"`
	RedirectLoops    Chains     `json:"redirect_loops"`
	Noindex          Pages      `json:"noindex"`
	Canonicals       Canonicals `json:"canonical_conflicts"`
	DuplicateTitles  Groups     `json:"duplicate_titles"`
	DuplicateContent Groups     `json:"duplicate_content"`
	Slowest          []Page     `json:"slowest"`
	RobotsBlocked    Pages      `json:"robots_blocked"`
	Trapped          Pages      `json:"trapped"`
	Charts           Charts     `json:"charts"`
}

// Summary counts the crawl's results.
type Summary struct {
	Results    int            `json:"results"`
	Pages      int            `json:"pages"`      // pages fetched without failure
	Requisites int            `json:"requisites"` // requisites fetched without failure
	Failed     int            `json:"failed"`     // failures, the skipped ones not included
	Skipped    int            `json:"skipped"`    // not fetched by the crawl's own rules (robots, scope, caps, traps)
	ByClass    map[string]int `json:"failed_by_class"`
	Queued     int64          `json:"queued"` // still to fetch when the report was read
	Hosts      int            `json:"hosts"`
	// Troubled lists the hosts whose breaker opened at least once, that
	// were given up on, or that are held, most opens first.
	Troubled      []HostTrouble `json:"troubled_hosts"`
	TroubledTotal int           `json:"troubled_hosts_total"`
}

// HostTrouble is one host's breaker trouble.
type HostTrouble struct {
	Host       string `json:"host"`
	State      string `json:"state"`
	Opened     int    `json:"opened"`   // transitions to open
	GivenUp    int    `json:"given_up"` // URLs failed when the host was given up on (class host-down)
	Hold       string `json:"hold,omitempty"`
	HoldReason string `json:"hold_reason,omitempty"`
}

// Targets are broken URLs, each with the pages linking to it.
type Targets struct {
	Total int      `json:"total"` // broken URLs, listed or not
	Items []Target `json:"items"`
}

// Target is one broken URL.
type Target struct {
	URL            string     `json:"url"`
	Status         int        `json:"status"`
	ErrorClass     string     `json:"error_class"`
	Error          string     `json:"error,omitempty"`
	Referrers      []Referrer `json:"referrers"`
	ReferrersTotal int        `json:"referrers_total"`
}

// Referrer is one link to a broken URL.
type Referrer struct {
	From    string   `json:"from"`
	Text    string   `json:"text,omitempty"`
	Element string   `json:"element,omitempty"`
	Attr    string   `json:"attr,omitempty"`
	Rel     []string `json:"rel,omitempty"`
}

// Chains are redirect chains (more than one hop) or loops.
type Chains struct {
	Total int     `json:"total"`
	Items []Chain `json:"items"`
}

// Chain is a walk of redirects from a URL nothing redirects to (or, for
// a loop of redirects alone, from any of its URLs).
type Chain struct {
	Hops []Hop `json:"hops"` // each redirect, in order
	// Final is where the chain ends: the first URL that is no redirect
	// the crawl recorded, or for a loop the URL it came back to.
	Final       string `json:"final"`
	FinalStatus int    `json:"final_status"` // 0: not fetched (or no answer)
	FinalClass  string `json:"final_error_class,omitempty"`
	Loop        bool   `json:"loop"`
}

// Hop is one redirect of a chain.
type Hop struct {
	URL    string `json:"url"`
	Status int    `json:"status"`
}

// Pages are a list of pages.
type Pages struct {
	Total int    `json:"total"`
	Items []Page `json:"items"`
}

// Page is a page with what a table shows of it.
type Page struct {
	URL        string   `json:"url"`
	Status     int      `json:"status"`
	Title      string   `json:"title,omitempty"`
	DurationMS int64    `json:"duration_ms,omitempty"`
	Depth      int      `json:"depth"`
	Referrer   string   `json:"referrer,omitempty"`
	Robots     []string `json:"robots,omitempty"`
	Error      string   `json:"error,omitempty"`
}

// Canonicals are pages whose canonical URL is another one.
type Canonicals struct {
	Total int         `json:"total"`
	Items []Canonical `json:"items"`
}

// Canonical is one page naming another URL as its canonical.
type Canonical struct {
	URL       string `json:"url"`
	Canonical string `json:"canonical"`
	// Problem is "elsewhere" (a working page named), "broken" (the named
	// URL failed), "redirected" (it redirects) or "not-crawled".
	Problem      string `json:"problem"`
	TargetStatus int    `json:"target_status"`
}

// Groups are sets of 2xx pages sharing a title or a body's sha256.
type Groups struct {
	Total int     `json:"total"` // groups, listed or not
	Pages int     `json:"pages"` // pages in all groups
	Items []Group `json:"items"`
}

// Group is pages sharing one key.
type Group struct {
	Key   string   `json:"key"` // the title, or the sha256
	Count int      `json:"count"`
	URLs  []string `json:"urls"`
}

// Charts hold the data the charts are drawn from.
type Charts struct {
	StatusClasses []Bucket `json:"status_classes"` // 2xx, 3xx, 4xx, 5xx, none
	ResponseTimes []Bucket `json:"response_times"` // by duration_ms
	Depths        []Bucket `json:"depths"`
	Timeline      Timeline `json:"breaker_timeline"`
}

// Bucket is one bar of a histogram.
type Bucket struct {
	Label string `json:"label"`
	Count int    `json:"count"`
}

// Timeline is when each of the most troubled hosts' breakers was not
// closed, between Start and End.
type Timeline struct {
	Start time.Time      `json:"start,omitzero"`
	End   time.Time      `json:"end,omitzero"`
	Hosts []HostTimeline `json:"hosts"`
}

// HostTimeline is one host's spans of trouble.
type HostTimeline struct {
	Host  string `json:"host"`
	Opens int    `json:"opens"`
	Spans []Span `json:"spans"`
}

// Span is a stretch of time a breaker spent in one state other than
// closed.
type Span struct {
	From  time.Time `json:"from"`
	To    time.Time `json:"to"`
	State string    `json:"state"` // open or half-open
}

// Finding names what --fail-on can check.
const (
	FindingBrokenLinks      = "broken-links"
	FindingBrokenRequisites = "broken-requisites"
	FindingRedirectLoops    = "redirect-loops"
	FindingNoindex          = "noindex"
)

// Findings lists the names --fail-on accepts, in order.
func Findings() []string {
	return []string{FindingBrokenLinks, FindingBrokenRequisites, FindingRedirectLoops, FindingNoindex}
}

// Count is how many of the named finding the report holds, and whether
// the name is known.
func (r *Report) Count(finding string) (int, bool) {
	switch finding {
	case FindingBrokenLinks:
		return r.BrokenLinks.Total, true
	case FindingBrokenRequisites:
		return r.BrokenRequisites.Total, true
	case FindingRedirectLoops:
		return r.RedirectLoops.Total, true
	case FindingNoindex:
		return r.Noindex.Total, true
	}
	return 0, false
}
