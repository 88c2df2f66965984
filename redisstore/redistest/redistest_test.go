package redistest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestServer(t *testing.T) {
	ctx := context.Background()
	s := Start(t)
	if !strings.HasPrefix(s.Addr, "127.0.0.1:") || s.URL() != "redis://"+s.Addr+"/0" {
		t.Fatalf("Addr %q URL %q", s.Addr, s.URL())
	}
	c := s.Client()
	if c != s.Client() {
		t.Fatal("Client is not cached")
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET = %q, %v", v, err)
	}
	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	uc := redis.NewClient(opt)
	defer uc.Close()
	if v, err := uc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("GET through URL = %q, %v", v, err)
	}
}

func TestRestartKeepsAppendOnlyData(t *testing.T) {
	ctx := context.Background()
	s := Start(t, WithAppendOnly(), WithPassword("sekrit"))
	addr := s.Addr
	if err := s.Client().Set(ctx, "k", "kept", 0).Err(); err != nil {
		t.Fatal(err)
	}
	noAuth := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer noAuth.Close()
	if err := noAuth.Get(ctx, "k").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("GET without the password: %v, want NOAUTH", err)
	}
	s.Restart(t)
	if s.Addr != addr {
		t.Fatalf("Restart moved the server from %s to %s", addr, s.Addr)
	}
	if v, err := s.Client().Get(ctx, "k").Result(); err != nil || v != "kept" {
		t.Fatalf("GET after restart = %q, %v", v, err)
	}
	s.Kill()
	ctx2, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := noAuth.Ping(ctx2).Err(); err == nil {
		t.Fatal("PING answered after Kill")
	}
}

func TestCluster(t *testing.T) {
	ctx := context.Background()
	c := StartCluster(t, 3)
	if len(c.Addrs) != 3 {
		t.Fatalf("Addrs = %v", c.Addrs)
	}
	cc := c.Client()
	// Keys spread over the masters: every one must be reachable.
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if err := cc.Set(ctx, k, "v"+k, 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := cc.Get(ctx, k).Result(); err != nil || v != "v"+k {
			t.Fatalf("GET %s = %q, %v", k, v, err)
		}
	}
	slot := func(k string) int64 {
		t.Helper()
		n, err := cc.ClusterKeySlot(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if a, b := slot("bw:{example.com}:b"), slot("bw:{example.com}:t"); a != b {
		t.Fatalf("same hash tag, slots %d and %d", a, b)
	}
	if a, b := slot("bw:{example.com}:b"), slot("bw:{example.org}:b"); a == b {
		t.Logf("different tags happen to share slot %d", a)
	}
	// A multi-key command over one tag works; over different slots it does not.
	if err := cc.MSet(ctx, "x{tag}", 1, "y{tag}", 2).Err(); err != nil {
		t.Fatal(err)
	}
	var masters atomic.Int32
	err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		masters.Add(1)
		return m.Ping(ctx).Err()
	})
	if err != nil || masters.Load() != 3 {
		t.Fatalf("ForEachMaster: %d masters, %v", masters.Load(), err)
	}
}
