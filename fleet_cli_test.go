package main

// End-to-end tests of fleet mode: several real crawl processes on one
// Redis store (redistest starts a throwaway redis-server) are one crawl.

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"breakwater/demosite"
	"breakwater/redisstore/redistest"
)

// TestFleetFourProcesses runs four crawl processes with the same seeds on
// one store, over ten healthy hosts, a dead one (503 to everything), a
// flaky one (every third page request 503, never twice running, never
// twice for one URL) and one that refuses the crawler by name. The fleet
// fetches every page once in all, spends on the dead host what one
// process would, never opens the flaky host's circuit, raises one case
// for the refusal and holds the host; every process ends with exit 3
// (work left: the held host's URLs wait for a person), and the store's
// commands agree with what the site saw.
func TestFleetFourProcesses(t *testing.T) {
	start := time.Now()
	bin := buildBinary(t)
	rs := redistest.Start(t)
	const (
		healthy, pages = 10, 30
		threshold, hc  = 3, 2
		rest           = 500 * time.Millisecond
	)
	specs := demosite.BenchSpecs(healthy, pages, false, 0)
	specs = append(specs,
		demosite.HostSpec{Name: "dead", Pages: 10, Behavior: demosite.Recovering, RecoverAfter: time.Hour},
		demosite.HostSpec{Name: "refusing", Pages: 10, Behavior: demosite.Refusing})
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { site.Close() })
	flaky := startLinkHost(t, 30, 0, 3)
	dead, refusing := site.Host("dead"), site.Host("refusing")
	seeds := append(site.Roots(), flaky.base()+"/")

	crawlStart := time.Now()
	procs := startFleet(t, bin, 4, fleetArgs(rs.URL(), nil, seeds...))
	outs := waitFleet(t, procs, 40*time.Second)
	crawlEnd := time.Now()
	for _, p := range procs {
		o := outs[p.id]
		if o.code != exitWorkLeft || !strings.Contains(p.stdout.String(), "crawl stopped") {
			t.Errorf("%s: %+v, want exit %d (work left: the refusing host is held):\n%s", p.id, o, exitWorkLeft, p.output())
		}
	}

	// Every healthy page was fetched once, fleet-wide, and answered.
	reqs := map[string][]demosite.Request{}
	for _, h := range site.Hosts() {
		if h.Spec().Behavior == demosite.Healthy {
			groupPageRequests(h.BaseURL(), h.Requests(), reqs)
		}
	}
	groupPageRequests(flaky.base(), flaky.requests(), reqs)
	want := map[string]bool{} // every page that answers, flaky's included
	for _, h := range site.Hosts() {
		if h.Spec().Behavior == demosite.Healthy {
			for i := range h.Spec().Pages {
				want[h.PageURL(i)] = true
			}
		}
	}
	for _, u := range flaky.urls() {
		want[u] = true
	}
	byProc := map[string]int{}
	twice := 0
	for u := range want {
		ok := 0
		for _, r := range reqs[u] {
			if r.Status == 200 {
				ok++
				byProc[procOf(procs, r)]++
			}
		}
		if ok != 1 {
			if twice++; twice <= 10 {
				t.Errorf("%s answered %d times, want once: %v", u, ok, reqs[u])
			}
		}
	}
	for u := range reqs {
		if !want[u] {
			t.Errorf("request for %s, which no page links", u)
		}
	}
	t.Logf("pages answered by process: %v", byProc)
	if len(byProc) < 2 {
		t.Errorf("one process fetched everything (%v): the fleet did not share the crawl", byProc)
	}

	rows := storeExport(t, rs.URL())
	for u := range want {
		r, ok := rows[u]
		if !ok {
			t.Errorf("export lacks %s", u)
			continue
		}
		if r["status"] != float64(200) || r["error_class"] != "" {
			t.Errorf("export %s: status %v class %v, want 200", u, r["status"], r["error_class"])
		}
	}
	var deadRows, otherFailed int
	for u, r := range rows {
		switch h := hostOf(t, u); {
		case h == hostKey(t, dead):
			deadRows++
			if r["error_class"] == "" {
				t.Errorf("export %s of the dead host: %v, want a failure", u, r)
			}
		case h == hostKey(t, refusing):
			t.Errorf("export %s of the refusing host: %v, want it held, not done", u, r)
		case !want[u]:
			t.Errorf("export lists %s, which is no page", u)
		case r["error_class"] != "":
			otherFailed++
		}
	}

	// The dead host cost the fleet what one process would spend: its
	// circuit opens after threshold failures (with host-concurrency
	// requests in flight at most), then one probe a rest.
	deadLog := dead.Requests()
	if len(deadLog) == 0 {
		t.Fatal("the dead host was never asked")
	}
	span := deadLog[len(deadLog)-1].Time.Sub(deadLog[0].Time)
	bound := threshold + hc + int(span/rest) + 1
	deadBy := map[string]int{}
	for _, r := range deadLog {
		deadBy[procOf(procs, r)]++
	}
	if len(deadLog) > bound {
		t.Errorf("the dead host got %d requests over %s (by process %v), more than %d (threshold %d + host-concurrency %d + one probe a %s rest)",
			len(deadLog), span.Round(time.Millisecond), deadBy, bound, threshold, hc, rest)
	}

	// The flaky host failed now and then, never enough to open its circuit.
	flaky503 := 0
	for _, r := range flaky.requests() {
		if r.Status == 503 {
			flaky503++
		}
	}
	if flaky503 < 5 {
		t.Errorf("the flaky host answered 503 only %d times: it was not flaky", flaky503)
	}
	ts := storeTransitions(t, rs.URL())
	byHost := map[string][]string{}
	for _, tr := range ts {
		byHost[tr.Host] = append(byHost[tr.Host], tr.From+">"+tr.To)
	}
	if tr := byHost[flaky.key()]; len(tr) > 0 {
		t.Errorf("the flaky host's circuit changed: %v", tr)
	}
	if len(byHost[hostKey(t, dead)]) == 0 {
		t.Errorf("the dead host's circuit never opened: transitions %v", byHost)
	}
	for h, tr := range byHost {
		if h != hostKey(t, dead) && h != hostKey(t, refusing) {
			t.Errorf("transitions of %s, which always answers: %v", h, tr)
		}
	}

	// One refusal, one case, the host held for a person.
	cases := storeCases(t, rs.URL())
	if len(cases) != 1 || cases[0].Host != hostKey(t, refusing) || cases[0].Status != 403 || !cases[0].Resolved.IsZero() {
		t.Errorf("cases = %+v, want one open case of %s with status 403", cases, hostKey(t, refusing))
	}
	if n := refusing.RequestCount(); n > hc {
		t.Errorf("the refusing host got %d requests, want at most %d (what was in flight when it refused)", n, hc)
	}
	hosts := storeHosts(t, rs.URL())
	if r := hosts[hostKey(t, refusing)]; r.Hold != "case" || r.State != "open" {
		t.Errorf("hosts: the refusing host is %+v, want open, hold case", r)
	}

	// status agrees with the site and the export.
	st := storeStatus(t, rs.URL())
	var refusingQueued int64
	if r, ok := hosts[hostKey(t, refusing)]; ok {
		refusingQueued = r.Queued
	}
	if st.Fetched != int64(len(want)) || st.Failed != int64(deadRows+otherFailed) || otherFailed != 0 ||
		st.Queued != refusingQueued || refusingQueued == 0 || st.Deferred != 0 ||
		st.Seen != st.Fetched+st.Failed+st.Queued || st.Hosts != len(seeds) {
		t.Errorf("status %+v; want fetched %d, failed %d (the dead host's), queued %d (the refusing host's), no deferred, seen their sum, %d hosts",
			st.Counts, len(want), deadRows, refusingQueued, len(seeds))
	}
	var sumFetched, sumFailed int64
	for _, r := range hosts {
		sumFetched += r.Fetched
		sumFailed += r.Failed
	}
	if sumFetched != st.Fetched || sumFailed != st.Failed {
		t.Errorf("hosts add up to %d fetched, %d failed; status says %d, %d", sumFetched, sumFailed, st.Fetched, st.Failed)
	}

	t.Logf("crawl %s; %d pages fetched once each (%d fetched twice); dead host: %d requests over %s (by process %v), bound %d; "+
		"%d dead URLs failed; flaky host: %d 503s, %d requests; refusing host: %d requests, %d URLs queued behind the case; "+
		"transitions %v; exits %v; wall %s",
		crawlEnd.Sub(crawlStart).Round(time.Millisecond), len(want), twice, len(deadLog), span.Round(time.Millisecond), deadBy, bound,
		deadRows, flaky503, len(flaky.requests()), refusing.RequestCount(), refusingQueued,
		byHost, exitsOf(outs), time.Since(start).Round(time.Millisecond))
}

func exitsOf(outs map[string]outcome) string {
	var s []string
	for id, o := range outs {
		s = append(s, fmt.Sprintf("%s:%d", id, o.code))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

var _ = syscall.SIGKILL
