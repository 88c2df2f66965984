package e2e

// A fleet crawl with --warc killed again and again: every done page stays
// in its process's WARC files where the store placed it, and
// `verify --store --warc` says so, or finds what was damaged.

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"breakwater/cli"
	"breakwater/redisstore/redistest"
)

// slowLink forwards loopback connections to a Redis server, holding
// each chunk a client sends for delay first: every round trip of a
// process takes at least that long, so a kill lands between two round
// trips of one write far more often than on a bare loopback.
type slowLink struct {
	l     net.Listener
	delay time.Duration
	wg    sync.WaitGroup
}

func startSlowLink(t testing.TB, target string, delay time.Duration) *slowLink {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &slowLink{l: l, delay: delay}
	s.wg.Add(1)
	go s.accept(target)
	t.Cleanup(func() { l.Close(); s.wg.Wait() })
	return s
}

func (s *slowLink) url() string { return "redis://" + s.l.Addr().String() + "/0" }

func (s *slowLink) accept(target string) {
	defer s.wg.Done()
	for {
		c, err := s.l.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			continue
		}
		s.wg.Add(2)
		go func() { // client -> server, delayed
			defer s.wg.Done()
			defer up.Close()
			buf := make([]byte, 64<<10)
			for {
				n, err := c.Read(buf)
				if n > 0 {
					time.Sleep(s.delay)
					if _, werr := up.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					return
				}
			}
		}()
		go func() { // server -> client
			defer s.wg.Done()
			defer c.Close()
			io.Copy(c, up)
		}()
	}
}

// fleetVerifyReport is what `verify --store --json` prints, the parts the
// tests read.
type fleetVerifyReport struct {
	OK                bool     `json:"ok"`
	Problems          []string `json:"problems"`
	Pages             int64    `json:"pages"`
	ArchivePlaced     int64    `json:"archive_placed"`
	ArchivedElsewhere int64    `json:"archived_elsewhere"`
	ArchiveExtra      int64    `json:"archive_extra"`
}

// fleetVerify runs `verify --store URL --warc DIR...` and returns its
// exit code and report.
func fleetVerify(t testing.TB, storeURL string, dirs ...string) (int, fleetVerifyReport) {
	t.Helper()
	args := []string{"verify", "--store", storeURL, "--json"}
	for _, d := range dirs {
		args = append(args, "--warc", d)
	}
	r := runCLI(t, context.Background(), args...)
	var rep fleetVerifyReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("breakwater %s: not JSON: %v\n%s", strings.Join(args, " "), err, r)
	}
	return r.code, rep
}

// TestFleetArchiveKills runs two processes of a fleet, each writing WARC
// files to its own directory (one per machine), and kills one of them
// with SIGKILL at a random moment again and again, restarting it with
// its --fleet-id; the store is reached through a link that slows every
// round trip, so kills land inside a batch's write. Once the crawl ends,
// `verify --store --warc` of both directories is clean: every page is
// done, and each done page is in the archive exactly where the store
// placed it; the records of pages archived again after a kill are only
// counted. Each directory alone checks its own process's pages and
// counts the other's.
func TestFleetArchiveKills(t *testing.T) {
	bin := buildBinary(t)
	seed := crashSeed(t)
	rng := rand.New(rand.NewPCG(seed, 28))
	rs := redistest.Start(t)
	link := startSlowLink(t, rs.Addr, 5*time.Millisecond)
	const nHosts, pages = 6, 80
	_, seeds, answers := startLinkHosts(t, nHosts, pages, 20*time.Millisecond)
	dir := t.TempDir()
	dirs := map[string]string{"p1": filepath.Join(dir, "m1"), "p2": filepath.Join(dir, "m2")}
	argsOf := func(id string) []string {
		a := fleetArgs(link.url(), []string{"--host-concurrency", "1", "--delay", "20ms", "--warc", dirs[id]}, seeds...)
		return append([]string{a[0], "--fleet-id", id, "--user-agent", fleetUA(id)}, a[1:]...)
	}
	// p2 joins once p1 crawls: the seeds are stored, so neither can find
	// the crawl over before it began.
	running := map[string]*proc{"p1": startProc(t, bin, argsOf("p1")...)}
	for start := time.Now(); answers() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			running["p1"].cmd.Process.Kill()
			t.Fatalf("p1 answered nothing in 30s:\n%s", running["p1"].output())
		}
	}
	running["p2"] = startProc(t, bin, argsOf("p2")...)
	const want = 14
	kills := 0
	deadline := time.Now().Add(3 * time.Minute)
	for kills < want && len(running) > 0 && time.Now().Before(deadline) {
		// A random moment once pages are answered since the last kill (the
		// restarted process has claimed its ID and crawls again): right
		// after a burst of answers whose results are on their way, or a
		// little later.
		burst := answers() + 2 + rng.IntN(20)
		for start := time.Now(); answers() < burst && time.Since(start) < 20*time.Second; {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		for id, p := range running { // a process done by itself is not restarted
			select {
			case err := <-p.exited:
				p.exited <- err
				if o := p.wait(t, time.Second); !finished(o, p) {
					t.Fatalf("%s ended by itself with %+v:\n%s", id, o, p.output())
				}
				delete(running, id)
			default:
			}
		}
		ids := []string{}
		for id := range running {
			ids = append(ids, id)
		}
		if len(ids) == 0 {
			break
		}
		id := ids[rng.IntN(len(ids))]
		p := running[id]
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if o := outcomeOf(<-p.exited); o.signal != syscall.SIGKILL {
			if !finished(o, p) {
				t.Fatalf("%s ended with %+v:\n%s", id, o, p.output())
			}
			delete(running, id)
			continue
		}
		kills++
		running[id] = startProc(t, bin, argsOf(id)...)
	}
	t.Logf("%d kills; %d page answers", kills, answers())
	// Both run once more to the crawl's end.
	for _, id := range []string{"p1", "p2"} {
		p := running[id]
		if p == nil {
			p = startProc(t, bin, argsOf(id)...)
		}
		if o := p.wait(t, 2*time.Minute); !finished(o, p) {
			t.Fatalf("%s's last run: %+v\n%s", id, o, p.output())
		}
	}
	if kills < want/2 {
		t.Errorf("only %d kills before the crawl ended, want at least %d: the site is too small for the machine", kills, want/2)
	}

	code, rep := fleetVerify(t, rs.URL(), dirs["p1"], dirs["p2"])
	if code != cli.ExitOK || !rep.OK {
		t.Fatalf("verify --store --warc of both directories after %d kills: exit %d, %+v", kills, code, rep)
	}
	if rep.Pages != nHosts*pages || rep.ArchivePlaced != rep.Pages || rep.ArchivedElsewhere != 0 {
		t.Errorf("%d pages done, %d found where placed, %d elsewhere; want all %d where placed",
			rep.Pages, rep.ArchivePlaced, rep.ArchivedElsewhere, nHosts*pages)
	}
	t.Logf("%d records archived again after a kill (counted, not problems)", rep.ArchiveExtra)
	text := mustRun(t, cli.ExitOK, "verify", "--store", rs.URL(), "--warc", dirs["p1"], "--warc", dirs["p2"])
	if want := strconv.FormatInt(rep.Pages, 10) + " done pages found where the store placed them"; !strings.Contains(text.stdout, want) ||
		!strings.HasSuffix(text.stdout, "ok\n") {
		t.Errorf("verify's report does not say %q and ok:\n%s", want, text.stdout)
	}
	var alone int64
	for _, id := range []string{"p1", "p2"} {
		code, one := fleetVerify(t, rs.URL(), dirs[id])
		if code != cli.ExitOK || one.ArchivePlaced+one.ArchivedElsewhere != rep.Pages {
			t.Errorf("verify --store --warc %s: exit %d, %+v; want ok, every page counted here or elsewhere", dirs[id], code, one)
		}
		alone += one.ArchivePlaced
	}
	if alone != rep.Pages {
		t.Errorf("each directory alone finds %d pages in all, want %d: each page in one", alone, rep.Pages)
	}

	// Damage: a placement the store names that holds another page's
	// records, a record altered, a file cut short. Each is found, exit 1.
	files, _ := filepath.Glob(filepath.Join(dirs["p1"], "*.warc.gz"))
	if len(files) == 0 {
		t.Fatalf("no finished WARC file in %s: %v", dirs["p1"], dirNames(dirs["p1"]))
	}
	damage := []struct {
		name, want string
		do         func(t *testing.T) (undo func())
	}{
		{"a placement moved to another record", "where the store placed it", func(t *testing.T) func() {
			return movePlacement(t, rs)
		}},
		{"a record altered", "archive", func(t *testing.T) func() {
			return rewriteFile(t, files[0], func(b []byte) []byte { b[len(b)/2] ^= 0x55; return b })
		}},
		{"a file cut short", "archive", func(t *testing.T) func() {
			return rewriteFile(t, files[0], func(b []byte) []byte { return b[:len(b)*2/3] })
		}},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			undo := d.do(t)
			defer undo()
			code, rep := fleetVerify(t, rs.URL(), dirs["p1"], dirs["p2"])
			if code != cli.ExitError || rep.OK || !strings.Contains(strings.Join(rep.Problems, "\n"), d.want) {
				t.Errorf("verify after %s: exit %d, %+v; want exit %d and a problem saying %q", d.name, code, rep, cli.ExitError, d.want)
			}
		})
	}
}

// rewriteFile replaces the file at path with change of its bytes, and
// returns what puts it back.
func rewriteFile(t *testing.T, path string, change func([]byte) []byte) func() {
	t.Helper()
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, change(append([]byte(nil), orig...)), 0o644); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// movePlacement points one page's placement (keys.go: bw:{H}:w) at the
// records of another page of its host, and returns what puts it back.
func movePlacement(t *testing.T, rs *redistest.Server) func() {
	t.Helper()
	ctx := context.Background()
	keys, err := rs.Client().Keys(ctx, "bw:{*}:w").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("no placements in the store: %v", err)
	}
	for _, k := range keys {
		m, err := rs.Client().HGetAll(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		var first, firstPlace string
		for h, p := range m {
			if first == "" {
				first, firstPlace = h, p
				continue
			}
			if p == firstPlace {
				continue
			}
			rs.Client().HSet(ctx, k, first, p)
			return func() { rs.Client().HSet(ctx, k, first, firstPlace) }
		}
	}
	t.Fatal("no host with two placements")
	return nil
}

// --warc is given once with --db, and must name a directory: anything
// else is a usage error (exit 2) naming what is wrong.
func TestFleetArchiveVerifyUsage(t *testing.T) {
	rs := redistest.Start(t)
	mustRun(t, cli.ExitOK, "crawl", "--store", rs.URL(), "--fleet-id", "p1", "--allow-private", "--progress", "never",
		startSite(t, 1, 1).Roots()[0])
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", filepath.Join(dir, "c.db"), "--warc", dir, "--warc", dir}, "--warc is given once with --db"},
		{[]string{"--store", rs.URL(), "--warc", filepath.Join(dir, "missing")}, "not a directory"},
	} {
		r := runCLI(t, t.Context(), append([]string{"verify"}, tc.args...)...)
		if r.code != cli.ExitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("verify %q: %s; want exit %d saying %q", tc.args, r, cli.ExitUsage, tc.want)
		}
	}
}
