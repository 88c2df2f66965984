package redisstore

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/redis/go-redis/v9"

	"breakwater/store"
)

// One scope for the fleet. The seed hosts are a set any process adds its
// seeds' hosts to, with a version that grows with each addition, so a
// process polls one small key to learn that the scope grew. The settings
// are a hash, one field a setting (its stored JSON), merged setting by
// setting (settings.lua) rather than written whole, so that two processes
// starting at once each keep what they were given.

const (
	keySeedHosts       = "bw:{meta}:seedhosts"
	keySeedHostsAdded  = "bw:{meta}:seedhosts:version"
	keySettingsByName  = "bw:{meta}:config"
	seedHostsChunk     = 1000
	settingSeedHostsV1 = "seed_hosts"
)

var (
	//go:embed settings.lua
	settingsSource string
	settingsScript = redis.NewScript(settingsSource)
	// addSeedHostsScript marks the store (KEYS[1], ARGV[1]), adds the
	// hosts ARGV[2:] to the set KEYS[2] and counts an addition in KEYS[3].
	addSeedHostsScript = redis.NewScript(`redis.call('SETNX', KEYS[1], ARGV[1])
local added = redis.call('SADD', KEYS[2], unpack(ARGV, 2))
if added > 0 then redis.call('INCR', KEYS[3]) end
return added`)
)

// AddSeedHosts adds hosts to the fleet's seed hosts, marking the store as
// this crawl's with them (its first keys may be these).
func (s *Store) AddSeedHosts(hosts []string) error {
	ctx, cancel := bg()
	defer cancel()
	for chunk := range slices.Chunk(hosts, seedHostsChunk) {
		args := make([]any, 0, len(chunk)+1)
		args = append(args, schemaMarker)
		for _, h := range chunk {
			args = append(args, h)
		}
		err := addSeedHostsScript.Run(ctx, s.rdb, []string{keySchema, keySeedHosts, keySeedHostsAdded}, args...).Err()
		if err != nil {
			return fmt.Errorf("store %s: add seed hosts: %w", s.display, err)
		}
	}
	return nil
}

// SeedHosts returns the fleet's seed hosts and the version of the set
// they were read at.
func (s *Store) SeedHosts() (hosts []string, version int64, err error) {
	ctx, cancel := bg()
	defer cancel()
	if version, err = s.SeedHostsVersion(); err != nil {
		return nil, 0, err
	}
	iter := s.rdb.SScan(ctx, keySeedHosts, 0, "", 10_000).Iterator()
	for iter.Next(ctx) {
		hosts = append(hosts, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return nil, 0, fmt.Errorf("store %s: read seed hosts: %w", s.display, err)
	}
	slices.Sort(hosts)
	return slices.Compact(hosts), version, nil
}

// SeedHostsVersion is the version of the seed hosts: it grows whenever a
// process adds one.
func (s *Store) SeedHostsVersion() (int64, error) {
	ctx, cancel := bg()
	defer cancel()
	v, err := s.rdb.Get(ctx, keySeedHostsAdded).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store %s: read the seed hosts' version: %w", s.display, err)
	}
	return v, nil
}

// MergeSettings merges settings into the fleet's, setting by setting:
// given(name) says the process was given it by a flag, read is what the
// process read of the stored settings as it resolved them. It returns the
// settings another process stored meanwhile.
func (s *Store) MergeSettings(settings, read map[string]json.RawMessage, given func(string) bool) ([]store.SettingConflict, error) {
	if err := s.migrateSettings(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	slices.Sort(names)
	args := []any{schemaMarker}
	for _, name := range names {
		g := "0"
		if given(name) {
			g = "1"
		}
		args = append(args, name, string(settings[name]), g, string(read[name]))
	}
	ctx, cancel := bg()
	defer cancel()
	res, err := settingsScript.Run(ctx, s.rdb, []string{keySettingsByName, keySchema}, args...).StringSlice()
	if err != nil {
		return nil, fmt.Errorf("store %s: merge settings: %w", s.display, err)
	}
	var out []store.SettingConflict
	for i := 0; i+2 < len(res); i += 3 {
		out = append(out, store.SettingConflict{Name: res[i], Other: json.RawMessage(res[i+1]),
			Ours: settings[res[i]], Replaced: res[i+2] == "replaced"})
	}
	return out, nil
}

// migrateSettings moves the settings of a store written before they were
// kept by name (one JSON string) into the hash, and its seed hosts into
// their set; a field another process wrote first is kept.
func (s *Store) migrateSettings() error {
	ctx, cancel := bg()
	defer cancel()
	data, err := s.rdb.Get(ctx, keySettings).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store %s: read settings: %w", s.display, err)
	}
	old := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &old); err != nil {
		return fmt.Errorf("store %s: read settings: %w", s.display, err)
	}
	if raw, ok := old[settingSeedHostsV1]; ok {
		var hosts []string
		if err := json.Unmarshal(raw, &hosts); err != nil {
			return fmt.Errorf("store %s: read seed hosts: %w", s.display, err)
		}
		if err := s.AddSeedHosts(hosts); err != nil {
			return err
		}
		delete(old, settingSeedHostsV1)
	}
	pipe := s.rdb.TxPipeline()
	for name, v := range old {
		pipe.HSetNX(ctx, keySettingsByName, name, string(v))
	}
	pipe.Del(ctx, keySettings)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store %s: move settings: %w", s.display, err)
	}
	return nil
}

// settingsByName reads the settings hash as one JSON object, with the
// seed hosts under seed_hosts, as a store that writes them whole keeps
// them; store.ErrNotFound when it is empty.
func (s *Store) settingsByName() ([]byte, error) {
	ctx, cancel := bg()
	defer cancel()
	fields, err := s.rdb.HGetAll(ctx, keySettingsByName).Result()
	if err != nil {
		return nil, fmt.Errorf("store %s: read settings: %w", s.display, err)
	}
	hosts, _, err := s.SeedHosts()
	if err != nil {
		return nil, err
	}
	if len(fields) == 0 && len(hosts) == 0 {
		return nil, store.ErrNotFound
	}
	obj := make(map[string]json.RawMessage, len(fields)+1)
	for k, v := range fields {
		obj[k] = json.RawMessage(v)
	}
	if obj[settingSeedHostsV1], err = json.Marshal(append([]string{}, hosts...)); err != nil {
		return nil, fmt.Errorf("store %s: read settings: %w", s.display, err)
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("store %s: read settings: a setting is not JSON: %w", s.display, err)
	}
	return data, nil
}
