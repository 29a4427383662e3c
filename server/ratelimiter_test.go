package server_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

type harness struct {
	client floodgatev1.RateLimiterClient
	health healthpb.HealthClient
	clock  *testkit.Clock
}

// start serves a RateLimiter over bufconn with a real gRPC client.
func start(t testing.TB, st store.Store, s server.Settings) *harness {
	t.Helper()
	clock := testkit.NewClock(testkit.T0)
	if s.Clock == nil {
		s.Clock = clock.Now
	}
	if st == nil {
		st = memstore.New(memstore.Config{})
	}
	t.Cleanup(func() { st.Close() })
	srv, hs := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{Settings: s}), nil, server.GRPCSettings{})
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &harness{client: floodgatev1.NewRateLimiterClient(conn), health: healthpb.NewHealthClient(conn), clock: clock}
}

// TestCheckReadmeExample is the README's grpcurl walk-through: three allowed
// (remaining 2, 1, 0), then denied with retry_after 20s.
func TestCheckReadmeExample(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	req := &floodgatev1.CheckRequest{Key: "user:1", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(3, time.Minute, 0)}
	for i, want := range []int64{2, 1, 0} {
		resp, err := h.client.Check(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Allowed || resp.Remaining != want || resp.Limit != 3 || resp.RetryAfter.AsDuration() != 0 {
			t.Fatalf("check %d: got allowed=%v remaining=%d limit=%d retry=%v, want allowed remaining=%d limit=3 retry=0",
				i, resp.Allowed, resp.Remaining, resp.Limit, resp.RetryAfter.AsDuration(), want)
		}
	}
	resp, err := h.client.Check(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || resp.RetryAfter.AsDuration() != 20*time.Second || resp.ResetAfter.AsDuration() != time.Minute {
		t.Fatalf("4th check: got allowed=%v retry=%v reset=%v, want denied retry=20s reset=1m", resp.Allowed, resp.RetryAfter.AsDuration(), resp.ResetAfter.AsDuration())
	}
	h.clock.Advance(20 * time.Second)
	if resp, err := h.client.Check(ctx, req); err != nil || !resp.Allowed || resp.Remaining != 0 {
		t.Fatalf("after 20s: got %v %v, want allowed remaining 0", resp, err)
	}
}

// TestCheckExactUnderContention fires 300 concurrent checks from 64
// goroutines at one key with limit 100: exactly 100 pass, per algorithm.
func TestCheckExactUnderContention(t *testing.T) {
	h := start(t, nil, server.Settings{})
	for _, alg := range []floodgatev1.Algorithm{
		floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW,
		floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW_LOG,
		floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW,
	} {
		t.Run(alg.String(), func(t *testing.T) {
			req := &floodgatev1.CheckRequest{Key: "contended", Algorithm: alg, Source: testkit.Inline(100, time.Hour, 0)}
			var allowed, denied atomic.Int64
			work := make(chan struct{}, 300)
			for range 300 {
				work <- struct{}{}
			}
			close(work)
			var wg sync.WaitGroup
			for range 64 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range work {
						resp, err := h.client.Check(context.Background(), req)
						if err != nil {
							t.Error(err)
							return
						}
						if resp.Allowed {
							allowed.Add(1)
						} else {
							denied.Add(1)
						}
					}
				}()
			}
			wg.Wait()
			if allowed.Load() != 100 || denied.Load() != 200 {
				t.Fatalf("got %d allowed, %d denied; want 100 and 200", allowed.Load(), denied.Load())
			}
		})
	}
}

// TestCheckInvalid: every bad input is InvalidArgument (NotFound for an
// unknown policy) with a message naming the field, and the server goes on.
func TestCheckInvalid(t *testing.T) {
	cfg, err := rules.Parse("policies.yaml", []byte("policies:\n  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, nil, server.Settings{Rules: testkit.StaticRules(cfg), MaxKeyBytes: 64})
	tb := floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET
	tests := []struct {
		name string
		req  *floodgatev1.CheckRequest
		code codes.Code
		msg  string
	}{
		{"empty key", &floodgatev1.CheckRequest{Algorithm: tb, Source: testkit.Inline(1, time.Second, 0)}, codes.InvalidArgument, "key: must not be empty"},
		{"long key", &floodgatev1.CheckRequest{Key: strings.Repeat("k", 65), Algorithm: tb, Source: testkit.Inline(1, time.Second, 0)}, codes.InvalidArgument, "key: 65 bytes exceed the limit of 64"},
		{"negative cost", &floodgatev1.CheckRequest{Key: "k", Cost: -1, Algorithm: tb, Source: testkit.Inline(1, time.Second, 0)}, codes.InvalidArgument, "cost: must not be negative"},
		{"cost above burst", &floodgatev1.CheckRequest{Key: "k", Cost: 11, Algorithm: tb, Source: testkit.Inline(5, time.Second, 10)}, codes.InvalidArgument, "cost: 11 exceeds the limit's capacity of 10 (burst)"},
		{"cost above requests", &floodgatev1.CheckRequest{Key: "k", Cost: 6, Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Source: testkit.Inline(5, time.Second, 0)}, codes.InvalidArgument, "cost: 6 exceeds the limit's capacity of 5 (requests)"},
		{"zero requests", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(0, time.Second, 0)}, codes.InvalidArgument, "limit.requests: must be positive"},
		{"negative requests", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(-3, time.Second, 0)}, codes.InvalidArgument, "limit.requests: must be positive"},
		{"zero period", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(1, 0, 0)}, codes.InvalidArgument, "limit.period: must be positive"},
		{"negative period", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(1, -time.Second, 0)}, codes.InvalidArgument, "limit.period: must be positive"},
		{"missing period", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1}}}, codes.InvalidArgument, "limit.period: required"},
		{"sub-millisecond period", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(1, 1500*time.Microsecond, 0)}, codes.InvalidArgument, "limit.period: must be a whole number of milliseconds"},
		{"negative burst", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(1, time.Second, -1)}, codes.InvalidArgument, "limit.burst: must not be negative"},
		{"burst on a window", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW, Source: testkit.Inline(1, time.Second, 5)}, codes.InvalidArgument, "limit.burst: applies only to ALGORITHM_TOKEN_BUCKET"},
		{"unknown algorithm", &floodgatev1.CheckRequest{Key: "k", Algorithm: 42, Source: testkit.Inline(1, time.Second, 0)}, codes.InvalidArgument, "algorithm: unknown value 42"},
		{"no algorithm with inline limit", &floodgatev1.CheckRequest{Key: "k", Source: testkit.Inline(1, time.Second, 0)}, codes.InvalidArgument, "algorithm: required with an inline limit"},
		{"neither limit nor policy", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb}, codes.InvalidArgument, "limit: one of limit or policy is required"},
		{"unknown policy", &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "gold"}}, codes.NotFound, `policy: unknown policy "gold"`},
		{"policy algorithm mismatch", &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}}, codes.InvalidArgument, "algorithm: token_bucket does not match policy"},
		{"sliding log above cap", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW_LOG, Source: testkit.Inline(10_001, time.Second, 0)}, codes.InvalidArgument, "sliding_window_log cap of 10000"},
		{"too fine to count", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW, Source: testkit.Inline(1<<40, 24*time.Hour, 0)}, codes.InvalidArgument, "exceeds 2^50"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.Check(context.Background(), tt.req)
			if got := status.Code(err); got != tt.code {
				t.Fatalf("got code %v (%v), want %v", got, err, tt.code)
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tt.msg) {
				t.Fatalf("got message %q, want it to contain %q", msg, tt.msg)
			}
		})
	}
	// The server keeps serving.
	if resp, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Algorithm: tb, Source: testkit.Inline(1, time.Second, 0)}); err != nil || !resp.Allowed {
		t.Fatalf("after bad inputs: got %v %v, want allowed", resp, err)
	}
	// Batch errors name the check.
	_, err = h.client.CheckBatch(context.Background(), &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{
		{Key: "a", Algorithm: tb, Source: testkit.Inline(1, time.Second, 0)},
		{Key: "", Algorithm: tb, Source: testkit.Inline(1, time.Second, 0)},
	}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "checks[1].key: must not be empty") {
		t.Fatalf("batch: got %v, want InvalidArgument naming checks[1].key", err)
	}
	if _, err := h.client.CheckBatch(context.Background(), &floodgatev1.CheckBatchRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty batch: got %v, want InvalidArgument", err)
	}
	if _, err := h.client.Reset(context.Background(), &floodgatev1.ResetRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("reset without key: got %v, want InvalidArgument", err)
	}
}

// TestCheckBatchAllOrNothing: when one check is denied, none is charged.
func TestCheckBatchAllOrNothing(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	fw := floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
	a := &floodgatev1.CheckRequest{Key: "a", Algorithm: fw, Source: testkit.Inline(5, time.Minute, 0)}
	b := &floodgatev1.CheckRequest{Key: "b", Algorithm: fw, Source: testkit.Inline(1, time.Minute, 0)}
	if _, err := h.client.Check(ctx, b); err != nil { // b is now spent
		t.Fatal(err)
	}
	resp, err := h.client.CheckBatch(ctx, &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Allowed || !resp.Results[0].Allowed || resp.Results[1].Allowed || resp.Results[1].RetryAfter.AsDuration() != time.Minute {
		t.Fatalf("got %v, want batch denied: a would fit, b denied with retry 1m", resp)
	}
	peek, err := h.client.Peek(ctx, &floodgatev1.PeekRequest{Key: "a", Algorithm: fw, Source: &floodgatev1.PeekRequest_Limit{Limit: a.GetLimit()}})
	if err != nil {
		t.Fatal(err)
	}
	if peek.Remaining != 5 {
		t.Fatalf("a after the denied batch: remaining %d, want 5 (nothing charged)", peek.Remaining)
	}
}

// TestPeekAndReset: Peek charges nothing; Reset gives the full limit back.
func TestPeekAndReset(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	sw := floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW
	lim := &floodgatev1.Limit{Requests: 2, Period: durationpb.New(time.Minute)}
	check := &floodgatev1.CheckRequest{Key: "p", Algorithm: sw, Source: &floodgatev1.CheckRequest_Limit{Limit: lim}}
	peek := &floodgatev1.PeekRequest{Key: "p", Algorithm: sw, Cost: 2, Source: &floodgatev1.PeekRequest_Limit{Limit: lim}}
	for range 3 {
		if p, err := h.client.Peek(ctx, peek); err != nil || !p.Allowed || p.Remaining != 2 {
			t.Fatalf("peek on a fresh key: got %v %v, want allowed remaining 2", p, err)
		}
	}
	if _, err := h.client.Check(ctx, check); err != nil {
		t.Fatal(err)
	}
	p, err := h.client.Peek(ctx, peek)
	if err != nil || p.Allowed || p.Remaining != 1 || p.RetryAfter.AsDuration() <= 0 {
		t.Fatalf("peek cost 2 after one check: got %v %v, want denied remaining 1 with a retry", p, err)
	}
	if _, err := h.client.Reset(ctx, &floodgatev1.ResetRequest{Key: "p"}); err != nil {
		t.Fatal(err)
	}
	if p, err := h.client.Peek(ctx, peek); err != nil || !p.Allowed || p.Remaining != 2 {
		t.Fatalf("peek after reset: got %v %v, want allowed remaining 2", p, err)
	}
}

// TestPolicy: a named policy from the config decides; shadow mode allows.
func TestPolicy(t *testing.T) {
	cfg, err := rules.Parse("policies.yaml", []byte(`policies:
  free: {requests_per_min: 15, burst: 30}
  login: {algorithm: sliding_window, requests: 5, period: 15m, failure_mode: closed}
  trial: {algorithm: fixed_window, requests: 1, period: 1h, shadow_mode: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	h := start(t, nil, server.Settings{Rules: testkit.StaticRules(cfg)})
	ctx := context.Background()
	policy := func(key, name string) *floodgatev1.CheckRequest {
		return &floodgatev1.CheckRequest{Key: key, Source: &floodgatev1.CheckRequest_Policy{Policy: name}}
	}
	for i := range 5 {
		if r, err := h.client.Check(ctx, policy("alice", "login")); err != nil || !r.Allowed || r.Limit != 5 {
			t.Fatalf("login %d: got %v %v, want allowed limit 5", i, r, err)
		}
	}
	if r, err := h.client.Check(ctx, policy("alice", "login")); err != nil || r.Allowed {
		t.Fatalf("6th login: got %v %v, want denied", r, err)
	}
	if r, err := h.client.Check(ctx, policy("bob", "free")); err != nil || !r.Allowed || r.Limit != 30 || r.Remaining != 29 {
		t.Fatalf("free tier: got %v %v, want allowed limit 30 remaining 29", r, err)
	}
	for i := range 3 {
		if r, err := h.client.Check(ctx, policy("carol", "trial")); err != nil || !r.Allowed {
			t.Fatalf("shadow check %d: got %v %v, want allowed", i, r, err)
		}
	}
}

// TestHealth: grpc.health.v1 answers SERVING.
func TestHealth(t *testing.T) {
	h := start(t, nil, server.Settings{})
	resp, err := h.health.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("got %v %v, want SERVING", resp, err)
	}
}
