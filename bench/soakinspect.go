package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/demosite"
	"breakwater/frontier"
	"breakwater/storage"
	"breakwater/store"
	"breakwater/warc"
)

// hostsTraffic counts what hosts saw, as trafficSince does for live hosts.
func hostsTraffic(hosts []*demosite.Host) Traffic {
	var t Traffic
	for _, h := range hosts {
		seen := make(map[string]bool)
		for _, r := range h.Requests() {
			if r.Path == "/robots.txt" {
				t.RobotsRequests++
				continue
			}
			t.PageRequests++
			if r.Status == 200 && !seen[r.Path] {
				seen[r.Path] = true
				t.DistinctPages++
			}
		}
	}
	return t
}

// lastRequest is the time of the latest request any of hosts received.
func lastRequest(hosts []*demosite.Host) time.Time {
	var last time.Time
	for _, h := range hosts {
		reqs := h.Requests()
		for _, r := range reqs {
			if r.Time.After(last) {
				last = r.Time
			}
		}
	}
	return last
}

// askedTwice names up to limit pages of hosts asked more than once, each
// with its requests' statuses and times from start.
func askedTwice(hosts []*demosite.Host, start time.Time, limit int) []string {
	var out []string
	for _, h := range hosts {
		byPath := map[string][]demosite.Request{}
		var order []string
		for _, r := range h.Requests() {
			if r.Path == "/robots.txt" {
				continue
			}
			if byPath[r.Path] == nil {
				order = append(order, r.Path)
			}
			byPath[r.Path] = append(byPath[r.Path], r)
		}
		for _, p := range order {
			reqs := byPath[p]
			if len(reqs) < 2 {
				continue
			}
			if len(out) == limit {
				return out
			}
			var at []string
			for _, r := range reqs {
				at = append(at, fmt.Sprintf("%d at %.2fs", r.Status, r.Time.Sub(start).Seconds()))
			}
			out = append(out, h.Name+p+": "+strings.Join(at, ", "))
		}
	}
	return out
}

func loggedErrors(counts map[string]int) bool {
	for msg := range counts {
		if strings.HasPrefix(msg, slog.LevelError.String()) {
			return true
		}
	}
	return false
}

// countLogged counts the child's log lines by message; a missing file is
// no line.
func countLogged(path string) (map[string]int, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for line := range bytes.Lines(data) {
		var rec struct {
			Level, Msg string
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("child log %s: %w", path, err)
		}
		counts[rec.Level+": "+rec.Msg]++
	}
	return counts, nil
}

func soakHostTraffic(h *demosite.Host, start time.Time) SoakHost {
	out := SoakHost{Name: h.Name, Behavior: h.Spec().Behavior.String(), Statuses: map[int]int{}}
	reqs := h.Requests()
	var times []time.Time
	for _, r := range reqs {
		times = append(times, r.Time)
		if h.Spec().Behavior != demosite.Dead {
			out.Statuses[r.Status]++
		}
		if r.Path == "/robots.txt" {
			out.Robots++
		} else {
			out.Requests++
		}
	}
	if len(times) > 0 {
		first, last := timeRange(times)
		out.First, out.Last = first.Sub(start), last.Sub(start)
	}
	return out
}

// inspectFile reads, from the child's file, each unhealthy host's counts
// and transitions and the dead host's results and timeline.
func (s *SoakResult) inspectFile(path string, healthy, unhealthy []*demosite.Host, run *MemoryRun) error {
	db, err := storage.Open(path, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	healthyKeys := make(map[string]bool, len(healthy))
	for _, h := range healthy {
		key, err := frontier.HostKey(h.BaseURL() + "/")
		if err != nil {
			return err
		}
		healthyKeys[key] = true
	}
	err = db.ForEachResult(func(res *store.Result) error {
		if healthyKeys[res.Host] && res.Attempts > 1 {
			s.HealthyRetried++
		}
		return nil
	})
	if err != nil {
		return err
	}
	byKey := make(map[string]*SoakHost, len(unhealthy))
	var deadKey string
	var deadTimes []time.Time
	for i, h := range unhealthy {
		key, err := frontier.HostKey(h.BaseURL() + "/")
		if err != nil {
			return err
		}
		byKey[key] = &s.Unhealthy[i]
		if h.Spec().Behavior == demosite.Dead {
			deadKey = key
			for _, r := range h.Requests() {
				deadTimes = append(deadTimes, r.Time)
			}
		}
	}
	err = db.ForEachHost(func(host string, c store.HostCounts) error {
		if h := byKey[host]; h != nil {
			h.Stored = c
		}
		return nil
	})
	if err != nil {
		return err
	}
	err = db.ForEachTransition(func(t store.Transition) error {
		if h := byKey[t.Host]; h != nil {
			if h.Transitions == nil {
				h.Transitions = map[string]int{}
			}
			h.Transitions[t.To]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	dead := &DeadRun{DeadResults: map[string]int64{}}
	if err := inspectDead(db, deadKey, dead); err != nil {
		return err
	}
	d := &s.Dead
	d.Results, d.Left = dead.DeadResults, dead.DeadLeft
	d.Connections = len(deadTimes)
	if len(deadTimes) > 0 {
		first, last := timeRange(deadTimes)
		d.FirstTried, d.LastTried = first.Sub(run.start), last.Sub(run.start)
	}
	d.Opened, d.GivenUp = sinceOrZero(dead.opened, run.start), sinceOrZero(dead.firstDown, run.start)
	d.OpenSpan, d.Probes, d.Bound = deadBound(s.Config.Breaker, s.HostConcurrency, d.Opened, max(d.GivenUp, d.LastTried))
	return nil
}

// deadBound is the most connections the dead host may see: threshold +
// host concurrency before and as the circuit opens, then one probe per
// rest period from the opening until the circuit's last use.
func deadBound(b breaker.Config, hostConcurrency int, opened, until time.Duration) (span time.Duration, probes, bound int) {
	if opened > 0 {
		span = max(until-opened, 0)
		probes = int(math.Ceil(span.Seconds() / b.Rest.Seconds()))
	}
	return span, probes, b.Threshold + hostConcurrency + probes
}

func timeRange(ts []time.Time) (first, last time.Time) {
	first, last = ts[0], ts[0]
	for _, t := range ts[1:] {
		if t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	return first, last
}

// soakArchive reads the archive back and finds each healthy page in it. It
// also returns the archive's count of response and revisit records by URL.
func soakArchive(dir string, healthy []*demosite.Host) (SoakWARC, map[string]int, error) {
	var w SoakWARC
	var err error
	if w.Files, w.Bytes, err = warcFiles(dir); err != nil {
		return w, nil, err
	}
	rep, err := warc.Check(dir)
	if err != nil {
		return w, nil, err
	}
	w.Records, w.CheckOK, w.NProblems, w.Unfinished = rep.Records, rep.OK(), len(rep.Problems), rep.Unfinished
	w.Problems = rep.Problems[:min(len(rep.Problems), maxProblems)]
	for _, h := range healthy {
		for i := range h.Spec().Pages {
			switch n := rep.Responses[h.PageURL(i)]; {
			case n == 0:
				w.HealthyMissing++
			case n == 1:
				w.HealthyOnce++
			default:
				w.HealthyTwice++
			}
		}
	}
	return w, rep.Responses, nil
}
