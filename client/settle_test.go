package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// TestReserveSettle is the LLM flow through the client: reserve an
// estimate of 300 tokens of 1000 a minute, use 1500; the settle puts the
// key 500 in debt, its retry charges nothing, and checks wait for the debt.
func TestReserveSettle(t *testing.T) {
	addr, clock := floodgatetest.Start(t, nil)
	c := floodgatetest.Dial(t, addr)
	ctx := context.Background()
	tpm := client.Limit{Algorithm: algorithms.TokenBucket, Requests: 1000, Period: time.Minute}

	r, err := c.Reserve(ctx, "tenant:a", tpm, 300)
	if err != nil || !r.Decision.Allowed || r.Decision.Remaining != 700 {
		t.Fatalf("reserve: %+v, %v", r, err)
	}
	want := client.Settlement{Limit: 1000, Debt: 500, RetryAfter: 30060 * time.Millisecond, ResetAfter: 90 * time.Second}
	for i := range 3 { // the first charges; the retries are duplicates
		got, err := r.Settle(ctx, 1500)
		if err != nil {
			t.Fatal(err)
		}
		want.Duplicate = i > 0
		if got != want {
			t.Fatalf("settle %d: got %+v, want %+v", i, got, want)
		}
	}
	if d, err := c.Check(ctx, client.Request{Key: "tenant:a", Limit: tpm}); err != nil || d.Allowed || d.RetryAfter != 30060*time.Millisecond {
		t.Fatalf("check in debt: %+v, %v", d, err)
	}
	// A second reservation has its own idempotency key.
	r2, err := c.Reserve(ctx, "tenant:b", tpm, 100)
	if err != nil || r2.IdempotencyKey() == r.IdempotencyKey() || r2.IdempotencyKey() == "" {
		t.Fatalf("two reservations, keys %q and %q (%v)", r.IdempotencyKey(), r2.IdempotencyKey(), err)
	}
	// Unused estimate comes back.
	if s, err := r2.Settle(ctx, 40); err != nil || s.Remaining != 960 || s.Debt != 0 {
		t.Fatalf("settle below the estimate: %+v, %v", s, err)
	}
	// Usage after the fact, nothing reserved.
	clock.Advance(time.Hour)
	if s, err := c.Charge(ctx, "tenant:a", tpm, 1200, "job-7"); err != nil || s.Debt != 200 || s.Duplicate {
		t.Fatalf("charge: %+v, %v", s, err)
	}
	if _, err := c.Charge(ctx, "tenant:a", tpm, 1300, "job-7"); err == nil {
		t.Fatalf("the same idempotency key with another amount was accepted")
	}
}
