package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/store"
	"breakwater/verify"
)

// Verify checks the fleet's store, read-only: the crawl's invariants
// (package verify) over the view verifySource produces, host by host, and
// the store's own layout: every queued or deferred URL has its entry, the
// entries are those URLs' and each record is filed under its own URL's
// hash; every host with URLs left is listed in its shard's ready set, so
// some process will take it, and every lease names a listed host. Each
// done page carries its placement in the archive, for opts.Placed. Run it
// on a store no process is writing, or expect counters caught between two
// scripts.
func (s *Store) Verify(ctx context.Context, opts verify.Options) (*verify.Report, error) {
	rep := verify.NewReport(opts.MaxProblems)
	src := &verifySource{s: s, ctx: ctx, rep: rep, br: NewBreakers(s.rdb, breaker.Config{})}
	if err := verify.Run(rep, src, opts); err != nil {
		return nil, err
	}
	return rep, nil
}

// verifySource is the store as package verify reads it: each host's keys
// read in one pipeline, one host at a time.
type verifySource struct {
	s   *Store
	ctx context.Context
	rep *verify.Report
	br  *Breakers

	listed map[string]bool // hosts in a shard's ready set
}

// Crawl reads the shards' ready sets and leases. The store keeps its
// counters, tallies and seen sets per host, and results by URL hash.
func (v *verifySource) Crawl() (*verify.Crawl, error) {
	v.listed = map[string]bool{}
	for shard := range Shards {
		k := keysOfShard(shard)
		members, err := v.s.rdb.ZRange(v.ctx, k.ready, 0, -1).Result()
		if err != nil {
			return nil, fmt.Errorf("store %s: read %s: %w", v.s.display, k.ready, err)
		}
		for _, h := range members {
			v.listed[h] = true
		}
		owners, err := v.s.rdb.HKeys(v.ctx, k.owner).Result()
		if err != nil {
			return nil, fmt.Errorf("store %s: read %s: %w", v.s.display, k.owner, err)
		}
		for _, h := range owners {
			if !v.listed[h] {
				v.rep.Addf("host %s: leased in %s but not listed in %s", h, k.owner, k.ready)
			}
		}
	}
	return &verify.Crawl{Parts: verify.HostSeen | verify.HostTallies}, nil
}

// Hosts calls fn with each host of the shards' host sets.
func (v *verifySource) Hosts(fn func(*verify.Host) error) error {
	return v.s.eachHost(v.ctx, func(hosts []string, _ int) error {
		slices.Sort(hosts)
		for _, name := range hosts {
			h, err := v.host(name)
			if err != nil {
				return err
			}
			if err := fn(h); err != nil {
				return err
			}
		}
		return nil
	})
}

func (v *verifySource) host(name string) (*verify.Host, error) {
	ctx, rep, k := v.ctx, v.rep, keysOf(name)
	pipe := v.s.rdb.Pipeline()
	queue := pipe.ZRange(ctx, k.queue, 0, -1)
	deferred := pipe.ZRange(ctx, k.deferred, 0, -1)
	items := pipe.HGetAll(ctx, k.items)
	seen := pipe.SMembers(ctx, k.seen)
	results := pipe.HGetAll(ctx, k.results)
	placements := pipe.HGetAll(ctx, k.warc)
	counts := pipe.HGetAll(ctx, k.counts)
	cases := pipe.LRange(ctx, k.cases, 0, -1)
	robotsRules := pipe.Get(ctx, k.robots)
	fetched := pipe.ZRangeWithScores(ctx, k.fetched, 0, -1)
	listedAt := pipe.ZScore(ctx, keysOfShard(shardOf(name)).stale, name)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("store %s: read host %s: %w", v.s.display, name, err)
	}
	h := &verify.Host{Name: name}
	for _, m := range seen.Val() {
		hash, err := parseHash(m)
		if err != nil {
			rep.Addf("host %s: seen set member %q is not a URL hash", name, m)
			continue
		}
		h.Seen = append(h.Seen, hash)
	}
	entries := items.Val()
	wait := func(members []string, place verify.Place) {
		for _, m := range members {
			hash, err := parseHash(m)
			if err != nil {
				rep.Addf("host %s: %s member %q is not a URL hash", name, place, m)
				continue
			}
			it := store.Item{Host: name, Hash: hash}
			switch entry, ok := entries[m]; {
			case !ok:
				rep.Addf("host %s: %s URL %s has no entry in %s", name, place, m, k.items)
			default:
				if entry == refreshEntry {
					entry += results.Val()[m] // a staged page: its Item is its stored result's
				}
				got, err := decodeEntry(name, 0, entry)
				switch {
				case err != nil:
					rep.Addf("host %s: entry of %s: %v", name, m, err)
				case got.Hash != hash:
					rep.Addf("host %s: entry %s holds the URL %s of another hash", name, m, got.URL)
				default:
					it = got
				}
			}
			h.Waiting = append(h.Waiting, verify.Waiting{Place: place, Item: it})
		}
	}
	wait(queue.Val(), verify.Queued)
	wait(deferred.Val(), verify.Deferred)
	if n, want := len(entries), len(queue.Val())+len(deferred.Val()); n != want {
		rep.Addf("host %s: %d entries for %d queued and %d deferred URLs", name, n, len(queue.Val()), len(deferred.Val()))
	}
	if left := len(queue.Val()) + len(deferred.Val()); left > 0 && !v.listed[name] {
		rep.Addf("host %s: %d URLs left but the host is in no shard's ready set: no process will take it", name, left)
	}
	for m, rec := range results.Val() {
		hash, r, err := store.DecodeResult([]byte(rec))
		if err != nil {
			rep.Addf("host %s: result %s: %v", name, m, err)
			continue
		}
		if hashKey(hash) != m {
			rep.Addf("host %s: result of %s is filed under another hash (%s)", name, r.URL, m)
		}
		h.Results = append(h.Results, verify.Done{Hash: hash, Result: r, Placement: placements.Val()[m]})
	}
	slices.SortFunc(h.Results, func(a, b verify.Done) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	v.checkIndex(name, fetched.Val(), results.Val(), entries, listedAt)
	if c := counts.Val(); len(c) > 0 {
		h.Counts = &store.HostCounts{Queued: atoi(c["queued"]), Deferred: atoi(c["deferred"]),
			Fetched: atoi(c["fetched"]), Failed: atoi(c["failed"])}
		h.SeenCount = atoi(c["seen"])
		for f, val := range c {
			switch {
			case strings.HasPrefix(f, "s:"):
				status, err := strconv.Atoi(f[2:])
				if err != nil {
					rep.Addf("host %s: counter %s names no status", name, f)
					continue
				}
				h.Tallies.AddStatus(status, atoi(val))
			case strings.HasPrefix(f, "f:"):
				h.Tallies.AddFailed(f[2:], atoi(val))
			}
		}
	}
	if b, ok, err := v.br.Get(ctx, name); err != nil {
		rep.Addf("host %s: %v", name, err)
	} else if ok {
		h.Breaker = &b
	}
	ts, err := v.br.Transitions(ctx, name)
	if err != nil {
		rep.Addf("host %s: %v", name, err)
	}
	for i, t := range ts {
		h.Transitions = append(h.Transitions, verify.Transition{Seq: uint64(i + 1), Transition: t})
	}
	for i, raw := range cases.Val() {
		c, err := store.DecodeCase(uint64(i+1), []byte(raw))
		if err != nil {
			rep.Addf("host %s: %v", name, err)
			continue
		}
		h.Cases = append(h.Cases, verify.Case{Seq: uint64(i + 1), Case: c})
	}
	if data, err := robotsRules.Bytes(); err == nil {
		if _, err := store.DecodeRobots(name, data); err != nil {
			rep.Addf("host %s: %v", name, err)
		}
	}
	return h, nil
}

// checkIndex checks a host's index of pages by fetch time (refresh.go):
// each member is a stored page under its fetch time, or a page queued
// for its refresh is out of it; and the host is listed in its shard no
// later than its oldest page, so that a pass finds it.
func (v *verifySource) checkIndex(name string, index []redis.Z, results, entries map[string]string, listedAt *redis.FloatCmd) {
	oldest := int64(-1)
	for _, z := range index {
		m, _ := z.Member.(string)
		ms := int64(z.Score)
		if oldest < 0 || ms < oldest {
			oldest = ms
		}
		at, ok := indexTime([]byte(results[m]))
		switch {
		case !ok:
			v.rep.Addf("host %s: %s lists %s, which is not a stored page", name, keysOf(name).fetched, m)
		case at != ms:
			v.rep.Addf("host %s: %s lists %s at %d, its page was fetched at %d", name, keysOf(name).fetched, m, ms, at)
		case entries[m] == refreshEntry:
			v.rep.Addf("host %s: %s lists %s, which is queued for its refresh", name, keysOf(name).fetched, m)
		}
	}
	if oldest < 0 {
		return
	}
	stale := keysOfShard(shardOf(name)).stale
	if at, err := listedAt.Result(); err != nil || int64(at) > oldest {
		v.rep.Addf("host %s: its oldest page (fetched at %d) is listed in %s at %v (%v): no refresh pass would find it in time",
			name, oldest, stale, at, err)
	}
}
