package crawl

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/storage"
)

// Pause holds host open (no probes, no automatic close) until Unpause.
// There is deliberately no force-close.
func (a *Admin) Pause(host, reason string) error {
	host, err := normalizeHost(host)
	if err != nil {
		return err
	}
	if reason == "" {
		return fmt.Errorf("pause %s: a --reason is required (it is recorded in the transition log)", host)
	}
	return a.change(host, func(r *breaker.Registry, now time.Time) error {
		r.Pause(host, reason, now)
		return nil
	}, nil)
}

// Unpause releases a paused host to half-open: it is probed again.
func (a *Admin) Unpause(host string) error {
	host, err := normalizeHost(host)
	if err != nil {
		return err
	}
	return a.change(host, func(r *breaker.Registry, now time.Time) error { return r.Unpause(host, now) }, nil)
}

// ResolveCase releases a host held by a refusal case to half-open and marks
// its open cases resolved, in the write that stores the released breaker:
// if that write fails, the cases stay open.
func (a *Admin) ResolveCase(host string) error {
	host, err := normalizeHost(host)
	if err != nil {
		return err
	}
	return a.change(host, func(r *breaker.Registry, now time.Time) error { return r.ResolveCase(host, now) },
		func(b *storage.Batch, now time.Time) { b.ResolveCases(host, now) })
}

// change applies a manual breaker change: to the live registry of a running
// crawl (which logs and persists it like any transition), or to the file.
// also, if not nil, adds operations to the write that stores the change.
func (a *Admin) change(host string, fn func(*breaker.Registry, time.Time) error, also func(*storage.Batch, time.Time)) error {
	now := a.now()
	var more func(*storage.Batch)
	if also != nil {
		more = func(b *storage.Batch) { also(b, now) }
	}
	if e := a.engine; e != nil {
		if err := fn(e.breakers, now); err != nil {
			return err
		}
		e.syncHold(host)
		return e.writeBreakers(more)
	}
	return a.changeOffline(host, fn, more, now)
}

func (a *Admin) changeOffline(host string, fn func(*breaker.Registry, time.Time) error, also func(*storage.Batch), now time.Time) error {
	var logged []storage.Transition
	reg := breaker.NewRegistry(DefaultOptions().Breaker, func(t breaker.Transition) {
		logged = append(logged, storage.NewTransition(t))
	})
	if b, err := a.db.Breaker(host); err == nil {
		reg.Load(host, b)
	} else if !errors.Is(err, storage.ErrNotFound) {
		return err
	}
	if err := fn(reg, now); err != nil {
		return err
	}
	var batch storage.Batch
	changed, removed := reg.TakeDirty()
	for h, b := range changed {
		batch.PutBreaker(h, b)
	}
	for _, h := range removed {
		batch.DeleteBreaker(h)
	}
	for _, t := range logged {
		batch.AppendTransition(t)
	}
	if also != nil {
		also(&batch)
	}
	_, err := a.db.Commit(&batch)
	return err
}

// syncHold makes the scheduler follow a manual change at once: a paused
// host is held; a released one is offered again.
func (e *Engine) syncHold(host string) {
	if e.front == nil {
		return
	}
	if b, ok := e.breakers.Get(host); ok && b.Hold != breaker.NoHold {
		e.front.Hold(host)
		return
	}
	e.front.Unhold(host)
}

// Handle serves the control socket's commands.
func (a *Admin) Handle(cmd string, args json.RawMessage) (any, error) {
	var in AdminArgs
	if len(args) > 0 {
		if err := json.Unmarshal(args, &in); err != nil {
			return nil, fmt.Errorf("%s: bad arguments: %w", cmd, err)
		}
	}
	switch cmd {
	case "status":
		return a.Status()
	case "hosts":
		return a.Hosts(in.State)
	case "transitions":
		return a.Transitions(in.Host, in.Since)
	case "cases":
		return a.Cases()
	case "pause":
		return nil, a.Pause(in.Host, in.Reason)
	case "unpause":
		return nil, a.Unpause(in.Host)
	case "resolve":
		return nil, a.ResolveCase(in.Host)
	}
	return nil, fmt.Errorf("unknown control command %q", cmd)
}

// AdminArgs are the arguments of a control command.
type AdminArgs struct {
	Host   string    `json:"host,omitempty"`
	State  string    `json:"state,omitempty"`
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
}
