package e2e

// Fleet processes that stall, clash or meet a Redis that may evict: the
// lease fence, one process per fleet ID, the eviction policy.

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/redisstore/redistest"
)

// TestFleetSIGSTOPFencedOut stops one of three processes (SIGSTOP) for
// several leases while it holds hosts, then continues it: the others take
// its hosts and crawl them; after it resumes it sends no request for a
// page another process fetched, the store refuses its late writes (it
// logs them), every page is answered, and twice only when the stopped
// process had it in flight at the stop (its answer came, or its result
// was not yet stored, within a second of the stop).
func TestFleetSIGSTOPFencedOut(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	const (
		nHosts, pages = 8, 40
		latency       = 40 * time.Millisecond
		lease         = time.Second
	)
	hosts, seeds, answers := startLinkHosts(t, nHosts, pages, latency)
	procs := startFleet(t, bin, 3, fleetArgs(rs.URL(),
		[]string{"--workers", "4", "--host-concurrency", "1", "--fleet-lease", lease.String(), "--timeout", "500ms"}, seeds...))
	var victim *fleetProc
	waitFor(t, 30*time.Second, "a process holding hosts a quarter of the way", func() bool {
		if answers() < nHosts*pages/4 {
			return false
		}
		count := map[string]int{}
		for _, id := range owners(t, rs.Client()) {
			count[id]++
		}
		victim = nil
		for _, p := range procs {
			if count[p.id] > 0 && (victim == nil || count[p.id] > count[victim.id]) {
				victim = p
			}
		}
		return victim != nil
	})
	stopAt := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * lease)
	contAt := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	outs := waitFleet(t, procs, 60*time.Second)
	for _, p := range procs {
		if o := outs[p.id]; o.code != cli.ExitOK {
			t.Errorf("%s: %+v, want exit 0:\n%s", p.id, o, p.output())
		}
	}
	const slack = 250 * time.Millisecond // a request sent before the stop, logged by the site after it
	// An answer not yet stored at the stop: its result waits in the
	// process's writer (a loaded machine delays it), then is refused.
	const window = time.Second
	twice := 0
	var lags []time.Duration // from the stopped process's answer to the stop
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
			switch {
			case len(ok) == 0:
				t.Errorf("%s never answered", u)
			case len(ok) == 1:
			case len(ok) == 2 && procOf(procs, ok[0]) == victim.id && ok[0].Time.Before(stopAt.Add(slack)) &&
				stopAt.Sub(ok[0].Time) <= window &&
				procOf(procs, ok[1]) != victim.id:
				twice++
				lags = append(lags, stopAt.Sub(ok[0].Time).Round(time.Millisecond))
			default:
				var who []string
				for _, r := range ok {
					who = append(who, procOf(procs, r)+"@"+r.Time.Format("15:04:05.000"))
				}
				t.Errorf("%s answered %d times (%v): stopped %s, continued %s", u, len(ok), who,
					stopAt.Format("15:04:05.000"), contAt.Format("15:04:05.000"))
			}
		}
	}
	if twice > 0 && !strings.Contains(victim.stderr.String(), "refused late writes") {
		t.Errorf("%s had %d pages in flight at the stop and logged no refused write:\n%s", victim.id, twice, victim.output())
	}
	st := storeStatus(t, rs.URL())
	if st.Fetched != nHosts*pages || st.Queued != 0 || st.Failed != 0 {
		t.Errorf("status %+v, want %d fetched", st.Counts, nHosts*pages)
	}
	t.Logf("stopped %s for %s; %d pages fetched twice (in flight at the stop, answered %v before it)",
		victim.id, contAt.Sub(stopAt).Round(time.Millisecond), twice, lags)
}

// TestFleetIDInUse: a second process given the --fleet-id of a live one
// exits 2 naming it; a crawl on a Redis
// whose maxmemory-policy may evict its keys is refused, naming the setting.
func TestFleetIDInUse(t *testing.T) {
	bin := buildBinary(t)
	rs := redistest.Start(t)
	h := startLinkHost(t, 400, 50*time.Millisecond, 0)
	args := fleetArgs(rs.URL(), []string{"--workers", "1", "--fleet-lease", "1s", "--timeout", "500ms"}, h.base()+"/")
	live := startFleet(t, bin, 1, args)[0]
	waitFor(t, 20*time.Second, "the live process's heartbeat", func() bool {
		n, _ := rs.Client().HExists(context.Background(), "bw:{meta}:procs", live.id).Result()
		return n
	})
	twin := startFleet(t, bin, 1, args)[0] // the same ID, p1
	o := twin.wait(t, 20*time.Second)
	if o.code != cli.ExitUsage {
		t.Errorf("the second p1: %+v, want exit %d:\n%s", o, cli.ExitUsage, twin.output())
	}
	pid := strconv.Itoa(live.cmd.Process.Pid)
	for _, w := range []string{"is in use by process " + pid, "last heartbeat", "--fleet-id"} {
		if !strings.Contains(twin.stderr.String(), w) {
			t.Errorf("the refusal lacks %q:\n%s", w, twin.output())
		}
	}
	if n := len(h.requests()); n == 0 {
		t.Fatal("the live process fetched nothing")
	}
	live.cmd.Process.Signal(syscall.SIGTERM)
	live.wait(t, 30*time.Second)

	if err := rs.Client().ConfigSet(context.Background(), "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	evicting := startProc(t, bin, args...)
	if o := evicting.wait(t, 20*time.Second); o.code == cli.ExitOK {
		t.Errorf("a crawl on an allkeys-lru Redis: %+v, want refused", o)
	}
	if !strings.Contains(evicting.stderr.String(), "maxmemory-policy is allkeys-lru") {
		t.Errorf("the refusal does not name the setting:\n%s", evicting.output())
	}
}
