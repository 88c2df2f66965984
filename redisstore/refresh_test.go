package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"breakwater/frontier"
	"breakwater/redisstore/redistest"
	"breakwater/store"
	"breakwater/verify"

	"github.com/redis/go-redis/v9"
)

// Refreshes on a fleet (refresh.go) against a real redis-server: pages
// indexed by fetch time as the writer stores them, staged by a cutoff,
// never twice, and indexed again when their refresh is stored.

var rfT0 = time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)

// rfCrawl leases every URL of f until the frontier ends and completes each
// with the result answer gives, recording the items leased.
func rfCrawl(t *testing.T, f *Frontier, answer func(it store.Item) store.Result) []store.Item {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var mu sync.Mutex
	var leased []store.Item
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				l, err := f.Next(ctx)
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				leased = append(leased, l.Item)
				mu.Unlock()
				r := answer(l.Item)
				if err := f.Complete(l, &r, nil); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if !errors.Is(err, frontier.ErrExhausted) {
			t.Fatalf("crawl ended with %v, want frontier.ErrExhausted", err)
		}
	}
	return leased
}

// rfPage is the page of it, fetched at at.
func rfPage(it store.Item, at time.Time) store.Result {
	return store.Result{URL: it.URL, Host: it.Host, Status: 200, FetchedAt: at, ETag: `"` + it.URL + `"`, Title: "t " + it.URL}
}

// rfSite crawls hosts x perHost pages once, page p of each host fetched
// at rfT0 + p minutes, and returns the store and the items.
func rfSite(t *testing.T, hosts, perHost int) (*Store, []store.Item) {
	t.Helper()
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	items := ftSite(hosts, perHost)
	minute := map[string]int{}
	for i, it := range items {
		minute[it.URL] = i % perHost
	}
	f := OpenFrontier(s, ftOptions(s, "p1", 0, 4))
	defer f.Close()
	if err := f.Add(items...); err != nil {
		t.Fatal(err)
	}
	ftWaitListed(t, s, hosts)
	rfCrawl(t, f, func(it store.Item) store.Result {
		return rfPage(it, rfT0.Add(time.Duration(minute[it.URL])*time.Minute))
	})
	return s, items
}

// rfQueued reads the URLs queued for host, in order, as a load gives them.
func rfQueued(t *testing.T, s *Store, host string) []store.Item {
	t.Helper()
	items, _, _, err := s.load(context.Background(), host, rfT0.UnixMilli(), 1000, 0)
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// rfStageAll stages until a pass is done and returns the pages staged.
func rfStageAll(t *testing.T, s *Store, cutoff time.Time, limit int) int {
	t.Helper()
	n := 0
	for range 1000 {
		scan, err := s.StageRefreshes(7, cutoff, limit)
		if err != nil {
			t.Fatal(err)
		}
		if scan.After != 7 {
			t.Errorf("After %d, want the 7 given back", scan.After)
		}
		n += scan.Staged
		if scan.Done {
			return n
		}
	}
	t.Fatal("a pass never ended")
	return n
}

func TestStageRefreshesByFetchTime(t *testing.T) {
	const hosts, perHost = 3, 5
	s, items := rfSite(t, hosts, perHost)
	steps := []struct {
		cutoff    time.Duration // after rfT0
		newStaged int           // pages staged by this pass
		queued    int           // URLs queued per host after it
	}{
		{0, 0, 0},                 // nothing fetched before rfT0
		{time.Minute, 1, 1},       // page 0 (minute 0)
		{time.Minute, 0, 1},       // the same cutoff again: nothing new
		{150 * time.Second, 2, 3}, // pages 1 and 2
		{time.Hour, 2, 5},         // the rest
		{2 * time.Hour, 0, 5},     // staged pages are not staged again
	}
	for _, st := range steps {
		got := rfStageAll(t, s, rfT0.Add(st.cutoff), 4096)
		if got != st.newStaged*hosts {
			t.Errorf("cutoff +%s: staged %d pages, want %d", st.cutoff, got, st.newStaged*hosts)
		}
		for h := range hosts {
			host := fmt.Sprintf("site%d.test", h)
			q := rfQueued(t, s, host)
			if len(q) != st.queued {
				t.Errorf("cutoff +%s: %s has %d URLs queued, want %d", st.cutoff, host, len(q), st.queued)
			}
			for i, it := range q {
				want := items[h*perHost+i] // oldest first
				if it.URL != want.URL || it.Hash != want.Hash || it.Replaces == 0 {
					t.Errorf("cutoff +%s: %s queue[%d] = %+v, want a refresh of %s", st.cutoff, host, i, it, want.URL)
					continue
				}
				prior, err := s.Replaced(it)
				if err != nil || prior.ETag != `"`+it.URL+`"` || prior.Title != "t "+it.URL {
					t.Errorf("Replaced(%s) = %+v, %v; want the stored page", it.URL, prior, err)
				}
			}
			if c := ftCounts(t, s.rdb, host); c["queued"] != int64(st.queued) {
				t.Errorf("cutoff +%s: %s counts %d queued, want %d", st.cutoff, host, c["queued"], st.queued)
			}
		}
	}
	if _, err := s.Replaced(store.Item{Host: items[0].Host, URL: items[0].URL, Hash: items[0].Hash}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Replaced of an item replacing nothing: %v, want ErrNotFound", err)
	}
}

// A pass over many hosts, a few at a time (limit 16: one host per shard
// per call), stages every stale page of each exactly once.
func TestStageRefreshesSmallSteps(t *testing.T) {
	const hosts, perHost = 40, 3
	s, _ := rfSite(t, hosts, perHost)
	if got := rfStageAll(t, s, rfT0.Add(time.Hour), 16); got != hosts*perHost {
		t.Errorf("staged %d pages, want %d", got, hosts*perHost)
	}
	for h := range hosts {
		if q := rfQueued(t, s, fmt.Sprintf("site%d.test", h)); len(q) != perHost {
			t.Errorf("site%d.test: %d URLs queued, want %d", h, len(q), perHost)
		}
	}
}

// Two processes passing at once stage each page once.
func TestStageRefreshesConcurrent(t *testing.T) {
	const hosts, perHost = 60, 4
	s, _ := rfSite(t, hosts, perHost)
	var wg sync.WaitGroup
	got := make([]int, 2)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				scan, err := s.StageRefreshes(0, rfT0.Add(time.Hour), 64)
				if err != nil {
					t.Error(err)
					return
				}
				got[i] += scan.Staged
				if scan.Done {
					return
				}
			}
		}()
	}
	wg.Wait()
	if got[0]+got[1] != hosts*perHost {
		t.Errorf("the two passes staged %v pages, want %d in all", got, hosts*perHost)
	}
	for h := range hosts {
		host := fmt.Sprintf("site%d.test", h)
		seen := map[string]int{}
		for _, it := range rfQueued(t, s, host) {
			seen[it.URL]++
		}
		if len(seen) != perHost {
			t.Errorf("%s: %d pages queued, want %d", host, len(seen), perHost)
		}
		for u, n := range seen {
			if n != 1 {
				t.Errorf("%s queued %d times", u, n)
			}
		}
		if c := ftCounts(t, s.rdb, host); c["queued"] != perHost {
			t.Errorf("%s counts %d queued, want %d", host, c["queued"], perHost)
		}
	}
}

// A refresh's completion indexes the page again under its new fetch time;
// a refresh that found the page gone leaves the index.
func TestRefreshCompletionRearms(t *testing.T) {
	const hosts, perHost = 2, 4
	s, items := rfSite(t, hosts, perHost)
	if got := rfStageAll(t, s, rfT0.Add(time.Hour), 4096); got != hosts*perHost {
		t.Fatalf("staged %d pages, want %d", got, hosts*perHost)
	}
	gone := items[1]
	t1 := rfT0.Add(2 * time.Hour)
	f := OpenFrontier(s, ftOptions(s, "p2", 0, 4))
	defer f.Close()
	leased := rfCrawl(t, f, func(it store.Item) store.Result {
		if it.URL == gone.URL {
			return store.Result{URL: it.URL, Host: it.Host, Status: 410, ErrorClass: "gone", FetchedAt: t1}
		}
		prior, err := s.Replaced(it)
		if err != nil {
			t.Errorf("Replaced(%s) in its refresh: %v", it.URL, err)
			return rfPage(it, t1)
		}
		r := *prior
		r.Status, r.FetchedAt = 304, t1
		return r
	})
	if len(leased) != hosts*perHost {
		t.Errorf("%d refreshes leased, want %d", len(leased), hosts*perHost)
	}
	for _, it := range leased {
		if it.Replaces == 0 {
			t.Errorf("%s leased as a new URL, not a refresh", it.URL)
		}
	}
	if got := rfStageAll(t, s, t1, 4096); got != 0 {
		t.Errorf("a pass before the refreshes' time staged %d pages", got)
	}
	if got := rfStageAll(t, s, t1.Add(time.Minute), 4096); got != hosts*perHost-1 {
		t.Errorf("a pass after the refreshes' time staged %d pages, want %d (all but the gone one)", got, hosts*perHost-1)
	}
	for _, it := range rfQueued(t, s, gone.Host) {
		if it.URL == gone.URL {
			t.Errorf("the page found gone was staged again")
		}
	}
	res := ftResults(t, s)
	if len(res) != hosts*perHost {
		t.Errorf("%d results, want %d", len(res), hosts*perHost)
	}
	rep, err := s.Verify(context.Background(), verify.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Errorf("verify: %v", rep.Problems)
	}
}

// A host's new URLs are fetched before its refreshes, whenever they came.
func TestRefreshesAfterNewURLs(t *testing.T) {
	s, items := rfSite(t, 1, 3)
	host := items[0].Host
	early := ftItem(host, "/new/early")
	ftApply(t, s.rdb, host, ftAdd(early)...)
	if got := rfStageAll(t, s, rfT0.Add(time.Hour), 4096); got != 3 {
		t.Fatalf("staged %d pages, want 3", got)
	}
	late := ftItem(host, "/new/late")
	ftApply(t, s.rdb, host, ftAdd(late)...)
	q := rfQueued(t, s, host)
	var order []string
	for _, it := range q {
		order = append(order, it.URL)
	}
	want := []string{early.URL, late.URL, items[0].URL, items[1].URL, items[2].URL}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Errorf("queue order %v, want %v", order, want)
	}
	if q[0].Replaces != 0 || q[1].Replaces != 0 {
		t.Errorf("new URLs given Replaces: %+v", q[:2])
	}
}

// verify --store finds an index that lost track of the pages: a member
// that is no stored page, a page under another time, a host no shard lists
// in time.
func TestVerifyRefreshIndex(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		spoil      func(s *Store, it store.Item)
	}{
		{"a member of no page", "which is not a stored page", func(s *Store, it store.Item) {
			s.rdb.ZAdd(context.Background(), keysOf(it.Host).fetched, redis.Z{Score: 1, Member: hashKey(store.HashOf("http://x/"))})
		}},
		{"a page under another time", "its page was fetched at", func(s *Store, it store.Item) {
			s.rdb.ZAdd(context.Background(), keysOf(it.Host).fetched, redis.Z{Score: 5, Member: hashKey(it.Hash)})
		}},
		{"a host listed too late", "no refresh pass would find it", func(s *Store, it store.Item) {
			s.rdb.ZRem(context.Background(), keysOfShard(shardOf(it.Host)).stale, it.Host)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, items := rfSite(t, 1, 2)
			rep, err := s.Verify(context.Background(), verify.Options{})
			if err != nil || !rep.OK() {
				t.Fatalf("verify before: %v %v", err, rep.Problems)
			}
			tc.spoil(s, items[0])
			rep, err = s.Verify(context.Background(), verify.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(rep.Problems, "\n"), tc.want) {
				t.Errorf("verify: %v, want a problem saying %q", rep.Problems, tc.want)
			}
		})
	}
}

// A write killed after the hosts' scripts indexed their new pages, before
// the rest, leaves each host listed for the refresh passes no later than
// its oldest page: the listing is lowered before the pages are indexed.
func TestRefreshListingLoweredBeforeTheIndex(t *testing.T) {
	srv := redistest.Start(t)
	s := ftStore(t, srv.URL())
	ctx := context.Background()
	f := &Frontier{s: s, o: ftOptions(s, "p1", 0, 3).withDefaults(), hosts: map[string]*ownedHost{},
		wake: make(chan struct{}), kickMgr: make(chan struct{}, 1), news: map[int]time.Time{}}
	it := ftItem("a.test", "/page")
	var queue store.Batch
	queue.Add(it)
	if err := f.write([]job{{batch: &queue}}); err != nil {
		t.Fatal(err)
	}
	stale := keysOfShard(shardOf(it.Host)).stale
	later := rfT0.Add(time.Hour).UnixMilli()
	s.rdb.ZAdd(ctx, stale, redis.Z{Score: float64(later), Member: it.Host}) // listed under a later page's time
	f.afterHostScripts = func() error { return errors.New("killed") }
	var done store.Batch
	r := rfPage(it, rfT0)
	done.Complete(it, &r)
	if err := f.write([]job{{batch: &done}}); err == nil {
		t.Fatal("the write went through its kill")
	}
	if at, _ := s.rdb.ZScore(ctx, keysOf(it.Host).fetched, hashKey(it.Hash)).Result(); int64(at) != rfT0.UnixMilli() {
		t.Fatalf("the page is indexed at %v, want %d: the scripts ran", at, rfT0.UnixMilli())
	}
	if at, err := s.rdb.ZScore(ctx, stale, it.Host).Result(); err != nil || int64(at) > rfT0.UnixMilli() {
		t.Errorf("after the kill the host is listed at %v (%v), later than its page fetched at %d: no pass would find it in time",
			int64(at), err, rfT0.UnixMilli())
	}
}
