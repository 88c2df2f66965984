package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"breakwater/redisstore/redistest"
)

func openScopeStore(t *testing.T) (*Store, *redistest.Server) {
	t.Helper()
	rs := redistest.Start(t)
	s, err := Open(context.Background(), rs.URL(), Create)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, rs
}

func settingsOf(t *testing.T, s *Store) map[string]string {
	t.Helper()
	data, err := s.Settings()
	if err != nil {
		t.Fatal(err)
	}
	obj := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &obj); err != nil {
		t.Fatalf("settings %s: %v", data, err)
	}
	out := map[string]string{}
	for k, v := range obj {
		out[k] = string(v)
	}
	return out
}

// Seed hosts only grow, and the version says when they did.
func TestSeedHostsGrowWithAVersion(t *testing.T) {
	s, _ := openScopeStore(t)
	if hosts, v, err := s.SeedHosts(); err != nil || len(hosts) != 0 || v != 0 {
		t.Fatalf("empty store: %v %d %v", hosts, v, err)
	}
	if err := s.AddSeedHosts([]string{"b.test", "a.test"}); err != nil {
		t.Fatal(err)
	}
	_, v1, _ := s.SeedHosts()
	if err := s.AddSeedHosts([]string{"a.test"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.SeedHostsVersion(); v != v1 {
		t.Errorf("adding a host already there moved the version %d -> %d", v1, v)
	}
	many := make([]string, 2500)
	for i := range many {
		many[i] = fmt.Sprintf("h%d.test", i)
	}
	if err := s.AddSeedHosts(many); err != nil {
		t.Fatal(err)
	}
	hosts, v2, err := s.SeedHosts()
	if err != nil || v2 <= v1 {
		t.Fatalf("after adding: version %d (was %d), %v", v2, v1, err)
	}
	if !slices.Contains(hosts, "a.test") || !slices.Contains(hosts, "b.test") || len(hosts) < 3 {
		t.Errorf("seed hosts %d, want a.test, b.test and the rest", len(hosts))
	}
	if got := settingsOf(t, s)["seed_hosts"]; got == "" || got == "[]" {
		t.Errorf("Settings lacks the seed hosts: %s", got)
	}
}

// Two processes merging at once: each keeps what it was given, a setting
// neither gave is added once, and what the other stored meanwhile is
// reported.
func TestMergeSettingsKeepsWhatEachWasGiven(t *testing.T) {
	s, _ := openScopeStore(t)
	none := map[string]json.RawMessage{}
	givenA := func(n string) bool { return n == "delay" }
	a := map[string]json.RawMessage{"delay": json.RawMessage(`"1s"`), "workers": json.RawMessage(`8`), "exclude": json.RawMessage(`[]`)}
	if c, err := s.MergeSettings(a, none, givenA); err != nil || len(c) != 0 {
		t.Fatalf("first merge: %v %v", c, err)
	}
	// B read the store before A wrote, and was given --exclude and --delay.
	givenB := func(n string) bool { return n == "exclude" || n == "delay" }
	b := map[string]json.RawMessage{"delay": json.RawMessage(`"2s"`), "workers": json.RawMessage(`4`), "exclude": json.RawMessage(`["x"]`)}
	c, err := s.MergeSettings(b, none, givenB)
	if err != nil {
		t.Fatal(err)
	}
	got := settingsOf(t, s)
	if got["delay"] != `"2s"` || got["exclude"] != `["x"]` || got["workers"] != `8` {
		t.Errorf("merged settings %v: want B's delay and exclude, A's workers", got)
	}
	byName := map[string]bool{}
	for _, x := range c {
		byName[x.Name] = x.Replaced
	}
	if len(c) != 3 || !byName["delay"] || !byName["exclude"] || byName["workers"] {
		t.Errorf("conflicts %+v: want delay and exclude replaced, workers kept", c)
	}
	// A later run that read the store first changes what it was given
	// without a conflict.
	read := map[string]json.RawMessage{}
	for k, v := range got {
		read[k] = json.RawMessage(v)
	}
	later := map[string]json.RawMessage{"delay": json.RawMessage(`"3s"`), "workers": json.RawMessage(`8`), "exclude": json.RawMessage(`["x"]`)}
	if c, err := s.MergeSettings(later, read, givenA); err != nil || len(c) != 0 {
		t.Errorf("a later change: conflicts %+v, %v; want none", c, err)
	}
	if settingsOf(t, s)["delay"] != `"3s"` {
		t.Error("the later change is not stored")
	}
}

// A store written before settings were kept by name is read as it was,
// and moved to the hash (seed hosts to their set) on the next write.
func TestSettingsOfAnOlderStoreMove(t *testing.T) {
	s, rs := openScopeStore(t)
	ctx := context.Background()
	old := `{"delay":"1s","seed_hosts":["a.test","b.test"]}`
	if err := rs.Client().Set(ctx, keySettings, old, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if got := settingsOf(t, s); got["delay"] != `"1s"` {
		t.Fatalf("older settings read as %v", got)
	}
	if _, err := s.MergeSettings(map[string]json.RawMessage{"workers": json.RawMessage(`2`)}, nil, func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	got := settingsOf(t, s)
	if got["delay"] != `"1s"` || got["workers"] != `2` || got["seed_hosts"] != `["a.test","b.test"]` {
		t.Errorf("after the move: %v", got)
	}
	if n, _ := rs.Client().Exists(ctx, keySettings).Result(); n != 0 {
		t.Error("the older settings key is left behind")
	}
}
