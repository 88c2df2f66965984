package redisstore

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

// One process per fleet ID. Every process writes a heartbeat under its ID
// (bw:{meta}:procs) with a random instance name of its run and the
// server's time; a process starting with an ID whose heartbeat another
// instance wrote recently is refused, and a process whose ID was taken
// over (it stalled past the stale age and a new one started) stops at its
// next heartbeat instead of writing on beside it.

var (
	//go:embed proc.lua
	procSource string
	procScript = redis.NewScript(procSource)
)

// ErrFleetIDInUse is a fleet ID whose heartbeat a live process keeps.
var ErrFleetIDInUse = errors.New("fleet ID in use")

// errTakenOver is a fleet ID another run of the same ID took meanwhile.
var errTakenOver = errors.New("another process took over this process's fleet ID (it was stalled past its heartbeat); this one stops")

// IDInUseError names the live process holding a fleet ID.
type IDInUseError struct {
	ID       string
	Beat     Heartbeat
	Age      time.Duration // of its last heartbeat, by the server's clock
	Instance string
}

func (e *IDInUseError) Error() string {
	who := "a live process"
	if e.Beat.PID != 0 {
		who = fmt.Sprintf("process %d on %s", e.Beat.PID, e.Beat.Hostname)
	}
	return fmt.Sprintf("fleet ID %q is in use by %s (last heartbeat %s ago, at %s): give this process another --fleet-id, or stop that one first",
		e.ID, who, e.Age.Round(time.Millisecond), e.Beat.At.UTC().Format(time.RFC3339))
}

func (e *IDInUseError) Unwrap() error { return ErrFleetIDInUse }

// Heartbeat is a process's last heartbeat as stored.
type Heartbeat struct {
	At       time.Time `json:"at"`
	Hosts    int       `json:"hosts"`
	InFlight int       `json:"in_flight"`
	PID      int       `json:"pid,omitempty"`
	Hostname string    `json:"hostname,omitempty"`
	Instance string    `json:"instance,omitempty"`
	ServerMS int64     `json:"server_ms,omitempty"`
}

// NewInstance names one run of a process, for its heartbeats.
func NewInstance() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ClaimID takes fleet ID id for the run instance. A heartbeat of another
// instance younger than stale is watched until it is stale: if it moves
// meanwhile its process is alive and the ID is refused
// (*IDInUseError, ErrFleetIDInUse); if not, that process died (a kill
// leaves its heartbeat behind) and the ID is taken. A restart after a kill
// so waits up to stale.
func (s *Store) ClaimID(ctx context.Context, id, instance string, stale time.Duration, now time.Time) error {
	beat := s.beatJSON(now, 0, 0)
	var first string
	for {
		res, err := procScript.Run(ctx, s.rdb, []string{keyProcs}, "claim", id, instance, ms(stale), beat).Slice()
		if err != nil {
			return fmt.Errorf("store %s: claim fleet ID %s: %w", s.display, id, err)
		}
		if ok, _ := res[0].(int64); ok == 1 {
			return nil
		}
		raw, _ := res[1].(string)
		age, _ := res[2].(int64)
		if gone(raw) {
			stale = 0 // its process is known dead: take the ID now
			continue
		}
		if first == "" {
			first = raw
		} else if raw != first {
			e := &IDInUseError{ID: id, Age: time.Duration(age) * time.Millisecond}
			_ = json.Unmarshal([]byte(raw), &e.Beat)
			return e
		}
		wait := min(stale-time.Duration(age)*time.Millisecond+time.Millisecond, 100*time.Millisecond)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(max(wait, time.Millisecond)):
		}
	}
}

// gone reports whether the heartbeat raw is of a process of this host
// that no longer runs (another process's PID, not found): a restart after
// a kill need not wait the heartbeat out. Containers sharing a host name
// may each run their process as PID 1, so a PID that exists proves
// nothing, nor does this process's own.
func gone(raw string) bool {
	var b Heartbeat
	if json.Unmarshal([]byte(raw), &b) != nil || b.PID <= 0 || b.PID == os.Getpid() {
		return false
	}
	name, _ := os.Hostname()
	return b.Hostname == name && !processRuns(b.PID)
}

func (s *Store) beatJSON(now time.Time, hosts, inflight int) []byte {
	name, _ := os.Hostname()
	b, _ := json.Marshal(Heartbeat{At: now.UTC(), Hosts: hosts, InFlight: inflight, PID: os.Getpid(), Hostname: name})
	return b
}

// beat queues the run's heartbeat on pipe; its reply is 0 when another
// run has taken the ID.
func (s *Store) beat(ctx context.Context, pipe redis.Pipeliner, id, instance string, data []byte) *redis.Cmd {
	return procScript.EvalSha(ctx, pipe, []string{keyProcs}, "beat", id, instance, data)
}

// endBeat queues the removal of the run's heartbeat on pipe.
func (s *Store) endBeat(ctx context.Context, pipe redis.Pipeliner, id, instance string) {
	procScript.EvalSha(ctx, pipe, []string{keyProcs}, "end", id, instance)
}
