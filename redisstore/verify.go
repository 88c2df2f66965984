package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/storage"
	"breakwater/store"
)

// Verify checks the fleet's store, read-only, for the invariants its
// scripts keep: every host's counters equal what its keys hold; every
// queued or deferred URL has its entry, is in the seen set and in one
// place only; every URL seen is queued, deferred or done (nothing seen is
// lost); every record decodes and is filed under its own URL's hash; the
// tallies add up; every host with URLs left is listed in its shard, so
// some process will take it; every lease names a listed host; breakers
// decode and each host's transitions run in generation order; a host
// with an open case is held by it. Run it on a store no process is
// writing, or expect counters caught between two scripts.
func (s *Store) Verify(ctx context.Context, opts storage.VerifyOptions) (*storage.VerifyReport, error) {
	rep := &storage.VerifyReport{}
	limit := opts.MaxProblems
	if limit <= 0 {
		limit = storage.DefaultMaxProblems
	}
	problem := func(format string, args ...any) {
		if len(rep.Problems) < limit {
			rep.Problems = append(rep.Problems, fmt.Sprintf(format, args...))
		} else {
			rep.Omitted++
		}
	}
	br := NewBreakers(s.rdb, breaker.Config{})
	listed := map[string]bool{}
	for shard := range Shards {
		k := keysOfShard(shard)
		members, err := s.rdb.ZRange(ctx, k.ready, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("store %s: read %s: %w", s.display, k.ready, err)
		}
		for _, h := range members {
			listed[h] = true
		}
		owners, err := s.rdb.HKeys(ctx, k.owner).Result()
		if err != nil {
			return nil, fmt.Errorf("store %s: read %s: %w", s.display, k.owner, err)
		}
		for _, h := range owners {
			if !listed[h] {
				problem("host %s: leased in %s but not listed in %s", h, k.owner, k.ready)
			}
		}
	}
	err := s.eachHost(ctx, func(hosts []string, _ int) error {
		for _, h := range hosts {
			rep.Hosts++
			if err := s.verifyHost(ctx, h, listed[h], br, rep, problem); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rep, nil
}

func (s *Store) verifyHost(ctx context.Context, host string, listed bool, br *Breakers, rep *storage.VerifyReport, problem func(string, ...any)) error {
	k := keysOf(host)
	pipe := s.rdb.Pipeline()
	queue := pipe.ZRange(ctx, k.queue, 0, -1)
	deferred := pipe.ZRange(ctx, k.deferred, 0, -1)
	items := pipe.HGetAll(ctx, k.items)
	seen := pipe.SMembers(ctx, k.seen)
	results := pipe.HGetAll(ctx, k.results)
	counts := pipe.HGetAll(ctx, k.counts)
	cases := pipe.LRange(ctx, k.cases, 0, -1)
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return fmt.Errorf("store %s: read host %s: %w", s.display, host, err)
	}
	c := counts.Val()
	seenSet := map[string]bool{}
	for _, h := range seen.Val() {
		seenSet[h] = true
	}
	where := map[string]string{}
	place := func(h, in string) {
		if prev, dup := where[h]; dup {
			problem("host %s: URL %s is both %s and %s", host, h, prev, in)
		}
		where[h] = in
		if !seenSet[h] {
			problem("host %s: %s URL %s is not in the seen set", host, in, h)
		}
		entry, ok := items.Val()[h]
		if !ok {
			problem("host %s: %s URL %s has no entry in %s", host, in, h, k.items)
			return
		}
		it, err := store.DecodeItem(host, 0, []byte(entry))
		switch {
		case err != nil:
			problem("host %s: entry of %s: %v", host, h, err)
		case hashKey(it.Hash) != h:
			problem("host %s: entry %s holds the URL %s of another hash", host, h, it.URL)
		}
	}
	for _, h := range queue.Val() {
		place(h, "queued")
	}
	for _, h := range deferred.Val() {
		place(h, "deferred")
	}
	if n := len(items.Val()); n != len(queue.Val())+len(deferred.Val()) {
		problem("host %s: %d entries for %d queued and %d deferred URLs", host, n, len(queue.Val()), len(deferred.Val()))
	}
	var pages, failed, statusSum, classSum int64
	for h, rec := range results.Val() {
		hash, r, err := store.DecodeResult([]byte(rec))
		if err != nil {
			problem("host %s: result %s: %v", host, h, err)
			continue
		}
		if hashKey(hash) != h {
			problem("host %s: result %s is filed under another hash (%s)", host, r.URL, h)
		}
		if !seenSet[h] {
			problem("host %s: result of %s is not in the seen set", host, r.URL)
		}
		if in, dup := where[h]; dup {
			problem("host %s: %s is done and %s", host, r.URL, in)
		}
		where[h] = "done"
		if r.Failed() {
			failed++
		} else {
			pages++
		}
	}
	for h := range seenSet {
		if _, ok := where[h]; !ok {
			problem("host %s: URL %s was seen but is neither queued, deferred nor done: lost", host, h)
		}
	}
	for f, v := range c {
		switch {
		case strings.HasPrefix(f, "s:"):
			statusSum += atoi(v)
		case strings.HasPrefix(f, "f:"):
			classSum += atoi(v)
		}
	}
	check := func(field string, want int64) {
		if got := atoi(c[field]); got != want {
			problem("host %s: counter %s is %d, the keys hold %d", host, field, got, want)
		}
	}
	check("queued", int64(len(queue.Val())))
	check("deferred", int64(len(deferred.Val())))
	check("fetched", pages)
	check("failed", failed)
	check("seen", int64(len(seenSet)))
	if statusSum != pages+failed {
		problem("host %s: results by status add up to %d, not %d", host, statusSum, pages+failed)
	}
	if classSum != failed {
		problem("host %s: failures by class add up to %d, not %d", host, classSum, failed)
	}
	if len(queue.Val())+len(deferred.Val()) > 0 && !listed {
		problem("host %s: %d URLs left but the host is in no shard's ready set: no process will take it",
			host, len(queue.Val())+len(deferred.Val()))
	}
	rep.Seen += int64(len(seenSet))
	rep.Queued += int64(len(queue.Val()))
	rep.Deferred += int64(len(deferred.Val()))
	rep.Pages += pages
	rep.Failed += failed
	b, ok, err := br.Get(ctx, host)
	if err != nil {
		problem("host %s: breaker: %v", host, err)
	} else if ok {
		rep.Breakers++
	}
	ts, err := br.Transitions(ctx, host)
	if err != nil {
		problem("host %s: transitions: %v", host, err)
	}
	rep.Transitions += len(ts)
	for i := 1; i < len(ts); i++ {
		if ts[i].Generation <= ts[i-1].Generation {
			problem("host %s: transition %d has generation %d after %d", host, i, ts[i].Generation, ts[i-1].Generation)
		}
	}
	if len(ts) > 0 && ok && ts[len(ts)-1].Generation > b.Generation {
		problem("host %s: the breaker's generation %d is behind its last transition's %s", host, b.Generation,
			strconv.FormatUint(ts[len(ts)-1].Generation, 10))
	}
	for _, raw := range cases.Val() {
		rep.Cases++
		cs, err := store.DecodeCase(0, []byte(raw))
		if err != nil {
			problem("host %s: case: %v", host, err)
			continue
		}
		if cs.Resolved.IsZero() && !b.Hold.Has(breaker.Case) {
			problem("host %s: an open case (%s) but the breaker is not held by it", host, cs.URL)
		}
	}
	return nil
}
