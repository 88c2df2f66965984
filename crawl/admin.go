package crawl

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/storage"
)

// Admin answers the inspection and control commands (status, hosts,
// transitions, cases, pause, unpause, resolve), either inside a running
// crawl, through its engine, or over a file no crawl holds.
type Admin struct {
	db     *storage.DB
	engine *Engine // nil when no crawl runs
	now    func() time.Time
}

// NewOfflineAdmin answers commands from the file alone.
func NewOfflineAdmin(db *storage.DB) *Admin { return &Admin{db: db, now: time.Now} }

// Admin answers commands for this running crawl.
func (e *Engine) Admin() *Admin { return &Admin{db: e.db, engine: e, now: e.opts.Now} }

// HostRow is one line of `breakwater hosts`.
type HostRow struct {
	Host          string        `json:"host"`
	State         string        `json:"state"`
	Hold          string        `json:"hold,omitempty"`
	HoldReason    string        `json:"hold_reason,omitempty"`
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

// Status reports the crawl's counters.
func (a *Admin) Status() (*Status, error) {
	st, err := ReadStatus(a.db)
	if err != nil {
		return nil, err
	}
	if a.engine != nil && a.engine.front != nil {
		st.Running, st.InFlight = true, a.engine.front.InFlight()
	}
	return st, nil
}

// Hosts lists every host with its breaker and counters; state filters by
// "open", "half-open", "closed", "paused" or "case" (empty: all).
func (a *Admin) Hosts(state string) ([]HostRow, error) {
	switch state {
	case "", "open", "half-open", "closed", "paused", "case":
	default:
		return nil, fmt.Errorf("--state %q: want open, half-open, closed, paused or case", state)
	}
	breakers, err := a.breakers()
	if err != nil {
		return nil, err
	}
	now := a.now()
	var pace map[string]HostPace
	if a.engine != nil {
		pace = a.engine.hosts.snapshot(now)
	}
	var rows []HostRow
	add := func(host string, c storage.HostCounts) {
		row := a.hostRow(host, c, breakers[host], pace[host], now)
		if state == "" || row.State == state || row.Hold == state {
			rows = append(rows, row)
		}
		delete(breakers, host)
	}
	err = a.db.ForEachHost(func(host string, c storage.HostCounts) error {
		add(host, c)
		return nil
	})
	// Hosts paused before the crawl ever queued a URL of theirs.
	for _, host := range sortedHosts(breakers) {
		add(host, storage.HostCounts{})
	}
	return rows, err
}

func sortedHosts(m map[string]breaker.Breaker) []string {
	out := make([]string, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

func (a *Admin) hostRow(host string, c storage.HostCounts, b breaker.Breaker, p HostPace, now time.Time) HostRow {
	row := HostRow{Host: host, State: b.State.String(), Hold: b.Hold.String(), HoldReason: b.HoldReason,
		Failures: b.Failures, Queued: c.Queued, Deferred: c.Deferred, Fetched: c.Fetched, Failed: c.Failed,
		Interval: p.Interval, Throttles: p.Throttles}
	if b.State != breaker.Closed {
		row.OpenedAt = b.OpenedAt
	}
	if ready := b.ReadyAt(); ready.After(now) {
		row.RestRemaining = ready.Sub(now)
	}
	if a.engine != nil {
		row.Retries, row.FirstAttempts = a.engine.budget.Usage(host, now)
	}
	return row
}

// breakers is the current breaker of every host with trouble.
func (a *Admin) breakers() (map[string]breaker.Breaker, error) {
	if a.engine != nil {
		return a.engine.breakers.Snapshot(), nil
	}
	out := map[string]breaker.Breaker{}
	err := a.db.ForEachBreaker(func(host string, b breaker.Breaker) error {
		out[host] = b
		return nil
	})
	return out, err
}

// Transitions lists logged breaker transitions, oldest first, optionally of
// one host and since a time.
func (a *Admin) Transitions(host string, since time.Time) ([]storage.Transition, error) {
	if host != "" {
		var err error
		if host, err = normalizeHost(host); err != nil {
			return nil, err
		}
	}
	var out []storage.Transition
	err := a.db.ForEachTransition(func(t storage.Transition) error {
		if (host == "" || t.Host == host) && !t.At.Before(since) {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// Cases lists recorded refusals, oldest first.
func (a *Admin) Cases() ([]storage.Case, error) {
	var out []storage.Case
	err := a.db.ForEachCase(func(c storage.Case) error {
		out = append(out, c)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, err
}

// normalizeHost accepts a host key ("example.com", "127.0.0.1:8080") or a URL.
func normalizeHost(host string) (string, error) {
	raw := host
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw + "/"
	}
	key, err := frontier.HostKey(raw)
	if err != nil || key == "" {
		return "", fmt.Errorf("host %q: not a host name, host:port or URL", host)
	}
	return key, nil
}
