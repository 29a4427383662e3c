package breaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/breaker"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestSettlePassesThrough: the breaker forwards Settle to a store that
// settles; a caller's conflicting idempotency keys are answers about the
// request, not failures of the store, so they never open it.
func TestSettlePassesThrough(t *testing.T) {
	b := breaker.New(memstore.New(memstore.Config{}), breaker.Config{Threshold: 2})
	defer b.Close()
	ctx := context.Background()
	s := store.Settlement{Key: "k", Limit: algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}, Actual: 12, IdempotencyKey: "i"}
	r, err := b.Settle(ctx, t0, s)
	if err != nil || r.Decision.Debt != 2 {
		t.Fatalf("settle: %+v, %v", r, err)
	}
	s.Actual = 13
	for range 5 {
		if _, err := b.Settle(ctx, t0, s); !errors.Is(err, store.ErrSettleConflict) {
			t.Fatalf("conflict: %v", err)
		}
	}
	out := make([]algorithms.Decision, 1)
	if err := b.Decide(ctx, t0, []store.Request{{Key: "k2", Limit: s.Limit, Cost: 1}}, out); err != nil {
		t.Fatalf("the breaker opened on conflicts: %v", err)
	}
}
