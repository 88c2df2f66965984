package redisstore

// Refreshes on a fleet (crawl's --recrawl-after).
//
// On a fleet a result is filed under its URL's hash (bw:{H}:r), so the
// result an Item replaces is the one filed under the Item's own hash;
// Replaces only says that there is one (it holds that page's fetch time in
// Unix milliseconds, at least 1), and Replaced reads it there.
//
// Every stored page is indexed by its fetch time in its host's bw:{H}:f,
// kept by the same script that stores the result (apply.lua's T; a
// failure leaves the index), and each shard lists its hosts in
// bw:{sN}:stale under a time no later than their oldest indexed page: the
// writer lowers it (ZADD LT) after each batch. A pass (StageRefreshes)
// takes the hosts listed before its cutoff, queues each one's stale pages
// in one script on the host's slot, which takes them out of the index, and
// lists the host again under its oldest page left; so a pass costs what
// became stale, whatever the number of hosts and pages, and two processes
// passing at once never stage one page twice. The take lists a host far
// ahead first, and the script reads the index after that, so a page a
// writer indexes meanwhile is never lost behind the listing (see
// refresh.lua's put).
//
// A staged page is queued like a new URL but scored after every new URL of
// its host (refreshBase + seq), so the host's new URLs are fetched first;
// its entry is a one-byte marker and the Item is made from the stored
// result when the queue is loaded: a page waiting for its refresh costs its
// queue member and that marker, and gives up its index member meanwhile.
// The completion of the refresh stores the result and indexes the page
// again with its new fetch time.

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strings"
	"time"

	"breakwater/store"

	"github.com/redis/go-redis/v9"
)

//go:embed refresh.lua
var refreshSource string

var refreshScript = redis.NewScript(refreshSource)

const (
	// refreshBase is added to a staged page's queue score (refresh.lua's
	// REFRESH_BASE): every new URL of the host sorts before it.
	refreshBase = 1 << 50
	// refreshEntry is a staged page's entry in its host's items.
	refreshEntry = "r"
	// takeLease is how long a pass keeps the hosts it took from the other
	// passes; a pass that died meanwhile leaves them to the next pass after
	// it.
	takeLease = time.Minute
)

// StageRefreshes queues for a refresh every page fetched before
// staleBefore of up to about limit/16 hosts listed as having one, up to
// limit/4 pages per host, and reports Done when no host is left with such
// a page. after is not used: a fleet's pass starts from its index of fetch
// times, not from a position in the results (RefreshScan.After is
// returned as given).
func (s *Store) StageRefreshes(after uint64, staleBefore time.Time, limit int) (store.RefreshScan, error) {
	ctx, cancel := bg()
	defer cancel()
	scan, err := s.stageRefreshes(ctx, staleBefore, max(1, limit/(Shards*16)), max(1, limit/4))
	if err != nil {
		return store.RefreshScan{After: after}, fmt.Errorf("store %s: stage refreshes: %w", s.display, err)
	}
	scan.After = after
	return scan, nil
}

func (s *Store) stageRefreshes(ctx context.Context, staleBefore time.Time, hostsPerShard, pagesPerHost int) (store.RefreshScan, error) {
	cutoff := staleBefore.UnixMilli()
	taken, done, err := s.takeStale(ctx, cutoff, hostsPerShard)
	if err != nil {
		return store.RefreshScan{}, err
	}
	scan := store.RefreshScan{Done: done}
	if len(taken) == 0 {
		return scan, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(taken))
	for i, t := range taken {
		k := keysOf(t.host)
		cmds[i] = refreshScript.EvalSha(ctx, pipe, []string{k.fetched, k.queue, k.deferred, k.items, k.counts},
			"stage", cutoff, pagesPerHost)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return store.RefreshScan{}, fmt.Errorf("stage the pages of %d hosts: %w", len(taken), err)
	}
	puts := map[int][]any{}
	touched := map[int][]any{}
	untils := map[int]string{}
	for i, t := range taken {
		res, err := cmds[i].Int64Slice()
		if err != nil || len(res) != 2 {
			return store.RefreshScan{}, fmt.Errorf("stage the pages of %s: %v %w", t.host, res, err)
		}
		staged, left := res[0], res[1]
		shard := shardOf(t.host)
		puts[shard] = append(puts[shard], t.host, left)
		untils[shard] = t.until
		if left >= 0 && left < cutoff {
			scan.Done = false // more of the host's pages are stale than one script takes
		}
		if staged > 0 {
			scan.Staged += int(staged)
			scan.Hosts = append(scan.Hosts, t.host)
			touched[shard] = append(touched[shard], t.host)
		}
	}
	// The hosts given refreshes are listed ready after their pages are
	// queued, as the writer lists hosts given new URLs.
	pipe = s.rdb.Pipeline()
	for shard, args := range puts {
		k := keysOfShard(shard)
		refreshScript.EvalSha(ctx, pipe, []string{k.stale}, append([]any{"put", untils[shard]}, args...)...)
	}
	for shard, hosts := range touched {
		k := keysOfShard(shard)
		shardScript.Run(ctx, pipe, []string{k.ready, k.owner, k.touch, k.hosts}, append([]any{"touch", ""}, hosts...)...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return store.RefreshScan{}, fmt.Errorf("list the hosts of %d refreshes: %w", scan.Staged, err)
	}
	return scan, nil
}

// takenHost is a host a pass took from its shard's stale list, listed at
// until meanwhile.
type takenHost struct {
	host, until string
}

// takeStale takes up to perShard hosts of every shard listed before
// cutoff, and reports whether every shard had fewer.
func (s *Store) takeStale(ctx context.Context, cutoff int64, perShard int) ([]takenHost, bool, error) {
	pipe := s.rdb.Pipeline()
	var cmds [Shards]*redis.Cmd
	for n := range Shards {
		cmds[n] = refreshScript.EvalSha(ctx, pipe, []string{keysOfShard(n).stale}, "take", cutoff, perShard, takeLease.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, false, fmt.Errorf("take the hosts with stale pages: %w", err)
	}
	var out []takenHost
	done := true
	for n := range Shards {
		vals, err := cmds[n].StringSlice()
		if err != nil || len(vals) == 0 {
			return nil, false, fmt.Errorf("take the hosts with stale pages of shard %d: %v %w", n, vals, err)
		}
		for _, h := range vals[1:] {
			out = append(out, takenHost{host: h, until: vals[0]})
		}
		if len(vals)-1 >= perShard {
			done = false
		}
	}
	return out, done, nil
}

// Replaced returns the page stored under it's hash when it is a refresh
// (Replaces set), or store.ErrNotFound: also for a failure, which a URL
// queued again asks for anew.
func (s *Store) Replaced(it store.Item) (*store.Result, error) {
	if it.Replaces == 0 {
		return nil, store.ErrNotFound
	}
	ctx, cancel := bg()
	defer cancel()
	rec, err := s.rdb.HGet(ctx, keysOf(it.Host).results, hashKey(it.Hash)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, store.ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("store %s: read the page of %s: %w", s.display, it.URL, err)
	case len(rec) > 0 && rec[0] == store.RecordFailed:
		return nil, store.ErrNotFound
	}
	h, r, err := store.DecodeResult(rec)
	if err != nil {
		return nil, fmt.Errorf("store %s: result of %s: %w", s.display, it.URL, err)
	}
	if h != it.Hash {
		return nil, store.ErrNotFound
	}
	return &r, nil
}

// refreshItem is the Item of a staged page: its stored result rec made
// into the URL to fetch again.
func refreshItem(host string, seq uint64, rec []byte) (store.Item, error) {
	h, r, err := store.DecodeResult(rec)
	if err != nil {
		return store.Item{}, fmt.Errorf("the page a refresh of %s replaces: %w", host, err)
	}
	return store.Item{Host: host, Seq: seq, URL: r.URL, Hash: h, Depth: r.Depth, Replaces: replacesOf(r.FetchedAt),
		Referrer: r.Referrer, Lastmod: r.Lastmod, Kind: r.Kind, Hops: r.RequisiteHops()}, nil
}

// decodeEntry decodes a queued or deferred URL's entry as load.lua gives
// it: a staged page's is refreshEntry followed by its stored result.
func decodeEntry(host string, seq uint64, entry string) (store.Item, error) {
	if rec, ok := strings.CutPrefix(entry, refreshEntry); ok {
		return refreshItem(host, seq, []byte(rec))
	}
	return store.DecodeItem(host, seq, []byte(entry))
}

// replacesOf is the Replaces of a refresh of a page fetched at t.
func replacesOf(t time.Time) uint64 { return uint64(max(t.UnixMilli(), 1)) }

// indexTime is the score of a stored page in its host's index, its fetch
// time; false for a failure, which is not indexed.
func indexTime(rec []byte) (int64, bool) {
	at, ok := store.PageFetchedAt(rec)
	return at.UnixMilli(), ok
}
