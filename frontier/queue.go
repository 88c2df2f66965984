package frontier

import (
	"context"
	"log/slog"
	"time"

	"breakwater/breaker"
	"breakwater/store"
)

// Queue is a crawl's frontier as the engine drives it, whichever store
// keeps it: the file's (*Frontier) or a fleet's, which hands a process the
// hosts it alone fetches. Leases are this package's Lease either way.
type Queue interface {
	// Add enqueues items never seen before.
	Add(items ...store.Item) error
	// Next blocks until a URL can be leased, ctx is done, or nothing is
	// left but held work (ErrExhausted).
	Next(ctx context.Context) (*Lease, error)
	// Release ends a lease without an attempt: the URL stays queued.
	Release(l *Lease)
	// Started tells the queue a lease's request began; its host is not
	// offered again before next.
	Started(l *Lease, next time.Time)
	// CompleteWith ends a lease with its result, the URLs it found and
	// what the archive is to write with it (see Options.Archive); also
	// add more operations to the same batch (the page's links).
	CompleteWith(l *Lease, r *store.Result, discovered []store.Item, attach any, also ...func(*store.Batch)) error
	// Defer ends a lease with its URL due again at due.
	Defer(l *Lease, it store.Item, due time.Time) error
	// Park keeps host's URLs from being leased until until; Unpark ends it.
	Park(host string, until time.Time)
	Unpark(host string, now time.Time)
	// Hold keeps host's URLs queued until Unhold: they wait for a person.
	Hold(host string)
	Unhold(host string)
	// FailHost records every queued URL of host not in flight as failed
	// with template.
	FailHost(host string, template store.Result) error
	// Feed counts a stream of Adds as pending work until done is called,
	// so the crawl cannot end before the stream does.
	Feed() (done func())
	// HeldWork is the number of held hosts (paused, or with an open case)
	// with URLs left: work only a person can release.
	HeldWork() int
	// InFlight is the number of leases not yet ended.
	InFlight() int
	// Failed is closed when nothing more can be stored.
	Failed() <-chan struct{}
	// Submit queues the operations fn adds to a batch for the next write.
	Submit(fn func(*store.Batch)) error
	// Outcome hands one outcome to the host's shared breaker, in a store
	// whose breakers are shared (store.Capabilities.SharedBreakers).
	Outcome(t breaker.Ticket, c breaker.Class, detail string, at time.Time)
	// TryProbe takes the store's probe gate of a half-open host: with
	// shared breakers one process of all those crawling the store probes a
	// host at a time; otherwise the engine's own registry is the only gate.
	TryProbe(host string, generation uint64) (bool, error)
	// ForeignBreaker reads the shared breaker of a host this process does
	// not hold (a robots.txt redirect's target), for the engine to take in
	// before it admits a request there; ok is false when the store's
	// breakers are not shared, or the process holds the host and its
	// registry is the current copy.
	ForeignBreaker(host string) (b breaker.Breaker, ok bool, err error)
	// Reprieve hands the end of a local fault that began at since to the
	// shared breakers of hosts, which the engine's registry has just sent
	// to half-open (breaker.Registry.Reprieve), in a store whose breakers
	// are shared; each shared breaker follows only while it is still the
	// circuit the fault opened.
	Reprieve(hosts []breaker.Reprieved, since, at time.Time)
	// Close stores what is waiting and stops.
	Close() error
}

var _ Queue = (*Frontier)(nil)

// Config is what the engine tells the store's frontier when it opens it,
// whichever store it is; each frontier uses what applies to it.
type Config struct {
	// Process names this process among those crawling the store; a store
	// one process crawls ignores it.
	Process string
	// HostConcurrency caps the leases in flight per host.
	HostConcurrency int
	// Workers is how many leases the engine asks for at once; a shared
	// store sizes the hosts a process holds by it.
	Workers int
	// Lease is how long a process holds a host of a shared store without
	// renewing it. Zero takes the store's default.
	Lease time.Duration
	// RequestTimeout bounds a request: a shared store starts none on a
	// host whose lease could run out first (and holds leases long enough).
	RequestTimeout time.Duration
	// Breaker configures the breakers a store keeps shared.
	Breaker breaker.Config
	// OnClaim is called with a host's shared breaker when the frontier
	// takes the host, and OnBreaker when someone else changed the breaker
	// of a host it holds (an operator's pause); neither under a lock of the
	// frontier. A store without shared breakers never calls them.
	OnClaim, OnBreaker func(host string, b breaker.Breaker)
	// Archive, if set, acts on each batch before it is stored (see
	// Options.Archive).
	Archive Archive
	Now     func() time.Time
	Logger  *slog.Logger
}

// Outcome does nothing: the file's breakers are the engine's registry,
// which writes them through batches.
func (f *Frontier) Outcome(breaker.Ticket, breaker.Class, string, time.Time) {}

// TryProbe always wins: one process crawls the file, and its registry has
// already admitted the probe.
func (f *Frontier) TryProbe(string, uint64) (bool, error) { return true, nil }

// ForeignBreaker has none: the file's breakers are the engine's registry.
func (f *Frontier) ForeignBreaker(string) (breaker.Breaker, bool, error) {
	return breaker.Breaker{}, false, nil
}

// Reprieve does nothing: the file's breakers are the engine's registry.
func (f *Frontier) Reprieve([]breaker.Reprieved, time.Time, time.Time) {}
