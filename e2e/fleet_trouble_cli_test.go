package e2e

// A fleet crawl (crawl --store redis://...) when its Redis is in trouble:
// killed mid-crawl and started again on the same port and append-only
// file, restarted with SIGTERM, and a store the crawl must refuse before
// it writes anything. The crawl runs in-process through run, as main
// would; the site is a demosite on 127.0.0.1 and Redis a throwaway
// redis-server.

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"breakwater/cli"
	"breakwater/demosite"
	"breakwater/redisstore"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// troubleArgs are the arguments of a fast fleet crawl of site into store.
func troubleArgs(storeURL string, site *demosite.Site, extra ...string) []string {
	args := []string{"crawl", "--store", storeURL, "--allow-private", "--workers", "8", "--delay", "20ms",
		"--timeout", "2s", "--connect-timeout", "1s", "--log-format", "text", "--log-level", "info",
		"--progress", "never", "--sitemaps=false", "--fleet-id", "trouble-1"}
	args = append(args, extra...)
	return append(args, site.Roots()...)
}

// troubleDone counts the results stored so far, from the hosts' counters.
func troubleDone(rdb *redis.Client) int64 {
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, "bw:{*}:c").Result()
	if err != nil {
		return 0
	}
	var n int64
	for _, k := range keys {
		vals, _ := rdb.HMGet(ctx, k, "fetched", "failed").Result()
		for _, v := range vals {
			if s, ok := v.(string); ok {
				i, _ := strconv.ParseInt(s, 10, 64)
				n += i
			}
		}
	}
	return n
}

// troubleCheck checks that every page of site has a result in the store,
// a page fetched, and that no page was fetched more than twice; it returns
// how many were fetched twice.
func troubleCheck(t *testing.T, url string, site *demosite.Site) (twice int) {
	t.Helper()
	st, err := redisstore.Open(context.Background(), url, redisstore.ReadOnly)
	if err != nil {
		t.Fatalf("open the store after the crawl: %v", err)
	}
	defer st.Close()
	got := map[string]*store.Result{}
	if err := st.ForEachResult(func(r *store.Result) error { got[r.URL] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	fetches := map[string]int{}
	for _, h := range site.Hosts() {
		for _, rq := range h.Requests() {
			if rq.Path != "/robots.txt" {
				fetches[h.BaseURL()+rq.Path]++
			}
		}
	}
	for _, u := range site.URLs() {
		r := got[u]
		switch {
		case r == nil:
			t.Errorf("%s: no result in the store (lost)", u)
		case r.Failed() || r.Status != 200:
			t.Errorf("%s: stored as %d %s %s", u, r.Status, r.ErrorClass, r.Error)
		}
		if n := fetches[u]; n > 2 {
			t.Errorf("%s fetched %d times, want at most twice", u, n)
		} else if n == 2 {
			twice++
		}
	}
	if len(got) != len(site.URLs()) {
		t.Errorf("%d results in the store, want %d", len(got), len(site.URLs()))
	}
	return twice
}

// troubleCrawl runs the crawl in the background; trouble is called once
// a third of the site is stored.
func troubleCrawl(t *testing.T, srv *redistest.Server, site *demosite.Site, trouble func()) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- runCLI(t, ctx, troubleArgs(srv.URL(), site)...) }()
	total := int64(len(site.URLs()))
	deadline := time.Now().Add(15 * time.Second)
	for troubleDone(srv.Client()) < total/3 {
		select {
		case r := <-done:
			t.Fatalf("the crawl ended before a third of it was stored: %s", r)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("a third of the site not stored after 15s (%d of %d)", troubleDone(srv.Client()), total)
		}
		time.Sleep(10 * time.Millisecond)
	}
	trouble()
	return <-done
}

func troubleLines(stderr, what string) []string {
	var out []string
	for line := range strings.Lines(stderr) {
		if strings.Contains(line, what) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// TestFleetCrawlRedisKilled: Redis is killed (SIGKILL) a third into the
// crawl and started again 1.5 s later on the same port and files. The
// process says once that it lost the store and once that it is back, loses
// no URL, fetches none more than twice, and ends the crawl with exit 0.
func TestFleetCrawlRedisKilled(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAppendOnly())
	site := startSite(t, 6, 40)
	var stored, atRestart int64
	start := time.Now()
	r := troubleCrawl(t, srv, site, func() {
		stored = troubleDone(srv.Client())
		srv.Kill()
		time.Sleep(1500 * time.Millisecond)
		srv.Restart(t)
		atRestart = troubleDone(srv.Client())
	})
	if r.code != cli.ExitOK {
		t.Fatalf("want exit 0, got %s", r)
	}
	lost, back := troubleLines(r.stderr, "lost the store"), troubleLines(r.stderr, "the store is back")
	if len(lost) != 1 || !strings.Contains(lost[0], "level=ERROR") || !strings.Contains(lost[0], srv.Addr) {
		t.Errorf("want one ERROR line naming the store saying it was lost, got %q\n%s", lost, r.stderr)
	}
	if len(back) != 1 || !strings.Contains(back[0], "level=INFO") {
		t.Errorf("want one INFO line saying the store is back, got %q\n%s", back, r.stderr)
	}
	if atRestart < stored {
		t.Errorf("%d results stored before the kill, %d after the restart: the append-only file lost some", stored, atRestart)
	}
	twice := troubleCheck(t, srv.URL(), site)
	t.Logf("killed after %d of %d results stored (%d after the restart); %d pages fetched twice; crawl %s; %s | %s",
		stored, len(site.URLs()), atRestart, twice, time.Since(start).Round(time.Millisecond), lost, back)
}

// TestFleetCrawlRedisRestarted: Redis is restarted with SIGTERM a third
// into the crawl: nothing is lost and the crawl ends with exit 0.
func TestFleetCrawlRedisRestarted(t *testing.T) {
	srv := redistest.Start(t, redistest.WithAppendOnly())
	site := startSite(t, 6, 40)
	var stored int64
	r := troubleCrawl(t, srv, site, func() {
		stored = troubleDone(srv.Client())
		srv.Restart(t)
	})
	if r.code != cli.ExitOK {
		t.Fatalf("want exit 0, got %s", r)
	}
	lost, back := troubleLines(r.stderr, "lost the store"), troubleLines(r.stderr, "the store is back")
	if len(lost) > 1 || len(back) != len(lost) {
		t.Errorf("want as many lost as back lines, at most one: %q, %q\n%s", lost, back, r.stderr)
	}
	twice := troubleCheck(t, srv.URL(), site)
	t.Logf("restarted after %d of %d results stored; %d pages fetched twice; %d lost/back lines", stored, len(site.URLs()), twice, len(lost))
}

// troubleFreeAddr is a loopback address nothing listens on.
func troubleFreeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// troubleKeys lists the keys of every database of the server.
func troubleKeys(t *testing.T, addr, password string) []string {
	t.Helper()
	var out []string
	for db := range 16 {
		c := redis.NewClient(&redis.Options{Addr: addr, Password: password, DB: db})
		keys, err := c.Keys(context.Background(), "*").Result()
		c.Close()
		if err != nil {
			t.Fatalf("KEYS of db %d: %v", db, err)
		}
		for _, k := range keys {
			out = append(out, strconv.Itoa(db)+"/"+k)
		}
	}
	slices.Sort(out)
	return out
}

// TestFleetCrawlBadStore: a crawl given a store it cannot or must not use
// exits 1 with an error naming the store (never its password), before it
// writes anything to it or to the working directory, and fetches nothing.
func TestFleetCrawlBadStore(t *testing.T) {
	t.Setenv(redisstore.PasswordEnv, "")
	const pw = "s3cret-fleet-pw"
	locked := redistest.Start(t, redistest.WithPassword(pw))
	foreign := redistest.Start(t)
	foreign.Client().Set(context.Background(), "cache:home", "<html>", 0)
	foreign.Client().LPush(context.Background(), "jobs", "a", "b")
	site := startSite(t, 1, 3)
	free := troubleFreeAddr(t)
	type check struct {
		name, url, secret string
		want              []string
		addr, pw          string // the server whose keys must not change
	}
	for _, tc := range []check{
		{name: "refused", url: "redis://" + free + "/0", want: []string{"store redis://" + free + "/0", "connection refused"}},
		{name: "wrong password", url: "redis://:not-the-pw-77@" + locked.Addr + "/0", secret: "not-the-pw-77",
			want: []string{"store redis://:xxxxx@" + locked.Addr + "/0", "wrong password", redisstore.PasswordEnv}, addr: locked.Addr, pw: pw},
		{name: "missing password", url: "redis://" + locked.Addr + "/0",
			want: []string{"store redis://" + locked.Addr + "/0", "wants a password"}, addr: locked.Addr, pw: pw},
		{name: "foreign keys", url: foreign.URL(),
			want: []string{"store " + foreign.URL(), "holds 2 keys and no Breakwater crawl"}, addr: foreign.Addr},
		{name: "not a redis URL", url: "http://" + foreign.Addr + "/0", want: []string{"want redis://"}, addr: foreign.Addr},
		// A typo must not make the process crawl alone into a file of that name.
		{name: "a file name", url: "crawl-store", want: []string{`store "crawl-store"`, "want redis://"}},
		{name: "one slash", url: "redis:/" + foreign.Addr + "/0", want: []string{"want redis://"}, addr: foreign.Addr},
		{name: "malformed with a password", url: "redis://:leak-me-55@" + foreign.Addr + "x/0", secret: "leak-me-55",
			want: []string{"want redis://"}, addr: foreign.Addr},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			var before []string
			if tc.addr != "" {
				before = troubleKeys(t, tc.addr, tc.pw)
			}
			args := troubleArgs(tc.url, site)
			r := runCLI(t, context.Background(), args...)
			if r.code != cli.ExitError {
				t.Fatalf("want exit %d, got %s", cli.ExitError, r)
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, r)
				}
			}
			if !strings.Contains(r.stderr, "breakwater: store ") {
				t.Errorf("the error does not name the store:\n%s", r)
			}
			if tc.secret != "" && strings.Contains(r.stdout+r.stderr, tc.secret) {
				t.Errorf("the output shows the password:\n%s", r)
			}
			if tc.addr != "" {
				if after := troubleKeys(t, tc.addr, tc.pw); !slices.Equal(before, after) {
					t.Errorf("the refused crawl changed the store: %v -> %v", before, after)
				}
			}
			if ents, _ := os.ReadDir(dir); len(ents) > 0 {
				var names []string
				for _, e := range ents {
					names = append(names, filepath.Join(dir, e.Name()))
				}
				t.Errorf("the refused crawl left files behind: %v", names)
			}
		})
	}
	for _, h := range site.Hosts() {
		if n := h.RequestCount(); n != 0 {
			t.Errorf("%s got %d requests from refused crawls", h.Name, n)
		}
	}
}
