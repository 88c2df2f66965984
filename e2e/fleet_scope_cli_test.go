package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/redisstore/redistest"
)

// startScopeSite serves hosts x pages, each page linking to pages of
// other hosts too, so that a process's scope decides what it follows.
func startScopeSite(t *testing.T, hosts, pages int) *demosite.Site {
	t.Helper()
	site, err := demosite.Start(demosite.BenchSpecs(hosts, pages, false, 0), demosite.SiteOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	return site
}

// checkScopeCrawl wants every page of every host fetched and nothing
// recorded out of scope.
func checkScopeCrawl(t *testing.T, storeURL string, site *demosite.Site, pages int) {
	t.Helper()
	for _, h := range site.Hosts() {
		got := map[string]bool{}
		for _, uri := range requested(h) {
			got[uri] = true
		}
		if len(got) != pages {
			t.Errorf("host %s: %d distinct pages fetched, want %d", h.BaseURL(), len(got), pages)
		}
	}
	for u, row := range storeExport(t, storeURL) {
		if row["error_class"] == "out-of-scope" {
			t.Errorf("%s recorded out-of-scope", u)
		}
	}
}

// A process that joins a running fleet with seeds of its own widens the
// fleet's scope: the process already running learns of the new hosts,
// and every page of the second site is fetched, none recorded out of
// scope.
func TestFleetJoinerWidensTheScope(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	const hosts, pages = 16, 30
	site := startScopeSite(t, hosts, pages)
	roots := site.Roots()
	extra := []string{"--delay", "40ms"}
	a := startFleet(t, bin, 1, fleetArgs(rs.URL(), extra, roots[:hosts/2]...))[0]
	time.Sleep(700 * time.Millisecond)
	argsB := fleetArgs(rs.URL(), extra, roots[hosts/2:]...)
	b := &fleetProc{proc: startProc(t, bin, append([]string{argsB[0], "--fleet-id", "p2", "--user-agent", fleetUA("p2")}, argsB[1:]...)...),
		id: "p2", agent: fleetUA("p2")}
	outs := waitFleet(t, []*fleetProc{a, b}, 60*time.Second)
	for id, o := range outs {
		if o.code != cli.ExitOK {
			t.Errorf("process %s: %+v", id, o)
		}
	}
	if !strings.Contains(a.stderr.String(), "the fleet's seed hosts grew") {
		t.Errorf("the first process never learned of the second's seeds:\n%s", a.output())
	}
	checkScopeCrawl(t, rs.URL(), site, pages)
}

// Two processes started together with different seeds and different
// settings: both sites are crawled whole, and the store keeps each
// process's given settings.
func TestFleetStartedTogetherMergesSeedsAndSettings(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	const hosts, pages = 12, 20
	site := startScopeSite(t, hosts, pages)
	roots := site.Roots()
	argsA := fleetArgs(rs.URL(), []string{"--exclude", "/nothing-matches"}, roots[:hosts/2]...)
	argsB := fleetArgs(rs.URL(), []string{"--max-depth", "25"}, roots[hosts/2:]...)
	procs := []*fleetProc{
		{proc: startProc(t, bin, append([]string{"crawl", "--fleet-id", "p1"}, argsA[1:]...)...), id: "p1"},
		{proc: startProc(t, bin, append([]string{"crawl", "--fleet-id", "p2"}, argsB[1:]...)...), id: "p2"},
	}
	for id, o := range waitFleet(t, procs, 60*time.Second) {
		if o.code != cli.ExitOK {
			t.Errorf("process %s: %+v", id, o)
		}
	}
	checkScopeCrawl(t, rs.URL(), site, pages)
	st := storeStatus(t, rs.URL())
	if got := string(st.Settings["exclude"]); !strings.Contains(got, "nothing-matches") {
		t.Errorf("stored exclude %s, want the first process's", got)
	}
	if got := string(st.Settings["max-depth"]); got != "25" {
		t.Errorf("stored max-depth %s, want the second process's 25", got)
	}
}

// --delay holds across a hand-off: a process stopped with SIGTERM gives
// its host back with the time of the next request it allows, and the
// process that takes the host over waits for it.
func TestFleetDelayHoldsAcrossAHandOff(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	const delay = time.Second
	site := startScopeSite(t, 1, 6)
	args := fleetArgs(rs.URL(), []string{"--delay", delay.String(), "--workers", "1", "--host-concurrency", "1"}, site.Roots()...)
	a := &fleetProc{proc: startProc(t, bin, append([]string{"crawl", "--fleet-id", "p1"}, args[1:]...)...), id: "p1"}
	host := site.Hosts()[0]
	deadline := time.Now().Add(20 * time.Second)
	for host.RequestCount() < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b := &fleetProc{proc: startProc(t, bin, append([]string{"crawl", "--fleet-id", "p2"}, args[1:]...)...), id: "p2"}
	time.Sleep(100 * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	outs := waitFleet(t, []*fleetProc{a, b}, 60*time.Second)
	if outs["p2"].code != cli.ExitOK {
		t.Errorf("p2: %+v\n%s", outs["p2"], b.output())
	}
	reqs := host.Requests()
	pages := map[string]bool{}
	for i, r := range reqs {
		pages[r.Path] = true
		if i > 0 {
			if gap := r.Time.Sub(reqs[i-1].Time); gap < delay-20*time.Millisecond {
				t.Errorf("requests %d and %d (%s, %s) %s apart, want at least %s", i-1, i, reqs[i-1].Path, r.Path, gap, delay)
			}
		}
	}
	if !pages["/p/5"] || !pages["/"] {
		t.Errorf("the crawl did not end: requests %v", reqs)
	}
}
