package bench

import (
	"fmt"
	"sort"
	"time"

	"breakwater/demosite"
)

// startSite serves size healthy hosts and, when deadURLs > 0, one dead host
// with that many distinct URLs, deadLinks of which each live page links to.
// The seed is fixed so every run of the bench crawls the same pages.
func startSite(size Size, deadURLs, deadLinks int) (*demosite.Site, error) {
	specs := demosite.BenchSpecs(size.Hosts, size.Pages, deadURLs > 0, deadURLs)
	site, err := demosite.Start(specs, demosite.SiteOptions{Seed: 1, DeadLinksPerPage: deadLinks})
	if err != nil {
		return nil, fmt.Errorf("start bench site (%s): %w", size, err)
	}
	return site, nil
}

// interleave reorders a BenchSpecs site's URLs (host by host) page by page
// across hosts, so that concurrent fetchers spread over hosts instead of
// queueing behind one host's connection cap.
func interleave(urls []string, size Size) []string {
	out := make([]string, 0, len(urls))
	for p := range size.Pages {
		for h := range size.Hosts {
			if i := h*size.Pages + p; i < len(urls) {
				out = append(out, urls[i])
			}
		}
	}
	return out
}

// Traffic is what a site's hosts saw, from their request logs.
type Traffic struct {
	PageRequests    int `json:"page_requests"`    // requests of live hosts other than /robots.txt
	DistinctPages   int `json:"distinct_pages"`   // distinct paths among them answered 200
	RobotsRequests  int `json:"robots_requests"`  // GET /robots.txt on live hosts
	DeadConnections int `json:"dead_connections"` // connections accepted by dead hosts
}

// Duplicates is the number of page requests beyond the first of each page.
func (t Traffic) Duplicates() int { return t.PageRequests - t.DistinctPages }

// logMark is where each host's request log stood at some moment, so that
// two measurements on one site can be told apart.
type logMark []int

func markLogs(site *demosite.Site) logMark {
	hosts := site.Hosts()
	m := make(logMark, len(hosts))
	for i, h := range hosts {
		m[i] = h.RequestCount()
	}
	return m
}

// trafficSince counts the requests logged after mark (nil: since Start).
func trafficSince(site *demosite.Site, mark logMark) Traffic {
	var t Traffic
	for i, h := range site.Hosts() {
		reqs := h.Requests()
		if mark != nil {
			reqs = reqs[mark[i]:]
		}
		if h.Spec().Behavior == demosite.Dead {
			t.DeadConnections += len(reqs)
			continue
		}
		seen := make(map[string]bool)
		for _, r := range reqs {
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

// totalRequests is every request (or dead connection) the site has logged.
func totalRequests(site *demosite.Site) int {
	n := 0
	for _, h := range site.Hosts() {
		n += h.RequestCount()
	}
	return n
}

// deadTimes returns the accept times of every dead-host connection after mark.
func deadTimes(site *demosite.Site, mark logMark) []time.Time {
	var out []time.Time
	for i, h := range site.Hosts() {
		if h.Spec().Behavior != demosite.Dead {
			continue
		}
		reqs := h.Requests()
		if mark != nil {
			reqs = reqs[mark[i]:]
		}
		for _, r := range reqs {
			out = append(out, r.Time)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// maxInWindow is the largest number of sorted times within any span of
// length window: the most requests a host received in one rest period.
func maxInWindow(times []time.Time, window time.Duration) int {
	best, lo := 0, 0
	for hi := range times {
		for times[hi].Sub(times[lo]) >= window {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}
