package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestSettleTimeoutThenRetry is the point of the idempotency key: the
// first Settle times out after its script call reached Redis (CLIENT
// PAUSE holds it in Redis, which runs it when the pause ends), the
// client retries with the same key: Redis charged once, and the retry
// answers duplicate.
func TestSettleTimeoutThenRetry(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	cfg := testConfig()
	cfg.Timeout = 100 * time.Millisecond
	s := newStore(t, c, cfg)
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}
	set := store.Settlement{Key: "llm:tenant-a", Limit: l, Reserved: 0, Actual: 4, IdempotencyKey: "req-1"}
	// settle retries on a timeout, as a client does with the same
	// idempotency key (the 100ms timeout can pass on a loaded machine).
	settle := func(set store.Settlement) (store.SettleResult, error) {
		for deadline := time.Now().Add(10 * time.Second); ; {
			r, err := s.Settle(ctx, t0, set)
			if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
				return r, err
			}
		}
	}
	// Load the script first, so the paused call is the charge itself.
	if _, err := settle(store.Settlement{Key: "warm", Limit: l, Actual: 1, IdempotencyKey: "w"}); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // not one of the store's connections
	defer admin.Close()
	if err := admin.Do(ctx, "CLIENT", "PAUSE", "1000", "ALL").Err(); err != nil {
		t.Fatalf("CLIENT PAUSE: %v", err)
	}
	_, err := s.Settle(ctx, t0, set)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("first settle during the pause: got %v, want a timeout (ErrUnavailable)", err)
	}
	time.Sleep(1100 * time.Millisecond) // the pause ends; the call runs
	r, err := settle(set)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if !r.Duplicate || r.Decision.Remaining != 6 {
		t.Fatalf("retry: got duplicate %v remaining %d, want a duplicate with 6 remaining (charged once)", r.Duplicate, r.Decision.Remaining)
	}
	out := decide(t, newStore(t, c, testConfig()), t0, store.Request{Key: set.Key, Limit: l}) // a store with testConfig's 5s timeout
	if out[0].Remaining != 6 {
		t.Fatalf("after the retry: remaining %d, want 6", out[0].Remaining)
	}
}

// TestSettleRecordExpires: the record lives for Config.SettleWindow (its
// TTL in Redis); after it, the same idempotency key charges again.
func TestSettleRecordExpires(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx := context.Background()
	cfg := testConfig()
	cfg.ClientTime = false // Redis' clock: a key is kept no longer than its TTL
	cfg.SettleWindow = 150 * time.Millisecond
	s := newStore(t, srv.Client(), cfg)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 100, Period: time.Hour}
	set := store.Settlement{Key: "k", Limit: l, Actual: 5, IdempotencyKey: "once"}
	now := time.Now()
	for i, wantDup := range []bool{false, true} {
		r, err := s.Settle(ctx, now, set)
		if err != nil || r.Duplicate != wantDup {
			t.Fatalf("settle %d: %+v, %v; want duplicate %v", i, r, err, wantDup)
		}
	}
	time.Sleep(300 * time.Millisecond)
	r, err := s.Settle(ctx, now, set)
	if err != nil || r.Duplicate || r.Decision.Remaining != 90 {
		t.Fatalf("after the window: %+v, %v; want a new charge leaving 90", r, err)
	}
}

// TestSettleAfterLibraryLost: a Redis that lost the function library
// (FUNCTION FLUSH, a restart) answers "Function not found" once; Settle
// loads the library again and charges, once.
func TestSettleAfterLibraryLost(t *testing.T) {
	srv := redistest.StartServer(t)
	c := srv.Client()
	ctx := context.Background()
	s := newStore(t, c, testConfig())
	l := algorithms.Limit{Algorithm: algorithms.SlidingWindowLog, Requests: 10, Period: time.Minute}
	for i, id := range []string{"a", "b"} {
		if err := c.FunctionFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Settle(ctx, t0, store.Settlement{Key: "k", Limit: l, Actual: 4, IdempotencyKey: id})
		if err != nil || r.Duplicate || r.Decision.Remaining != int64(6-4*i) {
			t.Fatalf("settle %d after FUNCTION FLUSH: %+v, %v", i, r, err)
		}
	}
	// The log is full after 8 of 10 and 4 more: 2 recorded, 2 not.
	r, err := s.Settle(ctx, t0, store.Settlement{Key: "k", Limit: l, Actual: 4, IdempotencyKey: "c"})
	if err != nil || r.Decision.Unrecorded != 2 || r.Decision.Remaining != 0 || r.Decision.Debt != 0 {
		t.Fatalf("a full log: %+v, %v; want 2 unrecorded, no debt", r, err)
	}
}
