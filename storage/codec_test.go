package storage

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"breakwater/breaker"
	"breakwater/robots"
	"breakwater/store"
)

// Records exactly as the code before storage owned their encodings wrote
// them (crawl marshalled breaker.Breaker, TransitionRecord and Case with
// encoding/json): files written then must read the same.
const (
	oldBreaker        = `{"State":1,"Failures":3,"ProbeSuccesses":0,"OpenedAt":"2025-03-01T12:00:00Z","Rest":300000000000,"Level":1,"DownSince":"2025-03-01T11:59:00Z","Generation":7,"Hold":1,"HoldReason":"asked us to stop"}`
	oldTransition     = `{"at":"2025-03-01T12:00:00Z","host":"a.example","from":"closed","to":"open","class":"transient","detail":"timeout"}`
	oldHeldTransition = `{"at":"2025-03-01T12:00:00Z","host":"a.example","from":"open","to":"open","hold":"case","reason":"403 names breakwater"}`
	oldCase           = `{"host":"b.example:8080","at":"2025-03-01T12:00:00Z","url":"http://b.example:8080/x","status":403,"excerpt":"no breakwater here"}`
	oldResolvedCase   = `{"host":"b.example:8080","at":"2025-03-01T12:00:00Z","url":"http://b.example:8080/x","status":403,"excerpt":"no breakwater here","resolved":"2025-03-01T13:00:00Z"}`
)

const (
	oldBreakerHost     = "a.example"
	undecodableRecord  = `{"State":`
	undecodableBreaker = "bad.example"
)

// putRaw writes raw records into the buckets as an older build would have.
func putRaw(t *testing.T, db *DB, bucket []byte, kv ...string) {
	t.Helper()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for i := 0; i < len(kv); i += 2 {
			if err := tx.Bucket(bucket).Put([]byte(kv[i]), []byte(kv[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func seqKeyString(seq uint64) string { return string(u64(seq)) }

func TestDecodeRecordsWrittenBefore(t *testing.T) {
	db := openTestDB(t)
	putRaw(t, db, bucketBreakers, oldBreakerHost, oldBreaker)
	putRaw(t, db, bucketTransitions, seqKeyString(1), oldTransition, seqKeyString(2), oldHeldTransition)
	putRaw(t, db, bucketCases, seqKeyString(1), oldCase, seqKeyString(2), oldResolvedCase)

	wantBreaker := breaker.Breaker{State: breaker.Open, Failures: 3, OpenedAt: t0, Rest: 5 * time.Minute,
		Level: 1, DownSince: t0.Add(-time.Minute), Generation: 7, Hold: breaker.Paused, HoldReason: "asked us to stop"}
	if b, err := db.Breaker(oldBreakerHost); err != nil || b != wantBreaker {
		t.Errorf("Breaker = %+v, %v; want %+v", b, err, wantBreaker)
	}
	wantTrans := []store.Transition{
		{At: t0, Host: "a.example", From: "closed", To: "open", Class: "transient", Detail: "timeout"},
		{At: t0, Host: "a.example", From: "open", To: "open", Hold: "case", Reason: "403 names breakwater"},
	}
	var trans []store.Transition
	if err := db.ForEachTransition(func(tr store.Transition) error { trans = append(trans, tr); return nil }); err != nil ||
		!reflect.DeepEqual(trans, wantTrans) {
		t.Errorf("transitions = %+v, %v; want %+v", trans, err, wantTrans)
	}
	open := store.Case{Host: "b.example:8080", At: t0, URL: "http://b.example:8080/x", Status: 403, Excerpt: "no breakwater here"}
	resolved := open
	resolved.Resolved = t0.Add(time.Hour)
	var cases []store.Case
	if err := db.ForEachCase(func(c store.Case) error { cases = append(cases, c); return nil }); err != nil ||
		!reflect.DeepEqual(cases, []store.Case{open, resolved}) {
		t.Errorf("cases = %+v, %v; want %+v", cases, err, []store.Case{open, resolved})
	}
}

// TestEncodingsUnchanged pins the stored form of transitions and cases: read
// back and written again they are byte for byte what the older code wrote,
// so older builds read newer files too. A breaker's form is its struct's
// fields, which may grow; it only has to read back the same.
func TestEncodingsUnchanged(t *testing.T) {
	old := openTestDB(t)
	putRaw(t, old, bucketBreakers, oldBreakerHost, oldBreaker)
	putRaw(t, old, bucketTransitions, seqKeyString(1), oldTransition, seqKeyString(2), oldHeldTransition)
	putRaw(t, old, bucketCases, seqKeyString(1), oldCase, seqKeyString(2), oldResolvedCase)
	db := openTestDB(t)
	var b store.Batch
	br, err := old.Breaker(oldBreakerHost)
	if err != nil {
		t.Fatal(err)
	}
	b.PutBreaker(oldBreakerHost, br)
	err = errors.Join(
		old.ForEachTransition(func(tr store.Transition) error { b.AppendTransition(tr); return nil }),
		old.ForEachCase(func(c store.Case) error { b.AppendCase(c); return nil }))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Commit(&b); err != nil {
		t.Fatal(err)
	}
	if again, err := db.Breaker(oldBreakerHost); err != nil || again != br {
		t.Errorf("breaker read back as %+v, %v; want %+v", again, err, br)
	}
	s := takeSnapshot(t, db)
	if want := []string{oldTransition, oldHeldTransition}; !reflect.DeepEqual(s.Trans, want) {
		t.Errorf("transitions written as\n%s\nwant\n%s", s.Trans, want)
	}
	var cases []string
	_ = db.forEach(bucketCases, func(_, v []byte) error { cases = append(cases, string(v)); return nil })
	if want := []string{oldCase, oldResolvedCase}; !reflect.DeepEqual(cases, want) {
		t.Errorf("cases written as\n%s\nwant\n%s", cases, want)
	}
}

func TestNewTransitionKeepsGeneration(t *testing.T) {
	local := time.FixedZone("east", 3600)
	got := store.NewTransition(breaker.Transition{At: t0.In(local), Host: "a.example", From: breaker.HalfOpen,
		To: breaker.Open, Class: breaker.Transient, Detail: "timeout", Generation: 9})
	want := store.Transition{At: t0, Host: "a.example", From: "half-open", To: "open", Class: "transient",
		Detail: "timeout", Generation: 9}
	if got != want || got.At.Location() != time.UTC {
		t.Errorf("NewTransition = %+v, want %+v in UTC", got, want)
	}
	db := openTestDB(t)
	commit(t, db, func(b *store.Batch) { b.AppendTransition(got) })
	if s := takeSnapshot(t, db); len(s.Trans) != 1 || !strings.Contains(s.Trans[0], `"generation":9`) {
		t.Errorf("stored transition %v lacks its generation", s.Trans)
	}
}

func TestDecodeErrorsNameTheRecord(t *testing.T) {
	db := openTestDB(t)
	putRaw(t, db, bucketBreakers, undecodableBreaker, undecodableRecord)
	putRaw(t, db, bucketTransitions, seqKeyString(41), undecodableRecord)
	putRaw(t, db, bucketCases, seqKeyString(42), undecodableRecord)
	_, byHost := db.Breaker(undecodableBreaker)
	tests := []struct {
		name, want string
		err        error
	}{
		{"Breaker", "decode breaker of bad.example", byHost},
		{"ForEachBreaker", "decode breaker of bad.example",
			db.ForEachBreaker(func(string, breaker.Breaker) error { return nil })},
		{"ForEachTransition", "decode transition 41", db.ForEachTransition(func(store.Transition) error { return nil })},
		{"ForEachCase", "decode case 42", db.ForEachCase(func(store.Case) error { return nil })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
				t.Errorf("error = %v, want one naming %q", tt.err, tt.want)
			}
		})
	}
}

func TestUnencodableRecordFailsCommit(t *testing.T) {
	far := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) // past what JSON times hold
	tests := []struct {
		name, want string
		add        func(b *store.Batch)
	}{
		{"breaker", "encode breaker of a.com", func(b *store.Batch) { b.PutBreaker("a.com", breaker.Breaker{OpenedAt: far}) }},
		{"transition", "encode transition of a.com", func(b *store.Batch) { b.AppendTransition(store.Transition{Host: "a.com", At: far}) }},
		{"case", "encode case of a.com", func(b *store.Batch) { b.AppendCase(store.Case{Host: "a.com", At: far}) }},
		{"robots", "encode robots.txt of a.com", func(b *store.Batch) { b.PutRobots("a.com", &robots.Rules{Status: -1}) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openTestDB(t)
			var b store.Batch
			b.Add(item("a.com", "/"))
			tt.add(&b)
			if _, err := db.Commit(&b); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Commit = %v, want an error naming %q", err, tt.want)
			}
			if c := mustCounts(t, db); c != (store.Counts{}) {
				t.Errorf("failed commit applied something: %+v", c)
			}
		})
	}
}
