package demosite

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Behavior is how a host treats the requests it receives.
type Behavior int

// The behaviors a host can have. The zero value is Healthy.
const (
	// Healthy serves every page normally.
	Healthy Behavior = iota
	// Dead accepts TCP connections and never answers; each connection is held
	// open until the client gives up or the Site closes.
	Dead
	// Recovering answers 503 until RecoverAfter has passed since Start, then
	// behaves as Healthy.
	Recovering
	// Refusing answers 403 with a body and an X-Block-Reason header naming the
	// crawler (HostSpec.RefuseToken).
	Refusing
	// Flaky fails each request with 500 with probability FlakyRate, drawn from
	// an RNG seeded by SiteOptions.Seed and the host's position.
	Flaky
	// Throttling answers 429 with Retry-After when requests arrive faster than
	// MaxRPS, and otherwise behaves as Healthy.
	Throttling
)

// Defaults applied to zero-valued HostSpec fields.
const (
	DefaultFlakyRate         = 0.3
	DefaultRetryAfterSeconds = 2
	DefaultMaxRPS            = 2.0
	DefaultRefuseToken       = "breakwater"
)

var behaviorNames = [...]string{"healthy", "dead", "recovering", "refusing", "flaky", "throttling"}

// String returns the lower-case name of b, e.g. "flaky".
func (b Behavior) String() string {
	if b < 0 || int(b) >= len(behaviorNames) {
		return "behavior(" + strconv.Itoa(int(b)) + ")"
	}
	return behaviorNames[b]
}

// hostState is the mutable per-host state behind the behaviors that need it.
type hostState struct {
	mu     sync.Mutex
	rng    *rand.Rand  // Flaky
	window []time.Time // Throttling: times of requests let through, oldest first
}

// gate applies the host's behavior to one request at now. It reports whether
// the request was answered here (status, headers set, body in buf); when it
// returns false the request proceeds to the page router.
func (h *Host) gate(hdr http.Header, buf *bytes.Buffer, now time.Time) (int, bool) {
	switch h.spec.Behavior {
	case Recovering:
		if now.Before(h.site.started.Add(h.spec.RecoverAfter)) {
			return plain(hdr, buf, http.StatusServiceUnavailable, "Service unavailable: warming up, try again later.\n"), true
		}
	case Refusing:
		tok := h.spec.RefuseToken
		hdr.Set("X-Block-Reason", tok)
		msg := fmt.Sprintf("Access denied: %s is not welcome here. Contact webmaster@%s.example to request access.\n", tok, h.Name)
		return plain(hdr, buf, http.StatusForbidden, msg), true
	case Flaky:
		if h.flakyFails() {
			return plain(hdr, buf, http.StatusInternalServerError, "Internal server error.\n"), true
		}
	case Throttling:
		if !h.throttleAllows(now) {
			hdr.Set("Retry-After", strconv.Itoa(h.spec.RetryAfterSeconds))
			return plain(hdr, buf, http.StatusTooManyRequests, "Too many requests: slow down.\n"), true
		}
	}
	return 0, false
}

func (h *Host) flakyFails() bool {
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	return h.state.rng.Float64() < h.spec.FlakyRate
}

// throttleAllows keeps a sliding window of the requests let through. Below one
// request per second the window stretches to 1/MaxRPS so that fractional rates
// still admit one request per window rather than none.
func (h *Host) throttleAllows(now time.Time) bool {
	window, limit := time.Second, int(h.spec.MaxRPS)
	if h.spec.MaxRPS < 1 {
		window, limit = time.Duration(float64(time.Second)/h.spec.MaxRPS), 1
	}
	h.state.mu.Lock()
	defer h.state.mu.Unlock()
	cut := 0
	for cut < len(h.state.window) && now.Sub(h.state.window[cut]) >= window {
		cut++
	}
	h.state.window = append(h.state.window[:0], h.state.window[cut:]...)
	if len(h.state.window) >= limit {
		return false
	}
	h.state.window = append(h.state.window, now)
	return true
}

// resolveSpec fills defaults into spec and rejects values that make no sense.
func resolveSpec(spec HostSpec, i int) (HostSpec, error) {
	if spec.Name == "" {
		spec.Name = "host-" + strconv.Itoa(i)
	}
	if spec.Pages < 1 {
		spec.Pages = 1
	}
	if spec.Behavior < Healthy || spec.Behavior > Throttling {
		return spec, fmt.Errorf("host %q: unknown behavior %d", spec.Name, int(spec.Behavior))
	}
	if spec.FlakyRate == 0 {
		spec.FlakyRate = DefaultFlakyRate
	}
	if spec.FlakyRate < 0 || spec.FlakyRate > 1 || math.IsNaN(spec.FlakyRate) {
		return spec, fmt.Errorf("host %q: flaky rate %v outside [0,1]", spec.Name, spec.FlakyRate)
	}
	if spec.RetryAfterSeconds <= 0 {
		spec.RetryAfterSeconds = DefaultRetryAfterSeconds
	}
	if spec.MaxRPS == 0 {
		spec.MaxRPS = DefaultMaxRPS
	}
	if spec.MaxRPS < 0 || math.IsNaN(spec.MaxRPS) || math.IsInf(spec.MaxRPS, 0) {
		return spec, fmt.Errorf("host %q: max rps %v must be positive", spec.Name, spec.MaxRPS)
	}
	if spec.RefuseToken == "" {
		spec.RefuseToken = DefaultRefuseToken
	}
	return spec, nil
}

// blackhole is a Dead host: a raw accept loop whose connections never get an
// answer. It reads and discards what the client sends only to learn when the
// client hangs up, so abandoned connections release their descriptors instead
// of piling up in CLOSE_WAIT during a long crawl.
type blackhole struct {
	ln     net.Listener
	onConn func()
	wg     sync.WaitGroup
	mu     sync.Mutex
	closed bool
	conns  map[net.Conn]struct{}
	held   time.Duration // summed over connections the client has closed
}

func newBlackhole(ln net.Listener, onConn func()) *blackhole {
	return &blackhole{ln: ln, onConn: onConn, conns: make(map[net.Conn]struct{})}
}

func (b *blackhole) serve() {
	b.wg.Add(1)
	go b.acceptLoop()
}

func (b *blackhole) acceptLoop() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Out of descriptors or similar: back off instead of spinning.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !b.track(c) {
			return
		}
		b.onConn()
	}
}

// track registers c and starts holding it; it reports false once closed.
func (b *blackhole) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		_ = c.Close()
		return false
	}
	b.conns[c] = struct{}{}
	b.wg.Add(1)
	go b.hold(c)
	return true
}

func (b *blackhole) hold(c net.Conn) {
	defer b.wg.Done()
	start := time.Now()
	_, _ = io.Copy(io.Discard, c)
	b.mu.Lock()
	delete(b.conns, c)
	b.held += time.Since(start)
	b.mu.Unlock()
	_ = c.Close()
}

// heldTime is how long clients kept connections open, summed over the
// connections they have closed.
func (b *blackhole) heldTime() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.held
}

func (b *blackhole) open() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}

func (b *blackhole) close() error {
	err := b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		_ = c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// demoRobots disallows the private page every demo host links from "/".
const demoRobots = "User-agent: *\nDisallow: /private/\n"

// DemoSpecs returns the site `breakwater demo` crawls: three healthy hosts of
// 40 pages (each with a robots.txt disallowing a linked /private/ page), a
// dead host with 100 distinct linked URLs, a host that recovers after 20 s, a
// host refusing "breakwater" with 403, a 30%-flaky host and a throttling host.
// Serve it with DemoOptions so live pages actually link to the dead host.
func DemoSpecs() []HostSpec {
	healthy := func(name string) HostSpec {
		return HostSpec{Name: name, Pages: 40, Robots: demoRobots, PrivatePage: true}
	}
	return []HostSpec{
		healthy("alpha"),
		healthy("bravo"),
		healthy("charlie"),
		{Name: "deadend", Pages: 100, Behavior: Dead},
		{Name: "phoenix", Pages: 20, Behavior: Recovering, RecoverAfter: 20 * time.Second},
		{Name: "gatekeeper", Pages: 10, Behavior: Refusing, RefuseToken: DefaultRefuseToken},
		{Name: "wobbly", Pages: 20, Behavior: Flaky, FlakyRate: 0.3},
		{Name: "slowpoke", Pages: 20, Behavior: Throttling, MaxRPS: 2, RetryAfterSeconds: 2},
	}
}

// DemoOptions returns the options DemoSpecs is meant to be served with: the
// default link counts plus one dead link per live page (190 live pages cover
// the dead host's 100 URLs).
func DemoOptions(seed int64) SiteOptions {
	return SiteOptions{LinksPerPage: 5, CrossLinks: 2, DeadLinksPerPage: 1, Seed: seed}
}

// BenchSpecs returns hosts healthy hosts of pages pages each, named
// "bench-000"…, plus, when dead is set, one Dead host "bench-dead" with
// deadURLs distinct URLs. Live pages link to the dead host only when
// SiteOptions.DeadLinksPerPage is set.
func BenchSpecs(hosts, pages int, dead bool, deadURLs int) []HostSpec {
	specs := make([]HostSpec, 0, hosts+1)
	for i := range hosts {
		specs = append(specs, HostSpec{Name: fmt.Sprintf("bench-%03d", i), Pages: pages})
	}
	if dead {
		specs = append(specs, HostSpec{Name: "bench-dead", Pages: deadURLs, Behavior: Dead})
	}
	return specs
}
