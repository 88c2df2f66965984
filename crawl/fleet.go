package crawl

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/store"
)

// A store several processes crawl at once (a fleet's, --store) runs this
// engine in every process. What changes is below the request path, and
// the store says it (Capabilities): its frontier hands a process the
// hosts it alone fetches, and each host's breaker is shared. The registry
// of each process still decides admissions from its copy of the breakers
// of the hosts it holds, so admitting a request costs no round trip;
// every outcome that can change a breaker goes to the shared breaker,
// which is the authority, and a half-open probe must also take the
// store's probe gate.

// FleetOptions tune a crawl of a store several processes crawl at once.
type FleetOptions struct {
	// ID names the process in the fleet; default HOSTNAME-SUFFIX, the
	// suffix random and kept across restarts (see defaultFleetID).
	ID string
	// Lease is how long a process holds a host without renewing it: a
	// process that dies gives its hosts back within a lease. Default 10s.
	Lease time.Duration
}

// needsCapability lists the options a store may lack the means for: a
// store without the capability refuses the option, all in one message.
var needsCapability = []struct {
	flag string
	set  func(o *Options) bool
	has  func(c store.Capabilities) bool
}{
	{"--recrawl-after", func(o *Options) bool { return o.RecrawlAfter > 0 }, func(c store.Capabilities) bool { return c.Refresh }},
	{"--retry-failed", func(o *Options) bool { return o.RetryFailed }, func(c store.Capabilities) bool { return c.RetryFailed }},
	{"--max-pages-per-host", func(o *Options) bool { return o.MaxPagesPerHost > 0 }, func(c store.Capabilities) bool { return c.HostPageCap }},
}

// ValidateFor refuses the options the store cannot carry out, and, on a
// store several processes crawl, a bad --fleet-id or --fleet-lease.
func (o *Options) ValidateFor(c store.Capabilities) error {
	if !c.SoleWriter {
		switch {
		case o.Fleet.ID != "" && !validFleetID(o.Fleet.ID):
			return fmt.Errorf("--fleet-id %q: use letters, digits, '.', '_' and '-' only (it names the process's WARC files)", o.Fleet.ID)
		case o.Fleet.Lease != 0 && o.Fleet.Lease < 100*time.Millisecond:
			return fmt.Errorf("--fleet-lease %s: at least 100ms", o.Fleet.Lease)
		}
	}
	for _, n := range needsCapability {
		if n.set(o) && !n.has(c) {
			return fmt.Errorf("%s is not supported with %s yet", n.flag, c.Name)
		}
	}
	return nil
}

func validFleetID(id string) bool {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return len(id) <= 64
}

// frontierConfig is what the store's frontier is opened with.
func (e *Engine) frontierConfig() frontier.Config {
	opts := e.opts
	cfg := frontier.Config{Process: e.processID(), HostConcurrency: opts.HostConcurrency, Workers: opts.Workers,
		Lease: opts.Fleet.Lease, RequestTimeout: opts.Timeout, Breaker: opts.breakerConfig(),
		OnClaim: e.claimed, OnBreaker: e.sharedBreaker, Now: opts.Now, Logger: opts.Logger}
	if e.archive != nil {
		cfg.Archive = e.archive
	}
	return cfg
}

// openFrontier opens the store's frontier.
func (e *Engine) openFrontier() (frontier.Queue, error) { return e.db.OpenFrontier(e.frontierConfig()) }

// processClaimer is a store several processes crawl, which makes sure no
// two of them run with one fleet ID: ClaimProcess fails while a live
// process holds cfg.Process.
type processClaimer interface {
	ClaimProcess(cfg frontier.Config) error
}

// claimProcess takes this process's fleet ID before anything is written
// under it (the archive's files and state, the leases).
func (e *Engine) claimProcess() error {
	c, ok := e.db.(processClaimer)
	if !ok {
		return nil
	}
	return c.ClaimProcess(e.frontierConfig())
}

// processID names this process among those crawling the store:
// --fleet-id, or HOSTNAME-SUFFIX (defaultFleetID).
func (e *Engine) processID() string {
	if e.opts.Fleet.ID == "" && e.caps.SoleWriter {
		// The one process of its store: the ID names nothing kept.
		host, _ := os.Hostname()
		e.opts.Fleet.ID = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if e.opts.Fleet.ID == "" {
		id, err := defaultFleetID(e.opts.WARC.Dir)
		if err != nil {
			e.log.Warn("keep the fleet ID's suffix for the next run: this run's ID is its own", "id", id, "err", err)
		}
		e.opts.Fleet.ID = id
	}
	return e.opts.Fleet.ID
}

// fleetSuffixFile is the name of the file that keeps the random suffix of
// the default fleet ID: in the WARC directory, whose files are named after
// the ID (a restart so finishes its predecessor's open file), or else in
// the user's state directory.
const fleetSuffixFile = ".breakwater-fleet-suffix"

// defaultFleetID is HOSTNAME-SUFFIX: SUFFIX is random, made at the first
// run and read back from fleetSuffixPath after, so that processes on one
// host name (containers on one host network all have PID 1) differ, and a
// process restarted keeps its ID. When the file cannot be kept, the ID is
// this run's alone, with the error.
func defaultFleetID(warcDir string) (string, error) {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		if validFleetID(string(r)) {
			return r
		}
		return '-'
	}, host)
	if host == "" {
		host = "breakwater"
	}
	host = host[:min(len(host), 50)]
	suffix, err := fleetSuffix(fleetSuffixPath(warcDir))
	return host + "-" + suffix, err
}

// fleetSuffixPath is where the default fleet ID's suffix is kept.
func fleetSuffixPath(warcDir string) string {
	if warcDir != "" {
		return filepath.Join(warcDir, fleetSuffixFile)
	}
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "breakwater", "fleet-suffix")
}

// fleetSuffix reads the suffix kept at path, or makes one and keeps it.
func fleetSuffix(path string) (string, error) {
	if path != "" {
		if data, err := os.ReadFile(path); err == nil {
			if s := strings.TrimSpace(string(data)); s != "" && len(s) <= 12 && validFleetID(s) {
				return s, nil
			}
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	if path == "" {
		return suffix, errors.New("no home directory for the fleet ID's suffix")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return suffix, fmt.Errorf("keep the fleet ID's suffix: %w", err)
	}
	if err := os.WriteFile(path, []byte(suffix+"\n"), 0o600); err != nil {
		return suffix, fmt.Errorf("keep the fleet ID's suffix: %w", err)
	}
	return suffix, nil
}

// sharedBreaker takes in a host's shared breaker: when the process takes
// the host, and when someone else changed it (a pause from the command
// line).
func (e *Engine) sharedBreaker(host string, b breaker.Breaker) {
	e.breakers.Load(host, b)
	e.syncHold(host)
}

// shareOutcome hands an outcome to the host's shared breaker, unless it
// cannot change it: an answer from a host whose breaker is clean (the
// common case, which so costs the store nothing).
func (e *Engine) shareOutcome(t breaker.Ticket, before breaker.Breaker, known bool, v Verdict, now time.Time) {
	if v.Class != breaker.Transient && v.Class != breaker.Refused && (!known || before.Clean()) {
		return
	}
	e.front.Outcome(t, v.Class, v.Detail, now)
}

// takeProbeGate takes the store's probe gate for a half-open probe: one
// process at a time probes a host, whatever its own registry admits.
func (e *Engine) takeProbeGate(t breaker.Ticket) bool {
	if !t.Probe {
		return true
	}
	won, err := e.front.TryProbe(t.Host, t.Generation)
	if err != nil {
		e.log.Warn("take the fleet's probe gate", "host", t.Host, "err", err)
		return false
	}
	return won
}
