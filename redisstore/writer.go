package redisstore

import (
	"breakwater/breaker"
	"breakwater/store"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// writer stores the queued jobs, in order, a batch at a time. With an
// archive, a batch's pages are archived once, before it is first tried:
// until Redis has taken it, it is retried alone (the archive accounts
// for one batch at a time), and new jobs wait behind it.
func (f *Frontier) writer() {
	defer f.done.Done()
	backoff := 100 * time.Millisecond
	var retry []job // archived, not yet stored
	for {
		select {
		case <-f.stop:
			return
		case <-f.kickWriter:
		case <-time.After(100 * time.Millisecond):
		}
		// Let a few more jobs gather: a batch costs one round trip whatever
		// its size, and with an archive one flush of the WARC file too.
		if f.o.Archive != nil {
			time.Sleep(50 * time.Millisecond)
		} else {
			time.Sleep(2 * time.Millisecond)
		}
		f.mu.Lock()
		jobs := retry
		if jobs == nil {
			jobs = f.jobs
			f.jobs = nil
		}
		f.writing = len(jobs)
		f.mu.Unlock()
		if len(jobs) == 0 {
			continue
		}
		archived := retry != nil
		var err error
		if !archived {
			archived, jobs, err = f.archive(jobs)
			if err != nil {
				f.fail(err)
				return
			}
		}
		err = f.write(jobs)
		if err != nil && isNoScript(err) {
			// Redis restarted and forgot the scripts: load them and try again.
			if err = f.s.loadScripts(context.Background()); err == nil {
				err = f.write(jobs)
			}
		}
		f.mu.Lock()
		f.writing = 0
		if err != nil {
			if archived {
				retry = jobs
			} else {
				f.jobs = append(jobs, f.jobs...) // kept, in order, until Redis takes them
			}
			fatal := isFatal(err)
			f.markDownLocked(err)
			f.mu.Unlock()
			if fatal {
				f.fail(err)
				return
			}
			select {
			case <-f.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			kick(f.kickWriter)
			continue
		}
		retry = nil
		if archived {
			f.o.Archive.AfterCommit()
		}
		backoff = 100 * time.Millisecond
		f.markUpLocked()
		f.settleLocked(jobs)
		f.broadcastLocked()
		f.mu.Unlock()
	}
}

// fail stops the frontier for good: nothing more can be stored.
func (f *Frontier) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fatal == nil {
		f.fatal = fmt.Errorf("store %s: %w", f.s.display, err)
		close(f.failed)
		f.broadcastLocked()
	}
}

// archive writes the records the jobs carry, and returns the jobs with
// the archive's own writes (its state, first captures) added.
func (f *Frontier) archive(jobs []job) (bool, []job, error) {
	if f.o.Archive == nil {
		return false, jobs, nil
	}
	var ab store.Batch
	for _, j := range jobs {
		if j.batch != nil {
			for _, v := range j.batch.Attached() {
				ab.Attach(v)
			}
		}
	}
	if len(ab.Attached()) == 0 {
		return false, jobs, nil
	}
	if err := f.o.Archive.BeforeCommit(&ab); err != nil {
		return false, jobs, err
	}
	for i, j := range jobs {
		if j.batch == nil {
			continue
		}
		for _, v := range j.batch.Attached() {
			if p, ok := v.(interface{ Placement() (string, int64) }); ok {
				file, offset := p.Placement()
				jobs[i].placement = file + " " + strconv.FormatInt(offset, 10)
			}
		}
	}
	return true, append(jobs, job{batch: &ab}), nil
}

// markDownLocked records that Redis failed: the first failure of an
// outage is logged, the rest are not.
func (f *Frontier) markDownLocked(err error) {
	if f.down {
		return
	}
	f.down, f.downSince = true, time.Now()
	f.o.Logger.Error("lost the store: no new URLs are taken, results wait in memory until it is back",
		"store", f.s.display, "err", err, "waiting", len(f.jobs))
}

func (f *Frontier) markUpLocked() {
	if !f.down {
		return
	}
	f.down = false
	f.o.Logger.Info("the store is back: the crawl resumes", "store", f.s.display,
		"after", time.Since(f.downSince).Round(time.Millisecond).String())
	f.broadcastLocked()
}

// settleLocked applies what a stored batch means for the owned hosts.
func (f *Frontier) settleLocked(jobs []job) {
	for _, j := range jobs {
		h := f.hosts[j.host]
		if h == nil || j.host == "" {
			continue
		}
		if j.counted {
			h.writes--
		}
		if j.settles {
			delete(h.pending, j.hash)
			h.settled[j.hash] = struct{}{}
		}
		if j.failAll != nil {
			h.stale = true
		}
	}
}

// errUnstorable marks a batch the fleet store cannot take at all.
var errUnstorable = errors.New("not storable")

// unsupportedOp refuses a batch operation the store does not apply.
func (s *Store) unsupportedOp(kind store.OpKind) error {
	return store.Unsupported(s.display, "the batch operation "+kind.String())
}

func isNoScript(err error) bool { return err != nil && strings.Contains(err.Error(), "NOSCRIPT") }

// isFatal tells errors that waiting will not cure (a script that fails
// on its data) from an outage.
func isFatal(err error) bool {
	if errors.Is(err, errUnstorable) {
		return true
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "ERR Error running script") || strings.Contains(msg, "user_script") ||
		strings.Contains(msg, "WRONGTYPE")
}

// hostOps is the part of a batch that touches one host.
type hostOps struct {
	args  []any
	found bool // the ops queue URLs: the host must be touched if any was new
	// fence is the token of the last F operation in args (fenced says
	// there is one): the settling operations after it carry it.
	fence  int64
	fenced bool
	// oldestPage is the earliest fetch time (Unix ms) of the pages the
	// ops store (math.MaxInt64: none): the host's shard lists it as
	// having a page that old, for the refresh passes.
	oldestPage int64
}

// fenceWith makes the settling operations appended next carry token
// (0: none, for writes of no lease).
func (o *hostOps) fenceWith(token int64) {
	if o.fenced && o.fence == token {
		return
	}
	arg := ""
	if token != 0 {
		arg = strconv.FormatInt(token, 10)
	}
	o.args = append(o.args, "F", arg)
	o.fence, o.fenced = token, true
}

// fenceOf is the token a job's operation on host carries: the job's own
// for its host, none for another's.
func fenceOf(j job, host string) int64 {
	if host == j.host {
		return j.token
	}
	return 0
}

// write stores jobs: first the archive's own writes (its state, first
// captures), then the scripts of every host they touch, then the shard
// calls that list the hosts given new URLs, then the outcomes and the
// other records kept outside the hosts' scripts.
//
// The archive's state goes first, in a round trip of its own, because
// the hosts' scripts mark pages done and name where their records are:
// once a result is stored, the archive state must already account for
// its records, or a restart (warc.Open cuts the open file back to the
// stored state) would lose the records of a done page. The other way
// round is harmless: a kill, an outage or a fenced-out host between the
// two leaves records that no result names, whose URLs are fetched and
// archived again. Both writes are idempotent, so a retry repeats them.
// A round trip of its own, not the head of the hosts' pipeline: on a
// Cluster the state's slot and the hosts' are on different nodes, and a
// pipeline orders nothing across nodes.
func (f *Frontier) write(jobs []job) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The seen cache takes a batch's adds as they are read, so that a link
	// repeated within the batch is sent once; if the batch did not reach
	// Redis, what it took is not known to be there.
	defer func() {
		if err != nil {
			f.seen.forget()
		}
	}()
	ops := map[string]*hostOps{}
	order := []string{}
	of := func(host string) *hostOps {
		o := ops[host]
		if o == nil {
			o = &hostOps{oldestPage: math.MaxInt64}
			ops[host] = o
			order = append(order, host)
		}
		return o
	}
	archive := f.s.rdb.Pipeline()
	extra := f.s.rdb.Pipeline()
	var resolves []resolveCase
	for _, j := range jobs {
		if j.failAll != nil {
			of(j.host).fenceWith(j.token)
			if err := f.failAll(ctx, j.host, j.failAll, of(j.host)); err != nil {
				return err
			}
		}
		if j.batch == nil {
			continue
		}
		err = j.batch.Each(func(op store.Op) error {
			switch op.Kind {
			case store.OpAdd, store.OpRequeue:
				if op.Kind == store.OpAdd && f.seen.has(op.Item.Hash) {
					return nil
				}
				f.seen.add(op.Item.Hash)
				entry := op.Value
				if entry == nil {
					entry = store.EncodeQueued(op.Item)
				}
				code := "A"
				if op.Kind == store.OpRequeue {
					code = "R"
				}
				o := of(op.Item.Host)
				o.args = append(o.args, code, hashKey(op.Item.Hash), entry)
				o.found = true
			case store.OpComplete:
				status, class, err := store.ResultHead(op.Value)
				if err != nil {
					return fmt.Errorf("result of %s: %w", op.Item.URL, err)
				}
				o := of(op.Item.Host)
				o.fenceWith(fenceOf(j, op.Item.Host))
				o.args = append(o.args, "C", hashKey(op.Item.Hash), op.Value, status, class)
				if ms, ok := indexTime(op.Value); ok {
					o.args = append(o.args, "T", hashKey(op.Item.Hash), ms)
					o.oldestPage = min(o.oldestPage, ms)
				}
			case store.OpDefer:
				o := of(op.Item.Host)
				o.fenceWith(fenceOf(j, op.Item.Host))
				o.args = append(o.args, "D", hashKey(op.Item.Hash), store.EncodeQueued(op.Item), f.serverMS(op.At))
			case store.OpQueueRefreshes:
				// Nothing to do: a fleet's pass queues the pages it stages
				// and lists their hosts itself (refresh.go).
			case store.OpPutHostPages:
				// Unfenced: a count only grows, and a late one is still pages asked for.
				n, size := binary.Uvarint(op.Value)
				if size <= 0 {
					return fmt.Errorf("page count of %s: malformed %x", op.Key, op.Value)
				}
				o := of(op.Key)
				o.args = append(o.args, "H", n)
			case store.OpPutRobots:
				o := of(op.Key)
				o.fenceWith(fenceOf(j, op.Key))
				o.args = append(o.args, "K", op.Value, ms(idleExpiry))
			case store.OpAppendCase:
				c, err := store.DecodeCase(0, op.Value)
				if err != nil {
					return err
				}
				o := of(c.Host)
				o.fenceWith(fenceOf(j, c.Host))
				o.args = append(o.args, "X", op.Value)
			case store.OpResolveCases:
				resolves = append(resolves, resolveCase{host: op.Key, at: op.At})
			case store.OpPutArchiveState:
				archive.Set(ctx, keyOfArchive(f.o.ID), op.Value, 0)
			case store.OpPutCapture:
				archive.HSetNX(ctx, keyOfCaptures(op.Key), op.Key, op.Value)
			case store.OpPutRunningAt:
				data, _ := json.Marshal(map[string]any{"at": op.At, "running": true})
				if len(op.Value) > 0 {
					data = op.Value
				}
				f.s.beat(ctx, extra, f.o.ID, f.o.Instance, data)
			default:
				return f.s.unsupportedOp(op.Kind)
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("%w: %w", errUnstorable, err)
		}
		if j.placement != "" {
			o := of(j.host)
			o.fenceWith(j.token)
			o.args = append(o.args, "W", hashKey(j.hash), j.placement)
		}
	}
	// 0. the archive's state and first captures, before any result; and
	// the hosts' listings for the refresh passes lowered to their new
	// pages' fetch times before the pages are indexed, so that a kill
	// between the two leaves no page indexed under a later listing (they
	// are lowered again after, in 3: a pass may list a host far ahead
	// meanwhile).
	for _, host := range order {
		if ms := ops[host].oldestPage; ms != math.MaxInt64 {
			archive.ZAddArgs(ctx, keysOfShard(shardOf(host)).stale, redis.ZAddArgs{LT: true, Members: []redis.Z{{Score: float64(ms), Member: host}}})
		}
	}
	if archive.Len() > 0 {
		if _, err := archive.Exec(ctx); err != nil {
			return fmt.Errorf("archive state: %w", err)
		}
	}
	if f.afterArchiveState != nil {
		if err := f.afterArchiveState(); err != nil {
			return err
		}
	}
	// A write that may queue URLs is marked in the fleet before its host
	// scripts, and unmarked once it has listed their hosts: between the
	// two, its URLs are queued on hosts no shard may list yet, which
	// another process's look at the fleet cannot see (lookAtFleet). The
	// mark is the process's own (its writes run one at a time), so the
	// retry of a write that failed between the two, Redis gone, clears
	// it; one of a process that died is forgotten at its expiry. It heads
	// the scripts' pipeline, which one server runs in order; a round trip
	// of its own would order it on a Cluster too, at a tenth of a fleet's
	// pages/s.
	pipe := f.s.rdb.Pipeline()
	marked := slices.ContainsFunc(order, func(h string) bool { return ops[h].found })
	defer func() { f.markLeft = err != nil && (marked || f.markLeft) }()
	if marked {
		until := f.serverMS(f.o.Now()) + queueingFor.Milliseconds()
		pipe.ZAdd(ctx, keyQueueing, redis.Z{Score: float64(until), Member: f.o.ID})
	}
	// 1. the hosts' own scripts, one per host, in one round trip.
	cmds := make([]*redis.Cmd, len(order))
	for i, host := range order {
		k := keysOf(host)
		cmds[i] = applyScript.EvalSha(ctx, pipe, []string{k.queue, k.deferred, k.items, k.seen, k.results, k.counts, k.warc, k.lease, k.fetched,
			k.robots, k.cases},
			ops[host].args...)
	}
	if len(order) > 0 {
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
	}
	f.noteRefusals(order, cmds)
	if f.afterHostScripts != nil {
		if err := f.afterHostScripts(); err != nil {
			return err
		}
	}
	// 2. the hosts given new URLs, listed in their shards after the URLs
	// are queued (see shard.lua's drop for why in this order).
	touched := map[int][]any{}
	for i, host := range order {
		if !ops[host].found {
			continue
		}
		res, _ := cmds[i].Int64Slice()
		if len(res) > 0 && res[0] > 0 {
			touched[shardOf(host)] = append(touched[shardOf(host)], host)
			f.mu.Lock()
			if h := f.hosts[host]; h != nil {
				h.stale = true
			}
			f.mu.Unlock()
		}
	}
	if len(touched) > 0 {
		// A look at the fleet made before these URLs were queued is stale.
		f.mu.Lock()
		f.queuedGen++
		f.fleetIdle = false
		f.mu.Unlock()
		pipe := f.s.rdb.Pipeline()
		for shard, hosts := range touched {
			f.shardCall(ctx, pipe, shard, append([]any{"touch", ""}, hosts...)...)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		f.listedNew.Store(true)
		kick(f.kickMgr)
	}
	// 3. records outside the hosts' scripts, then the breaker outcomes, in
	// order. A host's listing for the refresh passes is lowered after its
	// script indexed its pages (see refresh.go).
	for _, host := range order {
		if ms := ops[host].oldestPage; ms != math.MaxInt64 {
			extra.ZAddArgs(ctx, keysOfShard(shardOf(host)).stale, redis.ZAddArgs{LT: true, Members: []redis.Z{{Score: float64(ms), Member: host}}})
		}
	}
	if marked || f.markLeft {
		// After the listing, in this later round trip: a look that
		// misses the mark sees the count move (lookAtFleet).
		if len(touched) > 0 {
			extra.Incr(ctx, keyQueued)
		}
		extra.ZRem(ctx, keyQueueing, f.o.ID)
	}
	if extra.Len() > 0 {
		if _, err := extra.Exec(ctx); err != nil {
			return err
		}
	}
	for _, rc := range resolves {
		if err := f.s.resolveCases(ctx, rc.host, rc.at); err != nil {
			return err
		}
	}
	var moved map[string]breaker.Breaker // hosts whose shared circuit an outcome moved
	for _, j := range jobs {
		if j.reprieve != nil {
			if err := f.applyReprieve(ctx, j.host, j.reprieve); err != nil {
				return err
			}
		}
		if j.outcome == nil {
			continue
		}
		o := j.outcome
		b, trs, applied, err := f.o.Breakers.FencedOutcome(ctx, o.t, o.c, o.detail, o.at, j.token)
		if err != nil {
			return fmt.Errorf("breaker outcome of %s: %w", o.t.Host, err)
		}
		if !applied {
			f.refused.Add(1)
			f.o.Logger.Warn("the store refused a late breaker outcome: another process holds the host now",
				"store", f.s.display, "host", o.t.Host, "class", string(o.c), "token", j.token)
			continue
		}
		f.mu.Lock()
		if h := f.hosts[o.t.Host]; h != nil {
			h.gen = b.Generation
			if len(trs) > 0 {
				if moved == nil {
					moved = map[string]breaker.Breaker{}
				}
				moved[o.t.Host] = b
			}
		}
		f.mu.Unlock()
	}
	// A shared circuit that moved is handed to the engine as it now is:
	// the engine's copy made the same move from the same outcomes, but
	// numbers its generations its own way, and the tickets it issues
	// next (a probe's above all) must carry the store's.
	for host, b := range moved {
		f.o.OnBreaker(host, b)
	}
	return nil
}

// applyReprieve sends host's shared breaker to half-open after a local
// fault, if it is still the circuit the fault opened. When it is not, the
// shared breaker stands and this process's copy, which the engine has
// reprieved already, takes it back.
func (f *Frontier) applyReprieve(ctx context.Context, host string, r *reprieve) error {
	b, _, applied, err := f.o.Breakers.Reprieve(ctx, host, r.opened, r.since, r.at)
	if err != nil {
		return err
	}
	f.mu.Lock()
	h := f.hosts[host]
	if h != nil {
		h.gen = b.Generation
	}
	f.mu.Unlock()
	if applied {
		return nil
	}
	f.o.Logger.Info("the fleet's breaker was not reprieved after the local fault: it changed since the fault opened it",
		"store", f.s.display, "host", host, "state", b.State.String(), "generation", b.Generation, "opened", r.opened)
	if h != nil {
		f.o.OnBreaker(host, b)
	}
	return nil
}

// noteRefusals logs and counts the settling writes the hosts' scripts
// refused (fenced out: another process took the host), and forgets each
// host whose lease token moved past this process's.
func (f *Frontier) noteRefusals(order []string, cmds []*redis.Cmd) {
	for i, host := range order {
		res, err := cmds[i].Int64Slice()
		if err != nil || len(res) < 6 || res[4] == 0 {
			continue
		}
		f.refused.Add(res[4])
		f.mu.Lock()
		h := f.hosts[host]
		var mine int64
		if h != nil {
			mine = h.token
			if h.token != res[5] {
				f.loseLocked(h)
			}
		}
		f.mu.Unlock()
		f.o.Logger.Warn("the store refused late writes: another process holds the host now, and fetches their URLs again",
			"store", f.s.display, "host", host, "refused", res[4], "token", mine, "current_token", res[5])
	}
}

type resolveCase struct {
	host string
	at   time.Time
}

// failAll adds to o a completion with template of every queued URL of
// host that is not in flight.
func (f *Frontier) failAll(ctx context.Context, host string, template *store.Result, o *hostOps) error {
	items, _, _, err := f.s.load(ctx, host, f.serverMS(f.o.Now()), 1<<20, 0)
	if err != nil {
		return err
	}
	f.mu.Lock()
	var pending map[store.Hash]struct{}
	if h := f.hosts[host]; h != nil {
		pending = h.pending
	}
	for _, it := range items {
		if _, busy := pending[it.Hash]; busy {
			continue
		}
		r := template.ForItem(it)
		rec := store.EncodeResult(it, &r)
		o.args = append(o.args, "C", hashKey(it.Hash), []byte(rec), r.Status, r.ErrorClass)
	}
	f.mu.Unlock()
	return nil
}

// idleExpiry is how long the keys of a host no longer crawled are kept.
const idleExpiry = 24 * time.Hour
