package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestGiveBackRefusedEverywhere: on a port whose calls carry a refusal
// (bound beyond loopback without tokens), every way of giving budget back
// is refused alike: Reset, a Check's negative cost and a settlement below
// its reservation answer PermissionDenied naming the fix, and Envoy's
// negative hits are decided as 0 hits (never an error answer, which Envoy
// would let through); each refusal is counted, and the spent keys stay
// spent.
func TestGiveBackRefusedEverywhere(t *testing.T) {
	const why = "refused on this port: --auth-token-file"
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	s := server.Settings{Rules: testkit.StaticRules(testkit.ParseRules(t, "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 2}\n")),
		Clock: testkit.NewClock(testkit.T0).Now, Metrics: m}
	refuse := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(giveback.WithRefusal(ctx, why), req)
	}
	srv, _ := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{Settings: s}), server.NewEnvoy(st, server.EnvoySettings{Settings: s}), server.GRPCSettings{UnaryInterceptors: []grpc.UnaryServerInterceptor{refuse}})
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
	ctx := context.Background()
	rl, rls := floodgatev1.NewRateLimiterClient(conn), rlsv3.NewRateLimitServiceClient(conn)

	inline := &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Period: durationpb.New(time.Hour)}}
	if r, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Cost: 1, Source: inline}); err != nil || !r.Allowed {
		t.Fatalf("check: %v %v", r, err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--auth-token-file") {
			t.Errorf("%s: %v, want PermissionDenied naming the fix", what, err)
		}
	}
	_, err = rl.Reset(ctx, &floodgatev1.ResetRequest{Key: "k"})
	refused("Reset", err)
	_, err = rl.Settle(ctx, &floodgatev1.SettleRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Reserved: 1000000, Actual: 0, IdempotencyKey: "x1", Source: &floodgatev1.SettleRequest_Limit{Limit: inline.Limit}})
	refused("Settle refund", err)
	leaky := &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Period: durationpb.New(time.Hour)}}
	_, err = rl.Check(ctx, &floodgatev1.CheckRequest{Key: "l", Algorithm: floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET, Cost: -1, Source: leaky})
	refused("negative cost", err)
	if r, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Cost: 1, Source: inline}); err != nil || r.Allowed {
		t.Errorf("the spent key after the refused give-backs: %v %v, want denied", r, err)
	}
	// A settlement that charges more than it reserved gives nothing back.
	if _, err := rl.Settle(ctx, &floodgatev1.SettleRequest{Key: "s", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Reserved: 0, Actual: 1, IdempotencyKey: "x2", Source: &floodgatev1.SettleRequest_Limit{Limit: inline.Limit}}); err != nil {
		t.Errorf("a settlement with debt: %v", err)
	}

	desc := func(negative bool, hits uint64) *ratelimitv3.RateLimitDescriptor {
		d := testkit.Descriptor("k", "a")
		d.IsNegativeHits, d.HitsAddend = negative, wrapperspb.UInt64(hits)
		return d
	}
	for range 2 {
		if r, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(false, 1)}}); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("charge: %v %v", r, err)
		}
	}
	r, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(true, 1000000)}})
	if err != nil || r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("refused negative hits: %v %v, want the spent limit's OVER_LIMIT, no error", r, err)
	}
	if r, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc(false, 1)}}); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("after the refused negative hits: %v %v, want OVER_LIMIT (nothing given back)", r, err)
	}
	for _, c := range []struct {
		api, kind string
		want      float64
	}{{"check", "reset", 1}, {"check", "refund", 2}, {"envoy", "refund", 1}} {
		if got := counterValue(t, reg, "floodgate_givebacks_refused_total", map[string]string{"api": c.api, "kind": c.kind}); got != c.want {
			t.Errorf("floodgate_givebacks_refused_total{api=%s,kind=%s} = %v, want %v", c.api, c.kind, got, c.want)
		}
	}
}

// counterValue is the counter name with exactly labels in reg, or 0.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
