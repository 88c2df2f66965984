package storage

import (
	"breakwater/store"
	"testing"
	"time"
)

func TestRunningAtRoundTrip(t *testing.T) {
	db := openTestDB(t)
	if got, err := db.RunningAt(); err != nil || !got.IsZero() {
		t.Fatalf("RunningAt of a new file = %v, %v; want the zero time", got, err)
	}
	at := time.Date(2026, 12, 1, 10, 30, 0, 123, time.FixedZone("x", 3600))
	commit(t, db, func(b *store.Batch) { b.PutRunningAt(at) })
	commit(t, db, func(b *store.Batch) { b.PutRunningAt(at.Add(time.Second)) })
	got, err := db.RunningAt()
	if err != nil || !got.Equal(at.Add(time.Second)) {
		t.Fatalf("RunningAt = %v, %v; want %v (the last one stored)", got, err, at.Add(time.Second))
	}
}
