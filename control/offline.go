package control

import (
	"encoding/json"
	"errors"
	"time"

	"breakwater/breaker"
	"breakwater/store"
)

// File is what Offline needs of a database file no crawl holds
// (*storage.DB): the reads, a host's breaker, and commits.
type File interface {
	Reader
	ResultScanner
	LinkReader
	Breaker(host string) (breaker.Breaker, error)
	Commit(b *store.Batch) (*store.Committed, error)
}

// Offline answers the API from a database file no crawl holds: breaker
// state as the file stores it, and manual changes applied to it directly,
// each in one commit.
type Offline struct {
	db File
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ API = (*Offline)(nil)

// NewOffline answers the API from db.
func NewOffline(db File) *Offline { return &Offline{db: db} }

func (o *Offline) now() time.Time {
	if o.Now == nil {
		return time.Now()
	}
	return o.Now()
}

// Status reports the counters as stored; Running is false.
func (o *Offline) Status() (*Status, error) { return ReadStatus(o.db) }

// Hosts lists the hosts with their stored breakers; the live columns are zero.
func (o *Offline) Hosts(state string) ([]HostRow, error) {
	breakers, err := ReadBreakers(o.db)
	if err != nil {
		return nil, err
	}
	return HostRows(o.db, state, breakers, nil, o.now())
}

// Transitions lists the logged transitions; see API.
func (o *Offline) Transitions(host string, since time.Time) ([]store.Transition, error) {
	return ReadTransitions(o.db, host, since)
}

// Cases lists the recorded refusals.
func (o *Offline) Cases() ([]store.Case, error) { return ReadCases(o.db) }

// Results reads the results from the file.
func (o *Offline) Results(failedOnly bool, fn func(*store.Result) error) error {
	return ForEachResult(o.db, failedOnly, fn)
}

// Edges reads the link graph from the file.
func (o *Offline) Edges(fn func(store.Edge) error) error { return o.db.ForEachEdge(fn) }

// Inlinks reads the links to url from the file.
func (o *Offline) Inlinks(url string, fn func(store.Edge) error) error {
	return InlinksOf(o.db, url, fn)
}

// Pause holds host open in the file; see API.
func (o *Offline) Pause(host, reason string) error {
	ch, err := PauseChange(host, reason)
	if err != nil {
		return err
	}
	return o.apply(ch)
}

// Unpause releases a paused host in the file; see API.
func (o *Offline) Unpause(host string) error {
	ch, err := UnpauseChange(host)
	if err != nil {
		return err
	}
	return o.apply(ch)
}

// ResolveCase releases a case and marks it resolved in the file; see API.
func (o *Offline) ResolveCase(host string) error {
	ch, err := ResolveChange(host)
	if err != nil {
		return err
	}
	return o.apply(ch)
}

// apply carries ch out through a registry holding the host's stored
// breaker and commits the changed breaker, its transitions and ch's
// writes in one transaction.
func (o *Offline) apply(ch Change) error {
	now := o.now()
	var logged []store.Transition
	// The crawl's --breaker-* settings, as stored in the file; the breaker
	// package's defaults for those it lacks.
	reg := breaker.NewRegistry(o.breakerConfig(), func(t breaker.Transition) {
		logged = append(logged, store.NewTransition(t))
	})
	if b, err := o.db.Breaker(ch.Host); err == nil {
		reg.Load(ch.Host, b)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if err := ch.Apply(reg, now); err != nil {
		return err
	}
	var batch store.Batch
	changed, removed := reg.TakeDirty()
	for host, b := range changed {
		batch.PutBreaker(host, b)
	}
	for _, host := range removed {
		batch.DeleteBreaker(host)
	}
	for _, t := range logged {
		batch.AppendTransition(t)
	}
	if ch.Write != nil {
		ch.Write(&batch, now)
	}
	_, err := o.db.Commit(&batch)
	return err
}

// breakerConfig reads the crawl's stored breaker settings.
func (o *Offline) breakerConfig() breaker.Config {
	blob, _ := o.db.Settings()
	return StoredBreakerConfig(blob)
}

// StoredBreakerConfig reads the breaker settings out of a crawl's stored
// settings; what is missing or unreadable takes the breaker package's
// default.
func StoredBreakerConfig(settings []byte) breaker.Config {
	var s struct {
		Threshold int    `json:"breaker-threshold"`
		Rest      string `json:"breaker-rest"`
		RestMax   string `json:"breaker-rest-max"`
		Probes    int    `json:"breaker-probes"`
	}
	json.Unmarshal(settings, &s)
	cfg := breaker.Config{Threshold: s.Threshold, Probes: s.Probes}
	cfg.Rest, _ = time.ParseDuration(s.Rest)
	cfg.RestMax, _ = time.ParseDuration(s.RestMax)
	return cfg
}
