package e2e

import (
	"breakwater/cli"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// crashSeed is the seed of a crash test's randomness: BREAKWATER_CRASH_SEED
// replays a failure, else a new one each run, logged.
func crashSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("BREAKWATER_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BREAKWATER_CRASH_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with BREAKWATER_CRASH_SEED=%d)", seed, seed)
	return seed
}

// killer runs the same crawl command again and again, each time killing
// it with SIGKILL at a moment of its choice, until it has killed enough
// or a run ends by itself.
type killer struct {
	t       *testing.T
	bin     string
	site    *crashSite
	warcDir string
	db      string
	rng     *rand.Rand
	kills   []time.Time    // when each SIGKILL was sent
	modes   map[string]int // kills by what chose the moment
}

// The moments a kill is sent at.
const (
	killBurst    = "burst"    // right after a burst of page requests: their results wait in a commit
	killRotation = "rotation" // the moment a new WARC file appears: the old one just finished
	killTime     = "time"     // a random time after the start: recovery, seeds, the first commits
)

// pass runs args until want kills have been sent and then once more to
// its end, which must be exit 0. It checks the file's invariants after
// every kill.
func (k *killer) pass(args []string, want int) {
	t := k.t
	for n := 0; n < want; n++ {
		p := startProc(t, k.bin, args...)
		mode := k.moment(p)
		if mode == "" { // the run ended by itself: the crawl is done
			if o := outcomeOf(<-p.exited); !finished(o, p) {
				t.Fatalf("run ended before its kill with %+v:\n%s", o, p.output())
			}
			t.Logf("the crawl ended after %d of the %d kills wanted in this pass", n, want)
			return
		}
		at := time.Now() // before the signal: see duplicates
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		o := outcomeOf(<-p.exited)
		if o.signal != syscall.SIGKILL {
			// Ended by itself just before the kill: only a clean end will do.
			if !finished(o, p) {
				t.Fatalf("run ended with %+v:\n%s", o, p.output())
			}
			return
		}
		k.kills = append(k.kills, at)
		k.modes[mode]++
		if fileExists(k.db) { // a kill before the file was made leaves none
			verifyClean(t, k.db, "")
		}
		if t.Failed() {
			t.Fatalf("after kill %d (%s): the file is not clean; stderr:\n%s", len(k.kills), mode, p.stderr.String())
		}
	}
	p := startProc(t, k.bin, args...)
	if o := p.wait(t, 30*time.Second); !finished(o, p) {
		t.Fatalf("last run of the pass: %+v\n%s", o, p.output())
	}
}

// finished reports whether a run ended with the crawl done: exit 0, or 4
// when what the run itself finished all failed (the last URLs a resume
// finds can be the dead host's).
func finished(o outcome, p *proc) bool {
	return o.code == cli.ExitOK || (o.code == cli.ExitFailed && strings.Contains(p.stdout.String(), "crawl finished"))
}

// moment waits for the moment to kill p and names what chose it, or
// returns "" if p ended first.
func (k *killer) moment(p *proc) string {
	deadline := time.Now().Add(15 * time.Second)
	mode := []string{killBurst, killBurst, killRotation, killTime}[k.rng.IntN(4)]
	before := k.site.requests()
	burst := before + 1 + k.rng.IntN(12)
	openAt := openWARC(k.warcDir)
	at := p.started.Add(time.Duration(k.rng.IntN(300)) * time.Millisecond)
	for {
		select {
		case err := <-p.exited:
			p.exited <- err // for the caller
			return ""
		default:
		}
		now := time.Now()
		switch {
		case mode == killBurst && k.site.requests() >= burst:
			return mode
		case mode == killRotation && openWARC(k.warcDir) != openAt && openWARC(k.warcDir) != "":
			return mode
		case mode == killRotation && now.Sub(p.started) > 800*time.Millisecond:
			return killTime // no rotation came: a time kill all the same
		case mode == killTime && !now.Before(at):
			return mode
		case now.After(deadline):
			p.cmd.Process.Kill()
			k.t.Fatalf("no moment to kill came in 15s (%s):\n%s", mode, p.output())
		}
		time.Sleep(time.Millisecond)
	}
}

// openWARC is the name of the unfinished WARC file in dir, if any.
func openWARC(dir string) string {
	for _, n := range dirNames(dir) {
		if strings.HasSuffix(n, ".open") {
			return n
		}
	}
	return ""
}

// TestCrashConsistency kills a real crawl with SIGKILL at random moments,
// at least 20 times, and restarts it with the same command each time: a
// first pass over a site with a dead, a flaky and a throttling host, WARC
// on with files rotated at the smallest --warc-size (1 MiB; the bulky
// hosts fill a few), then a recrawl pass over the same site. After every kill the file is consistent; after each pass every
// page has its result, nothing discovered is left behind, every page
// answered twice was answered again only after a kill caught its first
// answer in flight, and the archive holds each stored answer exactly once.
func TestCrashConsistency(t *testing.T) {
	start := time.Now()
	bin := buildBinary(t)
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 16))
	site := startCrashSite(t, 5, 100, 2, 40, int64(seed%1000))
	dir := t.TempDir()
	db, warcDir := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "warc")
	k := &killer{t: t, bin: bin, site: site, warcDir: warcDir, db: db, rng: rng, modes: map[string]int{}}
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576")

	// Pass 1: the whole site, fetched for the first time.
	pass1 := time.Now()
	k.pass(args, 18)
	end1 := time.Now()
	kills1 := len(k.kills)
	rep := verifyClean(t, db, warcDir)
	first := checkSiteDone(t, db, site)
	stored := map[string]int{} // URL -> answers stored for it, one per pass
	for u, r := range first {
		if archived(r) {
			stored[u]++
		}
	}
	archivedOnce(t, rep, stored)
	dups1, most1, kill1, lag1 := duplicates(t, site.answers(pass1, end1), k.kills)
	if t.Failed() {
		t.Fatalf("after the first pass (%d kills %v)", kills1, k.modes)
	}

	// Pass 2: a recrawl of every page stored, once all are older than
	// after. Two pages change meanwhile: they are answered 200, the rest
	// 304. The pass must take less than after, or pages refreshed early in
	// it would be due again before its end.
	const after = 6 * time.Second
	changed := site.Hosts()[0]
	changed.Change(1, 2)
	site.bulky[0].change()
	time.Sleep(time.Until(end1.Add(after)))
	pass2 := time.Now()
	k.pass(crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576", "--recrawl-after", after.String()), 5)
	end2 := time.Now()
	if end2.Sub(pass2) >= after {
		t.Logf("the recrawl pass took %s, more than --recrawl-after %s: pages may be refreshed twice", end2.Sub(pass2), after)
	}
	rep = verifyClean(t, db, warcDir)
	second := checkSiteDone(t, db, site)
	for u, r := range second {
		if old := first[u]; archived(r) && (old == nil || r.FetchedAt.After(old.FetchedAt)) {
			stored[u]++
		}
	}
	for _, i := range []int{1, 2} {
		if r, old := second[changed.PageURL(i)], first[changed.PageURL(i)]; r == nil || old == nil || r.Status != 200 || r.SHA256 == old.SHA256 {
			t.Errorf("changed page %s: %+v, want it fetched anew", changed.PageURL(i), r)
		}
	}
	refreshed := 0
	for u := range second {
		if stored[u] == 2 {
			refreshed++
		}
	}
	if refreshed < len(site.pages())/2 {
		t.Errorf("the recrawl pass refreshed %d of the site's %d pages", refreshed, len(site.pages()))
	}
	archivedOnce(t, rep, stored)
	dups2, most2, kill2, lag2 := duplicates(t, site.answers(pass2, end2), k.kills)

	kills := len(k.kills)
	if kills < 20 {
		t.Errorf("only %d kills: the site is too small for the test", kills)
	}
	// Each kill catches at most the leases in flight (one per worker) and
	// the answers of the commit being gathered; per URL, one per kill.
	if most1 > kills1 || most2 > kills-kills1 {
		t.Errorf("one URL fetched again %d times in the first pass (%d kills), %d in the recrawl (%d kills)",
			most1, kills1, most2, kills-kills1)
	}
	files := 0
	for _, n := range dirNames(warcDir) {
		if strings.HasSuffix(n, ".warc.gz") {
			files++
		}
	}
	t.Logf("%d kills (%d in the first pass, %d in the recrawl; by moment %v); fetched again: %d pages (at most %d times one) "+
		"and %d by one kill in the first pass, %d (at most %d, %d by one kill) in the recrawl; "+
		"the longest from a caught answer to its kill %s; %d WARC files, records %v; %d pages refreshed; wall %s",
		kills, kills1, kills-kills1, k.modes, dups1, most1, kill1, dups2, most2, kill2, max(lag1, lag2).Round(time.Millisecond), files, rep.Records, refreshed,
		time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.Logf("replay the kill schedule with BREAKWATER_CRASH_SEED=%d", seed)
	}
}

// TestSIGTERMUnderLoad stops a crawl with SIGTERM three times while it
// fetches (requests to the dead host hanging, WARC records being
// written): each run exits within --timeout + 5 s with exit code 3 and
// says it was stopped by a signal, and nothing is lost or fetched twice:
// what a run had answered is committed before it exits, and the resume
// completes with the file and archive clean.
func TestSIGTERMUnderLoad(t *testing.T) {
	start := time.Now()
	bin := buildBinary(t)
	site := startCrashSite(t, 5, 40, 2, 40, 7)
	dir := t.TempDir()
	db, warcDir := filepath.Join(dir, "crawl.db"), filepath.Join(dir, "warc")
	const timeout = 2 * time.Second
	args := crashArgs(db, site, "--warc", warcDir, "--warc-size", "1048576", "--timeout", timeout.String())
	var stops []time.Duration
	for len(stops) < 3 {
		p := startProc(t, bin, args...)
		burst := site.requests() + 40
		for site.requests() < burst {
			select {
			case err := <-p.exited:
				t.Fatalf("run %d ended before its SIGTERM (%+v):\n%s", len(stops)+1, outcomeOf(err), p.output())
			case <-time.After(time.Millisecond):
			}
		}
		sent := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		o := p.wait(t, timeout+15*time.Second)
		took := time.Since(sent)
		stops = append(stops, took.Round(time.Millisecond))
		if took > timeout+5*time.Second {
			t.Errorf("run %d exited %s after SIGTERM, more than --timeout %s + 5s", len(stops), took, timeout)
		}
		if o.code != cli.ExitWorkLeft || !strings.Contains(p.stdout.String(), "stopped by a signal") {
			t.Fatalf("run %d after SIGTERM: %+v, want exit %d and the reason:\n%s", len(stops), o, cli.ExitWorkLeft, p.output())
		}
		// A clean stop finishes its WARC file; the archive is read back
		// once, at the end.
		verifyClean(t, db, "")
		if open := openWARC(warcDir); open != "" {
			t.Errorf("run %d left %s unfinished", len(stops), open)
		}
	}
	p := startProc(t, bin, args...)
	if o := p.wait(t, 30*time.Second); !finished(o, p) {
		t.Fatalf("resume after the stops: %+v\n%s", o, p.output())
	}
	rep := verifyClean(t, db, warcDir)
	res := checkSiteDone(t, db, site)
	stored := map[string]int{}
	for u, r := range res {
		if archived(r) {
			stored[u]++
		}
	}
	archivedOnce(t, rep, stored)
	// No kill: every page answered twice is a result a clean stop lost.
	dups, _, _, _ := duplicates(t, site.answers(start, time.Now()), nil)
	t.Logf("exits %v after SIGTERM (--timeout %s); %d pages fetched twice; wall %s",
		stops, timeout, dups, time.Since(start).Round(time.Millisecond))
}
