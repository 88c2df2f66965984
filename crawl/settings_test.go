package crawl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// mergeSettings takes a given flag from the run, anything else the file
// has from the file, and what the file lacks from the run; the seed hosts
// are kept.
func TestMergeSettings(t *testing.T) {
	stored := `{"seed_hosts":["a.test"],"scope":"domain","delay":"3s","exclude":["skip"],"max-depth":2}`
	run := SettingsOf(DefaultOptions())
	run.Delay = Duration(5 * time.Second)
	run.MaxDepth = 4
	given := map[string]bool{"delay": true}

	got, changes, err := mergeSettings([]byte(stored), run, func(f string) bool { return given[f] })
	if err != nil {
		t.Fatal(err)
	}
	if time.Duration(got.Delay) != 5*time.Second {
		t.Errorf("delay = %v, want the given 5s", time.Duration(got.Delay))
	}
	if got.Scope != "domain" || got.MaxDepth != 2 || strings.Join(got.Exclude, ",") != "skip" {
		t.Errorf("scope %q max-depth %d exclude %v: want the stored domain, 2, [skip]", got.Scope, got.MaxDepth, got.Exclude)
	}
	if got.UserAgent != DefaultOptions().UserAgent || got.Retries != 3 {
		t.Errorf("settings the file lacks should come from the run: %+v", got)
	}
	if strings.Join(got.SeedHosts, ",") != "a.test" {
		t.Errorf("seed hosts = %v, want the stored [a.test]", got.SeedHosts)
	}
	if len(changes) != 1 || changes[0].Flag != "delay" || string(changes[0].Old) != `"3s"` || string(changes[0].New) != `"5s"` {
		t.Errorf("changes = %+v, want delay \"3s\" -> \"5s\" alone", changes)
	}
}

// A given flag equal to the stored value is no change; the stored form
// round-trips through Options.
func TestSettingsRoundTrip(t *testing.T) {
	o := DefaultOptions()
	o.Header = []string{"X-A: 1"}
	o.Proxy = "socks5://127.0.0.1:1080"
	o.RecrawlAfter = 24 * time.Hour
	s := SettingsOf(o)
	data, _ := json.Marshal(&s)
	_, changes, err := mergeSettings(data, s, func(string) bool { return true })
	if err != nil || len(changes) != 0 {
		t.Fatalf("changes %v, %v: want none", changes, err)
	}
	var back Options
	if err := s.applyTo(&back); err != nil {
		t.Fatal(err)
	}
	if got := SettingsOf(back); !equalJSON(t, got, s) {
		t.Errorf("round trip through Options changed the settings")
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
