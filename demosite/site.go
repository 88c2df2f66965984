package demosite

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// HostSpec describes one host of the site. Zero values take the documented
// defaults; fields that do not apply to the host's Behavior are ignored.
type HostSpec struct {
	// Name labels the host in titles and logs; empty means "host-<index>".
	// Names must be unique within a site.
	Name string
	// Pages is the number of pages: "/" and "/p/1" … "/p/Pages-1". For a Dead
	// host it is the number of distinct URLs other pages link to. Below 1 means 1.
	Pages    int
	Behavior Behavior
	// RecoverAfter is how long after Start a Recovering host answers 503.
	RecoverAfter time.Duration
	// FlakyRate is a Flaky host's probability of a 500; zero means DefaultFlakyRate.
	FlakyRate float64
	// RetryAfterSeconds is a Throttling host's Retry-After; zero means DefaultRetryAfterSeconds.
	RetryAfterSeconds int
	// MaxRPS is a Throttling host's allowed request rate; zero means DefaultMaxRPS.
	MaxRPS float64
	// RefuseToken is the crawler name a Refusing host blocks; empty means DefaultRefuseToken.
	RefuseToken string
	// Robots is the body of /robots.txt; empty means /robots.txt answers 404.
	Robots string
	// PrivatePage makes "/" link to PrivatePath, a page Robots is expected to
	// disallow. It is not listed by Site.URLs.
	PrivatePage bool
	// Addr is the address the host listens on; empty means a free port on
	// 127.0.0.1. It must be a loopback address: the site is for tests.
	Addr string
}

// PrivatePath is the path of a host's private page (see HostSpec.PrivatePage).
const PrivatePath = "/private/"

// SiteOptions configures the link structure and clock of a Site.
type SiteOptions struct {
	// LinksPerPage is the number of same-host links per page; zero means 5.
	LinksPerPage int
	// CrossLinks is the number of links to other hosts' pages per page; zero
	// means 2, negative means none.
	CrossLinks int
	// DeadLinksPerPage is the number of distinct dead-host URLs each page of a
	// live host links to, when the site has a Dead host; zero means none.
	DeadLinksPerPage int
	// Now is the clock behaviors read; nil means time.Now.
	Now func() time.Time
	// Seed fixes cross links and flaky failures.
	Seed int64
	// Requisites gives every page what a real page needs to be shown: the
	// host's stylesheet (with a background image), its logo and an image
	// of the page's own, all on the page's host.
	Requisites bool
	// PageBytes pads every page with text paragraphs until it is at least
	// this long (the median HTML page on the web is about 30 KB); zero
	// leaves pages at their natural size of about 2 KB.
	PageBytes int
	// Gzip answers a request that accepts gzip with its HTML page gzipped
	// (Content-Encoding: gzip), as most web servers do.
	Gzip bool
}

// Request is one entry of a host's request log.
type Request struct {
	Time       time.Time
	Method     string
	Path       string // decoded path; empty for a dead host's connection
	RequestURI string // request target as sent, e.g. "/p/2?"
	Status     int    // 0 for a dead host's connection and a request hung by SetOutage
	UserAgent  string
}

// Site is a set of hosts served on loopback. Create it with Start.
type Site struct {
	opts    SiteOptions
	now     func() time.Time
	started time.Time
	hosts   []*Host
	byName  map[string]*Host
	live    []*Host     // non-dead hosts, in spec order
	dead    []*Host     // dead hosts, in spec order
	offset  map[int]int // host index -> global page number of its "/" among live pages

	// outage, while set, makes every host hang (see SetOutage).
	outage atomic.Bool

	closeOnce sync.Once
	closeErr  error
}

// SetOutage starts (true) or ends (false) an outage of the whole site, as
// the crawler would see its own network die: every request that arrives
// meanwhile is logged with status 0 and never answered; it hangs until the
// client gives up or the site closes. Dead hosts stay dead either way.
func (s *Site) SetOutage(on bool) { s.outage.Store(on) }

// Host is one host of a Site.
type Host struct {
	Name string

	site  *Site
	index int
	spec  HostSpec // defaults resolved
	ln    net.Listener
	base  string // "http://127.0.0.1:PORT"
	title string // HTML-escaped Name
	srv   *http.Server
	hole  *blackhole
	wg    sync.WaitGroup
	state hostState

	logMu     sync.Mutex
	log       []Request
	bodyBytes int64 // response body bytes sent (BodyBytes)

	revMu sync.Mutex
	revs  map[int]revision // pages changed since Start (revisions.go)
}

// Start listens on a fresh loopback port for each spec and serves the site
// until Close. On error nothing is left running.
func Start(specs []HostSpec, opts SiteOptions) (*Site, error) {
	if opts.LinksPerPage == 0 {
		opts.LinksPerPage = 5
	}
	if opts.CrossLinks == 0 {
		opts.CrossLinks = 2
	}
	s := &Site{opts: opts, now: opts.Now, byName: make(map[string]*Host, len(specs))}
	if s.now == nil {
		s.now = time.Now
	}
	s.started = s.now()
	for i, spec := range specs {
		h, err := s.addHost(i, spec)
		if err != nil {
			_ = s.Close()
			return nil, err
		}
		s.hosts = append(s.hosts, h)
		s.byName[h.Name] = h
	}
	s.index()
	for _, h := range s.hosts {
		h.serve()
	}
	return s, nil
}

func (s *Site) addHost(i int, spec HostSpec) (*Host, error) {
	spec, err := resolveSpec(spec, i)
	if err != nil {
		return nil, err
	}
	if _, dup := s.byName[spec.Name]; dup {
		return nil, fmt.Errorf("host %q: duplicate name", spec.Name)
	}
	addr := spec.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
		return nil, fmt.Errorf("host %q: address %q: want a loopback ip:port", spec.Name, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("host %q: listen: %w", spec.Name, err)
	}
	h := &Host{Name: spec.Name, site: s, index: i, spec: spec, ln: ln,
		base: "http://" + ln.Addr().String(), title: html.EscapeString(spec.Name)}
	h.state.rng = rand.New(rand.NewPCG(uint64(s.opts.Seed), uint64(i)))
	return h, nil
}

// index computes the live/dead split and global page numbers once, so that
// rendering a page needs no further bookkeeping.
func (s *Site) index() {
	s.offset = make(map[int]int, len(s.hosts))
	n := 0
	for _, h := range s.hosts {
		if h.spec.Behavior == Dead {
			s.dead = append(s.dead, h)
			continue
		}
		s.live = append(s.live, h)
		s.offset[h.index] = n
		n += h.spec.Pages
	}
}

func (h *Host) serve() {
	if h.spec.Behavior == Dead {
		h.hole = newBlackhole(h.ln, func() { h.record(Request{Time: h.site.now()}) })
		h.hole.serve()
		return
	}
	h.srv = &http.Server{
		Handler:           http.HandlerFunc(h.serveHTTP),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		_ = h.srv.Serve(h.ln) // returns ErrServerClosed after Close
	}()
}

// Close stops every host, drops every open connection (dead hosts' included)
// and waits for the site's goroutines. It is safe to call more than once.
func (s *Site) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		for _, h := range s.hosts {
			if err := h.close(); err != nil {
				errs = append(errs, fmt.Errorf("close host %q: %w", h.Name, err))
			}
		}
		s.closeErr = errors.Join(errs...)
	})
	return s.closeErr
}

func (h *Host) close() error {
	var err error
	switch {
	case h.hole != nil:
		err = h.hole.close()
	case h.srv != nil:
		err = h.srv.Close()
		h.wg.Wait()
	default: // listening but never served: Start failed part way
		err = h.ln.Close()
	}
	return err
}

// Roots returns the root URL of each host, in spec order.
func (s *Site) Roots() []string {
	out := make([]string, len(s.hosts))
	for i, h := range s.hosts {
		out[i] = h.base + "/"
	}
	return out
}

// Host returns the host called name, or nil.
func (s *Site) Host(name string) *Host { return s.byName[name] }

// Hosts returns every host, in spec order.
func (s *Site) Hosts() []*Host { return append([]*Host(nil), s.hosts...) }

// URLs returns every page URL of every non-dead host exactly once (private
// pages excluded), in spec and page order.
func (s *Site) URLs() []string {
	var out []string
	for _, h := range s.live {
		for i := 0; i < h.spec.Pages; i++ {
			out = append(out, h.PageURL(i))
		}
	}
	return out
}

// BaseURL returns the host's scheme and authority, e.g. "http://127.0.0.1:4321".
func (h *Host) BaseURL() string { return h.base }

// Spec returns the host's spec with defaults filled in.
func (h *Host) Spec() HostSpec { return h.spec }

// PageURL returns the absolute URL of page i of the host.
func (h *Host) PageURL(i int) string { return h.base + pagePath(i) }

// Requests returns a copy of the host's request log, oldest first.
func (h *Host) Requests() []Request {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return append([]Request(nil), h.log...)
}

// HeldTime is, for a Dead host, the time clients kept its connections open,
// summed over the connections they have closed: the worker time a crawler
// spent waiting on it, whatever it recorded. Zero for other hosts.
func (h *Host) HeldTime() time.Duration {
	if h.hole == nil {
		return 0
	}
	return h.hole.heldTime()
}

// OpenConnections is, for a Dead host, how many connections clients hold
// open now. Zero for other hosts.
func (h *Host) OpenConnections() int {
	if h.hole == nil {
		return 0
	}
	return h.hole.open()
}

// RequestCount returns the number of requests (dead host: connections) logged.
func (h *Host) RequestCount() int {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return len(h.log)
}

func (h *Host) record(r Request) {
	h.logMu.Lock()
	h.log = append(h.log, r)
	h.logMu.Unlock()
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

var gzipWriters = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed); return w }}

// serveHTTP logs the request before writing the response, so a client that
// has its answer always finds its request in the log.
func (h *Host) serveHTTP(w http.ResponseWriter, r *http.Request) {
	now := h.site.now()
	if h.site.outage.Load() {
		h.record(Request{Time: now, Method: r.Method, Path: r.URL.Path, RequestURI: r.RequestURI,
			UserAgent: r.UserAgent()})
		<-r.Context().Done()
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	hdr := w.Header()
	status, done := h.gate(hdr, buf, now)
	if !done {
		status = h.route(hdr, buf, r)
	}
	h.record(Request{Time: now, Method: r.Method, Path: r.URL.Path, RequestURI: r.RequestURI,
		Status: status, UserAgent: r.UserAgent()})
	if status == http.StatusNotModified {
		w.WriteHeader(status) // no body, and no length but the page's would be
		return
	}
	if h.site.opts.Gzip && status == http.StatusOK && strings.HasPrefix(hdr.Get("Content-Type"), "text/html") &&
		strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		zbuf := bufPool.Get().(*bytes.Buffer)
		zbuf.Reset()
		defer bufPool.Put(zbuf)
		zw := gzipWriters.Get().(*gzip.Writer)
		zw.Reset(zbuf)
		_, _ = zw.Write(buf.Bytes())
		_ = zw.Close()
		gzipWriters.Put(zw)
		buf = zbuf
		hdr.Set("Content-Encoding", "gzip")
		hdr.Add("Vary", "Accept-Encoding")
	}
	hdr.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		h.logMu.Lock()
		h.bodyBytes += int64(buf.Len())
		h.logMu.Unlock()
		_, _ = w.Write(buf.Bytes())
	}
}

func (h *Host) route(hdr http.Header, buf *bytes.Buffer, r *http.Request) int {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		return plain(hdr, buf, http.StatusMethodNotAllowed, "Method not allowed.\n")
	}
	p := r.URL.Path
	switch {
	case p == "/robots.txt" && h.spec.Robots != "":
		return plain(hdr, buf, http.StatusOK, h.spec.Robots)
	case p == PrivatePath && h.spec.PrivatePage:
		hdr.Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(buf, "<!DOCTYPE html>\n<html><head><title>%s private</title></head>\n"+
			"<body><h1>Staff only</h1><p>Crawlers should not be here.</p><a href=\"/\">home</a></body></html>\n", h.title)
		return http.StatusOK
	}
	if h.site.opts.Requisites {
		if status, ok := h.requisite(hdr, buf, p); ok {
			return status
		}
	}
	i, ok := pageNumber(p, h.spec.Pages)
	if !ok {
		return plain(hdr, buf, http.StatusNotFound, "Not found.\n")
	}
	if h.validate(hdr, r, i) {
		return http.StatusNotModified
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	h.writePage(buf, i)
	return http.StatusOK
}

func plain(hdr http.Header, buf *bytes.Buffer, status int, body string) int {
	hdr.Set("Content-Type", "text/plain; charset=utf-8")
	buf.WriteString(body)
	return status
}

// pagePath is the one path of page i: page 0 is "/", never "/p/0".
func pagePath(i int) string {
	if i == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(i)
}

// pageNumber parses a path produced by pagePath, rejecting aliases such as
// "/p/0" or "/p/01" so each page has exactly one URL.
func pageNumber(p string, pages int) (int, bool) {
	if p == "/" {
		return 0, true
	}
	rest, ok := strings.CutPrefix(p, "/p/")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 1 || i >= pages || strconv.Itoa(i) != rest {
		return 0, false
	}
	return i, true
}

// writePage renders page i of h. Links are computed here rather than stored:
// they are cheap pure functions of (seed, host, page), and storing them would
// make Start cost grow with the size of the site.
func (h *Host) writePage(buf *bytes.Buffer, i int) {
	n := h.spec.Pages
	buf.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>")
	fmt.Fprintf(buf, "%s page %d</title>", h.title, i)
	if h.site.opts.Requisites {
		buf.WriteString("<link rel=\"stylesheet\" href=\"/site.css\">")
	}
	fmt.Fprintf(buf, "</head>\n<body>\n<h1>%s page %d</h1>\n", h.title, i)
	if h.site.opts.Requisites {
		fmt.Fprintf(buf, "<img src=\"/logo.png\" alt=\"logo\"><img src=\"/img/%d.png\" alt=\"figure %d\">\n", i, i)
	}
	writeRevision(buf, h.revision(i))
	for k := range 5 {
		buf.WriteString(filler[(i+k)%len(filler)])
	}
	buf.WriteString("<h2>More on this site</h2>\n<ul>\n")
	for _, t := range sameHostTargets(n, i, h.site.opts.LinksPerPage) {
		fmt.Fprintf(buf, "<li><a href=\"%s\">%s page %d</a></li>\n", pagePath(t), h.title, t)
	}
	if i == 0 && h.spec.PrivatePage {
		fmt.Fprintf(buf, "<li><a href=\"%s\">Staff area</a></li>\n", PrivatePath)
	}
	buf.WriteString("</ul>\n<h2>Elsewhere</h2>\n<ul>\n")
	for _, t := range h.site.crossTargets(h, i) {
		fmt.Fprintf(buf, "<li><a href=\"%s\">%s page %d</a></li>\n", t.host.PageURL(t.page), t.host.title, t.page)
	}
	for _, t := range h.site.deadTargets(h, i) {
		fmt.Fprintf(buf, "<li><a href=\"%s\">archive %d</a></li>\n", t.host.PageURL(t.page), t.page)
	}
	buf.WriteString("</ul>\n")
	writeNoise(buf, h, n, i)
	// Distinct paragraphs, so that a padded page compresses like text
	// rather than like one paragraph repeated.
	for k := 0; buf.Len() < h.site.opts.PageBytes; k++ {
		buf.WriteString(padding[(i*31+k)%len(padding)])
	}
	buf.WriteString("</body></html>\n")
}

// requisite serves the stylesheet and images of SiteOptions.Requisites.
func (h *Host) requisite(hdr http.Header, buf *bytes.Buffer, p string) (int, bool) {
	switch {
	case p == "/site.css":
		hdr.Set("Content-Type", "text/css")
		buf.WriteString("body { font-family: sans-serif; background: #fff url(/bg.png) repeat-x }\nh1 { color: #236 }\n")
	case p == "/logo.png" || p == "/bg.png":
		hdr.Set("Content-Type", "image/png")
		buf.Write(tinyPNG)
	case strings.HasPrefix(p, "/img/") && strings.HasSuffix(p, ".png"):
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(p, "/img/"), ".png"))
		if err != nil || n < 0 || n >= h.spec.Pages {
			return 0, false
		}
		hdr.Set("Content-Type", "image/png")
		buf.Write(tinyPNG)
	default:
		return 0, false
	}
	return http.StatusOK, true
}

// tinyPNG is a valid 1x1 PNG: a browser shows it, a crawler stores it.
var tinyPNG = func() []byte {
	var b bytes.Buffer
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.NRGBA{R: 0x22, G: 0x33, B: 0x66, A: 0xff})
	if err := png.Encode(&b, img); err != nil {
		panic(err)
	}
	return b.Bytes()
}()

// writeNoise adds the links real sites are full of. Each one resolves to a
// page that is already a plain link somewhere on the host, except mailto:,
// which a crawler must skip.
func writeNoise(buf *bytes.Buffer, h *Host, n, i int) {
	buf.WriteString("<footer>\n")
	switch i % 3 {
	case 0:
		fmt.Fprintf(buf, "<a href=\"%s#comments\">comments</a>\n", pagePath((i+1)%n))
	case 1:
		fmt.Fprintf(buf, "<a href=\"%s?\">next</a>\n", pagePath((i+2)%n))
	}
	switch {
	case i%4 == 0:
		fmt.Fprintf(buf, "<a href=\"mailto:webmaster@%s.example\">contact</a>\n", h.title)
	case i%4 == 2:
		// Resolved against "/p/i", "../p/j" is "/p/j" and "../" is "/".
		ref := "../"
		if j := (i + 3) % n; j != 0 {
			ref = "../p/" + strconv.Itoa(j)
		}
		fmt.Fprintf(buf, "<a href=\"%s\">see also</a>\n", ref)
	}
	buf.WriteString("</footer>\n")
}

// sameHostTargets returns up to want distinct pages other than i. The first
// is always i+1 mod n, which chains every page to "/"; the rest jump around
// (i+2, 2i, 2i+1, 3i+1, i+n/2) and then fall back to i+3, i+4, … so small
// hosts still get as many links as they can.
func sameHostTargets(n, i, want int) []int {
	out := make([]int, 0, want)
	jumps := [...]int{i + 1, i + 2, 2 * i, 2*i + 1, 3*i + 1, i + n/2}
	for step := 0; len(out) < want && step < len(jumps)+n; step++ {
		t := i + 3 + step - len(jumps)
		if step < len(jumps) {
			t = jumps[step]
		}
		t %= n
		if t != i && !containsInt(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func containsInt(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

type target struct {
	host *Host
	page int
}

// crossTargets picks CrossLinks pages on other live hosts, from a hash of
// (seed, host, page, link) so the choice is stable for a seed.
func (s *Site) crossTargets(h *Host, i int) []target {
	if len(s.live) < 2 || s.opts.CrossLinks < 0 {
		return nil
	}
	out := make([]target, 0, s.opts.CrossLinks)
	for j := range s.opts.CrossLinks {
		x := mix(uint64(s.opts.Seed), uint64(h.index), uint64(i), uint64(j))
		o := s.live[x%uint64(len(s.live)-1)]
		if o.index >= h.index { // skip h itself: live is sorted by index
			o = s.live[x%uint64(len(s.live)-1)+1]
		}
		out = append(out, target{o, int((x >> 32) % uint64(o.spec.Pages))})
	}
	return out
}

// deadTargets walks a counter over all live pages so that consecutive pages
// link to consecutive dead URLs: every dead URL appears once the site has
// enough pages, and one page's dead links are distinct.
func (s *Site) deadTargets(h *Host, i int) []target {
	per := s.opts.DeadLinksPerPage
	if per <= 0 || len(s.dead) == 0 {
		return nil
	}
	out := make([]target, 0, per)
	nd := len(s.dead)
	for j := range per {
		c := (s.offset[h.index]+i)*per + j
		d := s.dead[c%nd]
		out = append(out, target{d, (c / nd) % d.spec.Pages})
	}
	return out
}

// mix hashes its arguments with the splitmix64 finalizer.
func mix(vals ...uint64) uint64 {
	z := uint64(0x9E3779B97F4A7C15)
	for _, v := range vals {
		z ^= v
		z += 0x9E3779B97F4A7C15
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		z ^= z >> 31
	}
	return z
}

// filler is the body text pages share: a fixed pseudo-random word salad, the
// same for every seed so page sizes do not depend on it.
var filler = makeFiller(8, 7)

// padding is the pool SiteOptions.PageBytes draws from: about 100 KB, more
// than a page's worth, so no paragraph repeats within a padded page.
var padding = makeFiller(256, 13)

func makeFiller(n int, seed uint64) []string {
	words := strings.Fields("crawl harbor tide wall stone wave anchor signal beacon ledger " +
		"archive index river bridge lantern compass chart voyage shelter current " +
		"keeper window garden orchard meadow quarry timber cable relay station")
	rng := rand.New(rand.NewPCG(seed, 11))
	out := make([]string, n)
	for p := range out {
		var b strings.Builder
		b.WriteString("<p>")
		for b.Len() < 420 {
			b.WriteString(words[rng.IntN(len(words))])
			b.WriteByte(' ')
		}
		b.WriteString("</p>\n")
		out[p] = b.String()
	}
	return out
}
