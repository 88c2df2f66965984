package crawl

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"breakwater/control"
	"breakwater/store"
)

// settingsDB is a store's stored settings, as ResolveFlags reads them.
type settingsDB struct{ blob []byte }

func (d settingsDB) Settings() ([]byte, error) {
	if d.blob == nil {
		return nil, store.ErrNotFound
	}
	return d.blob, nil
}

// storedBlob is what New stores after ResolveFlags: the merged settings.
func storedBlob(t *testing.T, v FlagValues) []byte {
	t.Helper()
	data, err := json.Marshal(v.Options.settings)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func allGiven(string) bool  { return true }
func noneGiven(string) bool { return false }

// setFlag sets flag's field in v from its stored (JSON) form.
func setFlag(t *testing.T, v *FlagValues, flag string, raw string) {
	t.Helper()
	f, ok := LookupFlag(flag)
	if !ok {
		t.Fatalf("no flag --%s in the table", flag)
	}
	if err := decodeSetting(flag, f.field(v), json.RawMessage(raw)); err != nil {
		t.Fatalf("--%s %s: %v", flag, raw, err)
	}
}

func valueOf(t *testing.T, v *FlagValues, flag string) string {
	t.Helper()
	f, _ := LookupFlag(flag)
	return string(encodeSetting(f.field(v)))
}

// One row per flag of the table: a first run gives the flag a value
// other than its default; a resume that gives no flag keeps that value if
// the flag is stored and has the default if it belongs to one run. The
// rows must name every flag of the table, so a new flag needs a row, and
// each says whether it is stored, so a decision changes in two places.
func TestEachSettingResumesAsTheTableSays(t *testing.T) {
	const stored, perRun = true, false
	rows := []struct {
		flag, value string
		stored      bool // the decision the table must keep
	}{
		{"db", `"other.db"`, perRun},
		{"seeds", `"seeds.txt"`, perRun},
		{"workers", `3`, perRun},
		{"memory-limit", `67108864`, perRun},
		{"max-pages", `10`, perRun},
		{"max-duration", `"1m0s"`, perRun},
		{"retry-failed", `true`, perRun},
		{"recrawl-after", `"24h0m0s"`, stored},
		{"fail-ratio", `0.5`, perRun},
		{"scope", `"domain"`, stored},
		{"max-depth", `2`, stored},
		{"trap-repeats", `5`, stored},
		{"trap-segments", `12`, stored},
		{"trap-query-params", `0`, stored},
		{"trap-future-years", `4`, stored},
		{"max-pages-per-host", `50`, stored},
		{"include", `["/docs/"]`, stored},
		{"exclude", `["\\.pdf$","/private/"]`, stored},
		{"sitemaps", `false`, stored},
		{"page-requisites", `false`, stored},
		{"requisite-hops", `2`, stored},
		{"skip-rel-nofollow", `true`, stored},
		{"robots-meta", `false`, stored},
		{"delay", `"3s"`, stored},
		{"host-concurrency", `2`, stored},
		{"user-agent", `"mybot/2.0"`, stored},
		{"header", `["X-Team: crawlers"]`, stored},
		{"cookies", `"/tmp/cookies.txt"`, stored},
		{"header-hosts", `"all"`, stored},
		{"proxy", `"http://proxy.example:3128"`, stored},
		{"timeout", `"7s"`, stored},
		{"connect-timeout", `"2s"`, stored},
		{"max-body", `1024`, stored},
		{"allow-private", `true`, stored},
		{"breaker", `false`, stored},
		{"breaker-threshold", `4`, stored},
		{"breaker-rest", `"1m0s"`, stored},
		{"breaker-rest-max", `"10m0s"`, stored},
		{"breaker-probes", `3`, stored},
		{"give-up-after", `"1h0m0s"`, stored},
		{"local-fault-hosts", `9`, stored},
		{"local-fault-share", `0.7`, stored},
		{"local-fault-window", `"2m0s"`, stored},
		{"retries", `5`, stored},
		{"retry-base", `"1s"`, stored},
		{"retry-max", `"1m0s"`, stored},
		{"retry-budget", `0.4`, stored},
		{"warc", `"/tmp/warc"`, stored},
		{"warc-size", `2097152`, stored},
		{"warc-prefix", `"site"`, stored},
		{"warc-max-record", `4096`, stored},
		{"warc-dedupe", `false`, stored},
		{"warc-secrets", `"keep"`, stored},
		{"progress", `"never"`, perRun},
		{"notify", `"http://127.0.0.1:9/hook"`, stored},
		{"metrics-file", `"/tmp/crawl.prom"`, stored},
		{"listen", `"127.0.0.1:9150"`, perRun},
		{"wacz", `"/tmp/crawl.wacz"`, perRun},
		{"log-format", `"json"`, perRun},
		{"log-level", `"debug"`, perRun},
		{"store", `"redis://127.0.0.1:6379"`, perRun},
		{"fleet-id", `"worker-1"`, perRun},
		{"fleet-lease", `"30s"`, perRun},
	}
	covered := map[string]bool{}
	for _, row := range rows {
		covered[row.flag] = true
	}
	for _, f := range Flags() {
		if !covered[f.Name] {
			t.Errorf("--%s has no row: give it a value other than its default", f.Name)
		}
	}
	for _, row := range rows {
		t.Run(row.flag, func(t *testing.T) {
			f, _ := LookupFlag(row.flag)
			if f.Stored != row.stored {
				t.Fatalf("the table says stored %v, the row %v", f.Stored, row.stored)
			}
			defaults := DefaultFlagValues()
			first := DefaultFlagValues()
			setFlag(t, &first, row.flag, row.value)
			if valueOf(t, &first, row.flag) == valueOf(t, &defaults, row.flag) {
				t.Fatalf("the row's value %s is --%s's default", row.value, row.flag)
			}
			if _, err := ResolveFlags(settingsDB{}, &first, allGiven); err != nil {
				t.Fatalf("first run: %v", err)
			}
			blob := storedBlob(t, first)

			resume := DefaultFlagValues()
			changes, err := ResolveFlags(settingsDB{blob}, &resume, noneGiven)
			if err != nil {
				t.Fatalf("resume: %v", err)
			}
			if len(changes) != 0 {
				t.Errorf("a resume that gives no flag changed %+v", changes)
			}
			got, want := valueOf(t, &resume, row.flag), valueOf(t, &first, row.flag)
			if !f.Stored {
				want = valueOf(t, &defaults, row.flag)
			}
			if got != want {
				t.Errorf("stored %v: after the resume --%s = %s, want %s", f.Stored, row.flag, got, want)
			}
			var kept map[string]json.RawMessage
			json.Unmarshal(blob, &kept)
			if _, ok := kept[row.flag]; ok != f.Stored {
				t.Errorf("stored %v, but the crawl's settings hold it: %v", f.Stored, ok)
			}
		})
	}
}

// mergeSettings takes a given flag from the run, anything else the crawl
// has from the crawl, and what the crawl lacks from the run; the seed
// hosts are kept. Only a given flag whose value differs is a change.
func TestMergeSettings(t *testing.T) {
	stored := `{"seed_hosts":["a.test"],"scope":"domain","delay":"3s","exclude":["skip"],"max-depth":2,"retries":3}`
	run := DefaultFlagValues()
	run.Options.Delay = 5 * time.Second
	run.Options.MaxDepth = 4
	run.Options.Retries = 3
	given := map[string]bool{"delay": true, "retries": true}

	got, changes, err := mergeSettings([]byte(stored), &run, func(f string) bool { return given[f] })
	if err != nil {
		t.Fatal(err)
	}
	o := run.Options
	if o.Delay != 5*time.Second {
		t.Errorf("delay = %v, want the given 5s", o.Delay)
	}
	if o.Scope != "domain" || o.MaxDepth != 2 || strings.Join(patterns(o.Exclude), ",") != "skip" {
		t.Errorf("scope %q max-depth %d exclude %v: want the stored domain, 2, [skip]", o.Scope, o.MaxDepth, o.Exclude)
	}
	if o.UserAgent != DefaultOptions().UserAgent {
		t.Errorf("user-agent %q: a setting the crawl lacks should come from the run", o.UserAgent)
	}
	if string(got["seed_hosts"]) != `["a.test"]` || string(got["delay"]) != `"5s"` || string(got["scope"]) != `"domain"` {
		t.Errorf("to store: %s", got)
	}
	if len(changes) != 1 || changes[0].Flag != "delay" || string(changes[0].Old) != `"3s"` || string(changes[0].New) != `"5s"` {
		t.Errorf("changes = %+v, want delay \"3s\" -> \"5s\" alone", changes)
	}
}

// An empty list flag clears what came before it, the stored list too: the
// change is logged and the crawl stores the empty list; a value after the
// empty one starts the list afresh.
func TestAnEmptyListFlagClearsTheStoredList(t *testing.T) {
	stored := []byte(`{"exclude":["\\.pdf$"],"header":["X-A: 1"],"include":["/docs/"]}`)
	for _, tc := range []struct {
		flag string
		uses []string
		want string
	}{
		{"exclude", []string{""}, `[]`},
		{"include", []string{""}, `[]`},
		{"header", []string{""}, `[]`},
		{"exclude", []string{"", "/private/"}, `["/private/"]`},
		{"exclude", []string{"/a/", "", "/b/"}, `["/b/"]`},
		{"header", []string{"X-B: 2", "X-C: 3"}, `["X-B: 2","X-C: 3"]`},
	} {
		t.Run(tc.flag+" "+strings.Join(tc.uses, ","), func(t *testing.T) {
			v := DefaultFlagValues()
			f, _ := LookupFlag(tc.flag)
			list := f.Bind(&v).(*ListValue)
			for _, u := range tc.uses {
				if err := list.Set(u); err != nil {
					t.Fatal(err)
				}
			}
			changes, err := ResolveFlags(settingsDB{stored}, &v, func(g string) bool { return g == tc.flag })
			if err != nil {
				t.Fatal(err)
			}
			if got := string(v.Options.settings[tc.flag]); got != tc.want {
				t.Errorf("stored --%s = %s, want %s", tc.flag, got, tc.want)
			}
			if len(changes) != 1 || changes[0].Flag != tc.flag {
				t.Errorf("changes %+v, want --%s alone", changes, tc.flag)
			}
			resume := DefaultFlagValues()
			if _, err := ResolveFlags(settingsDB{storedBlob(t, v)}, &resume, noneGiven); err != nil {
				t.Fatal(err)
			}
			if got := valueOf(t, &resume, tc.flag); got != tc.want {
				t.Errorf("the next resume has --%s = %s, want %s", tc.flag, got, tc.want)
			}
		})
	}
	v := DefaultFlagValues()
	f, _ := LookupFlag("include")
	if err := f.Bind(&v).(*ListValue).Set("("); err == nil {
		t.Error("--include ( was accepted")
	}
}

// oldSettings is a crawl's settings as the hand-written mirror of Options
// stored them before the settings table: every key of the time, an empty
// --header as null, no --local-fault-*, --notify or --metrics-file.
const oldSettings = `{"seed_hosts":["a.test","b.test"],"scope":"domain","include":[],"exclude":["\\.pdf$"],` +
	`"max-depth":3,"max-pages-per-host":0,"user-agent":"mybot/1.0","header":null,"cookies":"","header-hosts":"seeds",` +
	`"proxy":"","delay":"2s","host-concurrency":1,"timeout":"30s","connect-timeout":"10s","max-body":10485760,` +
	`"allow-private":true,"breaker":true,"breaker-threshold":5,"breaker-rest":"5m0s","breaker-rest-max":"0s",` +
	`"breaker-probes":2,"give-up-after":"30m0s","retries":3,"retry-base":"2s","retry-max":"10m0s","retry-budget":0.2,` +
	`"recrawl-after":"0s","sitemaps":true,"warc":"","warc-size":1073741824,"warc-prefix":"breakwater",` +
	`"warc-max-record":33554432,"warc-dedupe":true,"warc-secrets":"mask"}`

// A crawl stored before the settings table resumes with its settings; the
// settings it lacks take the run's values and are stored from then on; a
// flag given with the stored value, in the old spelling or not, is no
// change.
func TestOldFormatSettingsStillLoad(t *testing.T) {
	v := DefaultFlagValues()
	v.Options.LocalFault.Hosts = 9
	v.Command.Notify = "http://127.0.0.1:9/hook"
	changes, err := ResolveFlags(settingsDB{[]byte(oldSettings)}, &v, func(f string) bool { return f == "header" || f == "delay" })
	if err != nil {
		t.Fatal(err)
	}
	o := v.Options
	if o.Scope != ScopeDomain || o.MaxDepth != 3 || o.UserAgent != "mybot/1.0" || !o.AllowPrivate ||
		o.Breaker.Threshold != 5 || strings.Join(patterns(o.Exclude), " ") != `\.pdf$` || len(o.Include) != 0 {
		t.Errorf("the stored settings were not all read: %+v", o)
	}
	if o.Delay != time.Second {
		t.Errorf("delay %v: the given flag (its default, 1s) should win", o.Delay)
	}
	if len(changes) != 1 || changes[0].Flag != "delay" {
		t.Errorf("changes %+v: want delay alone (header null and [] are the same empty list)", changes)
	}
	s := v.Options.settings
	if string(s["local-fault-hosts"]) != "9" || string(s["notify"]) != `"http://127.0.0.1:9/hook"` {
		t.Errorf("settings the crawl lacked are not stored from now on: %s %s", s["local-fault-hosts"], s["notify"])
	}
	if string(s["seed_hosts"]) != `["a.test","b.test"]` {
		t.Errorf("seed hosts: %s", s["seed_hosts"])
	}
	if got, err := StoredFlagValues([]byte(oldSettings)); err != nil || got.Options.MaxDepth != 3 || got.Options.Delay != 2*time.Second {
		t.Errorf("StoredFlagValues: %+v, %v", got.Options, err)
	}
}

// A stored value that cannot be read is an error naming the flag, not a
// silent default.
func TestUnreadableStoredSettingNamesTheFlag(t *testing.T) {
	for blob, want := range map[string]string{
		`{"delay":"soon"}`:     "--delay",
		`{"exclude":["("]}`:    "--exclude",
		`{"max-depth":"deep"}`: "--max-depth",
		`not json`:             "read stored crawl settings",
	} {
		v := DefaultFlagValues()
		_, err := ResolveFlags(settingsDB{[]byte(blob)}, &v, noneGiven)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %s", blob, err, want)
		}
	}
}

// The table's secret settings are masked wherever stored settings are
// shown; the others are shown as stored.
func TestSecretSettingsAreMaskedFromTheTable(t *testing.T) {
	for _, tc := range []struct{ flag, value, hidden, shown string }{
		{"header", `["Authorization: Bearer s3cr3t-token-value","X-Team: crawlers"]`, "s3cr3t", "X-Team: crawlers"},
		{"proxy", `"http://u:p4ss@127.0.0.1:3128"`, "p4ss", "127.0.0.1:3128"},
		{"notify", `"https://hooks.example/services/T0/B0/t0k3n"`, "t0k3n", "hooks.example"},
		{"user-agent", `"mybot/1.0"`, "", "mybot/1.0"},
	} {
		got := string(control.MaskSetting(tc.flag, json.RawMessage(tc.value)))
		if tc.hidden != "" && strings.Contains(got, tc.hidden) || !strings.Contains(got, tc.shown) {
			t.Errorf("--%s %s shown as %s", tc.flag, tc.value, got)
		}
		f, _ := LookupFlag(tc.flag)
		if (f.Secret != nil) != (tc.hidden != "") {
			t.Errorf("--%s: secret %v in the table", tc.flag, f.Secret != nil)
		}
	}
}
