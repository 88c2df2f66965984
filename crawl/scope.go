package crawl

import (
	"net"
	"net/url"
	"regexp"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// scope decides which discovered URLs are worth enqueueing: it is the first
// half of authorisation (robots.txt is the second, at fetch time).
type scope struct {
	mode     string
	hosts    map[string]bool // host keys of the seeds
	domains  map[string]bool // registrable domains of the seeds, with ScopeDomain
	include  []*regexp.Regexp
	exclude  []*regexp.Regexp
	maxDepth int
}

func newScope(o *Options, seedHosts []string) *scope {
	s := &scope{mode: o.Scope, hosts: make(map[string]bool, len(seedHosts)), domains: map[string]bool{},
		include: o.Include, exclude: o.Exclude, maxDepth: o.MaxDepth}
	for _, h := range seedHosts {
		s.hosts[h] = true
		if s.mode == ScopeDomain { // only that scope reads them: a crawl of 100,000 seed hosts saves a map as big
			s.domains[registrableDomain(h)] = true
		}
	}
	return s
}

// withoutSecrets reports whether a request to host (a host key) leaves
// out the credentials the user gave, the secret --header values and the
// --cookies file's cookies (see Options.HeaderHosts): with
// HeaderHostsSeeds, a host no seed is on. Whatever the scope, a link or a
// redirect to another host does not take the seed host's credentials
// with it.
func (e *Engine) withoutSecrets(host string) bool {
	return e.opts.HeaderHosts != HeaderHostsAll && !e.scope.hosts[host]
}

// allows reports whether a discovered URL (already canonicalized to host) may be queued.
func (s *scope) allows(rawURL, host string, depth int) bool {
	if s.maxDepth >= 0 && depth > s.maxDepth {
		return false
	}
	switch s.mode {
	case ScopeSeeds:
		if !s.hosts[host] {
			return false
		}
	case ScopeDomain:
		if !s.domains[registrableDomain(host)] {
			return false
		}
	}
	return s.matchesFilters(rawURL)
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
