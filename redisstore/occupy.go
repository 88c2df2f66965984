package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Occupy makes host look held by a live process named owner for d, by
// the server's clock: listed in its shard with the lease's expiry, the
// shard's owner and the host's lease naming owner. It marks an empty
// database as a crawl's. It stands in for a busy process that holds the
// crawl's only host, and sends nothing while d runs, so that the commands
// of the processes left idle can be counted alone (the bench's idle
// figure).
func Occupy(ctx context.Context, rdb redis.UniversalClient, host, owner string, d time.Duration) error {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return fmt.Errorf("occupy %s: read the server's time: %w", host, err)
	}
	until := now.Add(d).UnixMilli()
	sk, hk := keysOfShard(shardOf(host)), keysOf(host)
	pipe := rdb.Pipeline()
	pipe.SetNX(ctx, keySchema, schemaMarker, 0)
	pipe.ZAdd(ctx, sk.ready, redis.Z{Score: float64(until), Member: host})
	pipe.HSet(ctx, sk.owner, host, owner)
	pipe.SAdd(ctx, sk.hosts, host)
	pipe.HSet(ctx, hk.lease, "owner", owner, "until", until, "token", 1)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("occupy %s: %w", host, err)
	}
	return nil
}
