package crawl

import (
	"context"
	"testing"
	"time"
)

// A host is forgotten only when nothing of it is in flight, and forgetting
// it releases its request context; aborting cancels the requests in flight
// and gives later requests a fresh context.
func TestHostTableRequests(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	table := newHostTable(0)
	hs := table.get("a.test", t0)
	ctx, done := hs.beginRequest(context.Background())

	table.prune(t0.Add(time.Hour), time.Minute)
	if table.lookup("a.test") == nil {
		t.Fatal("a host with a request in flight was forgotten")
	}
	if ctx.Err() != nil {
		t.Fatal("prune cancelled a request in flight")
	}

	hs.abort()
	if ctx.Err() == nil {
		t.Fatal("abort left the request in flight running")
	}
	done()
	next, done2 := hs.beginRequest(context.Background())
	if next.Err() != nil {
		t.Fatal("a request begun after abort starts cancelled")
	}
	done2()

	table.prune(t0.Add(2*time.Hour), time.Minute)
	if table.lookup("a.test") != nil {
		t.Fatal("an idle host with nothing in flight was kept")
	}
	if next.Err() == nil {
		t.Fatal("forgetting the host did not release its request context")
	}
}
