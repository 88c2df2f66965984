package e2e

// End-to-end tests of fleet mode: several real crawl processes on one
// Redis store (redistest starts a throwaway redis-server) are one crawl.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/redisstore/redistest"

	"github.com/redis/go-redis/v9"
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
		if o.code != cli.ExitWorkLeft || !strings.Contains(p.stdout.String(), "crawl stopped") ||
			!strings.Contains(p.stdout.String(), "1 host held: only URLs of held hosts are left") {
			t.Errorf("%s: %+v, want exit %d (work left: the refusing host is held, the one host held):\n%s", p.id, o, cli.ExitWorkLeft, p.output())
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

// TestFleetSIGKILLLosesNothing kills one of four crawl processes with
// SIGKILL while it holds hosts of a slow site (every page takes 30 ms),
// and lets the other three finish. Nothing is lost: every page is
// fetched, and fetched twice only if the victim had it in flight (or its
// answer not yet stored) when it died; the victim's hosts are taken up
// by the others about a lease after the kill; the survivors exit 0 and
// the store counts every page once.
func TestFleetSIGKILLLosesNothing(t *testing.T) {
	start := time.Now()
	bin := buildBinary(t)
	rs := redistest.Start(t)
	const (
		nHosts, pages = 12, 60
		latency       = 30 * time.Millisecond
		workers       = 4
		lease         = time.Second
	)
	hosts, seeds, answers := startLinkHosts(t, nHosts, pages, latency)
	procs := startFleet(t, bin, 4, fleetArgs(rs.URL(),
		[]string{"--workers", strconv.Itoa(workers), "--host-concurrency", "1", "--fleet-lease", lease.String()}, seeds...))

	// The victim: the process holding the most hosts once a quarter of
	// the pages are in, and itself has answers in.
	var victim *fleetProc
	var held []string // the victim's hosts at the kill
	waitFor(t, 30*time.Second, "a quarter of the pages fetched", func() bool {
		return answers() >= nHosts*pages/4
	})
	waitFor(t, 10*time.Second, "a process holding hosts it has fetched from", func() bool {
		byID := map[string][]string{}
		for host, id := range owners(t, rs.Client()) {
			byID[id] = append(byID[id], host)
		}
		victim, held = nil, nil
		for _, p := range procs {
			if len(byID[p.id]) > len(held) {
				victim, held = p, byID[p.id]
			}
		}
		return victim != nil
	})
	before := answers()
	killAt := time.Now() // before the signal: a request logged after it was sent after it
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if o := outcomeOf(<-victim.exited); o.signal != syscall.SIGKILL {
		t.Fatalf("%s ended with %+v before its kill:\n%s", victim.id, o, victim.output())
	}
	victim.exited <- nil // for waitFleet's sake; its outcome is known
	var rest []*fleetProc
	for _, p := range procs {
		if p != victim {
			rest = append(rest, p)
		}
	}
	outs := waitFleet(t, rest, 40*time.Second)
	end := time.Now()
	for _, p := range rest {
		if o := outs[p.id]; o.code != cli.ExitOK || !strings.Contains(p.stdout.String(), "crawl finished") {
			t.Errorf("%s: %+v, want exit 0:\n%s", p.id, o, p.output())
		}
	}

	// Every page answered; twice only if the victim's first answer was in
	// flight (or not yet stored) at the kill, and answered again after it
	// by another process.
	const window = time.Second // from a caught answer to the kill: a request plus a write, with slack
	twice, missing := 0, 0
	victimAnswers := 0
	var lags []time.Duration
	for _, h := range hosts {
		reqs := map[string][]demosite.Request{}
		groupPageRequests(h.base(), h.requests(), reqs)
		for _, u := range h.urls() {
			var ok []demosite.Request
			for _, r := range reqs[u] {
				if r.Status == 200 {
					ok = append(ok, r)
				}
			}
			for _, r := range ok {
				if procOf(procs, r) == victim.id {
					victimAnswers++
				}
			}
			switch {
			case len(ok) == 0:
				if missing++; missing <= 10 {
					t.Errorf("%s never answered", u)
				}
			case len(ok) == 2 && procOf(procs, ok[0]) == victim.id && killAt.Sub(ok[0].Time) <= window &&
				ok[0].Time.Before(killAt.Add(250*time.Millisecond)) && ok[1].Time.After(killAt) && procOf(procs, ok[1]) != victim.id:
				twice++
				lags = append(lags, killAt.Sub(ok[0].Time))
			case len(ok) > 1:
				t.Errorf("%s answered %d times with no kill to explain it: %v (kill at %s)", u, len(ok), ok, killAt.Format("15:04:05.000"))
			}
		}
	}
	if twice > 2*workers {
		t.Errorf("%d pages fetched again after the kill, more than the victim's %d workers had in flight, plus one answer each not yet stored", twice, workers)
	}

	// The victim's hosts were taken up within about a lease of the kill.
	var recover time.Duration
	resumed := 0
	for _, key := range held {
		var h *linkHost
		for _, x := range hosts {
			if x.key() == key {
				h = x
			}
		}
		if h == nil {
			t.Fatalf("the victim held %s, which is no host of the site", key)
		}
		for _, r := range h.requests() {
			if r.Time.After(killAt) && procOf(procs, r) != victim.id {
				recover = max(recover, r.Time.Sub(killAt))
				resumed++
				break
			}
		}
	}
	if limit := lease + 4*time.Second; recover > limit {
		t.Errorf("the victim's hosts were taken up %s after the kill, more than a %s lease plus slack (%s)", recover, lease, limit)
	}
	if resumed == 0 {
		t.Errorf("no host the victim held (%v) was asked after the kill: the kill came too late to test anything", held)
	}

	st := storeStatus(t, rs.URL())
	if st.Fetched != nHosts*pages || st.Failed != 0 || st.Queued != 0 || st.Deferred != 0 || st.Seen != nHosts*pages {
		t.Errorf("status %+v, want %d fetched and nothing else", st.Counts, nHosts*pages)
	}
	rows := storeExport(t, rs.URL())
	if len(rows) != nHosts*pages {
		t.Errorf("export lists %d URLs, want %d", len(rows), nHosts*pages)
	}
	t.Logf("killed %s at %d of %d answers (%d its own), holding %d hosts; %d pages fetched twice (lags %v); "+
		"its hosts taken up again after %s (%d of them asked after the kill); survivors done %s after the kill; wall %s",
		victim.id, before, nHosts*pages, victimAnswers, len(held), twice, lags, recover.Round(time.Millisecond), resumed,
		end.Sub(killAt).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestFleetRedisCluster crawls a small site (12 hosts) with two processes on a
// three-master Redis Cluster: the crawl completes, every page is stored
// once, every key of one host lives in one slot (its hash tag is the
// host, so the scripts that change a host stay atomic), and the shards'
// keys are spread over more than one master.
func TestFleetRedisCluster(t *testing.T) {
	start := time.Now()
	bin := buildBinary(t)
	c := redistest.StartCluster(t, 3)
	store := "redis://" + c.Addrs[0] + "/0?addr=" + c.Addrs[1] + "&addr=" + c.Addrs[2]
	// Twelve hosts: their shards are on one master with odds of about 3 in a million.
	const nHosts, pages = 12, 10
	var hosts []*linkHost
	var seeds []string
	want := map[string]bool{}
	for range nHosts {
		h := startLinkHost(t, pages, 0, 0)
		hosts = append(hosts, h)
		seeds = append(seeds, h.base()+"/")
		for _, u := range h.urls() {
			want[u] = true
		}
	}
	procs := startFleet(t, bin, 2, fleetArgs(store, nil, seeds...))
	outs := waitFleet(t, procs, 40*time.Second)
	for _, p := range procs {
		if o := outs[p.id]; o.code != cli.ExitOK {
			t.Errorf("%s: %+v, want exit 0:\n%s", p.id, o, p.output())
		}
	}
	rows := storeExport(t, store)
	for u := range want {
		if r, ok := rows[u]; !ok || r["status"] != float64(200) {
			t.Errorf("export %s: %v, want the page", u, r)
		}
	}
	if len(rows) != len(want) {
		t.Errorf("export lists %d URLs, want %d", len(rows), len(want))
	}
	if st := storeStatus(t, store); st.Fetched != int64(len(want)) || st.Queued != 0 || st.Failed != 0 || st.Hosts != nHosts {
		t.Errorf("status %+v (%d hosts), want %d fetched of %d hosts", st.Counts, st.Hosts, len(want), nHosts)
	}
	for _, h := range hosts {
		for _, r := range h.requests() {
			if r.Path != "/robots.txt" && r.Status != 200 {
				t.Errorf("%s%s answered %d", h.base(), r.Path, r.Status)
			}
		}
	}

	// Every key, from each master: its hash tag, its slot, its master.
	ctx := context.Background()
	type place struct {
		slot   int64
		master string
	}
	byTag := map[string]map[place][]string{}
	untagged := 0
	for _, addr := range c.Addrs {
		m := redis.NewClient(&redis.Options{Addr: addr})
		var cursor uint64
		for {
			keys, next, err := m.Scan(ctx, cursor, "*", 1000).Result()
			if err != nil {
				t.Fatalf("SCAN %s: %v", addr, err)
			}
			for _, k := range keys {
				slot, err := m.ClusterKeySlot(ctx, k).Result()
				if err != nil {
					t.Fatalf("CLUSTER KEYSLOT %s: %v", k, err)
				}
				open, close := strings.Index(k, "{"), strings.Index(k, "}")
				if !strings.HasPrefix(k, "bw:{") || close < open {
					if untagged++; untagged <= 10 {
						t.Errorf("key %q on %s has no hash tag", k, addr)
					}
					continue
				}
				tag := k[open+1 : close]
				if byTag[tag] == nil {
					byTag[tag] = map[place][]string{}
				}
				p := place{slot, addr}
				byTag[tag][p] = append(byTag[tag][p], k)
			}
			if cursor = next; cursor == 0 {
				break
			}
		}
		m.Close()
	}
	keysOfHost := map[string]int{}
	for _, h := range hosts {
		places := byTag[h.key()]
		if len(places) != 1 {
			t.Errorf("the keys of host %s are in %d slots or masters: %v", h.key(), len(places), places)
		}
		for _, ks := range places {
			keysOfHost[h.key()] += len(ks)
			if !slices.Contains(ks, "bw:{"+h.key()+"}:r") {
				t.Errorf("host %s has keys %v, and no results", h.key(), ks)
			}
		}
	}
	shardMasters := map[string]bool{}
	shards := 0
	for tag, places := range byTag {
		switch {
		case tag == "meta":
		case strings.HasPrefix(tag, "s") && !strings.Contains(tag, ":"):
			shards++
			for p := range places {
				shardMasters[p.master] = true
			}
		case keysOfHost[tag] == 0:
			t.Errorf("keys tagged %q, which is no host of the crawl: %v", tag, places)
		}
	}
	if len(shardMasters) < 2 {
		t.Errorf("the %d shards' keys are all on %v: no spread", shards, shardMasters)
	}
	var sample []string
	for _, ks := range byTag[hosts[0].key()] {
		sample = append(sample, ks...)
	}
	slices.Sort(sample)
	t.Logf("%d pages of %d hosts on a 3-master cluster; keys per host %v (%v); %d shards' keys over %d masters; wall %s",
		len(rows), nHosts, keysOfHost, sample, shards, len(shardMasters), time.Since(start).Round(time.Millisecond))
}
