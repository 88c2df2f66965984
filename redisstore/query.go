package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/breaker"
	"breakwater/robots"
	"breakwater/store"
)

// The reads behind the commands (status, hosts, transitions, cases,
// export) and the engine's few lookups. They walk the shards' host sets:
// a crawl's counters are kept per host, where the scripts update them.

func bg() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

// Settings returns the crawl's stored settings as one JSON object, by
// setting name, or store.ErrNotFound (scope.go keeps them by name).
func (s *Store) Settings() ([]byte, error) {
	data, err := s.settingsByName()
	if !errors.Is(err, store.ErrNotFound) {
		return data, err
	}
	ctx, cancel := bg()
	defer cancel()
	data, err = s.rdb.Get(ctx, keySettings).Bytes() // a store from before
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: read settings: %w", s.display, err)
	}
	return data, nil
}

// PutSettings stores the crawl's settings (a JSON object by setting
// name), each replacing the stored one; seed_hosts, when there, is added
// to the seed hosts. A fleet's processes merge theirs (MergeSettings).
func (s *Store) PutSettings(data []byte) error {
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("store %s: write settings: %w", s.display, err)
	}
	if raw, ok := obj[settingSeedHostsV1]; ok {
		var hosts []string
		if err := json.Unmarshal(raw, &hosts); err != nil {
			return fmt.Errorf("store %s: write settings: seed hosts: %w", s.display, err)
		}
		if err := s.AddSeedHosts(hosts); err != nil {
			return err
		}
		delete(obj, settingSeedHostsV1)
	}
	if err := s.migrateSettings(); err != nil {
		return err
	}
	ctx, cancel := bg()
	defer cancel()
	pipe := s.rdb.TxPipeline()
	pipe.SetNX(ctx, keySchema, schemaMarker, 0)
	for name, v := range obj {
		pipe.HSet(ctx, keySettingsByName, name, string(v))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store %s: write settings: %w", s.display, err)
	}
	return nil
}

// Robots returns the cached robots.txt rules of host, or store.ErrNotFound.
func (s *Store) Robots(host string) (*robots.Rules, error) {
	ctx, cancel := bg()
	defer cancel()
	data, err := s.rdb.Get(ctx, keysOf(host).robots).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("store %s: read robots.txt rules of %s: %w", s.display, host, err)
	}
	return store.DecodeRobots(host, data)
}

// Seen is always false: the hosts' scripts drop URLs seen before, and the
// fleet keeps no copy of the seen set in each process.
func (s *Store) Seen(store.Hash) bool { return false }

// RunningAt is zero: a fleet's breakers are shared, and their down time is
// the fleet's, not one process's.
func (s *Store) RunningAt() (time.Time, error) { return time.Time{}, nil }

// ForEachHost calls fn with every host's counters.
func (s *Store) ForEachHost(fn func(host string, c store.HostCounts) error) error {
	ctx, cancel := bg()
	defer cancel()
	return s.eachHostCounts(ctx, func(host string, c map[string]string) error {
		return fn(host, store.HostCounts{Queued: atoi(c["queued"]), Deferred: atoi(c["deferred"]),
			Fetched: atoi(c["fetched"]), Failed: atoi(c["failed"])})
	})
}

func (s *Store) eachHostCounts(ctx context.Context, fn func(host string, c map[string]string) error) error {
	return s.eachHost(ctx, func(hosts []string, _ int) error {
		slices.Sort(hosts)
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.MapStringStringCmd, len(hosts))
		for i, h := range hosts {
			cmds[i] = pipe.HGetAll(ctx, keysOf(h).counts)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return fmt.Errorf("store %s: read host counters: %w", s.display, err)
		}
		for i, h := range hosts {
			if err := fn(h, cmds[i].Val()); err != nil {
				return err
			}
		}
		return nil
	})
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// Counts sums every host's counters.
func (s *Store) Counts() (store.Counts, error) {
	ctx, cancel := bg()
	defer cancel()
	var c store.Counts
	err := s.eachHostCounts(ctx, func(_ string, h map[string]string) error {
		c.Seen += atoi(h["seen"])
		c.Queued += atoi(h["queued"])
		c.Deferred += atoi(h["deferred"])
		c.Fetched += atoi(h["fetched"])
		c.Failed += atoi(h["failed"])
		return nil
	})
	return c, err
}

// Tallies sums every host's results by status and by error class.
func (s *Store) Tallies() (store.Tallies, error) {
	ctx, cancel := bg()
	defer cancel()
	t := store.Tallies{Status: map[int]int64{}, Failed: map[string]int64{}}
	err := s.eachHostCounts(ctx, func(_ string, h map[string]string) error {
		for k, v := range h {
			switch {
			case strings.HasPrefix(k, "s:"):
				if st, err := strconv.Atoi(k[2:]); err == nil && atoi(v) != 0 {
					t.Status[st] += atoi(v)
				}
			case strings.HasPrefix(k, "f:") && atoi(v) != 0:
				t.Failed[k[2:]] += atoi(v)
			}
		}
		return nil
	})
	return t, err
}

// ForEachResult calls fn with every stored result, host by host.
func (s *Store) ForEachResult(fn func(r *store.Result) error) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	return s.eachHost(ctx, func(hosts []string, _ int) error {
		slices.Sort(hosts)
		for _, h := range hosts {
			var cursor uint64
			for {
				kv, next, err := s.rdb.HScan(ctx, keysOf(h).results, cursor, "", 500).Result()
				if err != nil {
					return fmt.Errorf("store %s: read results of %s: %w", s.display, h, err)
				}
				var where []any
				if len(kv) > 0 {
					hashes := make([]string, 0, len(kv)/2)
					for i := 0; i < len(kv); i += 2 {
						hashes = append(hashes, kv[i])
					}
					if where, err = s.rdb.HMGet(ctx, keysOf(h).warc, hashes...).Result(); err != nil {
						return fmt.Errorf("store %s: read WARC places of %s: %w", s.display, h, err)
					}
				}
				for i := 1; i < len(kv); i += 2 {
					_, r, err := store.DecodeResult([]byte(kv[i]))
					if err != nil {
						return fmt.Errorf("store %s: result %s of %s: %w", s.display, kv[i-1], h, err)
					}
					if place, ok := where[i/2].(string); ok {
						file, offset, _ := strings.Cut(place, " ")
						r.WARCFile, r.WARCOffset = file, atoi(offset)
					}
					if err := fn(&r); err != nil {
						return err
					}
				}
				if cursor = next; cursor == 0 {
					break
				}
			}
		}
		return nil
	})
}

// ScanResults is ForEachResult, optionally of failures only.
func (s *Store) ScanResults(failedOnly bool, fn func(r *store.Result) error) error {
	return s.ForEachResult(func(r *store.Result) error {
		if failedOnly && !r.Failed() {
			return nil
		}
		return fn(r)
	})
}

// ForEachBreaker calls fn with every host's stored breaker.
func (s *Store) ForEachBreaker(fn func(host string, b breaker.Breaker) error) error {
	ctx, cancel := bg()
	defer cancel()
	br := NewBreakers(s.rdb, breaker.Config{})
	return s.eachHost(ctx, func(hosts []string, _ int) error {
		slices.Sort(hosts)
		for _, h := range hosts {
			b, ok, err := br.Get(ctx, h)
			if err != nil {
				return err
			}
			if ok {
				if err := fn(h, b); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// ForEachTransition calls fn with every logged transition, oldest first.
func (s *Store) ForEachTransition(fn func(store.Transition) error) error {
	ctx, cancel := bg()
	defer cancel()
	br := NewBreakers(s.rdb, breaker.Config{})
	var all []store.Transition
	err := s.eachHost(ctx, func(hosts []string, _ int) error {
		for _, h := range hosts {
			ts, err := br.Transitions(ctx, h)
			if err != nil {
				return err
			}
			all = append(all, ts...)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(all, func(a, b store.Transition) int { return a.At.Compare(b.At) })
	for _, t := range all {
		if err := fn(t); err != nil {
			return err
		}
	}
	return nil
}

// ForEachCase calls fn with every case, oldest first.
func (s *Store) ForEachCase(fn func(store.Case) error) error {
	ctx, cancel := bg()
	defer cancel()
	var all []store.Case
	err := s.eachHost(ctx, func(hosts []string, _ int) error {
		for _, h := range hosts {
			vals, err := s.rdb.LRange(ctx, keysOf(h).cases, 0, -1).Result()
			if err != nil {
				return fmt.Errorf("store %s: read cases of %s: %w", s.display, h, err)
			}
			for _, v := range vals {
				c, err := store.DecodeCase(0, []byte(v))
				if err != nil {
					return err
				}
				all = append(all, c)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(all, func(a, b store.Case) int { return a.At.Compare(b.At) })
	for _, c := range all {
		if err := fn(c); err != nil {
			return err
		}
	}
	return nil
}

// resolveCases marks the open cases of host resolved at at.
func (s *Store) resolveCases(ctx context.Context, host string, at time.Time) error {
	key := keysOf(host).cases
	vals, err := s.rdb.LRange(ctx, key, 0, -1).Result()
	if err != nil {
		return err
	}
	for i, v := range vals {
		c, err := store.DecodeCase(0, []byte(v))
		if err != nil || !c.Resolved.IsZero() {
			continue
		}
		c.Resolved = at.UTC()
		data, err := json.Marshal(c)
		if err != nil {
			return err
		}
		if err := s.rdb.LSet(ctx, key, int64(i), data).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Processes returns the heartbeats of the fleet's processes.
func (s *Store) Processes() (map[string]string, error) {
	ctx, cancel := bg()
	defer cancel()
	return s.rdb.HGetAll(ctx, keyProcs).Result()
}
