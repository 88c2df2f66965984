package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"
)

func joinBudget(t *testing.T, s *Store, id string, limit int) (*PageBudget, int, int) {
	t.Helper()
	instance := NewInstance()
	if err := s.ClaimID(context.Background(), id, instance, time.Minute, time.Now()); err != nil {
		t.Fatal(err)
	}
	b, runLimit, used, err := s.JoinPageBudget(context.Background(), id, instance, limit, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return b, runLimit, used
}

func takeAll(t *testing.T, b *PageBudget) (total int, chunks []int) {
	t.Helper()
	for {
		n, err := b.Take(16)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return total, chunks
		}
		total += n
		chunks = append(chunks, n)
	}
}

// Processes crawling together share one limit; the last pages come in
// small chunks, and what a process gives back at its stop is the others'.
func TestPageBudgetIsSharedByTheLiveProcesses(t *testing.T) {
	s, _ := openScopeStore(t)
	a, limit, used := joinBudget(t, s, "a", 30)
	if limit != 30 || used != 0 {
		t.Fatalf("first join: limit %d used %d", limit, used)
	}
	b, limit, _ := joinBudget(t, s, "b", 500)
	if limit != 30 {
		t.Errorf("a process joining a live run got limit %d, want the run's 30", limit)
	}
	first, err := a.Take(16)
	if err != nil || first != 7 { // 30 left, 2 members: a quarter
		t.Fatalf("a's first take = %d, %v; want 7", first, err)
	}
	got, chunks := takeAll(t, b)
	if got != 23 {
		t.Fatalf("b took %d (chunks %v) after a's 7, want the other 23", got, chunks)
	}
	if last := chunks[len(chunks)-1]; last != 1 {
		t.Errorf("the last chunk was %d pages (chunks %v): the budget's end should come a page at a time", last, chunks)
	}
	if n, _ := a.Take(16); n != 0 {
		t.Fatalf("a took %d of a spent budget", n)
	}
	if err := a.Leave(5); err != nil { // a used 2 of its 7
		t.Fatal(err)
	}
	if got, _ := takeAll(t, b); got != 5 {
		t.Errorf("b took %d after a gave 5 back, want 5", got)
	}
	if err := b.Leave(100); err != nil { // more than b took: clamped
		t.Fatal(err)
	}
	// b gave back what it took (28), no more: a's 2 pages stay used.
	if used, _ := s.rdb.HGet(context.Background(), keyBudget, "used").Result(); used != "2" {
		t.Errorf("pages used after both left = %s, want a's 2", used)
	}
}

// A process starting when no member of the last run is alive starts a new
// run with the whole limit: a killed run's heartbeat goes stale, and a
// restart with the same fleet ID is a new instance.
func TestPageBudgetStartsAfreshWhenTheRunIsOver(t *testing.T) {
	s, _ := openScopeStore(t)
	// killed stops b's heartbeat as a kill does: b never leaves.
	killed := func(b *PageBudget) {
		s.rdb.HSet(context.Background(), keyProcs, b.id, `{"instance":"`+b.instance+`","server_ms":1}`)
	}
	// rejoin joins as id after its run's members died: a new run of limit.
	rejoin := func(id string, limit int, why string) {
		t.Helper()
		b, runLimit, used := joinBudget(t, s, id, limit)
		if runLimit != limit || used != 0 {
			t.Fatalf("%s: limit %d used %d, want a new run %d/0", why, runLimit, used, limit)
		}
		if got, _ := takeAll(t, b); got != limit {
			t.Fatalf("%s: took %d of the new run's %d", why, got, limit)
		}
		killed(b)
	}
	a, _, _ := joinBudget(t, s, "a", 10)
	if got, _ := takeAll(t, a); got != 10 {
		t.Fatalf("a took %d of 10", got)
	}
	killed(a)
	rejoin("b", 12, "joined after the run's only member died")
	rejoin("b", 12, "a restart with the same ID (a new instance)")
}

// However many processes take at once, they never take more than the
// limit between them.
func TestPageBudgetNeverGivesMoreThanTheLimit(t *testing.T) {
	s, _ := openScopeStore(t)
	const procs, limit = 6, 101
	budgets := make([]*PageBudget, procs)
	for i := range budgets {
		budgets[i], _, _ = joinBudget(t, s, string(rune('a'+i)), limit)
	}
	var mu sync.Mutex
	total := 0
	var wg sync.WaitGroup
	for _, b := range budgets {
		wg.Go(func() {
			for {
				n, err := b.Take(16)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != limit {
		t.Errorf("%d processes took %d pages of a budget of %d", procs, total, limit)
	}
}
