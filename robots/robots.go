package robots

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/temoto/robotstxt"
)

const (
	// DefaultTTL is how long Rules may be used before refetching (RFC 9309 §2.4).
	DefaultTTL = 24 * time.Hour

	// MaxBodySize is the parsing limit: bytes beyond it are ignored (RFC 9309 §2.5
	// requires at least 500 KiB).
	MaxBodySize = 500 << 10

	// MaxRedirects is how many consecutive redirects Fetch follows (RFC 9309 §2.3.1.2).
	MaxRedirects = 5

	// MaxCrawlDelay caps Crawl-delay values so absurd ones cannot overflow a Duration.
	MaxCrawlDelay = 24 * time.Hour
)

// ErrUnavailable means robots.txt could not be obtained for a reason that
// RFC 9309 treats as "unreachable" (429, 5xx, transport failure): the host must
// be treated as fully disallowed for now and the fetch retried later.
var ErrUnavailable = errors.New("robots.txt unavailable")

// Getter performs one HTTP GET without following redirects. It returns the
// status, the raw Location header (empty if none) and the body. A non-nil err
// means the server could not be reached.
type Getter func(ctx context.Context, url string) (status int, location string, body []byte, err error)

// Rules is the robots.txt outcome for one host. The exported fields are what
// the storage layer persists; treat them as read-only after construction.
// All methods are safe for concurrent use.
type Rules struct {
	// FetchedAt is when the response was obtained.
	FetchedAt time.Time
	// Status is the final HTTP status after redirects. A 2xx status means Body
	// was parsed; any other status means everything is allowed.
	Status int
	// Body is the robots.txt body, truncated to MaxBodySize at a line break.
	// It is nil unless Status is 2xx.
	Body []byte

	groups   []group  // parsed from Body once; never mutated afterwards
	sitemaps []string // absolute http(s) Sitemap URLs, in file order

	// own is the matcher of the first product token asked for, the
	// crawler's own: the one a crawl asks of every host's rules, kept
	// without the cost of a map (a sync.Map's first Load alone allocates
	// some 200 bytes, for every host whose rules are held).
	own      atomic.Pointer[tokenMatcher]
	matchers sync.Map     // any other product token -> *matcher, compiled lazily
	nmatch   atomic.Int32 // entries in matchers; bounds the cache
}

// tokenMatcher is a product token's compiled matcher.
type tokenMatcher struct {
	token string
	m     *matcher
}

// group is one robots.txt group: consecutive User-agent lines and the rules
// that follow them.
type group struct {
	agents []string // product tokens, lower case; "*" is the wildcard; "" never matches
	rules  []rule
	delay  time.Duration // largest valid Crawl-delay in the group
}

type rule struct {
	allow   bool
	pattern string // normalized by normPattern
}

// matcher is the merged, compiled group that applies to one product token.
type matcher struct {
	group *robotstxt.Group // nil when no rule applies
	delay time.Duration
}

// maxMatchers bounds the per-Rules matcher cache; a crawler normally asks for
// one product token, so more than this means a caller passing arbitrary agents.
const maxMatchers = 8

// FromResponse interprets a final (non-redirect) robots.txt response
// received at now. 2xx bodies are parsed; 4xx other than 429 allow
// everything; 429, 5xx and any other status return an error wrapping
// ErrUnavailable and no Rules.
func FromResponse(status int, body []byte, now time.Time) (*Rules, error) {
	switch {
	case status >= 200 && status <= 299:
		return newRules(status, body, now), nil
	case status == 429:
		return nil, fmt.Errorf("%w: status %d", ErrUnavailable, status)
	case status >= 400 && status <= 499:
		return newRules(status, nil, now), nil
	default:
		return nil, fmt.Errorf("%w: status %d", ErrUnavailable, status)
	}
}

// Fetch obtains the robots.txt of scheme://hostport with get, following up
// to MaxRedirects redirects itself. Too many redirects, a redirect loop, or a
// redirect without a usable http(s) Location count as "unavailable" and yield
// allow-all Rules carrying the last 3xx status. A transport error yields an
// error wrapping both ErrUnavailable and the Getter's error.
func Fetch(ctx context.Context, get Getter, scheme, hostport string, now time.Time) (*Rules, error) {
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("robots fetch: unsupported scheme %q", scheme)
	}
	if hostport == "" || strings.ContainsAny(hostport, "/?#@\\ \t\r\n") {
		return nil, fmt.Errorf("robots fetch: invalid host %q", hostport)
	}
	u := &url.URL{Scheme: scheme, Host: hostport, Path: "/robots.txt"}
	seen := make(map[string]bool, MaxRedirects+1)
	for redirects := 0; ; redirects++ {
		target := u.String()
		seen[target] = true
		status, location, body, err := get(ctx, target)
		if err != nil {
			return nil, fmt.Errorf("%w: get %s: %w", ErrUnavailable, target, err)
		}
		if status < 300 || status > 399 {
			r, err := FromResponse(status, body, now)
			if err != nil {
				return nil, fmt.Errorf("get %s: %w", target, err)
			}
			return r, nil
		}
		next, ok := redirectTarget(u, location)
		if !ok || redirects == MaxRedirects || seen[next.String()] {
			return newRules(status, nil, now), nil
		}
		u = next
	}
}

// redirectTarget resolves a Location header against the current URL and
// reports whether it is worth following.
func redirectTarget(cur *url.URL, location string) (*url.URL, bool) {
	if location == "" {
		return nil, false
	}
	ref, err := url.Parse(location)
	if err != nil {
		return nil, false
	}
	next := cur.ResolveReference(ref)
	next.Fragment, next.RawFragment = "", ""
	if (next.Scheme != "http" && next.Scheme != "https") || next.Host == "" || next.User != nil {
		return nil, false
	}
	return next, true
}

// newRules builds Rules; the body is copied, capped and, for 2xx, parsed.
func newRules(status int, body []byte, now time.Time) *Rules {
	r := &Rules{FetchedAt: now, Status: status}
	if status >= 200 && status <= 299 {
		r.Body = bytes.Clone(capBody(body))
		r.groups, r.sitemaps = parse(r.Body)
	}
	return r
}

// capBody truncates b to MaxBodySize, dropping a trailing partial line so a
// cut-off path cannot turn into a broader rule.
func capBody(b []byte) []byte {
	if len(b) <= MaxBodySize {
		return b
	}
	b = b[:MaxBodySize]
	if i := bytes.LastIndexAny(b, "\r\n"); i >= 0 {
		return b[:i+1]
	}
	return b[:0]
}

// Expired reports whether r should be refetched at now. A non-positive ttl
// means DefaultTTL. Rules are expired from exactly FetchedAt+ttl on.
func (r *Rules) Expired(now time.Time, ttl time.Duration) bool {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return !now.Before(r.FetchedAt.Add(ttl))
}

// Sitemaps returns the absolute http(s) URLs of the file's Sitemap lines.
func (r *Rules) Sitemaps() []string {
	return append([]string(nil), r.sitemaps...)
}

// Allowed reports whether agent may fetch path. agent is a product token such
// as "breakwater" (anything after the token, like "/1.0", is ignored); path is
// the URL's path plus query, e.g. "/a/b?c=d". /robots.txt is always allowed.
func (r *Rules) Allowed(path, agent string) bool {
	p := normPath(path)
	if p == "/robots.txt" {
		return true
	}
	m := r.matcherFor(agent)
	if m.group == nil {
		return true
	}
	return m.group.Test(anchor + p)
}

// CrawlDelay returns the Crawl-delay of the group that applies to agent, or
// zero if none is given. Crawl-delay is not part of RFC 9309; when a group
// lists several, the largest wins.
func (r *Rules) CrawlDelay(agent string) time.Duration {
	return r.matcherFor(agent).delay
}

func (r *Rules) matcherFor(agent string) *matcher {
	tok := ProductToken(agent)
	own := r.own.Load()
	if own != nil && own.token == tok {
		return own.m
	}
	if own == nil {
		m := compile(r.groups, tok)
		if r.own.CompareAndSwap(nil, &tokenMatcher{token: tok, m: m}) {
			return m
		}
		if own = r.own.Load(); own.token == tok {
			return own.m // another caller compiled it first
		}
	}
	if v, ok := r.matchers.Load(tok); ok {
		return v.(*matcher)
	}
	m := compile(r.groups, tok)
	if r.nmatch.Load() >= maxMatchers {
		return m
	}
	if v, loaded := r.matchers.LoadOrStore(tok, m); loaded {
		return v.(*matcher)
	}
	r.nmatch.Add(1)
	return m
}

// ProductToken extracts the leading RFC 9309 product token (letters, "-",
// "_") of a User-Agent or a robots.txt user-agent line, in lower case; ""
// if there is none. "Breakwater/1.0 (+url)" is "breakwater". It is the one
// rule for the crawler's own name: robots.txt groups and refusals that name
// the crawler are both matched against it.
func ProductToken(s string) string {
	i := 0
	for i < len(s) && isTokenChar(s[i]) {
		i++
	}
	return strings.ToLower(s[:i])
}

func isTokenChar(c byte) bool {
	return c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// selectGroups returns the groups naming tok, or else the "*" groups
// (RFC 9309 §2.2.1: exact, case-insensitive token match; matching groups merge).
func selectGroups(groups []group, tok string) []group {
	var specific, wildcard []group
	for _, g := range groups {
		switch {
		case tok != "" && hasAgent(g, tok):
			specific = append(specific, g)
		case hasAgent(g, "*"):
			wildcard = append(wildcard, g)
		}
	}
	if len(specific) > 0 {
		return specific
	}
	return wildcard
}

func hasAgent(g group, tok string) bool {
	for _, a := range g.agents {
		if a == tok {
			return true
		}
	}
	return false
}

// anchor prefixes every pattern and path handed to temoto. temoto compiles
// wildcard patterns into unanchored regexps, so "/a*b" would also match
// "/x/a/b"; a prefix that normalized paths can never contain (a raw control
// byte) pins every match to the start. It also shifts every rule length by
// the same amount, so temoto's longest-match order is unchanged.
const anchor = "/\x01"

// compile merges the groups that apply to tok into one temoto group. Allow
// rules are listed first because temoto keeps the first of equally long
// matches, and RFC 9309 §2.2.2 prefers Allow on a tie.
func compile(groups []group, tok string) *matcher {
	m := &matcher{}
	var allows, disallows []string
	for _, g := range selectGroups(groups, tok) {
		m.delay = max(m.delay, g.delay)
		for _, ru := range g.rules {
			if ru.allow {
				allows = append(allows, ru.pattern)
			} else {
				disallows = append(disallows, ru.pattern)
			}
		}
	}
	if len(allows)+len(disallows) == 0 {
		return m
	}
	rd, err := robotstxt.FromBytes(temotoBody(allows, disallows))
	if err != nil {
		// Only a pattern temoto cannot compile gets here; keep the rest.
		rd, err = robotstxt.FromBytes(temotoBody(compilable(allows), compilable(disallows)))
	}
	if err == nil {
		m.group = rd.FindGroup("*")
	}
	return m
}

// temotoBody renders normalized patterns as a single "*" group in the
// syntax temoto parses without error.
func temotoBody(allows, disallows []string) []byte {
	var b bytes.Buffer
	b.WriteString("User-agent: *\n")
	for _, p := range allows {
		b.WriteString("Allow: " + anchor + p + "\n")
	}
	for _, p := range disallows {
		b.WriteString("Disallow: " + anchor + p + "\n")
	}
	return b.Bytes()
}

func compilable(patterns []string) []string {
	var ok []string
	for _, p := range patterns {
		if _, err := robotstxt.FromBytes(temotoBody(nil, []string{p})); err == nil {
			ok = append(ok, p)
		}
	}
	return ok
}

// parse reads groups and sitemaps line by line. Unlike temoto, which rejects
// a whole file over one bad line, it skips what it cannot use (RFC 9309
// §2.3.1.5: use the parseable rules).
func parse(body []byte) ([]group, []string) {
	var groups []group
	var sitemaps []string
	var cur *group
	inRules := false // the current group has seen a rule line: the next User-agent starts a new group
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	for len(body) > 0 {
		var line []byte
		line, body = nextLine(body)
		key, val, ok := splitLine(line)
		if !ok {
			continue
		}
		switch key {
		case "user-agent", "useragent", "user agent":
			if cur == nil || inRules {
				groups = append(groups, group{})
				cur, inRules = &groups[len(groups)-1], false
			}
			cur.agents = append(cur.agents, agentValue(val))
		case "allow", "disallow":
			if cur == nil {
				continue // a rule outside any group applies to nobody
			}
			inRules = true
			if val != "" { // an empty path matches nothing
				cur.rules = append(cur.rules, rule{allow: key == "allow", pattern: normPattern(val)})
			}
		case "crawl-delay", "crawldelay":
			if cur == nil {
				continue
			}
			inRules = true
			if d, ok := parseDelay(val); ok {
				cur.delay = max(cur.delay, d)
			}
		case "sitemap", "site-map":
			if u, ok := sitemapURL(val); ok {
				sitemaps = append(sitemaps, u)
			}
		}
	}
	return groups, sitemaps
}

func nextLine(b []byte) (line, rest []byte) {
	i := bytes.IndexAny(b, "\r\n")
	if i < 0 {
		return b, nil
	}
	return b[:i], b[i+1:]
}

// splitLine returns the lower-cased key and the value of a "key: value" line,
// without comment and surrounding blanks. A missing colon is tolerated when a
// blank separates key and value ("Disallow /x"), as major crawlers do.
func splitLine(line []byte) (key, val string, ok bool) {
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	s := strings.Trim(string(line), " \t\v")
	i := strings.IndexByte(s, ':')
	if i < 0 {
		i = strings.IndexAny(s, " \t\v")
	}
	if i <= 0 {
		return "", "", false
	}
	key = strings.ToLower(strings.Trim(s[:i], " \t\v"))
	return key, strings.Trim(s[i+1:], " \t\v"), true
}

// agentValue turns a User-agent value into the product token it names:
// "*" for the wildcard, "" (matches nothing) when there is no token.
func agentValue(v string) string {
	if tok := ProductToken(v); tok != "" {
		return tok
	}
	if strings.HasPrefix(v, "*") {
		return "*"
	}
	return ""
}

func parseDelay(v string) (time.Duration, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f != f {
		return 0, false
	}
	if f >= MaxCrawlDelay.Seconds() {
		return MaxCrawlDelay, true
	}
	return time.Duration(f * float64(time.Second)), true
}

func sitemapURL(v string) (string, bool) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", false
	}
	return v, true
}

// normPath brings a request path (with query) into the form patterns are
// compared in (RFC 9309 §2.2.2): percent-encoded unreserved bytes decoded,
// other escapes upper-cased, non-ASCII and blanks encoded, and "$" encoded
// so it cannot collide with the end-of-path marker.
func normPath(p string) string {
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return escape(p, len(p))
}

// normPattern normalizes an Allow/Disallow value like normPath, keeping "*"
// wildcards and a final "$" end marker. Values not starting with "/" or "*"
// get a leading "/", as temoto and Google's parser do.
func normPattern(v string) string {
	if !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "*") {
		v = "/" + v
	}
	keepDollar := len(v) - 1 // only a trailing "$" is special
	if !strings.HasSuffix(v, "$") {
		keepDollar = -1
	}
	return escape(v, keepDollar)
}

const upperHex = "0123456789ABCDEF"

// escape canonicalizes percent-encoding; a "$" at index keep stays literal.
func escape(s string, keep int) string {
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			v := unhex(s[i+1])<<4 | unhex(s[i+2])
			i += 2
			if isUnreserved(v) {
				b.WriteByte(v)
				continue
			}
			c = v
		case c == '$' && i == keep:
			b.WriteByte(c)
			continue
		case c > 0x20 && c < 0x7f && c != '%' && c != '#' && c != '$':
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(upperHex[c>>4])
		b.WriteByte(upperHex[c&15])
	}
	return b.String()
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

func isUnreserved(c byte) bool {
	return isTokenChar(c) || ('0' <= c && c <= '9') || c == '.' || c == '~'
}

// encodingVersion tags the MarshalBinary layout.
const encodingVersion = 1

// MarshalBinary encodes r as version, FetchedAt, Status and Body; the parsed
// form is rebuilt by Unmarshal.
func (r *Rules) MarshalBinary() ([]byte, error) {
	t, err := r.FetchedAt.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("marshal robots fetched-at: %w", err)
	}
	if r.Status < 0 {
		return nil, fmt.Errorf("marshal robots: negative status %d", r.Status)
	}
	b := make([]byte, 0, 1+3*binary.MaxVarintLen64+len(t)+len(r.Body))
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(len(t)))
	b = append(b, t...)
	b = binary.AppendUvarint(b, uint64(r.Status))
	b = binary.AppendUvarint(b, uint64(len(r.Body)))
	return append(b, r.Body...), nil
}

// Unmarshal decodes bytes written by MarshalBinary into fresh Rules.
func Unmarshal(b []byte) (*Rules, error) {
	if len(b) == 0 || b[0] != encodingVersion {
		return nil, errors.New("unmarshal robots: unknown encoding version")
	}
	d := decoder{b: b[1:]}
	t := d.bytes(64)
	status := d.uvarint(999)
	body := d.bytes(MaxBodySize)
	if d.err != nil {
		return nil, fmt.Errorf("unmarshal robots: %w", d.err)
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("unmarshal robots: %d trailing bytes", len(d.b))
	}
	var at time.Time
	if err := at.UnmarshalBinary(t); err != nil {
		return nil, fmt.Errorf("unmarshal robots fetched-at: %w", err)
	}
	return newRules(int(status), body, at), nil
}

// decoder reads length-checked fields; the first failure sticks in err.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint(limit uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > limit {
		d.err = errors.New("bad or out-of-range varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(limit uint64) []byte {
	n := d.uvarint(limit)
	if d.err == nil && uint64(len(d.b)) < n {
		d.err = errors.New("truncated field")
	}
	if d.err != nil {
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}
