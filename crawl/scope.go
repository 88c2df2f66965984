package crawl

import (
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"

	"golang.org/x/net/publicsuffix"
)

// scope decides which discovered URLs are worth enqueueing: it is the first
// half of authorisation (robots.txt is the second, at fetch time).
type scope struct {
	mode     string
	seeds    atomic.Pointer[seedSet] // replaced whole when a fleet's seeds grow
	include  []*regexp.Regexp
	exclude  []*regexp.Regexp
	maxDepth int
}

// seedSet is the seeds' hosts as the scope reads them.
type seedSet struct {
	hosts   map[string]bool // host keys of the seeds
	domains map[string]bool // registrable domains of the seeds, with ScopeDomain
}

func newSeedSet(mode string, seedHosts []string) *seedSet {
	set := &seedSet{hosts: make(map[string]bool, len(seedHosts)), domains: map[string]bool{}}
	for _, h := range seedHosts {
		set.hosts[h] = true
		if mode == ScopeDomain { // only that scope reads them: a crawl of 100,000 seed hosts saves a map as big
			set.domains[registrableDomain(h)] = true
		}
	}
	return set
}

func newScope(o *Options, seedHosts []string) *scope {
	s := &scope{mode: o.Scope, include: o.Include, exclude: o.Exclude, maxDepth: o.MaxDepth}
	s.seeds.Store(newSeedSet(o.Scope, seedHosts))
	return s
}

// seedHost reports whether host is on a seed.
func (s *scope) seedHost(host string) bool { return s.seeds.Load().hosts[host] }

// coversHost reports whether the scope's mode admits host.
func (s *scope) coversHost(host string) bool {
	switch s.mode {
	case ScopeSeeds:
		return s.seeds.Load().hosts[host]
	case ScopeDomain:
		return s.seeds.Load().domains[registrableDomain(host)]
	}
	return true
}

// withoutSecrets reports whether a request to host (a host key) leaves
// out the credentials the user gave, the secret --header values and the
// --cookies file's cookies (see Options.HeaderHosts): with
// HeaderHostsSeeds, a host no seed is on. Whatever the scope, a link or a
// redirect to another host does not take the seed host's credentials
// with it.
func (e *Engine) withoutSecrets(host string) bool {
	return e.opts.HeaderHosts != HeaderHostsAll && !e.scope.seedHost(host)
}

// allows reports whether a discovered URL (already canonicalized to host) may be queued.
func (s *scope) allows(rawURL, host string, depth int) bool {
	if s.maxDepth >= 0 && depth > s.maxDepth {
		return false
	}
	return s.coversHost(host) && s.matchesFilters(rawURL)
}

// allowsRequisite reports whether a page's requisite may be fetched: on
// any host and at any depth, since it is part of a page already taken,
// but never one the user excluded.
func (s *scope) allowsRequisite(rawURL string) bool {
	for _, re := range s.exclude {
		if re.MatchString(rawURL) {
			return false
		}
	}
	return true
}

func (s *scope) matchesFilters(rawURL string) bool {
	if len(s.include) > 0 {
		ok := false
		for _, re := range s.include {
			if re.MatchString(rawURL) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	for _, re := range s.exclude {
		if re.MatchString(rawURL) {
			return false
		}
	}
	return true
}

// registrableDomain is the eTLD+1 of a host key; IPs and single-label names
// (which have none) stand for themselves.
func registrableDomain(hostKey string) string {
	name := hostKey
	if h, _, err := net.SplitHostPort(hostKey); err == nil {
		name = h
	}
	name = strings.Trim(name, "[]")
	if net.ParseIP(name) != nil {
		return name
	}
	if d, err := publicsuffix.EffectiveTLDPlusOne(name); err == nil {
		return d
	}
	return name
}

// requestPath is the path and query robots.txt rules are matched against.
func requestPath(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "/"
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}
