package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/store"
)

// manager keeps the process's hosts: it loads their queues, takes more
// hosts when it has too few with work, gives back those that ran dry or
// rest, renews the leases, and looks at the shards for work left.
//
// A process with too few hosts does not poll the shards: it claims on a
// shard when the work channel says a host there became ready (listen),
// and otherwise looks at every shard only every idlePoll, which catches
// the leases of processes that died and whatever a lost message said.
func (f *Frontier) manager() {
	defer f.done.Done()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var renewed, nextLook time.Time
	busy := false // the process had work at its last look
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
		if err == nil && time.Since(renewed) >= renewEvery(f.o.Lease) {
			if err = f.renew(ctx); err == nil {
				renewed = time.Now()
			}
		}
		if err == nil && !down {
			err = f.refill(ctx)
			if f.listedNew.Swap(false) {
				nextLook = time.Time{} // this process just listed hosts: look now
			}
			if err == nil {
				err = f.giveBack(ctx) // first: a look must not count the hosts it is done with
			}
			local := f.localWork()
			if (busy || f.hasNews(f.o.Now())) && !local {
				nextLook = time.Time{} // it just ran out, or a shard changed: is the fleet done?
			}
			busy = local
			if local {
				f.mu.Lock()
				f.fleetIdle = false
				f.mu.Unlock()
			}
			if err == nil {
				var looked, full bool
				looked, full, err = f.claim(ctx, !time.Now().Before(nextLook))
				switch {
				case full:
					nextLook = time.Time{} // more hosts may be ready: look as soon as it has room
				case looked:
					nextLook = time.Now().Add(f.idlePoll())
				}
			}
		}
		cancel()
		if isNoScript(err) && f.s.loadScripts(context.Background()) == nil {
			err = nil // Redis restarted and forgot the scripts, which are loaded again: no outage
		}
		if errors.Is(err, errTakenOver) {
			f.fail(err)
			return
		}
		if err != nil {
			f.mu.Lock()
			f.markDownLocked(err)
			f.mu.Unlock()
			kick(f.kickWriter) // the writer's next success ends the outage
		}
	}
}

// workChannel is where shard.lua announces hosts made ready.
const workChannel = "bw:work"

// listen takes the work channel's messages ("N": a host of shard N is
// ready now; "N DELAY": one will be in DELAY ms) for the manager, which
// claims on the shards named instead of polling them all.
func (f *Frontier) listen() {
	defer f.done.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps := f.s.rdb.Subscribe(ctx, workChannel)
	defer ps.Close()
	msgs := ps.Channel(redis.WithChannelHealthCheckInterval(30 * time.Second))
	for {
		select {
		case <-f.stop:
			return
		case m, ok := <-msgs:
			if !ok {
				return
			}
			shard, delay, ok := parseNews(m.Payload)
			if !ok {
				continue
			}
			f.noteNews(shard, f.o.Now().Add(delay))
		}
	}
}

func parseNews(payload string) (shard int, delay time.Duration, ok bool) {
	head, tail, hasDelay := strings.Cut(payload, " ")
	n, err := strconv.Atoi(head)
	if err != nil || n < 0 || n >= Shards {
		return 0, 0, false
	}
	if hasDelay {
		d, err := strconv.ParseInt(tail, 10, 64)
		if err != nil || d < 0 {
			return 0, 0, false
		}
		delay = time.Duration(d) * time.Millisecond
	}
	return n, delay, true
}

// noteNews records that shard has a host ready at at (the earliest kept).
func (f *Frontier) noteNews(shard int, at time.Time) {
	f.newsMu.Lock()
	if old, ok := f.news[shard]; !ok || at.Before(old) {
		f.news[shard] = at
	}
	f.newsMu.Unlock()
	if !at.After(f.o.Now()) {
		kick(f.kickMgr)
	}
}

// hasNews reports whether the work channel said something due by now
// that is not yet taken (news of a host ready later waits its time).
func (f *Frontier) hasNews(now time.Time) bool {
	f.newsMu.Lock()
	defer f.newsMu.Unlock()
	for _, at := range f.news {
		if !at.After(now) {
			return true
		}
	}
	return false
}

// takeNews removes and returns the shards with news due by now.
func (f *Frontier) takeNews(now time.Time) []int {
	f.newsMu.Lock()
	defer f.newsMu.Unlock()
	var due []int
	for shard, at := range f.news {
		if !at.After(now) {
			due = append(due, shard)
			delete(f.news, shard)
		}
	}
	return due
}

// renewEvery is how often the leases are renewed: a fifth of a lease,
// so that a lease keeps four fifths, more than a request's timeout
// (MinLease), with room for a late renewal.
func renewEvery(lease time.Duration) time.Duration { return lease / 5 }

// idlePoll is how often a process that wants more hosts looks at every
// shard: each look is one command per shard, so an idle process costs
// Redis a few commands a second.
func (f *Frontier) idlePoll() time.Duration {
	return min(max(f.o.Lease/2, 250*time.Millisecond), 4*time.Second)
}

// localWork reports whether the process has anything to do itself.
func (f *Frontier) localWork() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	local := f.inflight > 0 || len(f.jobs) > 0 || f.writing > 0 || f.feeding > 0
	for _, h := range f.hosts {
		local = local || (h.hasWork() && !h.held)
	}
	return local
}

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
		cmds[i] = f.s.loadCmd(ctx, pipe, name, f.serverMS(now), limits[i], 256)
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
		h.queued, h.nextDue, h.loaded, h.stale = queued, f.localMS(nextDue), true, false
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
// Hosts hosts with work: from the shards the work channel named, and,
// with look, from every shard with a host due, after a look at all of
// them that also tells whether the fleet has work left (lookAtFleet).
// It reports whether it looked, and whether it took as many hosts as it
// had room for (full: more may be ready).
func (f *Frontier) claim(ctx context.Context, look bool) (looked, full bool, err error) {
	f.mu.Lock()
	busy := 0
	for _, h := range f.hosts {
		if h.hasWork() && !h.held {
			busy++
		}
	}
	need := f.o.Hosts - busy
	f.mu.Unlock()
	shards := f.takeNews(f.o.Now())
	if need <= 0 {
		return false, false, nil
	}
	if look {
		// The writes that queued URLs are counted before the peek: one that
		// lands after it, unseen by it, then says the fleet is not idle.
		f.mu.Lock()
		gen := f.queuedGen
		f.mu.Unlock()
		// So are the fleet's, by a read of their count before the peek.
		fleetGen, err := f.s.queuedCount(ctx)
		if err != nil {
			return false, false, err
		}
		due, active, err := f.s.peek(ctx)
		if err != nil {
			return false, false, err
		}
		for _, n := range due {
			if !slices.Contains(shards, n) {
				shards = append(shards, n)
			}
		}
		if err := f.lookAtFleet(ctx, active, gen, fleetGen); err != nil {
			return true, false, err
		}
	}
	if len(shards) == 0 {
		return look, false, nil
	}
	got, err := f.claimOn(ctx, shards, need)
	if err != nil || len(got) == 0 {
		return look, false, err
	}
	return look, len(got) >= need, f.take(ctx, got)
}

// claimOn asks each of shards at once for its share of need hosts, and
// gives back what exceeds the need, ready now for the rest of the fleet.
func (f *Frontier) claimOn(ctx context.Context, shards []int, need int) ([]string, error) {
	leaseMS := f.o.Lease.Milliseconds()
	pipe := f.s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(shards))
	per := max(1, (need+len(shards)-1)/len(shards))
	for i, shard := range shards {
		cmds[i] = f.shardCall(ctx, pipe, shard, "claim", f.o.ID, "", leaseMS, per)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	var got []string
	for _, c := range cmds {
		hosts, err := c.StringSlice()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		got = append(got, hosts...)
	}
	if len(got) > need {
		back := f.s.rdb.Pipeline()
		for _, host := range got[need:] {
			f.shardCall(ctx, back, shardOf(host), "release", f.o.ID, host, "", 0)
		}
		if _, err := back.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		got = got[:need]
	}
	return got, nil
}

// take acquires the host leases of hosts claimed in their shards (each
// lease's token goes up), gives the shard entry back to the holder of a
// host whose lease another process still holds, and loads the rest.
func (f *Frontier) take(ctx context.Context, claimed []string) error {
	sent := f.o.Now()
	leaseMS := f.o.Lease.Milliseconds()
	pipe := f.s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(claimed))
	for i, host := range claimed {
		cmds[i] = f.leaseCall(ctx, pipe, host, "acquire", f.o.ID, leaseMS, "")
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	var got []string
	tokens := map[string]int64{}
	ends := map[string]time.Time{}
	nexts := map[string]time.Time{} // the previous holder's politeness
	restore := f.s.rdb.Pipeline()
	for i, host := range claimed {
		vals, err := cmds[i].Slice()
		if err != nil {
			return fmt.Errorf("acquire the lease of %s: %w", host, err)
		}
		if len(vals) < 2 {
			return fmt.Errorf("acquire the lease of %s: reply %v", host, vals)
		}
		token, _ := vals[0].(int64)
		left, _ := vals[1].(int64)
		if token == 0 {
			holder, _ := vals[2].(string)
			f.shardCall(ctx, restore, shardOf(host), "restore", f.o.ID, host, holder, left, "")
			continue
		}
		got = append(got, host)
		tokens[host] = token
		ends[host] = sent.Add(time.Duration(left) * time.Millisecond)
		if len(vals) > 2 {
			if wait, _ := vals[2].(int64); wait > 0 {
				nexts[host] = sent.Add(time.Duration(wait) * time.Millisecond)
			}
		}
	}
	if restore.Len() > 0 {
		if _, err := restore.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return err
		}
	}
	breakers := make([]breaker.Breaker, len(got))
	for i, host := range got {
		b, _, err := f.o.Breakers.Get(ctx, host)
		if err != nil {
			return fmt.Errorf("breaker of %s: %w", host, err)
		}
		breakers[i] = b
	}
	f.mu.Lock()
	for i, host := range got {
		h := f.hosts[host]
		if h == nil {
			h = &ownedHost{name: host, pending: map[store.Hash]struct{}{},
				settled: map[store.Hash]struct{}{}, nextDue: -1, gen: breakers[i].Generation}
			f.hosts[host] = h
		}
		h.token, h.leaseEnd = tokens[host], ends[host]
		if next := nexts[host]; next.After(h.readyAt) {
			h.readyAt = next
		}
	}
	f.mu.Unlock()
	for i, host := range got {
		f.o.OnClaim(host, breakers[i])
	}
	return f.loadHosts(ctx, got, sent)
}

// peek reads the first host of every shard's ready set (one command a
// shard) and the server's time: the shards with a host due now, and how
// many shards list a host with work (not held for a person).
func (s *Store) peek(ctx context.Context) (due []int, active int, err error) {
	pipe := s.rdb.Pipeline()
	var first [Shards]*redis.ZSliceCmd
	for i := range Shards {
		first[i] = pipe.ZRangeWithScores(ctx, keysOfShard(i).ready, 0, 0)
	}
	clock := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, err
	}
	now := clock.Val().UnixMilli()
	for i := range Shards {
		z := first[i].Val()
		if len(z) == 0 || int64(z[0].Score) >= heldScore {
			continue
		}
		active++
		if int64(z[0].Score) <= now {
			due = append(due, i)
		}
	}
	return due, active, nil
}

// politeWait is how long, in ms from now, the host's next request must
// wait: what its pace (--delay, Crawl-delay, Retry-After, the adaptive
// pace) allows, carried with its lease to whoever holds it next.
func politeWait(h *ownedHost, now time.Time) int64 {
	return max(0, h.readyAt.Sub(now).Milliseconds())
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
	// The host leases end first: a host listed ready while its lease
	// still named this process could not be taken by another.
	pipe = f.s.rdb.Pipeline()
	f.mu.Lock()
	for i, b := range backs {
		if h := f.hosts[b.name]; h != nil {
			wait := politeWait(h, now)
			f.leaseCall(ctx, pipe, b.name, "release", f.o.ID, h.token, wait, "")
			if b.at >= 0 && b.at != heldScore {
				backs[i].at = max(b.at, now.UnixMilli()+wait)
			}
		}
	}
	f.mu.Unlock()
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	pipe = f.s.rdb.Pipeline()
	for _, b := range backs {
		switch {
		case b.at < 0:
			f.shardCall(ctx, pipe, shardOf(b.name), "drop", f.o.ID, b.name, touches[b.name].Val(), "")
		case b.at == heldScore:
			f.shardCall(ctx, pipe, shardOf(b.name), "release", f.o.ID, b.name, "", "held")
		default:
			f.shardCall(ctx, pipe, shardOf(b.name), "release", f.o.ID, b.name, "", max(0, b.at-now.UnixMilli()))
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
	sent := f.o.Now()
	f.mu.Lock()
	byShard := map[int][]any{}
	gens := map[string]uint64{}
	tokens := map[string]int64{}
	for name, h := range f.hosts {
		byShard[shardOf(name)] = append(byShard[shardOf(name)], name)
		gens[name] = h.gen
		tokens[name] = h.token
	}
	inflight := f.inflight
	f.mu.Unlock()
	leaseMS := f.o.Lease.Milliseconds()
	pipe := f.s.rdb.Pipeline()
	var cmds []*redis.Cmd
	for shard, hosts := range byShard {
		cmds = append(cmds, f.shardCall(ctx, pipe, shard, append([]any{"renew", f.o.ID, "", leaseMS}, hosts...)...))
	}
	leases := map[string]*redis.Cmd{}
	genCmds := map[string]*redis.StringCmd{}
	for name := range gens {
		leases[name] = f.leaseCall(ctx, pipe, name, "renew", f.o.ID, tokens[name], leaseMS, "")
		genCmds[name] = pipe.HGet(ctx, keysOf(name).breaker, "gen")
	}
	beat := f.s.beat(ctx, pipe, f.o.ID, f.o.Instance, f.s.beatJSON(sent, len(gens), inflight))
	clock := pipe.Time(ctx)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	f.noteClock(sent, f.o.Now(), clock.Val())
	if n, err := beat.Int64(); err == nil && n == 0 {
		return errTakenOver
	}
	lost := map[string]bool{}
	for _, c := range cmds {
		hosts, _ := c.StringSlice()
		for _, h := range hosts {
			lost[h] = true
		}
	}
	for name, c := range leases {
		vals, err := c.Slice()
		if ok, _ := vals[0].(int64); err != nil || ok != 1 {
			lost[name] = true
		}
	}
	var changed []string
	for name, c := range genCmds {
		g, err := strconv.ParseUint(c.Val(), 10, 64)
		if err == nil && g != gens[name] {
			changed = append(changed, name)
		}
	}
	f.mu.Lock()
	for name := range gens {
		if h := f.hosts[name]; h != nil && h.token == tokens[name] && !lost[name] {
			h.leaseEnd = sent.Add(f.o.Lease)
		}
	}
	f.mu.Unlock()
	if len(lost) > 0 {
		f.o.Logger.Warn("lost host leases to another process (this one was too slow to renew them)",
			"store", f.s.display, "hosts", len(lost))
		f.mu.Lock()
		for name := range lost {
			if h := f.hosts[name]; h != nil && h.token == tokens[name] {
				f.loseLocked(h)
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

// loseLocked forgets a host whose lease another process took: nothing
// more of it is leased, and its leases in flight end with writes the
// store refuses; their URLs stay queued for the new holder.
func (f *Frontier) loseLocked(h *ownedHost) {
	h.buf, h.held = nil, true
	delete(f.hosts, h.name)
}

// lookAtFleet tells, when this process has nothing to do, from a look at
// the shards (active: those listing a host with work) whether the fleet
// has anything left but held hosts. Before saying no it lists again every
// host whose counters show work, in case a process died between queueing
// URLs and listing their host. gen is the count of this process's writes
// that queued URLs as of before the look's reads (queuedGen): one since
// says the reads may have missed it. fleetGen is the fleet's count of
// such writes (keyQueued) as of before them: with the writes marked as
// queueing (keyQueueing), it tells the same of every process's writes,
// whose URLs no shard lists between their host scripts and their listing.
func (f *Frontier) lookAtFleet(ctx context.Context, active int, gen, fleetGen uint64) error {
	if f.localWork() {
		f.mu.Lock()
		f.fleetIdle = false
		f.mu.Unlock()
		return nil
	}
	idle, held := active == 0, int64(0)
	if idle {
		relisted, err := f.s.relist(ctx, f.o.Now())
		if err != nil {
			return err
		}
		idle = relisted == 0
	}
	if idle {
		var err error
		if _, held, err = f.s.readyCounts(ctx); err != nil {
			return err
		}
		queueing, err := f.s.queueingSince(ctx, fleetGen, f.serverMS(f.o.Now()))
		if err != nil {
			return err
		}
		idle = !queueing
	}
	if f.duringLook != nil {
		f.duringLook()
	}
	f.mu.Lock()
	if f.queuedGen != gen {
		idle = false // this process queued URLs while it looked: look again
	}
	f.fleetIdle, f.fleetHeld = idle, int(held)
	f.broadcastLocked()
	f.mu.Unlock()
	return nil
}

// queueingFor is how long a write's queueing mark holds: a write gives
// up after 20 s (Frontier.write), and past its mark a process that died
// in the middle of one no longer keeps the fleet from ending.
const queueingFor = 20 * time.Second

// queuedCount is the fleet's count of writes that queued URLs (keyQueued).
func (s *Store) queuedCount(ctx context.Context) (uint64, error) {
	n, err := s.rdb.Get(ctx, keyQueued).Uint64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	return n, err
}

// queueingSince reports whether a write of the fleet may be queueing
// URLs at nowMS (server time), or has queued some since the count was
// gen.
func (s *Store) queueingSince(ctx context.Context, gen uint64, nowMS int64) (bool, error) {
	pipe := s.rdb.Pipeline()
	marks := pipe.ZCount(ctx, keyQueueing, "("+strconv.FormatInt(nowMS, 10), "+inf")
	count := pipe.Get(ctx, keyQueued)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	n, err := count.Uint64()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, err
	}
	return marks.Val() > 0 || n != gen, nil
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
			append([]any{"touch", ""}, lost...)...).Err()
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

// loadCmd queues a host's load script on pipe; nowMS is on the server's
// clock (Frontier.serverMS), as the deferred URLs' due times are.
func (s *Store) loadCmd(ctx context.Context, pipe redis.Pipeliner, host string, nowMS int64, limit, promote int) *redis.Cmd {
	k := keysOf(host)
	return loadScript.EvalSha(ctx, pipe, []string{k.queue, k.deferred, k.items, k.counts, k.results}, nowMS, limit, promote)
}

// load reads a host's first limit queued URLs at once.
func (s *Store) load(ctx context.Context, host string, nowMS int64, limit, promote int) ([]store.Item, int64, int64, error) {
	k := keysOf(host)
	c := loadScript.Run(ctx, s.rdb, []string{k.queue, k.deferred, k.items, k.counts, k.results}, nowMS, limit, promote)
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
		it, err := decodeEntry(host, uint64(seq), entry)
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
	for _, sc := range []*redis.Script{applyScript, loadScript, shardScript, leaseScript, procScript, breakerScript, holdScript, refreshScript} {
		if err := sc.Load(ctx, s.rdb).Err(); err != nil {
			return fmt.Errorf("load scripts: %w", err)
		}
	}
	return nil
}
