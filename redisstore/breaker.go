package redisstore

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/store"
)

// The fleet breaker. In fleet mode the processes of a crawl share one
// circuit per host in Redis, and a Lua script is the authority on it:
// breaker.lua applies one outcome exactly as a breaker.Registry would
// (Breaker.Advance, the registry's ticket acceptance with Refused always
// counting, Breaker.Record), hold.lua applies pauses, unpauses and case
// resolutions (Registry.Pause, Unpause, ResolveCase), and reprieve.lua the
// end of a local fault (Registry.Reprieve), each atomically and with the
// time passed in by the caller, never the server's clock.
//
// A host's breaker is the hash hostKeys.breaker with the fields below, all
// decimal integers except the two reasons; times are Unix milliseconds
// with 0 for the zero time, durations milliseconds. An absent hash reads as
// a clean closed breaker of generation 0. A close does not delete the hash,
// so generations do not restart; only the idle expiry removes an unheld
// breaker, a day (IdleExpiry) after its last change, when no ticket of its
// generations can still be outstanding.
//
//	state         breaker.State (0 closed, 1 open, 2 half-open)
//	failures      Failures
//	probes        ProbeSuccesses
//	opened        OpenedAt
//	rest          Rest
//	level         Level
//	down          DownSince
//	gen           Generation
//	hold          breaker.Hold bits (1 paused, 2 case)
//	hold_reason   HoldReason (the case's refusal detail)
//	pause_reason  PauseReason
//
// The probe gate hostKeys.probe holds the generation of the outstanding
// half-open probe (TryProbe sets it with NX and ProbeTimeout as its expiry);
// a transition deletes it, and so does the report of the probe itself.
// Every transition is appended to hostKeys.transitions as JSON (see
// transitionJSON).
//
// A script changes nothing when the breaker does not change: a clean closed
// host answering ok costs one EVALSHA and no write (not even its expiry).
// When it does change, the hash and the transition log get the idle expiry
// if the breaker is unheld, and lose any expiry if it is held, so a held
// host (a pause, a case) is never forgotten.
//
// Times and durations have millisecond precision in Redis: now is
// truncated to the millisecond, and the configured durations are rounded
// down to whole milliseconds (at least one).

var (
	//go:embed breaker.lua
	breakerLua string
	//go:embed hold.lua
	holdLua string
	//go:embed reprieve.lua
	reprieveLua string
	//go:embed breaker_common.lua
	breakerCommonLua string

	breakerScript  = redis.NewScript(breakerCommonLua + breakerLua)
	holdScript     = redis.NewScript(breakerCommonLua + holdLua)
	reprieveScript = redis.NewScript(breakerCommonLua + reprieveLua)
)

// DefaultIdleExpiry is how long an unheld breaker's hash and transition
// log live in Redis after their last change.
const DefaultIdleExpiry = 24 * time.Hour

// breakerFields are the hash's fields, in the order of the scripts' replies.
var breakerFields = []string{"state", "failures", "probes", "opened", "rest", "level", "down", "gen",
	"hold", "hold_reason", "pause_reason"}

// Breakers is the fleet's shared breakers, one per host, in Redis. It is
// safe for concurrent use; set IdleExpiry before first use.
type Breakers struct {
	rdb redis.UniversalClient
	cfg breaker.Config
	// IdleExpiry is how long an unheld breaker lives after its last change;
	// zero or negative means DefaultIdleExpiry. Held breakers never expire.
	IdleExpiry time.Duration
}

// NewBreakers returns the breakers stored in rdb, run with cfg.WithDefaults().
func NewBreakers(rdb redis.UniversalClient, cfg breaker.Config) *Breakers {
	return &Breakers{rdb: rdb, cfg: cfg.WithDefaults(), IdleExpiry: DefaultIdleExpiry}
}

// Config returns the configuration the breakers run with (defaults applied).
func (b *Breakers) Config() breaker.Config { return b.cfg }

// Outcome applies one classified outcome of a request admitted under
// ticket t at now, and returns the breaker after it and the transitions it
// caused (none, one, or two: an unheld open circuit whose rest has passed
// first goes half-open, then the outcome is recorded). An outcome the
// breaker does not accept (a stale ticket, anything but Refused while open
// or with the breaker disabled) changes nothing else.
//
// A caller admitting requests from a breaker it read (Get, or an earlier
// Outcome) treats an unheld Open breaker whose rest has passed as HalfOpen
// at Generation+1: the script's Advance makes it so before it records the
// probe's outcome.
func (b *Breakers) Outcome(ctx context.Context, t breaker.Ticket, c breaker.Class, detail string, now time.Time) (breaker.Breaker, []store.Transition, error) {
	br, trs, _, err := b.FencedOutcome(ctx, t, c, detail, now, 0)
	return br, trs, err
}

// FencedOutcome is Outcome for a request sent under the host's lease
// token (see the Frontier): the outcome is applied only while token is
// still the host's, and refused otherwise (applied false, nothing written,
// br the breaker as it stands). A token of 0 lifts the fence.
func (b *Breakers) FencedOutcome(ctx context.Context, t breaker.Ticket, c breaker.Class, detail string, now time.Time, token int64) (br breaker.Breaker, trs []store.Transition, applied bool, err error) {
	k := keysOf(t.Host)
	probe := 0
	if t.Probe {
		probe = 1
	}
	disabled := 0
	if b.cfg.Disabled {
		disabled = 1
	}
	keys := []string{k.breaker, k.probe, k.transitions}
	args := []any{string(c), detail, now.UnixMilli(), strconv.FormatUint(t.Generation, 10), probe,
		b.cfg.Threshold, ms(b.cfg.Rest), ms(b.cfg.RestMax), b.cfg.Probes, disabled,
		ms(b.idleExpiry()), t.Host}
	if token != 0 {
		keys = append(keys, k.lease)
		args = append(args, token)
	}
	res, err := breakerScript.Run(ctx, b.rdb, keys, args...).Slice()
	if err != nil {
		return breaker.Breaker{}, nil, false, fmt.Errorf("breaker outcome for %s: %w", t.Host, err)
	}
	applied, br, trs, err = parseReply(res)
	if err != nil {
		return breaker.Breaker{}, nil, false, fmt.Errorf("breaker outcome for %s: %w", t.Host, err)
	}
	return br, trs, applied, nil
}

// TryProbe gates the half-open probe fleet-wide: it sets the host's probe
// gate to generation unless it is set already, expiring after
// Config.ProbeTimeout, and reports whether it did, that is whether this
// caller may send the probe. The gate is freed by the next transition, by
// the probe's own Outcome, or by the expiry, whichever comes first.
func (b *Breakers) TryProbe(ctx context.Context, host string, generation uint64) (bool, error) {
	ok, err := b.rdb.SetNX(ctx, keysOf(host).probe, strconv.FormatUint(generation, 10), msDuration(b.cfg.ProbeTimeout)).Result()
	if err != nil {
		return false, fmt.Errorf("breaker probe gate for %s: %w", host, err)
	}
	return ok, nil
}

// Get reads host's breaker. A host without one reads as the clean closed
// zero Breaker, with ok false.
func (b *Breakers) Get(ctx context.Context, host string) (br breaker.Breaker, ok bool, err error) {
	vals, err := b.rdb.HMGet(ctx, keysOf(host).breaker, breakerFields...).Result()
	if err != nil {
		return breaker.Breaker{}, false, fmt.Errorf("breaker of %s: %w", host, err)
	}
	for _, v := range vals {
		if v != nil {
			ok = true
		}
	}
	if !ok {
		return breaker.Breaker{}, false, nil
	}
	br, err = parseFields(vals)
	if err != nil {
		return breaker.Breaker{}, false, fmt.Errorf("breaker of %s: %w", host, err)
	}
	return br, true, nil
}

// Pause force-opens host with an operator hold, as Registry.Pause: a host
// held by a case keeps it and gains the pause (a transition); pausing a
// paused host only replaces the reason (no transition).
func (b *Breakers) Pause(ctx context.Context, host, reason string, now time.Time) (breaker.Breaker, []store.Transition, error) {
	br, trs, _, err := b.hold(ctx, "pause", host, reason, now)
	if err != nil {
		return breaker.Breaker{}, nil, fmt.Errorf("pause %s: %w", host, err)
	}
	return br, trs, nil
}

// Unpause releases an operator pause, leaving any case, as
// Registry.Unpause: the host goes half-open only if no case holds it. For a
// host that is not paused it returns an error wrapping breaker.ErrCaseOpen
// if a case holds it, else breaker.ErrNotPaused, and the breaker as it is.
func (b *Breakers) Unpause(ctx context.Context, host string, now time.Time) (breaker.Breaker, []store.Transition, error) {
	br, trs, done, err := b.hold(ctx, "unpause", host, "", now)
	switch {
	case err != nil:
		return breaker.Breaker{}, nil, fmt.Errorf("unpause %s: %w", host, err)
	case !done && br.Hold.Has(breaker.Case):
		return br, nil, fmt.Errorf("unpause %s: %w", host, breaker.ErrCaseOpen)
	case !done:
		return br, nil, fmt.Errorf("unpause %s: %w", host, breaker.ErrNotPaused)
	}
	return br, trs, nil
}

// ResolveCase releases a case hold, leaving any pause, as
// Registry.ResolveCase: the host goes half-open only if it is not paused.
// For a host without a case it returns an error wrapping breaker.ErrNoCase,
// and the breaker as it is.
func (b *Breakers) ResolveCase(ctx context.Context, host string, now time.Time) (breaker.Breaker, []store.Transition, error) {
	br, trs, done, err := b.hold(ctx, "resolve", host, "", now)
	switch {
	case err != nil:
		return breaker.Breaker{}, nil, fmt.Errorf("resolve case for %s: %w", host, err)
	case !done:
		return br, nil, fmt.Errorf("resolve case for %s: %w", host, breaker.ErrNoCase)
	}
	return br, trs, nil
}

// hold runs hold.lua; done is false when a release found no such hold.
func (b *Breakers) hold(ctx context.Context, op, host, reason string, now time.Time) (breaker.Breaker, []store.Transition, bool, error) {
	k := keysOf(host)
	res, err := holdScript.Run(ctx, b.rdb, []string{k.breaker, k.probe, k.transitions},
		op, reason, now.UnixMilli(), ms(b.cfg.Rest), ms(b.idleExpiry()), host).Slice()
	if err != nil {
		return breaker.Breaker{}, nil, false, err
	}
	done, br, trs, err := parseReply(res)
	return br, trs, done, err
}

// Reprieve sends host's breaker to half-open with the configured rest and
// its down clock restarted at now, as breaker.Registry.Reprieve does after
// a fault of the caller's own making that began at since, and logs the
// transition with breaker.ReprieveReason. It applies only while the
// breaker is still the circuit the fault opened: open, unheld, at
// generation opened (breaker.Reprieved.Opened) and down since since or
// later; otherwise (closed or re-opened since, by any process, or held) it
// changes nothing and applied is false. The generation is the fence: a
// reprieve is right whoever holds the host's lease now, as long as no one
// has changed the circuit since.
func (b *Breakers) Reprieve(ctx context.Context, host string, opened uint64, since, now time.Time) (br breaker.Breaker, trs []store.Transition, applied bool, err error) {
	if b.cfg.Disabled {
		br, _, err = b.Get(ctx, host)
		return br, nil, false, err
	}
	k := keysOf(host)
	res, err := reprieveScript.Run(ctx, b.rdb, []string{k.breaker, k.probe, k.transitions},
		strconv.FormatUint(opened, 10), since.UnixMilli(), now.UnixMilli(), ms(b.cfg.Rest), ms(b.idleExpiry()),
		host, breaker.ReprieveReason).Slice()
	if err != nil {
		return breaker.Breaker{}, nil, false, fmt.Errorf("reprieve the breaker of %s: %w", host, err)
	}
	applied, br, trs, err = parseReply(res)
	if err != nil {
		return breaker.Breaker{}, nil, false, fmt.Errorf("reprieve the breaker of %s: %w", host, err)
	}
	return br, trs, applied, nil
}

// Transitions returns host's logged transitions, oldest first.
func (b *Breakers) Transitions(ctx context.Context, host string) ([]store.Transition, error) {
	raw, err := b.rdb.LRange(ctx, keysOf(host).transitions, 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("breaker transitions of %s: %w", host, err)
	}
	out := make([]store.Transition, 0, len(raw))
	for _, s := range raw {
		tr, err := parseTransition(s)
		if err != nil {
			return nil, fmt.Errorf("breaker transitions of %s: %w", host, err)
		}
		out = append(out, tr)
	}
	return out, nil
}

func (b *Breakers) idleExpiry() time.Duration {
	if b.IdleExpiry <= 0 {
		return DefaultIdleExpiry
	}
	return b.IdleExpiry
}

// ms is d in whole milliseconds, at least one.
func ms(d time.Duration) int64 { return max(d.Milliseconds(), 1) }

func msDuration(d time.Duration) time.Duration { return time.Duration(ms(d)) * time.Millisecond }

// msTime is the time of a stored Unix millisecond value; 0 is the zero time.
func msTime(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

// transitionJSON is a logged transition as the scripts write it (cjson).
type transitionJSON struct {
	AtMS       int64  `json:"at_ms"`
	Host       string `json:"host"`
	From       string `json:"from"`
	To         string `json:"to"`
	Hold       string `json:"hold"`
	Class      string `json:"class"`
	Detail     string `json:"detail"`
	Reason     string `json:"reason"`
	Generation uint64 `json:"generation"`
}

func parseTransition(s string) (store.Transition, error) {
	var j transitionJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return store.Transition{}, fmt.Errorf("transition %q: %w", s, err)
	}
	return store.Transition{At: time.UnixMilli(j.AtMS).UTC(), Host: j.Host, From: j.From, To: j.To,
		Hold: j.Hold, Class: j.Class, Detail: j.Detail, Reason: j.Reason, Generation: j.Generation}, nil
}

// parseReply reads a script's reply: {status, the breaker's fields...,
// transitions...}.
func parseReply(res []any) (done bool, br breaker.Breaker, trs []store.Transition, err error) {
	n := len(breakerFields)
	if len(res) < 1+n {
		return false, br, nil, fmt.Errorf("short script reply (%d values)", len(res))
	}
	status, err := toInt(res[0])
	if err != nil {
		return false, br, nil, err
	}
	if br, err = parseFields(res[1 : 1+n]); err != nil {
		return false, br, nil, err
	}
	for _, v := range res[1+n:] {
		s, ok := v.(string)
		if !ok {
			return false, br, nil, fmt.Errorf("transition is %T, not a string", v)
		}
		tr, err := parseTransition(s)
		if err != nil {
			return false, br, nil, err
		}
		trs = append(trs, tr)
	}
	return status == 1, br, trs, nil
}

// parseFields builds a Breaker from the values of breakerFields, in order
// (integers or decimal strings; nil for a missing field).
func parseFields(v []any) (breaker.Breaker, error) {
	var n [9]int64
	for i := range n {
		if v[i] == nil {
			continue
		}
		x, err := toInt(v[i])
		if err != nil {
			return breaker.Breaker{}, fmt.Errorf("field %s: %w", breakerFields[i], err)
		}
		n[i] = x
	}
	str := func(x any) string { s, _ := x.(string); return s }
	if n[7] < 0 {
		return breaker.Breaker{}, errors.New("field gen: negative")
	}
	return breaker.Breaker{
		State:          breaker.State(n[0]),
		Failures:       int(n[1]),
		ProbeSuccesses: int(n[2]),
		OpenedAt:       msTime(n[3]),
		Rest:           time.Duration(n[4]) * time.Millisecond,
		Level:          int(n[5]),
		DownSince:      msTime(n[6]),
		Generation:     uint64(n[7]),
		Hold:           breaker.Hold(n[8]),
		HoldReason:     str(v[9]),
		PauseReason:    str(v[10]),
	}, nil
}

func toInt(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T %v", v, v)
}
