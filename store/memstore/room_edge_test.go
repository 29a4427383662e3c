package memstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// TestRoomAtTheExpiringMillisecond: a full shard that refused a new key
// sweeps again at the very millisecond its soonest state expires, and
// takes the key then (not a millisecond later).
func TestRoomAtTheExpiringMillisecond(t *testing.T) {
	s := New(Config{MaxKeys: 1, Shards: 1, SweepInterval: -1})
	defer s.Close()
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 10, Period: time.Minute}
	try := func(at time.Time, key string) error {
		return s.Decide(context.Background(), at, []store.Request{{Key: key, Limit: l, Cost: 1}}, make([]algorithms.Decision, 1))
	}
	if err := try(t0, "a"); err != nil { // expires with its window, at t0 + 1m
		t.Fatal(err)
	}
	if err := try(t0.Add(30*time.Second), "b"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("b while a lives: %v, want the shard full (ErrUnavailable)", err)
	}
	if err := try(t0.Add(time.Minute-time.Millisecond), "b"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("b a millisecond before a expires: %v, want the shard full", err)
	}
	if err := try(t0.Add(time.Minute), "b"); err != nil {
		t.Errorf("b at the millisecond a expires: %v, want room", err)
	}
}
