package redisstore

import (
	"breakwater/store"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"
)

// RequeueFailed queues every failed URL of the crawl again
// (--retry-failed). See RequeueFailedWhere.
func (s *Store) RequeueFailed() (int, error) { return s.RequeueFailedWhere(nil) }

// RequeueFailedWhere queues again the failed URLs keep chooses (nil: all),
// a host at a time: its results are read in chunks, so memory follows one
// chunk, not the crawl. Each URL is queued by the host's script only while
// its stored result is still a failure and it is neither queued nor
// deferred, so processes that start with --retry-failed together queue it
// once, and one another process already fetched again stays done. The
// hosts given URLs are listed for claiming, as new links are.
func (s *Store) RequeueFailedWhere(keep func(r *store.Result) bool) (int, error) {
	ctx, cancel := bg()
	defer cancel()
	total := 0
	err := s.eachHost(ctx, func(hosts []string, shard int) error {
		var touched []any
		for _, host := range hosts {
			n, err := s.requeueHost(ctx, host, keep)
			if err != nil {
				return err
			}
			if n > 0 {
				touched = append(touched, host)
			}
			total += n
		}
		if len(touched) == 0 {
			return nil
		}
		k := keysOfShard(shard)
		return shardScript.EvalSha(ctx, s.rdb, []string{k.ready, k.owner, k.touch, k.hosts},
			append([]any{"touch", ""}, touched...)...).Err()
	})
	if err != nil {
		return total, fmt.Errorf("store %s: requeue failed: %w", s.display, err)
	}
	return total, nil
}

// requeueHost queues host's chosen failures again, returning how many.
func (s *Store) requeueHost(ctx context.Context, host string, keep func(r *store.Result) bool) (int, error) {
	k := keysOf(host)
	added := 0
	var cursor uint64
	for {
		kv, next, err := s.rdb.HScan(ctx, k.results, cursor, "", 500).Result()
		if err != nil {
			return added, fmt.Errorf("read the results of %s: %w", host, err)
		}
		var args []any
		for i := 0; i+1 < len(kv); i += 2 {
			rec := kv[i+1]
			if len(rec) == 0 || rec[0] != store.RecordFailed {
				continue
			}
			h, r, err := store.DecodeResult([]byte(rec))
			if err != nil {
				return added, fmt.Errorf("result %s of %s: %w", kv[i], host, err)
			}
			if !r.Failed() || (keep != nil && !keep(&r)) {
				continue
			}
			it := store.Item{Host: host, URL: r.URL, Hash: h, Depth: r.Depth, Referrer: r.Referrer,
				Lastmod: r.Lastmod, Kind: r.Kind, Hops: r.RequisiteHops()}
			args = append(args, "E", hashKey(h), store.EncodeQueued(it))
		}
		if len(args) > 0 {
			res, err := applyScript.EvalSha(ctx, s.rdb, []string{k.queue, k.deferred, k.items, k.seen, k.results, k.counts, k.warc},
				args...).Int64Slice()
			if isNoScript(err) {
				if err = s.loadScripts(ctx); err == nil {
					res, err = applyScript.EvalSha(ctx, s.rdb, []string{k.queue, k.deferred, k.items, k.seen, k.results, k.counts, k.warc},
						args...).Int64Slice()
				}
			}
			if err != nil {
				return added, fmt.Errorf("queue the failures of %s again: %w", host, err)
			}
			added += int(res[0])
		}
		if cursor = next; cursor == 0 {
			return added, nil
		}
	}
}

// HostPages returns the pages of host the fleet has requested, as its
// processes stored them for --max-pages-per-host (stored true); without a
// stored count, the host's results, fetched and failed, which include
// every page asked for (and a few that were not: robots.txt refusals).
func (s *Store) HostPages(host string) (n int64, stored bool, err error) {
	ctx, cancel := bg()
	defer cancel()
	vals, err := s.rdb.HMGet(ctx, keysOf(host).counts, "pages", "fetched", "failed").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, fmt.Errorf("store %s: read the page count of host %s: %w", s.display, host, err)
	}
	num := func(v any) (int64, bool) {
		str, ok := v.(string)
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(str, 10, 64)
		return n, err == nil
	}
	if n, ok := num(vals[0]); ok {
		return n, true, nil
	}
	fetched, _ := num(vals[1])
	failed, _ := num(vals[2])
	return fetched + failed, false, nil
}
