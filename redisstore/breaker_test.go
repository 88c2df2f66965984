package redisstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

var (
	tableCfg = breaker.Config{Threshold: 3, Rest: 5 * time.Second, RestMax: 20 * time.Second, Probes: 2,
		ProbeTimeout: time.Minute}.WithDefaults()
	t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// startStates are the table's starting breakers at t0 (nil: no hash).
func startStates() []struct {
	name string
	b    *breaker.Breaker
} {
	at := func(d time.Duration) time.Time { return t0.Add(-d) }
	s := time.Second
	return []struct {
		name string
		b    *breaker.Breaker
	}{
		{"absent", nil},
		{"closed clean", &breaker.Breaker{Rest: 5 * s, Generation: 7}},
		{"closed threshold-1", &breaker.Breaker{Failures: 2, Rest: 5 * s, Generation: 3}},
		{"open resting", &breaker.Breaker{State: breaker.Open, OpenedAt: at(2 * s), Rest: 5 * s, DownSince: at(2 * s), Generation: 4}},
		{"open rest just over", &breaker.Breaker{State: breaker.Open, OpenedAt: at(5 * s), Rest: 5 * s, DownSince: at(30 * s), Generation: 4}},
		{"open escalated rest over", &breaker.Breaker{State: breaker.Open, OpenedAt: at(11 * s), Rest: 10 * s, Level: 1, DownSince: at(40 * s), Generation: 6}},
		{"half-open probes-1", &breaker.Breaker{State: breaker.HalfOpen, ProbeSuccesses: 1, OpenedAt: at(20 * s), Rest: 10 * s, Level: 1, DownSince: at(60 * s), Generation: 9}},
		{"half-open max rest", &breaker.Breaker{State: breaker.HalfOpen, OpenedAt: at(30 * s), Rest: 20 * s, Level: 2, DownSince: at(90 * s), Generation: 10}},
		{"held paused", &breaker.Breaker{State: breaker.Open, OpenedAt: at(time.Hour), Rest: 5 * s, DownSince: at(time.Hour), Generation: 11,
			Hold: breaker.Paused, PauseReason: "maintenance"}},
		{"held case", &breaker.Breaker{State: breaker.Open, OpenedAt: at(time.Hour), Rest: 5 * s, DownSince: at(time.Hour), Generation: 12,
			Hold: breaker.Case, HoldReason: "403 names us"}},
		{"held both", &breaker.Breaker{State: breaker.Open, OpenedAt: at(time.Hour), Rest: 5 * s, DownSince: at(time.Hour), Generation: 13,
			Hold: breaker.Case | breaker.Paused, HoldReason: "403 names us", PauseReason: "maintenance"}},
	}
}

// TestOutcomeTable checks every (starting state, class, ticket) against
// the Go breaker, enabled and disabled: the breaker returned and stored,
// the transitions returned and logged, the probe gate and the expiry. Each
// row is also run through a breaker.Registry (Load, Admit, Report).
func TestOutcomeTable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	const seededTTL = time.Hour
	classes := []breaker.Class{breaker.OK, breaker.Transient, breaker.Permanent, breaker.Throttled, breaker.Refused, "bogus"}
	type ticketKind struct {
		name  string
		delta int // generation relative to the breaker's
		probe bool
	}
	tickets := []ticketKind{
		{"current", 0, false}, {"stale", -1, false}, {"next", 1, false},
		{"probe current", 0, true}, {"probe stale", -1, true}, {"probe next", 1, true},
	}
	row := 0
	for _, disabled := range []bool{false, true} {
		cfg := tableCfg
		cfg.Disabled = disabled
		bs := NewBreakers(rdb, cfg)
		for _, st := range startStates() {
			for _, c := range classes {
				for _, tk := range tickets {
					name := fmt.Sprintf("disabled=%v/%s/%s/%s", disabled, st.name, c, tk.name)
					row++
					host := fmt.Sprintf("row%d.example", row)
					var start breaker.Breaker
					if st.b != nil {
						start = *st.b
						ttl := seededTTL
						if start.Hold != breaker.NoHold {
							ttl = 0
						}
						seed(t, rdb, host, start, ttl)
					}
					gen := int64(start.Generation) + int64(tk.delta)
					ticket := breaker.Ticket{Host: host, Generation: uint64(max(gen, 0)), Probe: tk.probe, At: t0}
					// The probe ticket holds the gate; otherwise some
					// other probe of the breaker's generation does.
					gateVal := start.Generation
					if tk.probe && tk.delta == 0 {
						gateVal = ticket.Generation
					}
					if err := rdb.Set(ctx, keysOf(host).probe, gateVal, 0).Err(); err != nil {
						t.Fatal(err)
					}
					detail := fmt.Sprintf(`%s "detail" — ü/%d`, c, row)

					got, gotTrs, err := bs.Outcome(ctx, ticket, c, detail, t0)
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					want, wantTrs := modelOutcome(cfg, host, start, ticket, c, detail, t0)
					if d := diffBreaker(got, want); d != "" {
						t.Errorf("%s: %s", name, d)
					}
					if d := diffTransitions(gotTrs, wantTrs); d != "" {
						t.Errorf("%s: %s", name, d)
					}
					stored, ok, err := bs.Get(ctx, host)
					if err != nil {
						t.Fatal(err)
					}
					changed := want != start
					if wantOK := st.b != nil || changed; ok != wantOK {
						t.Errorf("%s: Get ok = %v, want %v", name, ok, wantOK)
					}
					if d := diffBreaker(stored, want); d != "" {
						t.Errorf("%s: Get: %s", name, d)
					}
					logged, err := bs.Transitions(ctx, host)
					if err != nil {
						t.Fatal(err)
					}
					if d := diffTransitions(logged, wantTrs); d != "" {
						t.Errorf("%s: logged %s", name, d)
					}

					ignored := disabled && c != breaker.Refused
					wantGate := !ignored && (want.Generation != start.Generation || (tk.probe && gateVal == ticket.Generation))
					if g := gate(t, rdb, host); (g == nil) != wantGate {
						t.Errorf("%s: gate %v, want freed=%v", name, g, wantGate)
					}

					ttl, err := rdb.PTTL(ctx, keysOf(host).breaker).Result()
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case !ok:
						if ttl != -2 {
							t.Errorf("%s: no breaker, yet TTL %v", name, ttl)
						}
					case want.Hold != breaker.NoHold:
						if ttl != -1 {
							t.Errorf("%s: held, TTL %v, want none", name, ttl)
						}
					case changed:
						if ttl <= seededTTL || ttl > DefaultIdleExpiry {
							t.Errorf("%s: changed, TTL %v, want about %v", name, ttl, DefaultIdleExpiry)
						}
					case ttl <= 0 || ttl > seededTTL:
						t.Errorf("%s: unchanged, TTL %v, want the seeded %v untouched", name, ttl, seededTTL)
					}

					// The same through a real registry.
					rb, present, rTrs := registryOutcome(cfg, host, start, ticket, c, detail, t0)
					if present {
						if d := diffBreaker(got, rb); d != "" {
							t.Errorf("%s: against the registry: %s", name, d)
						}
					} else if !got.Clean() {
						t.Errorf("%s: the registry evicted the host, the script left %+v", name, got)
					}
					if d := diffTransitions(gotTrs, rTrs); d != "" {
						t.Errorf("%s: against the registry: %s", name, d)
					}
				}
			}
		}
	}
	t.Logf("%d rows", row)
}

// TestHoldTable checks Pause, Unpause and ResolveCase from every starting
// state against a breaker.Registry.
func TestHoldTable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	row := 0
	for _, disabled := range []bool{false, true} {
		cfg := tableCfg
		cfg.Disabled = disabled
		bs := NewBreakers(rdb, cfg)
		for _, st := range startStates() {
			for _, op := range []string{"pause", "unpause", "resolve"} {
				for _, reason := range []string{"", "complaint"} {
					if op != "pause" && reason != "" {
						continue
					}
					row++
					name := fmt.Sprintf("disabled=%v/%s/%s %q", disabled, st.name, op, reason)
					host := fmt.Sprintf("hold%d.example", row)
					var start breaker.Breaker
					if st.b != nil {
						start = *st.b
						seed(t, rdb, host, start, 0)
					}
					if err := rdb.Set(ctx, keysOf(host).probe, start.Generation, 0).Err(); err != nil {
						t.Fatal(err)
					}
					got, gotTrs, err := runHold(ctx, bs, host, op, reason, t0)
					want, wantTrs, wantErr := modelHold(cfg, host, start, op, reason, t0)
					if !sameError(err, wantErr) {
						t.Errorf("%s: error %v, want %v", name, err, wantErr)
					}
					if d := diffBreaker(got, want); d != "" {
						t.Errorf("%s: %s", name, d)
					}
					if d := diffTransitions(gotTrs, wantTrs); d != "" {
						t.Errorf("%s: %s", name, d)
					}
					stored, _, err := bs.Get(ctx, host)
					if err != nil {
						t.Fatal(err)
					}
					if d := diffBreaker(stored, want); d != "" {
						t.Errorf("%s: Get: %s", name, d)
					}
					if g := gate(t, rdb, host); (g == nil) != (want.Generation != start.Generation) {
						t.Errorf("%s: gate %v after generation %d -> %d", name, g, start.Generation, want.Generation)
					}
					if wantErr == nil {
						checkExpiry(t, rdb, host, want.Hold != breaker.NoHold, DefaultIdleExpiry)
					}
				}
			}
		}
	}
}

func TestHoldErrors(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	bs := NewBreakers(srv.Client(), tableCfg)
	if _, _, err := bs.Unpause(ctx, "a.example", t0); !errors.Is(err, breaker.ErrNotPaused) || !strings.Contains(err.Error(), "a.example") {
		t.Fatalf("Unpause of an unknown host: %v", err)
	}
	if _, _, err := bs.ResolveCase(ctx, "a.example", t0); !errors.Is(err, breaker.ErrNoCase) {
		t.Fatalf("ResolveCase of an unknown host: %v", err)
	}
	if _, ok, _ := bs.Get(ctx, "a.example"); ok {
		t.Fatal("a failed release created the breaker")
	}
	if _, _, err := bs.Outcome(ctx, breaker.Ticket{Host: "a.example"}, breaker.Refused, "403 bot", t0); err != nil {
		t.Fatal(err)
	}
	b, trs, err := bs.Unpause(ctx, "a.example", t0)
	if !errors.Is(err, breaker.ErrCaseOpen) || len(trs) != 0 || b.Hold != breaker.Case {
		t.Fatalf("Unpause of a case: %v %v %+v", err, trs, b)
	}
	b, trs, err = bs.ResolveCase(ctx, "a.example", t0.Add(time.Minute))
	if err != nil || b.State != breaker.HalfOpen || len(trs) != 1 || trs[0].Reason != "case resolved" {
		t.Fatalf("ResolveCase: %v %v %+v", err, trs, b)
	}
}

// TestStaleGenerations walks a breaker through open, half-open, closed and
// open again, and checks that outcomes of earlier generations change
// nothing: a stale probe can neither close nor reopen a newer circuit.
func TestStaleGenerations(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := breaker.Config{Threshold: 2, Rest: 10 * time.Second, Probes: 2}
	bs := NewBreakers(srv.Client(), cfg)
	const host = "stale.example"
	now := t0
	outcome := func(gen uint64, probe bool, c breaker.Class) (breaker.Breaker, []store.Transition) {
		t.Helper()
		b, trs, err := bs.Outcome(ctx, breaker.Ticket{Host: host, Generation: gen, Probe: probe, At: now}, c, "", now)
		if err != nil {
			t.Fatal(err)
		}
		return b, trs
	}
	unchanged := func(what string, gen uint64, probe bool, c breaker.Class) {
		t.Helper()
		before, _, _ := bs.Get(ctx, host)
		after, trs := outcome(gen, probe, c)
		if after != before || len(trs) != 0 {
			t.Fatalf("%s changed the breaker: %+v -> %+v %v", what, before, after, trs)
		}
	}

	outcome(0, false, breaker.Transient)
	b, _ := outcome(0, false, breaker.Transient)
	if b.State != breaker.Open || b.Generation != 1 {
		t.Fatalf("after threshold: %+v", b)
	}
	unchanged("a late failure of the closed period", 0, false, breaker.Transient)
	unchanged("a late success of the closed period", 0, false, breaker.OK)

	now = now.Add(10 * time.Second)
	// The first probe goes under the generation the caller predicts.
	b, trs := outcome(2, true, breaker.OK)
	if b.State != breaker.HalfOpen || b.Generation != 2 || b.ProbeSuccesses != 1 || len(trs) != 1 {
		t.Fatalf("first probe: %+v %v", b, trs)
	}
	unchanged("a non-probe ticket while half-open", 2, false, breaker.OK)
	unchanged("a probe of the open generation", 1, true, breaker.OK)
	unchanged("a failed probe of the open generation", 1, true, breaker.Transient)
	b, _ = outcome(2, true, breaker.OK)
	if b.State != breaker.Closed || b.Generation != 3 {
		t.Fatalf("second probe: %+v", b)
	}
	unchanged("a late success of the closed probe", 2, true, breaker.OK)
	unchanged("a late failure of the closed probe", 2, true, breaker.Transient)

	// Reopen, go half-open again: generation 5.
	outcome(3, false, breaker.Transient)
	b, _ = outcome(3, false, breaker.Transient)
	if b.State != breaker.Open || b.Generation != 4 {
		t.Fatalf("reopened: %+v", b)
	}
	unchanged("a probe of the first half-open period on the open circuit", 2, true, breaker.OK)
	now = now.Add(10 * time.Second)
	b, _ = outcome(5, true, breaker.Throttled)
	if b.State != breaker.HalfOpen || b.Generation != 5 || !b.DownSince.Equal(now) {
		t.Fatalf("second half-open: %+v", b)
	}
	unchanged("a stale probe success", 2, true, breaker.OK)
	unchanged("a stale probe failure", 2, true, breaker.Transient)
	unchanged("a stale closed-period probe", 3, true, breaker.OK)
	// A refusal is never stale.
	b, trs = outcome(0, false, breaker.Refused)
	if b.Hold != breaker.Case || b.Generation != 6 || len(trs) != 1 {
		t.Fatalf("late refusal: %+v %v", b, trs)
	}
}

// TestConcurrentProbes has 8 clients, like 8 processes, race for the probe
// gate of one half-open generation: exactly one wins each round; the
// probe's own report frees the gate, and so does its expiry.
func TestConcurrentProbes(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	cfg := breaker.Config{Threshold: 1, Rest: time.Second, Probes: 3, ProbeTimeout: 200 * time.Millisecond}
	const host, n = "probe.example", 8
	var fleet []*Breakers
	for range n {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		fleet = append(fleet, NewBreakers(c, cfg))
	}
	seed(t, srv.Client(), host, breaker.Breaker{State: breaker.HalfOpen, OpenedAt: t0, Rest: time.Second, DownSince: t0, Generation: 4}, 0)

	race := func() int {
		t.Helper()
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			start  = make(chan struct{})
			winner = -1
			wins   int
		)
		for i, bs := range fleet {
			wg.Go(func() {
				<-start
				ok, err := bs.TryProbe(ctx, host, 4)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					wins++
					winner = i
					mu.Unlock()
				}
			})
		}
		close(start)
		wg.Wait()
		if wins != 1 {
			t.Fatalf("%d callers won the probe gate, want 1", wins)
		}
		return winner
	}

	w := race()
	if pttl := srv.Client().PTTL(ctx, keysOf(host).probe).Val(); pttl <= 0 || pttl > 200*time.Millisecond {
		t.Fatalf("gate PTTL %v, want (0, 200ms]", pttl)
	}
	// The winner's probe reports: a success short of closing frees the gate.
	b, trs, err := fleet[w].Outcome(ctx, breaker.Ticket{Host: host, Generation: 4, Probe: true}, breaker.OK, "", t0.Add(time.Second))
	if err != nil || b.ProbeSuccesses != 1 || len(trs) != 0 {
		t.Fatalf("probe outcome: %+v %v %v", b, trs, err)
	}
	race()
	// This winner never reports; the gate expires by itself.
	deadline := time.Now().Add(5 * time.Second)
	for {
		ok, err := fleet[0].TryProbe(ctx, host, 4)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the probe gate never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, bs := range fleet[1:] {
		if ok, _ := bs.TryProbe(ctx, host, 4); ok {
			t.Fatal("a second caller won the gate after its expiry")
		}
	}
}

// TestConcurrentOpen has N clients report transient failures at once
// against a closed host: the circuit opens exactly once.
func TestConcurrentOpen(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	const host, n, each, threshold = "open.example", 8, 10, 5
	cfg := breaker.Config{Threshold: threshold, Rest: time.Minute}
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		mu    sync.Mutex
		seen  []store.Transition
	)
	for range n {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr})
		t.Cleanup(func() { c.Close() })
		bs := NewBreakers(c, cfg)
		wg.Go(func() {
			<-start
			for range each {
				_, trs, err := bs.Outcome(ctx, breaker.Ticket{Host: host}, breaker.Transient, "timeout", t0)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				seen = append(seen, trs...)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	bs := NewBreakers(srv.Client(), cfg)
	logged, err := bs.Transitions(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Transition{{At: t0, Host: host, From: "closed", To: "open", Class: "transient", Detail: "timeout", Generation: 1}}
	if d := diffTransitions(logged, want); d != "" {
		t.Fatalf("logged %s", d)
	}
	if d := diffTransitions(seen, want); d != "" {
		t.Fatalf("returned %s", d)
	}
	b, _, _ := bs.Get(ctx, host)
	if b.State != breaker.Open || b.Generation != 1 || b.Failures != 0 {
		t.Fatalf("breaker %+v", b)
	}
}

// TestExpiry checks the keys' expiry: unheld breakers live IdleExpiry
// after their last change, held ones for ever; an unchanged breaker is not
// written at all.
func TestExpiry(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	bs := NewBreakers(rdb, breaker.Config{Threshold: 1})
	bs.IdleExpiry = 2 * time.Hour
	const host = "ttl.example"
	k := keysOf(host)
	ttl := func(key string) time.Duration { t.Helper(); return rdb.PTTL(ctx, key).Val() }

	// A clean host answering ok: nothing written.
	if _, _, err := bs.Outcome(ctx, breaker.Ticket{Host: host}, breaker.OK, "", t0); err != nil {
		t.Fatal(err)
	}
	if n := rdb.Exists(ctx, k.breaker, k.transitions, k.probe).Val(); n != 0 {
		t.Fatalf("an ok on a clean host wrote %d keys", n)
	}
	// Opening: both keys expire after IdleExpiry.
	if _, _, err := bs.Outcome(ctx, breaker.Ticket{Host: host}, breaker.Transient, "", t0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.breaker, k.transitions} {
		if d := ttl(key); d <= time.Hour || d > 2*time.Hour {
			t.Fatalf("%s TTL %v, want about 2h", key, d)
		}
	}
	// A pause: no expiry.
	if _, _, err := bs.Pause(ctx, host, "ops", t0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.breaker, k.transitions} {
		if d := ttl(key); d != -1 {
			t.Fatalf("held %s TTL %v, want none", key, d)
		}
	}
	// Re-pausing (reason only) keeps it held and unexpiring.
	if _, trs, err := bs.Pause(ctx, host, "ops, again", t0); err != nil || len(trs) != 0 {
		t.Fatalf("re-pause: %v %v", trs, err)
	}
	if d := ttl(k.breaker); d != -1 {
		t.Fatalf("re-paused TTL %v", d)
	}
	// Unpaused: half-open, unheld, expiring again.
	if _, _, err := bs.Unpause(ctx, host, t0); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.breaker, k.transitions} {
		if d := ttl(key); d <= time.Hour || d > 2*time.Hour {
			t.Fatalf("released %s TTL %v, want about 2h", key, d)
		}
	}
	// Closed again after the probes: the hash stays (with its generation)
	// and expires.
	var b breaker.Breaker
	for range 2 {
		got, _, err := bs.Outcome(ctx, breaker.Ticket{Host: host, Generation: 3, Probe: true}, breaker.OK, "", t0)
		if err != nil {
			t.Fatal(err)
		}
		b = got
	}
	if b.State != breaker.Closed || b.Generation != 4 {
		t.Fatalf("after the probes: %+v", b)
	}
	if got, ok, _ := bs.Get(ctx, host); !ok || got.Generation != 4 {
		t.Fatalf("closed breaker stored as %+v, %v", got, ok)
	}
	if d := ttl(k.breaker); d <= time.Hour || d > 2*time.Hour {
		t.Fatalf("closed TTL %v", d)
	}
}

// TestCleanOKIsOneRead checks that an ok on a clean closed host costs one
// EVALSHA, which reads the hash and writes nothing.
func TestCleanOKIsOneRead(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	bs := NewBreakers(c, breaker.Config{})
	tk := breaker.Ticket{Host: "clean.example"}
	// The first run loads the script (EVALSHA, NOSCRIPT, EVAL).
	if _, _, err := bs.Outcome(ctx, tk, breaker.OK, "", t0); err != nil {
		t.Fatal(err)
	}
	admin := srv.Client()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b, trs, err := bs.Outcome(ctx, tk, breaker.OK, "", t0)
	if err != nil || b != (breaker.Breaker{}) || len(trs) != 0 {
		t.Fatalf("%+v %v %v", b, trs, err)
	}
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]string{}
	for line := range strings.Lines(info) {
		if name, rest, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.HasPrefix(name, "cmdstat_") {
			n, _, _ := strings.Cut(rest, ",")
			calls[strings.TrimPrefix(name, "cmdstat_")] = strings.TrimPrefix(n, "calls=")
		}
	}
	delete(calls, "config|resetstat")
	if want := map[string]string{"evalsha": "1", "hmget": "1"}; !maps.Equal(calls, want) {
		t.Fatalf("commands run %v, want %v", calls, want)
	}
}

// TestTransitionLog checks a whole story's log, as store.Transition
// values, and that Outcome returns the Advance and the Record together.
func TestTransitionLog(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	bs := NewBreakers(srv.Client(), breaker.Config{Threshold: 1, Rest: time.Second, RestMax: 4 * time.Second, Probes: 1})
	const h = "log.example"
	t1, t2, t3, t4 := t0.Add(time.Second), t0.Add(3*time.Second), t0.Add(4*time.Second), t0.Add(5*time.Second)
	steps := []func() ([]store.Transition, error){
		func() ([]store.Transition, error) {
			_, trs, err := bs.Outcome(ctx, breaker.Ticket{Host: h}, breaker.Transient, "503", t0)
			return trs, err
		},
		func() ([]store.Transition, error) {
			_, trs, err := bs.Outcome(ctx, breaker.Ticket{Host: h, Generation: 2, Probe: true}, breaker.Transient, "timeout", t1)
			return trs, err
		},
		func() ([]store.Transition, error) {
			_, trs, err := bs.Pause(ctx, h, "ops", t2)
			return trs, err
		},
		func() ([]store.Transition, error) {
			_, trs, err := bs.Outcome(ctx, breaker.Ticket{Host: h}, breaker.Refused, "403 bot", t3)
			return trs, err
		},
		func() ([]store.Transition, error) {
			_, trs, err := bs.Unpause(ctx, h, t4)
			return trs, err
		},
	}
	want := []store.Transition{
		{At: t0, Host: h, From: "closed", To: "open", Class: "transient", Detail: "503", Generation: 1},
		{At: t1, Host: h, From: "open", To: "half-open", Generation: 2},
		{At: t1, Host: h, From: "half-open", To: "open", Class: "transient", Detail: "timeout", Generation: 3},
		{At: t2, Host: h, From: "open", To: "open", Hold: "paused", Reason: "ops", Generation: 4},
		{At: t3, Host: h, From: "open", To: "open", Hold: "case+paused", Class: "refused", Detail: "403 bot", Reason: "403 bot", Generation: 5},
		{At: t4, Host: h, From: "open", To: "open", Hold: "case", Reason: "unpaused", Generation: 6},
	}
	var returned []store.Transition
	for _, step := range steps {
		trs, err := step()
		if err != nil {
			t.Fatal(err)
		}
		returned = append(returned, trs...)
	}
	if d := diffTransitions(returned, want); d != "" {
		t.Fatalf("returned %s", d)
	}
	logged, err := bs.Transitions(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffTransitions(logged, want); d != "" {
		t.Fatalf("logged %s", d)
	}
	b, _, _ := bs.Get(ctx, h)
	if b.Rest != 2*time.Second || b.Level != 1 || b.HoldReason != "403 bot" || b.PauseReason != "" {
		t.Fatalf("breaker %+v", b)
	}
	if none, err := bs.Transitions(ctx, "other.example"); err != nil || len(none) != 0 {
		t.Fatalf("transitions of an unknown host: %v %v", none, err)
	}
}

// TestCluster runs the scripts on a Redis Cluster: a host's keys share a
// slot, so no script fails with CROSSSLOT, and hosts spread over masters.
func TestCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	ctx := context.Background()
	bs := NewBreakers(cl.Client(), breaker.Config{Threshold: 1})
	for i := range 20 {
		host := fmt.Sprintf("c%d.example", i)
		b, trs, err := bs.Outcome(ctx, breaker.Ticket{Host: host}, breaker.Transient, "x", t0)
		if err != nil || b.State != breaker.Open || len(trs) != 1 {
			t.Fatalf("%s: %+v %v %v", host, b, trs, err)
		}
		if _, _, err := bs.Pause(ctx, host, "p", t0); err != nil {
			t.Fatal(err)
		}
		if _, _, err := bs.Unpause(ctx, host, t0); err != nil {
			t.Fatal(err)
		}
		if ok, err := bs.TryProbe(ctx, host, 3); err != nil || !ok {
			t.Fatalf("TryProbe %v %v", ok, err)
		}
		b, trs, err = bs.Outcome(ctx, breaker.Ticket{Host: host, Generation: 3, Probe: true}, breaker.OK, "", t0)
		if err != nil || b.ProbeSuccesses != 1 || len(trs) != 0 {
			t.Fatalf("%s: %+v %v %v", host, b, trs, err)
		}
		if logged, err := bs.Transitions(ctx, host); err != nil || len(logged) != 3 {
			t.Fatalf("%s: %v %v", host, logged, err)
		}
		if got, ok, err := bs.Get(ctx, host); err != nil || !ok || got != b {
			t.Fatalf("%s: Get %+v %v %v", host, got, ok, err)
		}
	}
}
