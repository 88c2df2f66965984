package control

import (
	"fmt"
	"time"

	"breakwater/breaker"
	"breakwater/store"
)

// Change is a manual breaker change, as Pause, Unpause and ResolveCase
// make it. An implementation of API carries it out on the registry that
// holds Host's breaker: it calls Apply, and when Apply succeeds it writes
// the changed breaker, its transitions and Write's operations together,
// so that none of them lands in the file without the others.
type Change struct {
	Host string
	// Apply changes the breaker of Host in r at now.
	Apply func(r *breaker.Registry, now time.Time) error
	// Write, if not nil, adds what must be written with the change.
	Write func(b *store.Batch, now time.Time)
}

// PauseChange is the change Pause makes: it normalizes host and requires
// a reason, which the transition log records.
func PauseChange(host, reason string) (Change, error) {
	host, err := NormalizeHost(host)
	if err != nil {
		return Change{}, err
	}
	if reason == "" {
		return Change{}, fmt.Errorf("pause %s: a --reason is required (it is recorded in the transition log)", host)
	}
	return Change{Host: host, Apply: func(r *breaker.Registry, now time.Time) error {
		r.Pause(host, reason, now)
		return nil
	}}, nil
}

// UnpauseChange is the change Unpause makes.
func UnpauseChange(host string) (Change, error) {
	host, err := NormalizeHost(host)
	if err != nil {
		return Change{}, err
	}
	return Change{Host: host, Apply: func(r *breaker.Registry, now time.Time) error {
		return r.Unpause(host, now)
	}}, nil
}

// ResolveChange is the change ResolveCase makes: the case hold is released,
// and the host's open cases are marked resolved in the same write.
func ResolveChange(host string) (Change, error) {
	host, err := NormalizeHost(host)
	if err != nil {
		return Change{}, err
	}
	return Change{
		Host:  host,
		Apply: func(r *breaker.Registry, now time.Time) error { return r.ResolveCase(host, now) },
		Write: func(b *store.Batch, now time.Time) { b.ResolveCases(host, now) },
	}, nil
}
