package redisstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"breakwater/breaker"
	"breakwater/frontier"
	"breakwater/redisstore/redistest"
	"breakwater/store"
)

// The fence of the host leases (lease.lua, apply.lua's F, breaker.lua's
// token), the server's clock, one process per fleet ID (proc.lua) and the
// cost of an idle process, against a real redis-server.

// ftPause stops f's goroutines as a SIGSTOP would: no renewal, no write,
// no release; its callers may still end leases, whose writes wait.
func ftPause(f *Frontier) {
	close(f.stop)
	f.done.Wait()
}

// ftResume starts them again, as a SIGCONT.
func ftResume(f *Frontier) {
	f.stop = make(chan struct{})
	f.done.Add(3)
	go f.writer()
	go f.manager()
	go f.listen()
}

// TestLeaseScriptSteps drives lease.lua over a ladder of fixed times: the
// token grows with every acquire, only the holder renews or releases with
// its token, and an unexpired lease is nobody else's.
func TestLeaseScriptSteps(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	key := keysOf("steps.test").lease
	call := func(args ...any) []any {
		t.Helper()
		res, err := leaseScript.Run(ctx, rdb, []string{key}, args...).Slice()
		if err != nil {
			t.Fatalf("lease.lua %v: %v", args, err)
		}
		return res
	}
	const t0, t1, t2, t3, t4 = "1000", "5000", "10999", "11000", "20000"
	steps := []struct {
		args []any
		want string
	}{
		{[]any{"acquire", "p1", 10000, t0}, "[1 10000 0]"},
		{[]any{"acquire", "p2", 10000, t1}, "[0 6000 p1]"}, // p1's until 11000
		{[]any{"renew", "p2", "1", 10000, t1}, "[0 0 p1]"}, // not p2's
		{[]any{"acquire", "p2", 10000, t2}, "[0 1 p1]"},
		{[]any{"acquire", "p2", 10000, t3}, "[2 10000 0]"}, // expired: p2's, token 2
		{[]any{"renew", "p1", "1", 10000, t3}, "[0 0 p2]"}, // p1 lost it
		{[]any{"renew", "p2", "1", 10000, t3}, "[0 0 p2]"}, // an old token renews nothing
		{[]any{"renew", "p2", "2", 10000, t3}, "[1 10000]"},
		{[]any{"release", "p1", "2", 0, t3}, "0"},
		{[]any{"release", "p2", "2", 3000, t3}, "1"},               // its next request 3 s on, at 14000
		{[]any{"acquire", "p1", 10000, "12000"}, "[3 10000 2000]"}, // the next holder waits the rest
		{[]any{"release", "p1", "3", 0, "12000"}, "1"},
		{[]any{"acquire", "p2", 10000, t4}, "[4 10000 0]"}, // the token keeps growing
	}
	for i, st := range steps {
		var got string
		if st.args[0] == "release" {
			n, err := leaseScript.Run(ctx, rdb, []string{key}, st.args...).Int64()
			if err != nil {
				t.Fatal(err)
			}
			got = strconv.FormatInt(n, 10)
		} else {
			got = fmt.Sprint(call(st.args...))
		}
		if got != st.want {
			t.Fatalf("step %d %v: %s, want %s", i, st.args, got, st.want)
		}
	}
}

// TestApplyScriptFence: the settling operations (complete, defer, promote,
// placement, robots.txt rules, cases) after F are applied only with the host's current token and
// counted as refused otherwise; adds are applied whoever sends them.
func TestApplyScriptFence(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	host := "fence.test"
	a, b, c := ftItem(host, "/a"), ftItem(host, "/b"), ftItem(host, "/c")
	ftApply(t, rdb, host, append(ftAdd(a), ftAdd(b)...)...)
	for _, p := range []string{"p1", "p2"} { // p1 token 1, then p2 token 2
		if err := leaseScript.Run(ctx, rdb, []string{keysOf(host).lease}, "acquire", p, 1, "").Err(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // p1's lease of 1 ms runs out by the server's clock
	}
	page := store.Result{URL: a.URL, Host: host, Status: 200}
	stale := append([]any{"F", "1"}, ftComplete(t, a, page)...)
	stale = append(stale, ftDefer(b, 5000)...)
	stale = append(stale, "W", hashKey(a.Hash), "f.warc.gz 0")
	stale = append(stale, "K", `{"stale":true}`, 60000, "X", `{"host":"fence.test","stale":true}`)
	stale = append(stale, ftAdd(c)...)
	if got := ftApplyAll(t, rdb, host, stale...); fmt.Sprint(got) != "[1 0 0 0 5 2]" {
		t.Fatalf("token 1's writes: %v, want c added, 5 refused, current token 2", got)
	}
	ftWantCounts(t, rdb, host, map[string]int64{"queued": 3, "fetched": 0, "deferred": 0})
	if n, _ := rdb.HLen(ctx, keysOf(host).warc).Result(); n != 0 {
		t.Fatalf("a refused placement was stored")
	}
	if n, _ := rdb.Exists(ctx, keysOf(host).robots, keysOf(host).cases).Result(); n != 0 {
		t.Fatalf("a refused robots.txt cache or case was stored")
	}
	current := append([]any{"F", "2"}, ftComplete(t, a, page)...)
	current = append(current, "K", `{"rules":1}`, 60000, "X", `{"host":"fence.test"}`)
	current = append(current, "F", "")
	current = append(current, ftDefer(b, 5000)...)
	if got := ftApplyAll(t, rdb, host, current...); fmt.Sprint(got) != "[0 1 1 0 0 2]" {
		t.Fatalf("token 2's and unfenced writes: %v, want one completed, one deferred", got)
	}
	if rules, _ := rdb.Get(ctx, keysOf(host).robots).Result(); rules != `{"rules":1}` {
		t.Errorf("robots.txt cache %q, want the lease holder's", rules)
	}
	if ttl, _ := rdb.PTTL(ctx, keysOf(host).robots).Result(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("robots.txt cache expires in %v, want within the minute asked", ttl)
	}
	if cases, _ := rdb.LRange(ctx, keysOf(host).cases, 0, -1).Result(); len(cases) != 1 || cases[0] != `{"host":"fence.test"}` {
		t.Errorf("cases %q, want the lease holder's one", cases)
	}
}

// TestPausedFrontierFencedOut: a process paused (its goroutines stopped,
// as by SIGSTOP) past its leases, while another takes its hosts and
// crawls them, then continued: it starts no request on the hosts it lost,
// the store refuses its late results and breaker outcome (logged,
// counted), and every URL has one result, the new holder's; only the URLs
// in flight at the pause were fetched twice.
func TestPausedFrontierFencedOut(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	const lease = 500 * time.Millisecond
	const hosts, perHost = 3, 5
	items := ftSite(hosts, perHost)
	oa := ftOptions(s, "stale", lease, 16)
	oa.RequestTimeout = 100 * time.Millisecond
	a := OpenFrontier(s, oa)
	defer a.Close()
	if err := a.Add(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inflight := map[string]*frontier.Lease{}
	for len(inflight) < hosts {
		l, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		inflight[l.Item.Host] = l
	}
	ftPause(a)

	b := OpenFrontier(s, ftOptions(s, "owner", lease, 16))
	defer b.Close()
	led := newLedger()
	if err := ftRun(ctx, b, 2, 4, led, time.Millisecond); !errors.Is(err, frontier.ErrExhausted) {
		t.Fatalf("the new holder ended with %v, want ErrExhausted", err)
	}
	for _, it := range items {
		if n := len(led.leases[it.URL]); n != 1 {
			t.Errorf("%s leased %d times by the new holder, want once", it.URL, n)
		}
	}

	// The stale one's requests end while it is stopped: a page each, and a
	// transient failure for the first host's breaker.
	var first string
	for host, l := range inflight {
		if first == "" {
			first = host
			a.Outcome(breaker.Ticket{Host: host}, breaker.Transient, "late", time.Now())
		}
		r := store.Result{URL: l.Item.URL, Host: host, Status: 299}
		if err := a.Complete(l, &r, nil); err != nil {
			t.Fatal(err)
		}
	}
	ftResume(a)
	waitUntil(t, 10*time.Second, "the late writes are refused", func() bool { return a.Refused() >= hosts+1 })
	if got := a.Refused(); got != hosts+1 {
		t.Errorf("%d writes refused, want %d (the results and the outcome)", got, hosts+1)
	}
	short, stop := context.WithTimeout(ctx, 2*lease)
	defer stop()
	if l, err := a.Next(short); err == nil {
		t.Errorf("the continued process leased %s of a host it lost", l.Item.URL)
	}
	res := map[string]int{}
	err := s.ForEachResult(func(r *store.Result) error {
		res[r.URL]++
		if r.Status != 200 {
			t.Errorf("%s stored with status %d: the stale process's result", r.URL, r.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if res[it.URL] != 1 {
			t.Errorf("%s has %d results, want 1", it.URL, res[it.URL])
		}
	}
	br, _, err := b.o.Breakers.Get(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if br.Failures != 0 {
		t.Errorf("%s's breaker counts %d failures: the stale outcome was applied", first, br.Failures)
	}
}

// TestSkewedClockStealsNoLease: a process whose clock runs an hour ahead
// takes none of the hosts a live process holds: leases run on the
// server's clock.
func TestSkewedClockStealsNoLease(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := ftStore(t, srv.URL())
	const hosts = 4
	items := ftSite(hosts, 3)
	a := OpenFrontier(s, ftOptions(s, "honest", time.Second, 16))
	defer a.Close()
	if err := a.Add(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	held := map[string]bool{}
	for len(held) < hosts {
		l, err := a.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held[l.Item.Host] = true
	}
	ob := ftOptions(s, "ahead", time.Second, 16)
	ob.Now = func() time.Time { return time.Now().Add(time.Hour) }
	b := OpenFrontier(s, ob)
	defer b.Close()
	for range 3 {
		if _, _, err := b.claim(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	taken := len(b.hosts)
	b.mu.Unlock()
	if taken != 0 {
		t.Errorf("the skewed process took %d hosts held by a live one", taken)
	}
	for host := range held {
		if o, _ := rdb.HGet(ctx, keysOfShard(shardOf(host)).owner, host).Result(); o != "honest" {
			t.Errorf("%s is owned by %q, want the live holder", host, o)
		}
		if o, _ := rdb.HGet(ctx, keysOf(host).lease, "owner").Result(); o != "honest" {
			t.Errorf("%s's lease names %q, want the live holder", host, o)
		}
	}
}

// TestOneProcessPerFleetID: a second process given a live process's ID is
// refused, naming the live one and its heartbeat; once it stops the ID is
// free; a process that died leaves its ID to the next start after half a
// lease; and a process that was only stalled, resumed after its ID was
// taken over, stops instead of writing on beside the new one.
func TestOneProcessPerFleetID(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	ctx := context.Background()
	const lease = 400 * time.Millisecond
	first, err := Start(ctx, s, ftOptions(s, "p1", lease, 4))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Start(ctx, s, ftOptions(s, "p1", lease, 4))
	var inUse *IDInUseError
	if !errors.As(err, &inUse) || !errors.Is(err, ErrFleetIDInUse) {
		t.Fatalf("a second p1: %v, want an IDInUseError", err)
	}
	for _, w := range []string{`"p1"`, "process " + strconv.Itoa(os.Getpid()), "last heartbeat", "--fleet-id"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal %q lacks %q", err, w)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Start(ctx, s, ftOptions(s, "p1", lease, 4))
	if err != nil {
		t.Fatalf("p1 after the first stopped: %v", err)
	}
	// It dies (no heartbeat, none removed): the next start waits it out.
	ftPause(again)
	next, err := Start(ctx, s, ftOptions(s, "p1", lease, 4))
	if err != nil {
		t.Fatalf("p1 after its process died: %v", err)
	}
	defer next.Close()
	// The dead one was only stalled: it resumes and finds its ID taken.
	ftResume(again)
	select {
	case <-again.Failed():
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled process did not stop after its ID was taken over")
	}
	if _, err := again.Next(ctx); err == nil || !strings.Contains(err.Error(), "took over") {
		t.Errorf("the taken-over process's Next: %v", err)
	}
	again.Close()
}

// TestIdleFrontierCommands: a process with nothing to claim (another holds
// the only host) waits on the work channel and costs Redis at most 10
// commands a second, also with news of a host ready later; a host listed
// by another process reaches it through the channel.
func TestIdleFrontierCommands(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	if err := s.PutSettings([]byte(`{"seeds":[]}`)); err != nil {
		t.Fatal(err)
	}
	busy := OpenFrontier(s, ftOptions(s, "busy", 10*time.Second, 1)) // room for its one host only
	defer busy.Close()
	if err := busy.Add(ftItem("only.test", "/1"), ftItem("only.test", "/2")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := busy.Next(ctx); err != nil {
		t.Fatal(err)
	}
	quiet := ftStore(t, srv.URL())
	idle := OpenFrontier(quiet, ftOptions(quiet, "idle", 10*time.Second, 4))
	defer idle.Close()
	time.Sleep(500 * time.Millisecond) // its first look
	// News of a host ready in a minute: it waits for the time, not polls.
	if err := s.Client().Publish(ctx, workChannel, "3 60000").Err(); err != nil {
		t.Fatal(err)
	}
	from, start := quiet.Commands(), time.Now()
	time.Sleep(6 * time.Second)
	n, took := quiet.Commands()-from, time.Since(start)
	rate := float64(n) / took.Seconds()
	t.Logf("idle process: %d commands in %s: %.1f a second", n, took.Round(time.Millisecond), rate)
	if rate > 10 {
		t.Errorf("an idle process sends %.1f commands a second, want at most 10", rate)
	}
	// New work: the idle one hears of it and takes it.
	if err := busy.Add(ftItem("new.test", "/1")); err != nil {
		t.Fatal(err)
	}
	l, err := idle.Next(ctx)
	if err != nil || l.Item.Host != "new.test" {
		t.Fatalf("the idle process's lease: %v %v, want new.test's URL", l, err)
	}
}

// TestShardAnnouncesWork: the shard operations that make a host ready
// announce the shard on the work channel ("N", or "N DELAY" for later);
// one that makes nothing ready says nothing; restore gives a shard entry
// back to the holder of the host's lease.
func TestShardAnnouncesWork(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	ps := rdb.Subscribe(ctx, workChannel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	msgs := ps.Channel()
	hosts := ftHostsOfShard(2)
	a, b := hosts[0], hosts[1]
	n := shardOf(a)
	k := keysOfShard(n)
	want := func(step, payload string) {
		t.Helper()
		// A marker published after the step: what came before it is the step's.
		rdb.Publish(ctx, workChannel, "marker")
		var got []string
		for m := range msgs {
			if m.Payload == "marker" {
				break
			}
			got = append(got, m.Payload)
		}
		if strings.Join(got, ",") != payload {
			t.Errorf("%s announced %q, want %q", step, got, payload)
		}
	}
	shard := strconv.Itoa(n)
	ftShard(t, rdb, n, "touch", 1000, a)
	want("touch of a new host", shard)
	ftShard(t, rdb, n, "touch", 1000, a)
	want("touch of a listed host", "")
	ftShard(t, rdb, n, "claim", "p1", 1000, 10000, 10)
	want("claim", "")
	ftShard(t, rdb, n, "release", "p1", a, 2000, 3000)
	want("release for later", shard+" 3000")
	ftShard(t, rdb, n, "wake", 2500, a)
	want("wake", shard)
	ftShard(t, rdb, n, "claim", "p1", 2500, 10000, 10)
	ftShard(t, rdb, n, "release", "p1", a, 2600, "held")
	want("release held", "")
	if s, _ := ftZScore(t, rdb, k.ready, a); int64(s) != heldScore {
		t.Errorf("a held host scores %v, want heldScore", s)
	}
	ftShard(t, rdb, n, "touch", 3000, b)
	ftShard(t, rdb, n, "claim", "p1", 3000, 10000, 10)
	want("touch, claim", shard)
	tc, _ := rdb.HGet(ctx, k.touch, b).Result()
	ftShard(t, rdb, n, "drop", "p1", b, tc, 3100)
	want("the drop of the shard's last host with work", shard)

	// restore: p2 claimed c in the shard, but p1 holds c's lease for 700 ms more.
	c := hosts[1] + ".restore"
	ftShard(t, rdb, shardOf(c), "touch", 4000, c)
	ftShard(t, rdb, shardOf(c), "claim", "p2", 4000, 10000, 10)
	if r, _ := ftShard(t, rdb, shardOf(c), "restore", "p3", c, "p1", 700, 4000).Int64(); r != 0 {
		t.Errorf("a stranger restored c")
	}
	if r, _ := ftShard(t, rdb, shardOf(c), "restore", "p2", c, "p1", 700, 4000).Int64(); r != 1 {
		t.Errorf("p2's restore of c: %d, want 1", r)
	}
	kc := keysOfShard(shardOf(c))
	if o, _ := rdb.HGet(ctx, kc.owner, c).Result(); o != "p1" {
		t.Errorf("c's owner after the restore: %q, want p1", o)
	}
	if s, _ := ftZScore(t, rdb, kc.ready, c); s != 4700 {
		t.Errorf("c scores %v after the restore, want p1's expiry 4700", s)
	}
	for _, p := range []string{"3", "3 250", "x", "-1", "16", "3 -5"} {
		shard, delay, ok := parseNews(p)
		t.Logf("parseNews(%q) = %d %s %v", p, shard, delay, ok)
		if wantOK := p == "3" || p == "3 250"; ok != wantOK {
			t.Errorf("parseNews(%q) ok %v, want %v", p, ok, wantOK)
		}
	}
}

// TestSkewedClockDefersOnTheServersClock: a process whose clock runs an
// hour ahead defers a URL by 300 ms of its own clock: the store keeps it
// due 300 ms from the server's now, not an hour on, and an honest process
// taking the host leases it again within a second.
func TestSkewedClockDefersOnTheServersClock(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	s := ftStore(t, srv.URL())
	items := ftSite(1, 1)
	host := items[0].Host
	ob := ftOptions(s, "ahead", time.Second, 4)
	ob.Now = func() time.Time { return time.Now().Add(time.Hour) }
	b := OpenFrontier(s, ob)
	if err := b.Add(items...); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := b.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Defer(l, l.Item, ob.Now().Add(300*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	due, err := rdb.ZScore(ctx, keysOf(host).deferred, hashKey(items[0].Hash)).Result()
	if err != nil {
		t.Fatalf("the deferred URL is not in the deferred set: %v", err)
	}
	server, _ := rdb.Time(ctx).Result()
	if ahead := time.Duration(int64(due)-server.UnixMilli()) * time.Millisecond; ahead > 2*time.Second || ahead < -time.Second {
		t.Fatalf("deferred due %v from the server's now, want about 300ms", ahead)
	}

	a := OpenFrontier(s, ftOptions(s, "honest", time.Second, 4))
	defer a.Close()
	start := time.Now()
	again, err := a.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again.Item.URL != items[0].URL || time.Since(start) > 5*time.Second {
		t.Errorf("leased %s after %v, want the deferred URL within seconds", again.Item.URL, time.Since(start))
	}
}
