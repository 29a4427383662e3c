package server_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

func settleLimit(requests int64, period time.Duration) *floodgatev1.SettleRequest_Limit {
	return &floodgatev1.SettleRequest_Limit{Limit: &floodgatev1.Limit{Requests: requests, Period: durationpb.New(period)}}
}

// TestSettleReserveThenSettle is the LLM flow: 1000 tokens a minute;
// reserve an estimate of 300, use 1500: the 1200 above go into debt (500
// owed), checks are denied until it is repaid, and a retry of the settle
// charges nothing.
func TestSettleReserveThenSettle(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	tb := floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	check := &floodgatev1.CheckRequest{Key: "tenant:a", Algorithm: tb, Cost: 300,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1000, Period: durationpb.New(time.Minute)}}}
	if resp, err := h.client.Check(ctx, check); err != nil || !resp.Allowed || resp.Remaining != 700 {
		t.Fatalf("reserve: %v %v", resp, err)
	}
	settle := &floodgatev1.SettleRequest{Key: "tenant:a", Algorithm: tb, Reserved: 300, Actual: 1500, IdempotencyKey: "req-1", Source: settleLimit(1000, time.Minute)}
	resp, err := h.client.Settle(ctx, settle)
	if err != nil {
		t.Fatal(err)
	}
	// 500 owed, then 1 token: 501 tokens at 1000/min = 30.06s.
	if resp.Debt != 500 || resp.Remaining != 0 || resp.Duplicate || resp.Limit != 1000 ||
		resp.RetryAfter.AsDuration() != 30060*time.Millisecond || resp.ResetAfter.AsDuration() != 90*time.Second {
		t.Fatalf("settle: got %v", resp)
	}
	again, err := h.client.Settle(ctx, settle)
	if err != nil || !again.Duplicate || again.Debt != 500 {
		t.Fatalf("retry: got %v, %v; want a duplicate still owing 500", again, err)
	}
	c, err := h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "tenant:a", Algorithm: tb, Source: check.Source})
	if err != nil || c.Allowed || c.RetryAfter.AsDuration() != 30060*time.Millisecond {
		t.Fatalf("check in debt: got %v, %v", c, err)
	}
	h.clock.Advance(30060 * time.Millisecond)
	if c, err := h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "tenant:a", Algorithm: tb, Source: check.Source}); err != nil || !c.Allowed {
		t.Fatalf("check after the debt: got %v, %v", c, err)
	}
	// A refund of an unused estimate.
	refund := &floodgatev1.SettleRequest{Key: "tenant:a", Algorithm: tb, Reserved: 400, Actual: 0, IdempotencyKey: "req-2", Source: settleLimit(1000, time.Minute)}
	if r, err := h.client.Settle(ctx, refund); err != nil || r.Remaining != 400 || r.Debt != 0 {
		t.Fatalf("refund: got %v, %v", r, err)
	}
}

// TestSettleBadInputs: every bad input is an InvalidArgument naming the
// field; none charges.
func TestSettleBadInputs(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	tb := floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	ok := func() *floodgatev1.SettleRequest {
		return &floodgatev1.SettleRequest{Key: "k", Algorithm: tb, Actual: 5, IdempotencyKey: "i", Source: settleLimit(10, time.Second)}
	}
	for _, c := range []struct {
		field string
		edit  func(r *floodgatev1.SettleRequest)
	}{
		{"key", func(r *floodgatev1.SettleRequest) { r.Key = "" }},
		{"key", func(r *floodgatev1.SettleRequest) { r.Key = strings.Repeat("k", 5000) }},
		{"algorithm", func(r *floodgatev1.SettleRequest) { r.Algorithm = 0 }},
		{"algorithm", func(r *floodgatev1.SettleRequest) { r.Algorithm = 99 }},
		{"limit", func(r *floodgatev1.SettleRequest) { r.Source = nil }},
		{"limit.requests", func(r *floodgatev1.SettleRequest) { r.Source = settleLimit(0, time.Second) }},
		{"limit.period", func(r *floodgatev1.SettleRequest) { r.Source = settleLimit(1, 0) }},
		{"reserved", func(r *floodgatev1.SettleRequest) { r.Reserved = -1 }},
		{"reserved", func(r *floodgatev1.SettleRequest) { r.Reserved = 1 << 60 }},
		{"actual", func(r *floodgatev1.SettleRequest) { r.Actual = -3 }},
		{"actual", func(r *floodgatev1.SettleRequest) { r.Actual = 1 << 51 }},
		{"idempotency_key", func(r *floodgatev1.SettleRequest) { r.IdempotencyKey = "" }},
		{"idempotency_key", func(r *floodgatev1.SettleRequest) { r.IdempotencyKey = strings.Repeat("x", 129) }},
	} {
		req := ok()
		c.edit(req)
		_, err := h.client.Settle(ctx, req)
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), c.field+":") {
			t.Errorf("%s: got %v, want InvalidArgument naming %q", c.field, err, c.field)
		}
	}
	if _, err := h.client.Settle(ctx, &floodgatev1.SettleRequest{Key: "k", Actual: 1, IdempotencyKey: "i", Source: &floodgatev1.SettleRequest_Policy{Policy: "nope"}}); status.Code(err) != codes.NotFound {
		t.Errorf("unknown policy: got %v, want NotFound", err)
	}
	// Nothing was charged by the refused settles.
	r, err := h.client.Settle(ctx, ok())
	if err != nil || r.Remaining != 5 {
		t.Fatalf("a good settle after the bad ones: %v, %v; want remaining 5", r, err)
	}
	// The same idempotency key with other numbers names another settlement.
	other := ok()
	other.Actual = 6
	if _, err := h.client.Settle(ctx, other); status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), "idempotency_key:") {
		t.Errorf("reused idempotency key: got %v, want InvalidArgument naming idempotency_key", err)
	}
}

// TestSettleConcurrentRetries: one settle retried from 20 goroutines at
// once charges once.
func TestSettleConcurrentRetries(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	req := &floodgatev1.SettleRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW, Actual: 7, IdempotencyKey: "once", Source: settleLimit(10, time.Minute)}
	var wg sync.WaitGroup
	var charged, failed atomic.Int32
	for range 20 {
		wg.Go(func() {
			r, err := h.client.Settle(ctx, req)
			switch {
			case err != nil:
				failed.Add(1)
			case !r.Duplicate:
				charged.Add(1)
			}
		})
	}
	wg.Wait()
	if charged.Load() != 1 || failed.Load() != 0 {
		t.Fatalf("%d charged, %d failed; want 1 and 0", charged.Load(), failed.Load())
	}
	p, err := h.client.Peek(ctx, &floodgatev1.PeekRequest{Key: "k", Algorithm: req.Algorithm, Source: &floodgatev1.PeekRequest_Limit{Limit: req.GetLimit()}})
	if err != nil || p.Remaining != 3 {
		t.Fatalf("peek: %v, %v; want remaining 3", p, err)
	}
}

// TestSettleStoreDown: a store that cannot decide answers degraded (the
// client retries with the same idempotency key).
func TestSettleStoreDown(t *testing.T) {
	h := start(t, downSettler{memstore.New(memstore.Config{})}, server.Settings{})
	r, err := h.client.Settle(context.Background(), &floodgatev1.SettleRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Actual: 1, IdempotencyKey: "i", Source: settleLimit(10, time.Minute)})
	if err != nil || !r.Degraded || r.Limit != 10 {
		t.Fatalf("got %v, %v; want degraded with limit 10", r, err)
	}
}

// downSettler is a store whose Settle fails as an unreachable Redis does.
type downSettler struct{ *memstore.Store }

func (downSettler) Settle(context.Context, time.Time, store.Settlement) (store.SettleResult, error) {
	return store.SettleResult{}, store.ErrUnavailable
}
