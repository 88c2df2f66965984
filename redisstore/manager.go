package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/store"
)

// manager keeps the process's hosts: it loads their queues, takes more
// hosts when it has too few with work, gives back those that ran dry or
// rest, renews the leases, and looks at the shards for work left.
func (f *Frontier) manager() {
	defer f.done.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var renewed, claimed, looked time.Time
	poll := minPoll // grows while a process looks and finds nothing
	for {
		select {
		case <-f.stop:
			return
		case <-tick.C:
		case <-f.kickMgr:
		}
		f.mu.Lock()
		down := f.down
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		if down {
			// The writer's next success ends the outage too, but a process
			// with nothing to write must also see Redis come back.
			if err = f.s.rdb.Ping(ctx).Err(); err == nil {
				f.mu.Lock()
				f.markUpLocked()
				f.mu.Unlock()
				down = false
				renewed = time.Time{} // renew first: leases may have expired meanwhile
			}
		}
		if err == nil && time.Since(renewed) >= f.o.Lease/4 {
			if err = f.renew(ctx); err == nil {
				renewed = time.Now()
			}
		}
		if err == nil && !down {
			err = f.refill(ctx)
			// An empty claim or look is not repeated at once: an idle
			// process must not keep Redis busy.
			if f.listedNew.Swap(false) {
				poll, claimed, looked = minPoll, time.Time{}, time.Time{} // this process just listed hosts: look now
			}
			if err == nil && time.Since(claimed) >= poll {
				var got int
				if got, err = f.claim(ctx); got == 0 {
					claimed = time.Now()
					poll = min(2*poll, maxPoll)
				} else {
					poll = minPoll
				}
			}
			if err == nil {
				err = f.giveBack(ctx)
			}
			if err == nil && time.Since(looked) >= poll {
				looked = time.Now()
				err = f.lookAtFleet(ctx)
			}
		}
		cancel()
		if isNoScript(err) && f.s.loadScripts(context.Background()) == nil {
			err = nil // Redis restarted and forgot the scripts, which are loaded again: no outage
		}
		if err != nil {
			f.mu.Lock()
			f.markDownLocked(err)
			f.mu.Unlock()
			kick(f.kickWriter) // the writer's next success ends the outage
		}
	}
}

// A process with nothing to do looks for work every minPoll at first,
// then less often, up to maxPoll.
const (
	minPoll = 20 * time.Millisecond
	maxPoll = 100 * time.Millisecond
)

// refill loads the queues of hosts whose buffers run low.
func (f *Frontier) refill(ctx context.Context) error {
	now := f.o.Now()
	f.mu.Lock()
	var want []string
	for name, h := range f.hosts {
		due := h.nextDue >= 0 && h.nextDue <= now.UnixMilli()
		low := len(h.buf) < f.o.Buffer/2 && (h.stale || !h.loaded || h.queued > int64(len(h.pending)+len(h.buf)) || due)
		if low {
			want = append(want, name)
		}
	}
	f.mu.Unlock()
	return f.loadHosts(ctx, want, now)
}

// loadHosts loads the queues of hosts, in one round trip.
func (f *Frontier) loadHosts(ctx context.Context, hosts []string, now time.Time) error {
	if len(hosts) == 0 {
		return nil
	}
	pipe := f.s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(hosts))
	f.mu.Lock()
	limits := make([]int, len(hosts))
	for i, name := range hosts {
		limits[i] = f.o.Buffer
		if h := f.hosts[name]; h != nil {
			limits[i] += len(h.pending)
			clear(h.settled)
		}
	}
	f.mu.Unlock()
	for i, name := range hosts {
		cmds[i] = f.s.loadCmd(ctx, pipe, name, now, limits[i], 256)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, name := range hosts {
		items, queued, nextDue, err := parseLoad(name, cmds[i])
		if err != nil {
			return err
		}
		h := f.hosts[name]
		if h == nil {
			continue
		}
		h.queued, h.nextDue, h.loaded, h.stale = queued, nextDue, true, false
		have := make(map[store.Hash]struct{}, len(h.buf))
		for _, it := range h.buf {
			have[it.Hash] = struct{}{}
		}
		for _, it := range items {
			_, busy := h.pending[it.Hash]
			_, done := h.settled[it.Hash]
			_, dup := have[it.Hash]
			if !busy && !done && !dup {
				h.buf = append(h.buf, it)
			}
		}
	}
	f.broadcastLocked()
	return nil
}

// claim takes hosts from the shards' ready sets until the process holds
// Hosts hosts with work or no shard has one ready.
func (f *Frontier) claim(ctx context.Context) (int, error) {
	f.mu.Lock()
	busy := 0
	for _, h := range f.hosts {
		if h.hasWork() && !h.held {
			busy++
		}
	}
	need := f.o.Hosts - busy
	start := f.nextShard
	f.nextShard = (f.nextShard + 1) % Shards
	f.mu.Unlock()
	if need <= 0 {
		return 1, nil
	}
	now := f.o.Now()
	expiry := now.Add(f.o.Lease).UnixMilli()
	pipe := f.s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, Shards)
	// Ask every shard at once for its share, from a shard that turns, so
	// that processes do not all empty the same shard first.
	per := max(1, (need+Shards-1)/Shards)
	for i := range Shards {
		shard := (start + i) % Shards
		cmds[i] = f.shardCall(ctx, pipe, shard, "claim", f.o.ID, now.UnixMilli(), expiry, per)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, err
	}
	var got []string
	for _, c := range cmds {
		hosts, err := c.StringSlice()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		got = append(got, hosts...)
	}
	if len(got) == 0 {
		return 0, nil
	}
	if len(got) > need {
		// Every shard was asked for its share at once: give back what
		// exceeds the process's need, ready now for the rest of the fleet.
		back := f.s.rdb.Pipeline()
		for _, host := range got[need:] {
			f.shardCall(ctx, back, shardOf(host), "release", f.o.ID, host, now.UnixMilli())
		}
		if _, err := back.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		got = got[:need]
	}
	breakers := make([]breaker.Breaker, len(got))
	for i, host := range got {
		b, _, err := f.o.Breakers.Get(ctx, host)
		if err != nil {
			return 0, fmt.Errorf("breaker of %s: %w", host, err)
		}
		breakers[i] = b
	}
	f.mu.Lock()
	for i, host := range got {
		if f.hosts[host] == nil {
			f.hosts[host] = &ownedHost{name: host, pending: map[store.Hash]struct{}{},
				settled: map[store.Hash]struct{}{}, nextDue: -1,
				gen: breakers[i].Generation}
		}
	}
	f.mu.Unlock()
	for i, host := range got {
		f.o.OnClaim(host, breakers[i])
	}
	return len(got), f.loadHosts(ctx, got, now)
}

// giveBack returns to the fleet the hosts with nothing in flight that
// ran dry, rest for a while, or are held.
func (f *Frontier) giveBack(ctx context.Context) error {
	now := f.o.Now()
	type back struct {
		name string
		at   int64 // -1: drained, drop it unless touched meanwhile
	}
	var backs []back
	f.mu.Lock()
	for name, h := range f.hosts {
		if h.inflight > 0 || h.writes > 0 || len(h.pending) > 0 || !h.loaded || h.stale {
			continue
		}
		switch {
		case h.held:
			backs = append(backs, back{name, heldScore})
		case h.parked.After(now.Add(time.Second)):
			backs = append(backs, back{name, h.parked.UnixMilli()})
		case len(h.buf) == 0 && h.queued == 0 && h.nextDue >= 0:
			backs = append(backs, back{name, h.nextDue})
		case len(h.buf) == 0 && h.queued == 0:
			backs = append(backs, back{name, -1})
		}
	}
	f.mu.Unlock()
	if len(backs) == 0 {
		return nil
	}
	// A drained host is dropped only if no URL was queued for it since its
	// touch count was read, before its queue was found empty.
	pipe := f.s.rdb.Pipeline()
	touches := map[string]*redis.StringCmd{}
	for _, b := range backs {
		if b.at < 0 {
			touches[b.name] = pipe.HGet(ctx, keysOfShard(shardOf(b.name)).touch, b.name)
		}
	}
	if len(touches) > 0 {
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		pipe = f.s.rdb.Pipeline()
		counts := map[string]*redis.IntCmd{}
		for name := range touches {
			k := keysOf(name)
			counts[name] = pipe.ZCard(ctx, k.queue)
			counts[name+"\x00d"] = pipe.ZCard(ctx, k.deferred)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		for i, b := range backs {
			if b.at < 0 && counts[b.name].Val()+counts[b.name+"\x00d"].Val() > 0 {
				backs[i].at = now.UnixMilli() // not empty after all: ready for whoever comes
			}
		}
	}
	pipe = f.s.rdb.Pipeline()
	for _, b := range backs {
		if b.at < 0 {
			f.shardCall(ctx, pipe, shardOf(b.name), "drop", f.o.ID, b.name, touches[b.name].Val())
		} else {
			f.shardCall(ctx, pipe, shardOf(b.name), "release", f.o.ID, b.name, b.at)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	f.mu.Lock()
	for _, b := range backs {
		if h := f.hosts[b.name]; h != nil && h.inflight == 0 && h.writes == 0 && len(h.pending) == 0 {
			delete(f.hosts, b.name)
		}
	}
	f.mu.Unlock()
	return nil
}

// renew extends the leases of every held host, drops the hosts another
// process has taken meanwhile, records the heartbeat, and reloads the
// breakers someone else changed (an operator's pause).
func (f *Frontier) renew(ctx context.Context) error {
	now := f.o.Now()
	f.mu.Lock()
	byShard := map[int][]any{}
	gens := map[string]uint64{}
	for name, h := range f.hosts {
		byShard[shardOf(name)] = append(byShard[shardOf(name)], name)
		gens[name] = h.gen
	}
	inflight := f.inflight
	f.mu.Unlock()
	expiry := now.Add(f.o.Lease).UnixMilli()
	pipe := f.s.rdb.Pipeline()
	var cmds []*redis.Cmd
	for shard, hosts := range byShard {
		cmds = append(cmds, f.shardCall(ctx, pipe, shard, append([]any{"renew", f.o.ID, expiry}, hosts...)...))
	}
	genCmds := map[string]*redis.StringCmd{}
	for name := range gens {
		genCmds[name] = pipe.HGet(ctx, keysOf(name).breaker, "gen")
	}
	beat, _ := json.Marshal(map[string]any{"at": now.UTC(), "hosts": len(gens), "in_flight": inflight})
	pipe.HSet(ctx, keyProcs, f.o.ID, beat)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	var lost []string
	for _, c := range cmds {
		hosts, _ := c.StringSlice()
		lost = append(lost, hosts...)
	}
	var changed []string
	for name, c := range genCmds {
		g, err := strconv.ParseUint(c.Val(), 10, 64)
		if err == nil && g != gens[name] {
			changed = append(changed, name)
		}
	}
	if len(lost) > 0 {
		f.o.Logger.Warn("lost host leases to another process (this one was too slow to renew them)",
			"store", f.s.display, "hosts", len(lost))
		f.mu.Lock()
		for _, name := range lost {
			if h := f.hosts[name]; h != nil {
				h.buf, h.held = nil, true // its leases in flight end; nothing new is leased
				delete(f.hosts, name)
			}
		}
		f.mu.Unlock()
	}
	for _, name := range changed {
		b, _, err := f.o.Breakers.Get(ctx, name)
		if err != nil {
			return err
		}
		f.mu.Lock()
		h := f.hosts[name]
		if h != nil {
			h.gen = b.Generation
		}
		f.mu.Unlock()
		if h != nil {
			f.o.OnBreaker(name, b)
		}
	}
	return nil
}

// lookAtFleet counts, when this process has nothing to do, the hosts of
// the whole fleet with work: none but held ones means the crawl is over.
// Before saying so it lists again every host whose counters show work,
// in case a process died between queueing URLs and listing their host.
func (f *Frontier) lookAtFleet(ctx context.Context) error {
	f.mu.Lock()
	local := f.inflight > 0 || len(f.jobs) > 0 || f.writing > 0 || f.feeding > 0
	for _, h := range f.hosts {
		local = local || (h.hasWork() && !h.held)
	}
	f.mu.Unlock()
	if local {
		f.mu.Lock()
		f.fleetIdle = false
		f.mu.Unlock()
		return nil
	}
	active, held, err := f.s.readyCounts(ctx)
	if err != nil {
		return err
	}
	idle := active == 0
	if idle {
		relisted, err := f.s.relist(ctx, f.o.Now())
		if err != nil {
			return err
		}
		idle = relisted == 0
	}
	f.mu.Lock()
	f.fleetIdle, f.fleetHeld = idle, int(held)
	f.broadcastLocked()
	f.mu.Unlock()
	return nil
}

// readyCounts counts the listed hosts of every shard: those with work to
// do or waiting for a time or a lease, and those held for a person.
func (s *Store) readyCounts(ctx context.Context) (active, held int64, err error) {
	pipe := s.rdb.Pipeline()
	var a, h [Shards]*redis.IntCmd
	lim := strconv.FormatInt(heldScore, 10)
	for i := range Shards {
		k := keysOfShard(i)
		a[i] = pipe.ZCount(ctx, k.ready, "-inf", "("+lim)
		h[i] = pipe.ZCount(ctx, k.ready, lim, "+inf")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, 0, err
	}
	for i := range Shards {
		active += a[i].Val()
		held += h[i].Val()
	}
	return active, held, nil
}

// relist lists again, ready now, every host with URLs queued or deferred
// that no shard lists, and reports how many it found.
func (s *Store) relist(ctx context.Context, now time.Time) (int, error) {
	n := 0
	err := s.eachHost(ctx, func(hosts []string, shard int) error {
		pipe := s.rdb.Pipeline()
		counts := make([]*redis.SliceCmd, len(hosts))
		scores := make([]*redis.FloatCmd, len(hosts))
		for i, h := range hosts {
			counts[i] = pipe.HMGet(ctx, keysOf(h).counts, "queued", "deferred")
			scores[i] = pipe.ZScore(ctx, keysOfShard(shard).ready, h)
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
		var lost []any
		for i, h := range hosts {
			if scores[i].Err() == nil {
				continue
			}
			if countAt(counts[i].Val(), 0)+countAt(counts[i].Val(), 1) > 0 {
				lost = append(lost, h)
			}
		}
		if len(lost) == 0 {
			return nil
		}
		n += len(lost)
		k := keysOfShard(shard)
		return shardScript.Run(ctx, s.rdb, []string{k.ready, k.owner, k.touch, k.hosts},
			append([]any{"touch", now.UnixMilli()}, lost...)...).Err()
	})
	return n, err
}

func countAt(vals []any, i int) int64 {
	if i >= len(vals) || vals[i] == nil {
		return 0
	}
	s, _ := vals[i].(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// eachHost calls fn with the hosts of every shard, a chunk at a time.
func (s *Store) eachHost(ctx context.Context, fn func(hosts []string, shard int) error) error {
	for shard := range Shards {
		key := keysOfShard(shard).hosts
		var cursor uint64
		for {
			hosts, next, err := s.rdb.SScan(ctx, key, cursor, "", 1000).Result()
			if err != nil {
				return err
			}
			if len(hosts) > 0 {
				if err := fn(hosts, shard); err != nil {
					return err
				}
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
	}
	return nil
}

// loadCmd queues a host's load script on pipe.
func (s *Store) loadCmd(ctx context.Context, pipe redis.Pipeliner, host string, now time.Time, limit, promote int) *redis.Cmd {
	k := keysOf(host)
	return loadScript.EvalSha(ctx, pipe, []string{k.queue, k.deferred, k.items, k.counts}, now.UnixMilli(), limit, promote)
}

// load reads a host's first limit queued URLs at once.
func (s *Store) load(ctx context.Context, host string, now time.Time, limit, promote int) ([]store.Item, int64, int64, error) {
	k := keysOf(host)
	c := loadScript.Run(ctx, s.rdb, []string{k.queue, k.deferred, k.items, k.counts}, now.UnixMilli(), limit, promote)
	return parseLoad(host, c)
}

func parseLoad(host string, c *redis.Cmd) (items []store.Item, queued, nextDue int64, err error) {
	vals, err := c.Slice()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("load the queue of %s: %w", host, err)
	}
	if len(vals) < 2 || (len(vals)-2)%3 != 0 {
		return nil, 0, 0, fmt.Errorf("load the queue of %s: %d values", host, len(vals))
	}
	queued, _ = vals[0].(int64)
	nextDue, _ = vals[1].(int64)
	for i := 2; i < len(vals); i += 3 {
		hs, _ := vals[i].(string)
		seq, _ := vals[i+1].(int64)
		entry, _ := vals[i+2].(string)
		it, err := store.DecodeItem(host, uint64(seq), []byte(entry))
		if err != nil {
			return nil, 0, 0, err
		}
		if h, err := parseHash(hs); err != nil || h != it.Hash {
			return nil, 0, 0, fmt.Errorf("queue of %s: entry %s holds another URL's hash", host, hs)
		}
		items = append(items, it)
	}
	return items, queued, nextDue, nil
}

// loadScripts loads every script on every master, for the pipelines'
// EVALSHA (a restarted Redis has forgotten them).
func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range []*redis.Script{applyScript, loadScript, shardScript} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load scripts: %w", err)
		}
	}
	return nil
}
