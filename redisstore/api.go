package redisstore

import (
	"context"
	"encoding/json"
	"time"

	"breakwater/breaker"
	"breakwater/control"
	"breakwater/store"
)

// API answers the control commands (status, hosts, transitions, cases,
// pause, unpause, resolve, export) from the store itself: a fleet has no
// one process to ask, and every process reads the same state. A pause or
// a resolved case is a script on the host's breaker; the process holding
// the host sees its generation move at its next lease renewal and holds
// or frees the host.
type API struct {
	s   *Store
	br  *Breakers
	Now func() time.Time
}

var _ control.API = (*API)(nil)

// NewAPI answers the control API from s.
func NewAPI(s *Store) *API {
	a := &API{s: s, Now: time.Now}
	a.br = NewBreakers(s.rdb, a.breakerConfig())
	return a
}

// breakerConfig is the crawl's stored --breaker-* settings.
func (a *API) breakerConfig() breaker.Config {
	data, _ := a.s.Settings()
	return control.StoredBreakerConfig(data).WithDefaults()
}

// Status reports the fleet's counters; Running says whether a process
// beat within the last lease periods, InFlight sums their last beats.
func (a *API) Status() (*control.Status, error) {
	st, err := control.ReadStatus(a.s)
	if err != nil {
		return nil, err
	}
	procs, err := a.s.Processes()
	if err != nil {
		return nil, err
	}
	for _, raw := range procs {
		var beat struct {
			At       time.Time `json:"at"`
			InFlight int       `json:"in_flight"`
		}
		if json.Unmarshal([]byte(raw), &beat) == nil && a.Now().Sub(beat.At) < 30*time.Second {
			st.Running = true
			st.InFlight += beat.InFlight
		}
	}
	return st, nil
}

// Hosts lists the hosts with their shared breakers.
func (a *API) Hosts(state string) ([]control.HostRow, error) {
	breakers, err := control.ReadBreakers(a.s)
	if err != nil {
		return nil, err
	}
	return control.HostRows(a.s, state, breakers, nil, a.Now())
}

// Transitions lists the logged transitions.
func (a *API) Transitions(host string, since time.Time) ([]store.Transition, error) {
	return control.ReadTransitions(a.s, host, since)
}

// Cases lists the recorded refusals.
func (a *API) Cases() ([]store.Case, error) { return control.ReadCases(a.s) }

// Results reads the stored results.
func (a *API) Results(failedOnly bool, fn func(*store.Result) error) error {
	return a.s.ScanResults(failedOnly, fn)
}

// Edges is refused: a fleet's store keeps no link graph
// (store.Capabilities.LinkGraph).
func (a *API) Edges(func(store.Edge) error) error {
	return store.Unsupported(a.s.display, "the link graph")
}

// Inlinks is refused, as Edges is.
func (a *API) Inlinks(string, func(store.Edge) error) error {
	return store.Unsupported(a.s.display, "the link graph")
}

// Pause holds host open fleet-wide.
func (a *API) Pause(host, reason string) error {
	ch, err := control.PauseChange(host, reason) // validates the host and the reason
	if err != nil {
		return err
	}
	ctx, cancel := bg()
	defer cancel()
	_, _, err = a.br.Pause(ctx, ch.Host, reason, a.Now())
	return err
}

// Unpause releases a paused host to half-open, fleet-wide.
func (a *API) Unpause(host string) error {
	ch, err := control.UnpauseChange(host)
	if err != nil {
		return err
	}
	ctx, cancel := bg()
	defer cancel()
	if _, _, err := a.br.Unpause(ctx, ch.Host, a.Now()); err != nil {
		return err
	}
	return a.s.wake(ctx, ch.Host, a.Now())
}

// ResolveCase releases a case's hold and marks the host's cases resolved.
func (a *API) ResolveCase(host string) error {
	ch, err := control.ResolveChange(host)
	if err != nil {
		return err
	}
	ctx, cancel := bg()
	defer cancel()
	now := a.Now()
	if _, _, err := a.br.ResolveCase(ctx, ch.Host, now); err != nil {
		return err
	}
	if err := a.s.resolveCases(ctx, ch.Host, now); err != nil {
		return err
	}
	return a.s.wake(ctx, ch.Host, now)
}

// wake makes a released host that no process holds ready at once.
func (s *Store) wake(ctx context.Context, host string, now time.Time) error {
	k := keysOfShard(shardOf(host))
	return shardScript.Run(ctx, s.rdb, []string{k.ready, k.owner, k.touch, k.hosts}, "wake", "", host).Err()
}
