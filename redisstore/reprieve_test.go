package redisstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// TestReprieveTable checks reprieve.lua from every kind of starting
// breaker at fixed times: a local fault began at since and ends at t0; only
// a breaker still open, unheld, of the generation the process's copy had
// and down since the fault began goes to half-open, exactly as the
// process's own breaker.Registry.Reprieve sends it there; every other is
// left as it was, with nothing written.
func TestReprieveTable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	bs := NewBreakers(rdb, tableCfg)
	s := time.Second
	since := t0.Add(-time.Minute)
	at := func(d time.Duration) time.Time { return t0.Add(-d) }
	rows := []struct {
		name   string
		start  *breaker.Breaker // nil: no hash
		opened uint64           // the generation the caller's copy was open at
		want   bool             // reprieved
	}{
		{"opened during the fault", &breaker.Breaker{State: breaker.Open, OpenedAt: at(30 * s), Rest: 5 * s,
			DownSince: at(30 * s), Generation: 4}, 4, true},
		{"opened as the fault began", &breaker.Breaker{State: breaker.Open, OpenedAt: since, Rest: 5 * s,
			DownSince: since, Generation: 4}, 4, true},
		{"escalated during the fault", &breaker.Breaker{State: breaker.Open, OpenedAt: at(10 * s), Rest: 20 * s, Level: 2,
			DownSince: at(50 * s), Generation: 8}, 8, true},
		{"open, rest over", &breaker.Breaker{State: breaker.Open, OpenedAt: at(40 * s), Rest: 5 * s,
			DownSince: at(40 * s), Generation: 4}, 4, true},
		{"re-opened since by another process", &breaker.Breaker{State: breaker.Open, OpenedAt: at(s), Rest: 10 * s, Level: 1,
			DownSince: at(30 * s), Generation: 6}, 4, false},
		{"down before the fault", &breaker.Breaker{State: breaker.Open, OpenedAt: at(30 * s), Rest: 20 * s, Level: 2,
			DownSince: at(2 * time.Minute), Generation: 4}, 4, false},
		{"already half-open", &breaker.Breaker{State: breaker.HalfOpen, OpenedAt: at(30 * s), Rest: 5 * s,
			DownSince: at(30 * s), Generation: 5}, 4, false},
		{"half-open at the generation given", &breaker.Breaker{State: breaker.HalfOpen, OpenedAt: at(30 * s), Rest: 5 * s,
			DownSince: at(30 * s), Generation: 4}, 4, false},
		{"closed since", &breaker.Breaker{Rest: 5 * s, Generation: 6}, 4, false},
		{"paused", &breaker.Breaker{State: breaker.Open, OpenedAt: at(30 * s), Rest: 5 * s, DownSince: at(30 * s), Generation: 4,
			Hold: breaker.Paused, PauseReason: "maintenance"}, 4, false},
		{"case", &breaker.Breaker{State: breaker.Open, OpenedAt: at(30 * s), Rest: 5 * s, DownSince: at(30 * s), Generation: 4,
			Hold: breaker.Case, HoldReason: "403 names us"}, 4, false},
		{"absent", nil, 0, false},
	}
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			host := fmt.Sprintf("reprieve%d.example", i)
			var start breaker.Breaker
			if row.start != nil {
				start = *row.start
				ttl := time.Hour
				if start.Hold != breaker.NoHold {
					ttl = 0
				}
				seed(t, rdb, host, start, ttl)
			}
			if err := rdb.Set(ctx, keysOf(host).probe, start.Generation, 0).Err(); err != nil {
				t.Fatal(err)
			}
			got, trs, applied, err := bs.Reprieve(ctx, host, row.opened, since, t0)
			if err != nil {
				t.Fatal(err)
			}
			if applied != row.want {
				t.Fatalf("applied = %v, want %v (breaker %+v)", applied, row.want, got)
			}
			want, wantTrs := start, []store.Transition(nil)
			if row.want {
				want = registryReprieve(t, host, start, since, t0)
				wantTrs = []store.Transition{{At: t0, Host: host, From: "open", To: "half-open",
					Reason: breaker.ReprieveReason, Generation: start.Generation + 1}}
			}
			if d := diffBreaker(got, want); d != "" {
				t.Errorf("reply: %s", d)
			}
			if d := diffTransitions(trs, wantTrs); d != "" {
				t.Errorf("reply: %s", d)
			}
			stored, ok, err := bs.Get(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			if ok != (row.start != nil) {
				t.Errorf("stored: ok = %v for a start of %v", ok, row.start)
			}
			if d := diffBreaker(stored, want); d != "" {
				t.Errorf("stored: %s", d)
			}
			logged, err := bs.Transitions(ctx, host)
			if err != nil {
				t.Fatal(err)
			}
			if d := diffTransitions(logged, wantTrs); d != "" {
				t.Errorf("logged: %s", d)
			}
			if g := gate(t, rdb, host); (g == nil) != row.want {
				t.Errorf("probe gate %v: want it freed only by a reprieve (a new generation)", g)
			}
			if row.start != nil {
				checkExpiry(t, rdb, host, start.Hold != breaker.NoHold, DefaultIdleExpiry)
			}
		})
	}
}

// registryReprieve is what breaker.Registry.Reprieve makes of start, a
// breaker the registry reprieves.
func registryReprieve(t *testing.T, host string, start breaker.Breaker, since, now time.Time) breaker.Breaker {
	t.Helper()
	r := breaker.NewRegistry(tableCfg, nil)
	r.Load(host, start)
	got := r.Reprieve(since, now)
	if len(got) != 1 || got[0] != (breaker.Reprieved{Host: host, Opened: start.Generation}) {
		t.Fatalf("the registry reprieves %+v of %+v, want %s at generation %d", got, start, host, start.Generation)
	}
	b, _ := r.Get(host)
	return b
}

// A reprieve with the breaker disabled changes nothing: a disabled
// breaker's registry reprieves nothing either.
func TestReprieveDisabled(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	cfg := tableCfg
	cfg.Disabled = true
	start := breaker.Breaker{State: breaker.Open, OpenedAt: t0.Add(-time.Second), Rest: 5 * time.Second,
		DownSince: t0.Add(-time.Second), Generation: 4}
	seed(t, rdb, "off.example", start, time.Hour)
	got, trs, applied, err := NewBreakers(rdb, cfg).Reprieve(context.Background(), "off.example", 4, t0.Add(-time.Minute), t0)
	if err != nil || applied || len(trs) != 0 {
		t.Fatalf("Reprieve with the breaker disabled = %+v, %v, %v, %v; want nothing done", got, trs, applied, err)
	}
	if d := diffBreaker(got, start); d != "" {
		t.Error(d)
	}
}

// An outcome that moves a held host's shared circuit hands the engine the
// store's breaker, generation included, so that the engine's next tickets
// (a probe's, a local fault's reprieve) name the store's circuit; one that
// moves nothing costs no callback.
func TestMovedCircuitIsHandedToTheEngine(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	o := ftOptions(s, "p1", 0, 4)
	o.Breakers = NewBreakers(s.Client(), breaker.Config{Threshold: 2, Rest: time.Minute, Probes: 1})
	var mu sync.Mutex
	var handed []breaker.Breaker
	o.OnBreaker = func(host string, b breaker.Breaker) {
		mu.Lock()
		defer mu.Unlock()
		handed = append(handed, b)
	}
	f := OpenFrontier(s, o)
	defer f.Close()
	items := ftSite(1, 3)
	if err := f.Add(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := f.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	host := l.Item.Host
	// The engine's own generations need not be the store's: 40 here.
	f.Outcome(breaker.Ticket{Host: host, Generation: 40}, breaker.Transient, "timeout", time.Now())
	waitUntil(t, 5*time.Second, "the first failure is stored", func() bool {
		b, _, _ := o.Breakers.Get(ctx, host)
		return b.Failures == 1
	})
	mu.Lock()
	if len(handed) != 0 {
		t.Errorf("a failure that opened nothing handed the engine %v", handed)
	}
	mu.Unlock()
	f.Outcome(breaker.Ticket{Host: host, Generation: 40}, breaker.Transient, "timeout", time.Now())
	waitUntil(t, 5*time.Second, "the opened circuit is handed to the engine", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handed) > 0
	})
	shared, _, err := o.Breakers.Get(ctx, host)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := handed[len(handed)-1]; got.State != breaker.Open || got.Generation != shared.Generation {
		t.Errorf("handed %v gen %d, want the store's open circuit gen %d", got.State, got.Generation, shared.Generation)
	}
}
