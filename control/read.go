package control

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/store"
)

// What every implementation of API reads from the database file, and the
// checks each makes of its arguments.

// Reader is what the reads need of a crawl's store: the file
// (*storage.DB) or the fleet's Redis store.
type Reader interface {
	Counts() (store.Counts, error)
	ForEachHost(fn func(host string, c store.HostCounts) error) error
	Tallies() (store.Tallies, error)
	Settings() ([]byte, error)
	ForEachBreaker(fn func(host string, b breaker.Breaker) error) error
	ForEachTransition(fn func(store.Transition) error) error
	ForEachCase(fn func(store.Case) error) error
}

// ReadStatus computes the status of the crawl stored in db, as of its last
// commit; Running and InFlight are left for a running crawl to fill.
func ReadStatus(db Reader) (*Status, error) {
	c, err := db.Counts()
	if err != nil {
		return nil, err
	}
	st := &Status{Counts: c, FailedByClass: map[string]int{}, StatusCodes: map[int]int{}}
	err = db.ForEachHost(func(_ string, hc store.HostCounts) error {
		st.Hosts++
		if hc.Queued > 0 {
			st.HostsQueued++
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t, err := db.Tallies()
	if err != nil {
		return nil, err
	}
	for class, n := range t.Failed {
		st.FailedByClass[class] = int(n)
	}
	for code, n := range t.Status {
		st.StatusCodes[code] = int(n)
	}
	switch blob, err := db.Settings(); {
	case err == nil:
		if st.Settings, err = MaskSettings(blob); err != nil {
			return nil, fmt.Errorf("read stored crawl settings: %w", err)
		}
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	return st, nil
}

// HostRows lists every host db counts, in host order, then every other
// host with a breaker (paused before the crawl queued a URL of theirs),
// sorted. breakers is the current breaker of each host with trouble; live,
// if not nil, adds what a running crawl knows of a host. state filters
// the rows as API.Hosts says.
func HostRows(db Reader, state string, breakers map[string]breaker.Breaker,
	live func(host string) LiveHost, now time.Time) ([]HostRow, error) {
	switch state {
	case "", "open", "half-open", "closed", "paused", "case":
	default:
		return nil, fmt.Errorf("--state %q: want open, half-open, closed, paused or case", state)
	}
	var rows []HostRow
	listed := make(map[string]bool, len(breakers))
	add := func(host string, c store.HostCounts) {
		listed[host] = true
		var extra LiveHost
		if live != nil {
			extra = live(host)
		}
		if row := hostRow(host, c, breakers[host], extra, now); row.matches(state) {
			rows = append(rows, row)
		}
	}
	err := db.ForEachHost(func(host string, c store.HostCounts) error {
		add(host, c)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var rest []string
	for host := range breakers {
		if !listed[host] {
			rest = append(rest, host)
		}
	}
	sort.Strings(rest)
	for _, host := range rest {
		add(host, store.HostCounts{})
	}
	return rows, nil
}

func hostRow(host string, c store.HostCounts, b breaker.Breaker, live LiveHost, now time.Time) HostRow {
	row := HostRow{Host: host, State: b.State.String(), Hold: b.Hold.String(), HoldReason: b.HoldReason,
		PauseReason: b.PauseReason, Failures: b.Failures, Queued: c.Queued, Deferred: c.Deferred, Fetched: c.Fetched, Failed: c.Failed,
		Interval: live.Interval, Throttles: live.Throttles, Retries: live.Retries, FirstAttempts: live.FirstAttempts}
	if b.State != breaker.Closed {
		row.OpenedAt = b.OpenedAt
	}
	if ready := b.ReadyAt(); ready.After(now) {
		row.RestRemaining = ready.Sub(now)
	}
	return row
}

// matches reports whether the row is in state: its breaker state, or one
// of its holds ("paused" matches a host held both ways, "case+paused").
func (r HostRow) matches(state string) bool {
	return state == "" || r.State == state || slices.Contains(strings.Split(r.Hold, "+"), state)
}

// ReadBreakers returns the breaker db stores for each host with trouble.
func ReadBreakers(db Reader) (map[string]breaker.Breaker, error) {
	out := map[string]breaker.Breaker{}
	err := db.ForEachBreaker(func(host string, b breaker.Breaker) error {
		out[host] = b
		return nil
	})
	return out, err
}

// ReadTransitions lists db's logged transitions, oldest first, of host
// (any host or URL form; empty: all hosts) at or after since.
func ReadTransitions(db Reader, host string, since time.Time) ([]store.Transition, error) {
	if host != "" {
		var err error
		if host, err = NormalizeHost(host); err != nil {
			return nil, err
		}
	}
	var out []store.Transition
	err := db.ForEachTransition(func(t store.Transition) error {
		if (host == "" || t.Host == host) && !t.At.Before(since) {
			out = append(out, t)
		}
		return nil
	})
	return out, err
}

// ReadCases lists db's recorded refusals, oldest first.
func ReadCases(db Reader) ([]store.Case, error) {
	var out []store.Case
	err := db.ForEachCase(func(c store.Case) error {
		out = append(out, c)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out, err
}

// NormalizeHost accepts a host key ("example.com", "127.0.0.1:8080") or a
// URL and returns the host key the crawl files the host under.
func NormalizeHost(host string) (string, error) {
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
