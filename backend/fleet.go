package backend

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/redisstore"
	"breakwater/store"
	"breakwater/warc"
)

// fleetCapabilities: every process of a fleet crawls the store at once and
// shares the hosts' breakers through it; it refreshes pages (its index of
// fetch times, redisstore/refresh.go), queues failures again and counts
// each host's pages; it keeps no link graph.
var fleetCapabilities = store.Capabilities{Name: "--store redis://", SharedBreakers: true, SharedScope: true, Refresh: true,
	RetryFailed: true, HostPageCap: true}

// fleet is a fleet's store on Redis.
type fleet struct {
	*redisstore.Store
	holdsCrawl bool
	// instance names this run in its heartbeats, from ClaimProcess on.
	instance string
}

// Fleet is the backend of a fleet's store already open, which Close and
// Discard close.
func Fleet(st *redisstore.Store) Backend {
	_, err := st.Settings()
	return &fleet{Store: st, holdsCrawl: !errors.Is(err, store.ErrNotFound)}
}

func (f *fleet) Capabilities() store.Capabilities { return fleetCapabilities }

// OpenFrontier starts the process's fleet frontier, which holds enough
// hosts to keep its workers busy (redisstore.HostsFor) and shares their
// breakers.
func (f *fleet) OpenFrontier(cfg frontier.Config) (frontier.Queue, error) {
	o := f.options(cfg)
	if f.instance == "" {
		fr, err := redisstore.Start(context.Background(), f.Store, o)
		if err != nil {
			return nil, err
		}
		return fleetQueue{fr}, nil
	}
	return fleetQueue{redisstore.OpenFrontier(f.Store, o)}, nil
}

func (f *fleet) options(cfg frontier.Config) redisstore.FrontierOptions {
	return redisstore.FrontierOptions{ID: cfg.Process, Instance: f.instance, HostConcurrency: cfg.HostConcurrency,
		Hosts: redisstore.HostsFor(cfg.Workers, cfg.HostConcurrency), Lease: cfg.Lease, RequestTimeout: cfg.RequestTimeout,
		Breakers: redisstore.NewBreakers(f.Client(), cfg.Breaker), OnClaim: cfg.OnClaim, OnBreaker: cfg.OnBreaker,
		Archive: cfg.Archive, Now: cfg.Now, Logger: cfg.Logger}
}

// ErrFleetIDInUse is a --fleet-id a live process of the fleet holds.
var ErrFleetIDInUse = redisstore.ErrFleetIDInUse

// ClaimProcess takes the process's fleet ID for this run, before anything
// is written under it: refused (ErrFleetIDInUse, naming the live process)
// while another live process holds it.
func (f *fleet) ClaimProcess(cfg frontier.Config) error {
	o := f.options(cfg)
	instance := redisstore.NewInstance()
	lease := redisstore.EffectiveLease(o.Lease, o.RequestTimeout)
	if err := f.ClaimID(context.Background(), o.ID, instance, lease/2, time.Now()); err != nil {
		return err
	}
	f.instance = instance
	return nil
}

// Archive keeps each process's archive state apart, and names its files
// after the process.
func (f *fleet) Archive(process string) (warc.Store, string) { return f.ArchiveStore(process), process }

// Commit is not for a fleet's store: every write goes through a process's
// frontier.
func (f *fleet) Commit(*store.Batch) (*store.Committed, error) {
	return nil, store.Unsupported(f.Path(), "a commit outside the frontier")
}

// ForEachEdge, Inlinks and ForEachPageLinks are refused: the fleet's store keeps no link
// graph (no LinkGraph capability), so its crawls store none.
func (f *fleet) ForEachEdge(func(store.Edge) error) error {
	return store.Unsupported(f.Path(), "the link graph")
}

func (f *fleet) Inlinks(store.Hash, func(store.Edge) error) error {
	return store.Unsupported(f.Path(), "the link graph")
}

func (f *fleet) ForEachPageLinks(func(*store.PageLinks) error) error {
	return store.Unsupported(f.Path(), "the link graph")
}

func (f *fleet) HoldsCrawl() bool { return f.holdsCrawl }

// SocketPath is none: a fleet's commands read the store itself, not one
// process.
func (f *fleet) SocketPath() string { return "" }

func (f *fleet) LogUsage(log *slog.Logger) {
	log.Info("fleet store commands", "store", f.Path(), "commands", f.Commands())
}

func (f *fleet) Discard() error { return f.Close() }

// fleetQueue gives the fleet frontier the engine's names.
type fleetQueue struct{ *redisstore.Frontier }

func (q fleetQueue) ForeignBreaker(host string) (breaker.Breaker, bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return q.Frontier.ForeignBreaker(ctx, host)
}

func (q fleetQueue) TryProbe(host string, generation uint64) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return q.Frontier.TryProbe(ctx, host, generation)
}

// JoinPageBudget makes the process a member of the fleet's --max-pages
// (redisstore.JoinPageBudget): a new run of limit pages when no other
// member is alive, else the live run's, whose limit and pages used come
// back.
func (f *fleet) JoinPageBudget(cfg frontier.Config, limit int) (b store.PageBudget, runLimit, used int, err error) {
	o := f.options(cfg)
	lease := redisstore.EffectiveLease(o.Lease, o.RequestTimeout)
	pb, runLimit, used, err := f.Store.JoinPageBudget(context.Background(), o.ID, f.instance, limit, lease/2)
	if err != nil {
		return nil, 0, 0, err
	}
	return pb, runLimit, used, nil
}
