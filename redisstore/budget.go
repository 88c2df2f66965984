package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fleet's --max-pages (bw:{meta}:budget, budget.lua): one budget for
// the processes crawling the store together, taken in chunks so that a
// page costs no round trip, and given back in part when a process stops.

var (
	//go:embed budget.lua
	budgetSource string
	budgetScript = redis.NewScript(budgetSource)
)

const keyBudget = "bw:{meta}:budget"

// PageBudget is one process's part in the fleet's --max-pages.
type PageBudget struct {
	s            *Store
	id, instance string
}

// JoinPageBudget makes the process id (its run instance) a member of the
// fleet's page budget. When no other member's heartbeat is younger than
// stale, the fleet's run is over and a new one starts with limit pages;
// otherwise the process shares the live run's budget, whose limit and
// pages used so far come back (the limit may differ from the one asked).
func (s *Store) JoinPageBudget(ctx context.Context, id, instance string, limit int, stale time.Duration) (b *PageBudget, runLimit, used int, err error) {
	res, err := budgetScript.Run(ctx, s.rdb, []string{keyBudget, keyProcs}, "join", id, instance, limit, ms(stale)).Int64Slice()
	if err != nil {
		return nil, 0, 0, fmt.Errorf("store %s: join the fleet's page budget: %w", s.display, err)
	}
	if len(res) != 2 {
		return nil, 0, 0, fmt.Errorf("store %s: join the fleet's page budget: reply %v", s.display, res)
	}
	return &PageBudget{s: s, id: id, instance: instance}, int(res[0]), int(res[1]), nil
}

// Take takes up to want pages of the budget: fewer as it runs out, so
// that the last pages are spread over the members, and none once it has.
func (b *PageBudget) Take(want int) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := budgetScript.Run(ctx, b.s.rdb, []string{keyBudget, keyProcs}, "take", b.id, b.instance, max(want, 1)).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("store %s: take pages of the fleet's budget: %w", b.s.display, err)
	}
	if len(res) != 3 {
		return 0, fmt.Errorf("store %s: take pages of the fleet's budget: reply %v", b.s.display, res)
	}
	return int(res[0]), nil
}

// Leave gives back the unused pages taken and leaves the fleet's run.
func (b *PageBudget) Leave(unused int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := budgetScript.Run(ctx, b.s.rdb, []string{keyBudget, keyProcs}, "leave", b.id, b.instance, max(unused, 0)).Err(); err != nil {
		return fmt.Errorf("store %s: give back the fleet's pages: %w", b.s.display, err)
	}
	return nil
}
