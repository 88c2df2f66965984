package control

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/storage"
	"breakwater/store"
)

// t0 is the clock of the fakes and of Offline in these tests.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// openDB opens a fresh database file in t.TempDir(), closed on Cleanup.
func openDB(t *testing.T) (*storage.DB, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crawl.db")
	db, err := storage.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, path
}

// offline returns an Offline over a fresh file whose clock reads t0, with
// one URL of each host queued.
func offline(t *testing.T, hosts ...string) (*Offline, *storage.DB) {
	t.Helper()
	db, _ := openDB(t)
	var b store.Batch
	for _, h := range hosts {
		u := "http://" + h + "/"
		b.Add(store.Item{Host: h, URL: u, Hash: store.HashOf(u)})
	}
	commitOrFail(t, db, &b)
	o := NewOffline(db)
	o.Now = func() time.Time { return t0 }
	return o, db
}

func commitOrFail(t *testing.T, db *storage.DB, b *store.Batch) {
	t.Helper()
	if _, err := db.Commit(b); err != nil {
		t.Fatal(err)
	}
}

// holdByCase stores host's breaker as held by a case, with the case.
func holdByCase(t *testing.T, db *storage.DB, host string) {
	t.Helper()
	var b store.Batch
	b.PutBreaker(host, breaker.Breaker{State: breaker.Open, OpenedAt: t0.Add(-time.Hour), Rest: time.Minute,
		Generation: 2, Hold: breaker.Case, HoldReason: "403 names breakwater"})
	b.AppendCase(store.Case{Host: host, At: t0.Add(-time.Hour), URL: "http://" + host + "/", Status: 403})
	commitOrFail(t, db, &b)
}

func hostsIn(t *testing.T, api API, state string) map[string]HostRow {
	t.Helper()
	rows, err := api.Hosts(state)
	if err != nil {
		t.Fatalf("Hosts(%q): %v", state, err)
	}
	out := map[string]HostRow{}
	for _, r := range rows {
		out[r.Host] = r
	}
	return out
}

func transitionsOf(t *testing.T, api API, host string) []store.Transition {
	t.Helper()
	ts, err := api.Transitions(host, time.Time{})
	if err != nil {
		t.Fatalf("Transitions(%q): %v", host, err)
	}
	return ts
}

func TestOfflinePauseAndUnpause(t *testing.T) {
	o, _ := offline(t, "a.example", "b.example")
	if err := o.Pause("a.example", ""); err == nil || !strings.Contains(err.Error(), "--reason") {
		t.Errorf("Pause without a reason = %v, want an error asking for one", err)
	}
	if err := o.Pause("http://A.Example/some/page", "maintenance window"); err != nil {
		t.Fatalf("Pause: %v", err)
	}
	paused := hostsIn(t, o, "paused")
	if r, ok := paused["a.example"]; !ok || len(paused) != 1 || r.State != "open" || r.PauseReason != "maintenance window" ||
		r.Queued != 1 || !r.OpenedAt.Equal(t0) {
		t.Errorf("Hosts(paused) = %+v, want a.example alone, open, with its reason and queued URL", paused)
	}
	if len(hostsIn(t, o, "")) != 2 {
		t.Errorf("Hosts() should list both hosts")
	}
	ts := transitionsOf(t, o, "a.example")
	if len(ts) != 1 || ts[0].To != "open" || ts[0].Hold != "paused" || ts[0].Reason != "maintenance window" ||
		!ts[0].At.Equal(t0) || ts[0].Generation == 0 {
		t.Fatalf("transitions after Pause = %+v, want one to open, paused, with the reason and a generation", ts)
	}
	if len(transitionsOf(t, o, "b.example")) != 0 {
		t.Errorf("b.example has transitions")
	}

	if err := o.Unpause("a.example"); err != nil {
		t.Fatalf("Unpause: %v", err)
	}
	if r, ok := hostsIn(t, o, "half-open")["a.example"]; !ok || r.Hold != "" {
		t.Errorf("after Unpause a.example should be half-open without a hold: %+v", r)
	}
	if n := len(hostsIn(t, o, "paused")); n != 0 {
		t.Errorf("%d hosts still paused after Unpause", n)
	}
	if ts := transitionsOf(t, o, "a.example"); len(ts) != 2 || ts[1].Reason != "unpaused" || ts[1].To != "half-open" {
		t.Errorf("transitions after Unpause = %+v, want the pause and then the release to half-open", ts)
	}
	if err := o.Unpause("a.example"); err == nil || !strings.Contains(err.Error(), "a.example") {
		t.Errorf("Unpause of a host not paused = %v, want an error naming it", err)
	}
}

func TestOfflinePauseOfUnknownHostIsListed(t *testing.T) {
	o, _ := offline(t, "a.example")
	if err := o.Pause("zzz.example:8080", "not yet crawled"); err != nil {
		t.Fatal(err)
	}
	rows, err := o.Hosts("")
	if err != nil || len(rows) != 2 || rows[0].Host != "a.example" || rows[1].Host != "zzz.example:8080" ||
		rows[1].Hold != "paused" {
		t.Errorf("Hosts() = %+v, %v; want a.example, then the paused host without counts", rows, err)
	}
}

func TestOfflineHostsRejectsUnknownState(t *testing.T) {
	o, _ := offline(t, "a.example")
	if _, err := o.Hosts("sleepy"); err == nil || !strings.Contains(err.Error(), "--state") {
		t.Errorf("Hosts(sleepy) = %v, want an error naming --state", err)
	}
}

func TestOfflineResolveCase(t *testing.T) {
	o, db := offline(t, "a.example", "b.example")
	holdByCase(t, db, "a.example")
	holdByCase(t, db, "b.example")
	if rows := hostsIn(t, o, "case"); len(rows) != 2 {
		t.Fatalf("Hosts(case) = %+v, want both hosts", rows)
	}
	if err := o.ResolveCase("a.example"); err != nil {
		t.Fatalf("ResolveCase: %v", err)
	}
	cases, err := o.Cases()
	if err != nil || len(cases) != 2 {
		t.Fatalf("Cases = %+v, %v", cases, err)
	}
	for _, c := range cases {
		if want := c.Host == "a.example"; !c.Resolved.IsZero() != want || want && !c.Resolved.Equal(t0) {
			t.Errorf("case of %s resolved at %v after resolving a.example", c.Host, c.Resolved)
		}
	}
	if r := hostsIn(t, o, "")["a.example"]; r.State != "half-open" || r.Hold != "" {
		t.Errorf("a.example after ResolveCase: %+v, want half-open without a hold", r)
	}
	if ts := transitionsOf(t, o, "a.example"); len(ts) != 1 || ts[0].Reason != "case resolved" {
		t.Errorf("transitions = %+v, want the case's release", ts)
	}
	if err := o.ResolveCase("a.example"); err == nil {
		t.Errorf("resolving a resolved case succeeded")
	}
	if err := o.Unpause("b.example"); err == nil || !strings.Contains(err.Error(), "b.example") {
		t.Errorf("Unpause of a host held by a case = %v, want an error", err)
	}
}

// TestOfflineResolveCaseKeepsCaseWhenWriteFails resolves a case in a file
// opened read-only: the release cannot be written, so the case stays open.
func TestOfflineResolveCaseKeepsCaseWhenWriteFails(t *testing.T) {
	db, path := openDB(t)
	holdByCase(t, db, "a.example")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := storage.Open(path, &storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	o := NewOffline(ro)
	if err := o.ResolveCase("a.example"); err == nil {
		t.Fatalf("ResolveCase on a read-only file succeeded")
	}
	if cases, err := o.Cases(); err != nil || len(cases) != 1 || !cases[0].Resolved.IsZero() {
		t.Errorf("cases = %+v, %v; want the case still open", cases, err)
	}
	if r := hostsIn(t, o, "case")["a.example"]; r.Hold != "case" {
		t.Errorf("a.example = %+v, want it still held by its case", r)
	}
}
