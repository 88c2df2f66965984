package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"pgregory.net/rapid"

	"breakwater/breaker"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// The reference for the scripts is the Go breaker itself. modelOutcome
// applies an outcome with breaker.Breaker's own methods, in the order the
// script must (Advance, the registry's acceptance rule, Record);
// registryOutcome and modelHold drive a real breaker.Registry, so that the
// acceptance rule, the transitions' reasons and the holds come from the
// registry's code and not from a reading of it.

// modelOutcome is what breaker.lua must do with one outcome.
func modelOutcome(cfg breaker.Config, host string, b breaker.Breaker, t breaker.Ticket, c breaker.Class, detail string, now time.Time) (breaker.Breaker, []store.Transition) {
	cfg = cfg.WithDefaults()
	if cfg.Disabled && c != breaker.Refused {
		return b, nil
	}
	var trs []store.Transition
	if before := b; !cfg.Disabled && b.Advance(now) {
		trs = append(trs, modelTransition(host, before, b, now, "", "", ""))
	}
	if c == breaker.Refused || accepts(b, t) {
		before := b
		if b.Record(cfg, c, detail, now) {
			trs = append(trs, modelTransition(host, before, b, now, c, detail, ""))
		}
	}
	return b, trs
}

// accepts is the registry's entry.accepts.
func accepts(b breaker.Breaker, t breaker.Ticket) bool {
	switch b.State {
	case breaker.HalfOpen:
		return t.Probe && t.Generation == b.Generation
	case breaker.Closed:
		return !t.Probe
	}
	return false
}

// modelTransition is the registry's commit: an empty reason becomes the
// case's detail, else the pause's reason.
func modelTransition(host string, before, after breaker.Breaker, now time.Time, c breaker.Class, detail, reason string) store.Transition {
	switch {
	case reason != "":
	case after.Hold.Has(breaker.Case):
		reason = after.HoldReason
	case after.Hold.Has(breaker.Paused):
		reason = after.PauseReason
	}
	return store.NewTransition(breaker.Transition{At: now, Host: host, From: before.State, To: after.State,
		Hold: after.Hold, Class: c, Detail: detail, Reason: reason, Generation: after.Generation})
}

// loadRegistry returns a registry holding b for host such that it goes on
// from b's generation, and the offset to subtract from the registry's
// generations. A clean b has no entry in a registry; its generation is
// carried by the registry's floor, which a clean breaker of generation 0
// cannot set (floors start at 1), hence the offset.
func loadRegistry(cfg breaker.Config, host string, b breaker.Breaker, on func(breaker.Transition)) (*breaker.Registry, uint64) {
	reg := breaker.NewRegistry(cfg, on)
	if !b.Clean() {
		reg.Load(host, b)
		return reg, 0
	}
	if b.Generation == 0 {
		return reg, 1
	}
	// Loading over an entry of generation G-1 raises the floor to G.
	reg.Load(host, breaker.Breaker{Failures: 1, Generation: b.Generation - 1})
	reg.Load(host, b)
	return reg, 0
}

// registryOutcome drives a breaker.Registry through the same outcome:
// Admit at now (the Advance the script does first), then Report. present
// is false when the registry evicted the host (it is clean).
func registryOutcome(cfg breaker.Config, host string, b breaker.Breaker, t breaker.Ticket, c breaker.Class, detail string, now time.Time) (nb breaker.Breaker, present bool, trs []store.Transition) {
	var got []breaker.Transition
	reg, off := loadRegistry(cfg, host, b, func(tr breaker.Transition) { got = append(got, tr) })
	reg.Admit(host, now)
	reg.Report(t, c, detail, now)
	nb, present = reg.Get(host)
	if present {
		nb.Generation -= off
		if b.Clean() && nb.State == breaker.Closed {
			// The registry had no entry for b, and a new entry starts with
			// no rest; a closed breaker's rest is never read (opening from
			// closed resets it), and the hash keeps the one it had.
			nb.Rest, nb.Level = b.Rest, b.Level
		}
	}
	for _, tr := range got {
		tr.Generation -= off
		trs = append(trs, store.NewTransition(tr))
	}
	return nb, present, trs
}

// modelHold is what hold.lua must do: a registry's Pause, Unpause or
// ResolveCase. The registry is loaded with b; a clean b is loaded with one
// failure so that its entry keeps its generation (every hold operation
// either opens it, which resets the count, or fails).
func modelHold(cfg breaker.Config, host string, b breaker.Breaker, op, reason string, now time.Time) (breaker.Breaker, []store.Transition, error) {
	var got []breaker.Transition
	reg := breaker.NewRegistry(cfg, func(tr breaker.Transition) { got = append(got, tr) })
	loaded := b
	if loaded.Clean() {
		loaded.Failures = 1
	}
	reg.Load(host, loaded)
	var err error
	switch op {
	case "pause":
		reg.Pause(host, reason, now)
	case "unpause":
		err = reg.Unpause(host, now)
	case "resolve":
		err = reg.ResolveCase(host, now)
	default:
		panic(op)
	}
	if err != nil {
		return b, nil, err
	}
	nb, ok := reg.Get(host)
	if !ok {
		panic("a held or half-open breaker was evicted")
	}
	var trs []store.Transition
	for _, tr := range got {
		trs = append(trs, store.NewTransition(tr))
	}
	return nb, trs, nil
}

// runHold calls the Breakers method for op.
func runHold(ctx context.Context, bs *Breakers, host, op, reason string, now time.Time) (breaker.Breaker, []store.Transition, error) {
	switch op {
	case "pause":
		return bs.Pause(ctx, host, reason, now)
	case "unpause":
		return bs.Unpause(ctx, host, now)
	case "resolve":
		return bs.ResolveCase(ctx, host, now)
	}
	panic(op)
}

// sameError reports whether got and want are both nil or wrap the same
// breaker sentinel.
func sameError(got, want error) bool {
	if (got == nil) != (want == nil) {
		return false
	}
	for _, s := range []error{breaker.ErrNotPaused, breaker.ErrCaseOpen, breaker.ErrNoCase} {
		if errors.Is(want, s) != errors.Is(got, s) {
			return false
		}
	}
	return true
}

func normBreaker(b breaker.Breaker) breaker.Breaker {
	b.OpenedAt, b.DownSince = normTime(b.OpenedAt), normTime(b.DownSince)
	return b
}

func normTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func normTransitions(trs []store.Transition) []store.Transition {
	out := make([]store.Transition, len(trs))
	for i, tr := range trs {
		tr.At = normTime(tr.At)
		out[i] = tr
	}
	return out
}

// diffBreaker describes how got differs from want, or returns "".
func diffBreaker(got, want breaker.Breaker) string {
	got, want = normBreaker(got), normBreaker(want)
	if got == want {
		return ""
	}
	return fmt.Sprintf("breaker\n got %+v\nwant %+v", got, want)
}

func diffTransitions(got, want []store.Transition) string {
	got, want = normTransitions(got), normTransitions(want)
	if slices.Equal(got, want) {
		return ""
	}
	var sb strings.Builder
	sb.WriteString("transitions\n got:")
	for _, tr := range got {
		fmt.Fprintf(&sb, "\n  %+v", tr)
	}
	sb.WriteString("\nwant:")
	for _, tr := range want {
		fmt.Fprintf(&sb, "\n  %+v", tr)
	}
	return sb.String()
}

// fataler is what the helpers need of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// msOf is t as the hash stores it.
func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// seed writes b as host's breaker hash, with ttl unless it is zero, and
// clears the host's gate and log.
func seed(t testing.TB, rdb redis.UniversalClient, host string, b breaker.Breaker, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	k := keysOf(host)
	if err := rdb.Del(ctx, k.breaker, k.probe, k.transitions).Err(); err != nil {
		t.Fatal(err)
	}
	err := rdb.HSet(ctx, k.breaker, "state", int(b.State), "failures", b.Failures, "probes", b.ProbeSuccesses,
		"opened", msOf(b.OpenedAt), "rest", b.Rest.Milliseconds(), "level", b.Level, "down", msOf(b.DownSince),
		"gen", b.Generation, "hold", int(b.Hold), "hold_reason", b.HoldReason, "pause_reason", b.PauseReason).Err()
	if err != nil {
		t.Fatal(err)
	}
	if ttl > 0 {
		if err := rdb.PExpire(ctx, k.breaker, ttl).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// gate returns host's probe gate value, or nil.
func gate(t fataler, rdb redis.UniversalClient, host string) *string {
	t.Helper()
	v, err := rdb.Get(context.Background(), keysOf(host).probe).Result()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &v
}

// checkExpiry asserts the expiry rule on host's keys: held keys have no
// expiry, unheld ones an expiry of at most idle.
func checkExpiry(t fataler, rdb redis.UniversalClient, host string, held bool, idle time.Duration) {
	t.Helper()
	k := keysOf(host)
	for _, key := range []string{k.breaker, k.transitions} {
		ttl, err := rdb.PTTL(context.Background(), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case ttl == -2: // absent
		case held && ttl != -1:
			t.Fatalf("%s of a held breaker has TTL %v, want none", key, ttl)
		case !held && (ttl <= 0 || ttl > idle):
			t.Fatalf("%s of an unheld breaker has TTL %v, want (0, %v]", key, ttl, idle)
		}
	}
}

var propHosts atomic.Int64

// TestBreakerModel applies random sequences of outcomes, pauses,
// releases, probe gate claims and waits to a fleet breaker and to the Go
// breaker, and compares them after every step: the breaker, the
// transitions, the probe gate and the keys' expiry.
func TestBreakerModel(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	classes := []breaker.Class{breaker.OK, breaker.OK, breaker.Transient, breaker.Transient, breaker.Transient,
		breaker.Permanent, breaker.Throttled, breaker.Refused, "unknown"}
	details := []string{"", "503", "connect: connection refused", `403 "names us" — über/bot`}
	reasons := []string{"", "maintenance", "complaint from host"}

	rapid.Check(t, func(rt *rapid.T) {
		cfg := breaker.Config{
			Threshold:    rapid.IntRange(1, 4).Draw(rt, "threshold"),
			Rest:         time.Duration(rapid.IntRange(1, 5).Draw(rt, "rest_s")) * time.Second,
			Probes:       rapid.IntRange(1, 3).Draw(rt, "probes"),
			ProbeTimeout: time.Minute,
			Disabled:     rapid.IntRange(0, 9).Draw(rt, "disabled") == 0,
		}
		cfg.RestMax = cfg.Rest * time.Duration(rapid.SampledFrom([]int{1, 2, 3, 8}).Draw(rt, "restmax_x"))
		cfg = cfg.WithDefaults()
		bs := NewBreakers(rdb, cfg)
		bs.IdleExpiry = time.Hour
		host := fmt.Sprintf("prop%d.example", propHosts.Add(1))

		var (
			b    breaker.Breaker // the model
			gv   *uint64         // the model's probe gate
			log  []store.Transition
			now  = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(rapid.Int64Range(0, 1e6).Draw(rt, "start_ms")) * time.Millisecond)
			step int
		)
		ticketGen := func(rt *rapid.T) uint64 {
			g := b.Generation
			switch rapid.IntRange(0, 4).Draw(rt, "gen_kind") {
			case 0, 1:
				return g
			case 2:
				return g + 1 // what a caller predicts for a rested open circuit
			case 3:
				if g > 0 {
					return g - 1
				}
				return 0
			}
			return rapid.Uint64Range(0, g+2).Draw(rt, "gen")
		}
		check := func(rt *rapid.T, got breaker.Breaker, gotTrs, wantTrs []store.Transition) {
			if d := diffBreaker(got, b); d != "" {
				rt.Fatalf("step %d: %s", step, d)
			}
			if d := diffTransitions(gotTrs, wantTrs); d != "" {
				rt.Fatalf("step %d: %s", step, d)
			}
		}

		rt.Repeat(map[string]func(*rapid.T){
			"outcome": func(rt *rapid.T) {
				c := rapid.SampledFrom(classes).Draw(rt, "class")
				detail := rapid.SampledFrom(details).Draw(rt, "detail")
				tk := breaker.Ticket{Host: host, Generation: ticketGen(rt), Probe: rapid.Bool().Draw(rt, "probe"), At: now}
				got, gotTrs, err := bs.Outcome(ctx, tk, c, detail, now)
				if err != nil {
					rt.Fatal(err)
				}
				before := b
				var wantTrs []store.Transition
				b, wantTrs = modelOutcome(cfg, host, b, tk, c, detail, now)
				switch {
				case cfg.Disabled && c != breaker.Refused:
					// Ignored outright, as Registry.Report does.
				case b.Generation != before.Generation:
					gv = nil
				case tk.Probe && gv != nil && *gv == tk.Generation:
					gv = nil
				}
				log = append(log, wantTrs...)
				check(rt, got, gotTrs, wantTrs)
			},
			"pause": func(rt *rapid.T) {
				reason := rapid.SampledFrom(reasons).Draw(rt, "reason")
				got, gotTrs, err := bs.Pause(ctx, host, reason, now)
				if err != nil {
					rt.Fatal(err)
				}
				before := b
				var wantTrs []store.Transition
				b, wantTrs, _ = modelHold(cfg, host, b, "pause", reason, now)
				if b.Generation != before.Generation {
					gv = nil
				}
				log = append(log, wantTrs...)
				check(rt, got, gotTrs, wantTrs)
			},
			"release": func(rt *rapid.T) {
				op := rapid.SampledFrom([]string{"unpause", "resolve"}).Draw(rt, "op")
				got, gotTrs, err := runHold(ctx, bs, host, op, "", now)
				before := b
				var wantTrs []store.Transition
				var wantErr error
				b, wantTrs, wantErr = modelHold(cfg, host, b, op, "", now)
				if !sameError(err, wantErr) {
					rt.Fatalf("step %d: %s error %v, want %v", step, op, err, wantErr)
				}
				if b.Generation != before.Generation {
					gv = nil
				}
				log = append(log, wantTrs...)
				check(rt, got, gotTrs, wantTrs)
			},
			"tryprobe": func(rt *rapid.T) {
				g := ticketGen(rt)
				ok, err := bs.TryProbe(ctx, host, g)
				if err != nil {
					rt.Fatal(err)
				}
				if want := gv == nil; ok != want {
					rt.Fatalf("step %d: TryProbe(%d) = %v, want %v", step, g, ok, want)
				}
				if ok {
					gv = &g
				}
			},
			"wait": func(rt *rapid.T) {
				now = now.Add(time.Duration(rapid.Int64Range(0, 2*cfg.RestMax.Milliseconds()).Draw(rt, "wait_ms")) * time.Millisecond)
			},
			"": func(rt *rapid.T) {
				step++
				got, _, err := bs.Get(ctx, host)
				if err != nil {
					rt.Fatal(err)
				}
				if d := diffBreaker(got, b); d != "" {
					rt.Fatalf("step %d: Get: %s", step, d)
				}
				g := gate(rt, rdb, host)
				switch {
				case gv == nil && g != nil:
					rt.Fatalf("step %d: gate %s, want free", step, *g)
				case gv != nil && (g == nil || *g != fmt.Sprint(*gv)):
					rt.Fatalf("step %d: gate %v, want %d", step, g, *gv)
				}
				checkExpiry(rt, rdb, host, b.Hold != breaker.NoHold, bs.IdleExpiry)
			},
		})
		all, err := bs.Transitions(ctx, host)
		if err != nil {
			rt.Fatal(err)
		}
		if d := diffTransitions(all, log); d != "" {
			rt.Fatalf("logged %s", d)
		}
	})
}
