package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// The fleet frontier when its Redis goes away mid-crawl: killed (SIGKILL)
// and started again on the same port and append-only file, or restarted
// with SIGTERM. Nothing may be lost: every URL ends with its result, the
// process says once that it lost the store and once that it is back, and
// hands out no new lease in between.

// trLog collects a logger's records.
type trLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *trLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *trLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.recs = append(l.recs, r.Clone())
	l.mu.Unlock()
	return nil
}
func (l *trLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *trLog) WithGroup(string) slog.Handler      { return l }

// count is how many records at level start with msg.
func (l *trLog) count(level slog.Level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.Level == level && strings.HasPrefix(r.Message, msg) {
			n++
		}
	}
	return n
}

func (l *trLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.recs {
		fmt.Fprintf(&b, "%s %s %s", r.Time.Format("15:04:05.000"), r.Level, r.Message)
		r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s=%v", a.Key, a.Value); return true })
		b.WriteByte('\n')
	}
	return b.String()
}

const (
	trLost = "lost the store"
	trBack = "the store is back"
)

// trCrawl runs workers on f until the frontier ends, as a crawl would:
// every lease holds for hold, then completes as a page that links to two
// other pages of its host (mostly known already). It records when every
// lease was handed out.
type trCrawl struct {
	f    *Frontier
	hold time.Duration

	mu     sync.Mutex
	leases map[string]int
	times  []time.Time
	done   int
}

func (c *trCrawl) run(ctx context.Context, workers, pages int) error {
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := c.f.Next(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				c.mu.Lock()
				c.leases[l.Item.URL]++
				c.times = append(c.times, time.Now())
				c.mu.Unlock()
				time.Sleep(c.hold)
				var n int
				fmt.Sscanf(l.Item.URL[strings.LastIndex(l.Item.URL, "/")+1:], "%d", &n)
				found := []store.Item{
					ftItem(l.Item.Host, fmt.Sprintf("/p/%d", (n+1)%pages)),
					ftItem(l.Item.Host, fmt.Sprintf("/p/%d", (n*7+3)%pages)),
				}
				r := store.Result{URL: l.Item.URL, Host: l.Item.Host, Status: 200, FetchedAt: time.Now()}
				if err := c.f.Complete(l, &r, found); err != nil {
					errs[w] = err
					return
				}
				c.mu.Lock()
				c.done++
				c.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if !errors.Is(err, frontier.ErrExhausted) {
			return err
		}
	}
	return frontier.ErrExhausted
}

func (c *trCrawl) completed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// leasedWithin counts the leases handed out in [from, to).
func (c *trCrawl) leasedWithin(from, to time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, at := range c.times {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

// trSeeds are the seeds of a site of hosts hosts: every host's /p/0, the
// rest is found by crawling.
func trSeeds(hosts int) []store.Item {
	var items []store.Item
	for h := range hosts {
		items = append(items, ftItem(fmt.Sprintf("site%d.test", h), "/p/0"))
	}
	return items
}

// trCheckDone checks every page of the site has its result, and reports
// the URLs leased more than once.
func trCheckDone(t *testing.T, s *Store, c *trCrawl, hosts, pages int) (twice int) {
	t.Helper()
	res := ftResults(t, s)
	for h := range hosts {
		for p := range pages {
			u := fmt.Sprintf("http://site%d.test/p/%d", h, p)
			if res[u] != 1 {
				t.Errorf("%s: %d results stored, want 1 (lost)", u, res[u])
			}
			if n := c.leases[u]; n > 2 {
				t.Errorf("%s leased %d times, want at most twice", u, n)
			} else if n == 2 {
				twice++
			}
		}
	}
	if len(res) != hosts*pages {
		t.Errorf("%d results, want %d", len(res), hosts*pages)
	}
	cn, err := s.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if cn.Seen != int64(hosts*pages) || cn.Fetched != int64(hosts*pages) || cn.Queued != 0 || cn.Failed != 0 {
		t.Errorf("counts %+v, want %d seen and fetched, nothing queued or failed", cn, hosts*pages)
	}
	return twice
}

func trFrontier(s *Store, log *trLog, lease time.Duration) *Frontier {
	return OpenFrontier(s, FrontierOptions{ID: "p1", Lease: lease, Hosts: 16, Buffer: 8,
		Breakers: NewBreakers(s.Client(), breaker.Config{}), Logger: slog.New(log)})
}

// TestFrontierStoreKilled: Redis is killed mid-crawl and started again on
// the same port and files after 1.5 s.
func TestFrontierStoreKilled(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAppendOnly())
	s := ftStore(t, srv.URL())
	log := &trLog{}
	f := trFrontier(s, log, 5*time.Second)
	const hosts, pages = 8, 40
	if err := f.Add(trSeeds(hosts)...); err != nil {
		t.Fatal(err)
	}
	c := &trCrawl{f: f, hold: 15 * time.Millisecond, leases: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- c.run(ctx, 8, pages) }()

	waitUntil(t, 10*time.Second, "a third of the crawl is done", func() bool { return c.completed() >= hosts*pages/3 })
	srv.Kill()
	killedAt := time.Now()
	atKill := c.completed()
	waitUntil(t, 2*time.Second, "the frontier sees the store down", f.Down)
	seenDown := time.Since(killedAt)
	time.Sleep(1500 * time.Millisecond)
	restartAt := time.Now()
	srv.Restart(t) // after Kill: starts it again on the same port and directory
	upAt := time.Now()
	duringOutage := c.completed() - atKill
	waitUntil(t, 10*time.Second, "the frontier sees the store back", func() bool { return !f.Down() })
	seenUp := time.Since(upAt)

	if err := <-ended; !errors.Is(err, frontier.ErrExhausted) {
		t.Fatalf("the crawl ended with %v, want frontier.ErrExhausted\n%s", err, log)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := log.count(slog.LevelError, trLost); n != 1 {
		t.Errorf("%d %q errors, want 1\n%s", n, trLost, log)
	}
	if n := log.count(slog.LevelInfo, trBack); n != 1 {
		t.Errorf("%d %q lines, want 1\n%s", n, trBack, log)
	}
	// Once the outage is seen, no new lease until the store is back.
	if n := c.leasedWithin(killedAt.Add(seenDown).Add(100*time.Millisecond), restartAt); n > 0 {
		t.Errorf("%d leases handed out while the store was down", n)
	}
	twice := trCheckDone(t, s, c, hosts, pages)
	t.Logf("killed after %d of %d pages; down seen after %s; %d leases ended while down; back seen %s after the restart; %d URLs leased twice",
		atKill, hosts*pages, seenDown.Round(time.Millisecond), duringOutage, seenUp.Round(time.Millisecond), twice)
}

// TestFrontierStoreRestarted: Redis is restarted (SIGTERM, its
// append-only file written out) mid-crawl.
func TestFrontierStoreRestarted(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAppendOnly())
	s := ftStore(t, srv.URL())
	log := &trLog{}
	f := trFrontier(s, log, 5*time.Second)
	const hosts, pages = 8, 40
	if err := f.Add(trSeeds(hosts)...); err != nil {
		t.Fatal(err)
	}
	c := &trCrawl{f: f, hold: 15 * time.Millisecond, leases: map[string]int{}}
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	ended := make(chan error, 1)
	go func() { ended <- c.run(ctx, 8, pages) }()

	waitUntil(t, 10*time.Second, "a third of the crawl is done", func() bool { return c.completed() >= hosts*pages/3 })
	atRestart := c.completed()
	srv.Restart(t)
	if err := <-ended; !errors.Is(err, frontier.ErrExhausted) {
		t.Fatalf("the crawl ended with %v, want frontier.ErrExhausted\n%s", err, log)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	lost, back := log.count(slog.LevelError, trLost), log.count(slog.LevelInfo, trBack)
	if lost > 1 || back != lost {
		t.Errorf("%d %q and %d %q lines, want as many of each, at most one\n%s", lost, trLost, back, trBack, log)
	}
	twice := trCheckDone(t, s, c, hosts, pages)
	t.Logf("restarted after %d of %d pages; %d lost/back lines; %d URLs leased twice", atRestart, hosts*pages, lost, twice)
}

// TestFrontierCloseWaitsForStore: results completed while the store is
// down are stored by Close once it is back.
func TestFrontierCloseWaitsForStore(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAppendOnly())
	s := ftStore(t, srv.URL())
	log := &trLog{}
	f := trFrontier(s, log, 5*time.Second)
	items := ftSite(3, 2)
	if err := f.Add(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var leases []*frontier.Lease
	for len(leases) < 3 { // one per host
		l, err := f.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	srv.Kill()
	for _, l := range leases {
		r := store.Result{URL: l.Item.URL, Host: l.Item.Host, Status: 200}
		if err := f.Complete(l, &r, nil); err != nil {
			t.Fatalf("Complete while the store is down: %v", err)
		}
	}
	waitUntil(t, 2*time.Second, "the frontier sees the store down", f.Down)
	closed := make(chan error, 1)
	closeStart := time.Now()
	go func() { closed <- f.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with 3 results unstored and the store down", err)
	case <-time.After(time.Second):
	}
	srv.Restart(t)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return 10s after the store came back")
	}
	res := ftResults(t, s)
	for _, l := range leases {
		if res[l.Item.URL] != 1 {
			t.Errorf("%s, completed while the store was down, has %d results after Close", l.Item.URL, res[l.Item.URL])
		}
	}
	if n := log.count(slog.LevelError, trLost); n != 1 {
		t.Errorf("%d %q errors, want 1\n%s", n, trLost, log)
	}
	t.Logf("Close took %s (the store down for 1s of it)", time.Since(closeStart).Round(time.Millisecond))
}

// TestFrontierOutageWithNothingToWrite: the store goes away while the
// process has nothing in flight and nothing to write (its workers are
// between URLs), so that the manager, not the writer, sees it go. Once it
// is back the crawl must go on.
func TestFrontierOutageWithNothingToWrite(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAppendOnly())
	s := ftStore(t, srv.URL())
	log := &trLog{}
	f := trFrontier(s, log, 400*time.Millisecond) // renewals every 100ms: the manager sees the outage at once
	defer f.Close()
	items := ftSite(2, 3)
	if err := f.Add(items...); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the hosts are held", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		n := 0
		for _, h := range f.hosts {
			if h.loaded && len(h.buf) > 0 {
				n++
			}
		}
		return n == 2 && len(f.jobs) == 0 && f.writing == 0
	})
	srv.Kill()
	waitUntil(t, 3*time.Second, "the frontier sees the store down", f.Down)
	time.Sleep(500 * time.Millisecond)
	srv.Restart(t)
	upAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	c := &trCrawl{f: f, leases: map[string]int{}}
	err := c.run(ctx, 2, 3)
	if !errors.Is(err, frontier.ErrExhausted) {
		t.Fatalf("the crawl after the outage ended with %v (down %v), want frontier.ErrExhausted\n%s", err, f.Down(), log)
	}
	res := ftResults(t, s)
	for _, it := range items {
		if res[it.URL] != 1 {
			t.Errorf("%s: %d results", it.URL, res[it.URL])
		}
	}
	if n := log.count(slog.LevelInfo, trBack); n != 1 {
		t.Errorf("%d %q lines, want 1\n%s", n, trBack, log)
	}
	t.Logf("crawl done %s after the store came back", time.Since(upAt).Round(time.Millisecond))
}
