package server_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/lenientcodec"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

type envoyHarness struct {
	client rlsv3.RateLimitServiceClient
	clock  *testkit.Clock
}

func startEnvoy(t testing.TB, yaml string, st store.Store, s server.EnvoySettings) *envoyHarness {
	t.Helper()
	cfg, err := rules.Parse("edge.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	clock := testkit.NewClock(testkit.T0)
	s.Rules = testkit.StaticRules(cfg)
	if s.Clock == nil {
		s.Clock = clock.Now
	}
	if st == nil {
		st = memstore.New(memstore.Config{})
	}
	t.Cleanup(func() { st.Close() })
	srv, _ := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{}), server.NewEnvoy(st, s), server.GRPCSettings{})
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(lenientcodec.Codec{}))) // sends what Envoy may: values that are not UTF-8
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &envoyHarness{client: rlsv3.NewRateLimitServiceClient(conn), clock: clock}
}

func (h *envoyHarness) call(t testing.TB, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs})
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// codes of a response: overall then per descriptor, e.g. "OVER_LIMIT:OK,OVER_LIMIT".
func codesOf(r *rlsv3.RateLimitResponse) string {
	var parts []string
	for _, s := range r.Statuses {
		parts = append(parts, s.Code.String())
	}
	return r.OverallCode.String() + ":" + strings.Join(parts, ",")
}

func headerMap(r *rlsv3.RateLimitResponse) map[string]string {
	m := map[string]string{}
	for _, h := range r.ResponseHeadersToAdd {
		m[h.Key] = h.Value
	}
	return m
}

func TestEnvoyUnknownDomain(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "elsewhere", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("remote_address", "1")}})
	if err != nil || codesOf(resp) != "OK:OK" {
		t.Fatalf("got %v %v, want OK", resp, err)
	}
}

// TestEnvoyAllOrNothing: a request denied by one descriptor charges none of
// the others (envoyproxy/ratelimit charges them all).
func TestEnvoyAllOrNothing(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	ip := testkit.Descriptor("remote_address", "192.0.2.9") // 3/s
	strict := testkit.Descriptor("remote_address", "10.0.0.1")
	if got := codesOf(h.call(t, strict)); got != "OK:OK" {
		t.Fatal(got)
	}
	for range 5 {
		if got := codesOf(h.call(t, ip, strict)); got != "OVER_LIMIT:OK,OVER_LIMIT" {
			t.Fatalf("got %s, want OVER_LIMIT:OK,OVER_LIMIT", got)
		}
	}
	// The 3/s descriptor was never charged: three calls still pass.
	for i := range 3 {
		if got := codesOf(h.call(t, ip)); got != "OK:OK" {
			t.Fatalf("call %d after the denied requests: got %s, want OK", i, got)
		}
	}
}

func TestEnvoyHitsAddendAndRefund(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	ctx := context.Background()
	ip := testkit.Descriptor("remote_address", "192.0.2.10")
	// Request-level hits_addend 3 spends the whole 3/s.
	r, err := h.client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{ip}, HitsAddend: 3})
	if err != nil || codesOf(r) != "OK:OK" || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("hits 3: got %v %v, want OK remaining 0", r, err)
	}
	// Per-descriptor hits_addend 0 looks without spending, answering as
	// one hit would: the next unit does not fit.
	peek := testkit.Descriptor("remote_address", "192.0.2.10")
	peek.HitsAddend = wrapperspb.UInt64(0)
	if r := h.call(t, peek); codesOf(r) != "OVER_LIMIT:OVER_LIMIT" || r.Statuses[0].LimitRemaining != 0 {
		t.Fatalf("peek: got %v, want OVER_LIMIT remaining 0", r)
	}
	if got := codesOf(h.call(t, ip)); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("over: got %s", got)
	}
	// is_negative_hits gives two back.
	refund := testkit.Descriptor("remote_address", "192.0.2.10")
	refund.HitsAddend = wrapperspb.UInt64(2)
	refund.IsNegativeHits = true
	if r := h.call(t, refund); codesOf(r) != "OK:OK" || r.Statuses[0].LimitRemaining != 2 {
		t.Fatalf("refund: got %v, want OK remaining 2", r)
	}
	for i, want := range []string{"OK:OK", "OK:OK", "OVER_LIMIT:OVER_LIMIT"} {
		if got := codesOf(h.call(t, ip)); got != want {
			t.Fatalf("after refund, call %d: got %s, want %s", i, got, want)
		}
	}
}

func TestEnvoyShadowMode(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	for i := range 3 {
		r := h.call(t, testkit.Descriptor("shadowed", "x"))
		if codesOf(r) != "OK:OK" {
			t.Fatalf("shadow call %d: got %s, want OK", i, codesOf(r))
		}
	}
	// Global shadow mode.
	g := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{ShadowMode: true})
	for i := range 5 {
		if got := codesOf(g.call(t, testkit.Descriptor("remote_address", "10.0.0.1"))); got != "OK:OK" {
			t.Fatalf("global shadow call %d: got %s, want OK", i, got)
		}
	}
}

func TestEnvoyHeaders(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	ip := testkit.Descriptor("remote_address", "192.0.2.20")
	r := h.call(t, ip)
	hs := headerMap(r)
	want := map[string]string{
		"x-ratelimit-limit":     "3, 3;w=1",
		"x-ratelimit-remaining": "2",
		"x-ratelimit-reset":     "1",
		"ratelimit-policy":      `"edge.remote_address";q=3;w=1`,
		"ratelimit":             `"edge.remote_address";r=2;t=1`,
	}
	for k, v := range want {
		if hs[k] != v {
			t.Errorf("%s: got %q, want %q (all: %v)", k, hs[k], v, hs)
		}
	}
	if _, ok := hs["retry-after"]; ok {
		t.Errorf("retry-after on an OK answer: %v", hs)
	}
	h.call(t, ip)
	h.call(t, ip)
	r = h.call(t, ip)
	if hs := headerMap(r); hs["retry-after"] != "1" || hs["x-ratelimit-remaining"] != "0" {
		t.Errorf("over limit: got %v, want retry-after 1 and remaining 0", hs)
	}
	off := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{NoHeaders: true})
	if r := off.call(t, ip); len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("headers switched off: got %v", r.ResponseHeadersToAdd)
	}
}

// TestEnvoyWindowEdge is the window-edge attack: with a sliding
// window of 10 per 2s, ten requests just before a window edge and ten just
// after: the second ten are denied.
func TestEnvoyWindowEdge(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	h.clock.Advance(2*time.Second - 10*time.Millisecond) // 10ms before an edge
	d := testkit.Descriptor("login", "alice")
	for i := range 10 {
		if got := codesOf(h.call(t, d)); got != "OK:OK" {
			t.Fatalf("before the edge, call %d: got %s", i, got)
		}
	}
	h.clock.Advance(20 * time.Millisecond) // 10ms after the edge
	for i := range 10 {
		if got := codesOf(h.call(t, d)); got != "OVER_LIMIT:OVER_LIMIT" {
			t.Fatalf("after the edge, call %d: got %s, want OVER_LIMIT", i, got)
		}
	}
}

func TestEnvoyLimitOverride(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	d := testkit.Descriptor("remote_address", "192.0.2.30")
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}
	if got := codesOf(h.call(t, d)); got != "OK:OK" {
		t.Fatal(got)
	}
	r := h.call(t, d)
	if codesOf(r) != "OVER_LIMIT:OVER_LIMIT" || r.Statuses[0].CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Fatalf("override 1/min, 2nd call: got %v", r)
	}
}

func TestEnvoyInvalid(t *testing.T) {
	h := startEnvoy(t, testkit.EnvoyRules, nil, server.EnvoySettings{})
	long := strings.Repeat("v", 5000)
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"empty domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("a", "b")}}, "domain: must not be empty"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "edge"}, "descriptors: must hold at least one descriptor"},
		{"descriptor without entries", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("a", "b"), {}}}, "descriptors[1].entries: must hold at least one entry"},
		{"empty key", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("", "b")}}, "descriptors[0].entries[0].key: must not be empty"},
		{"huge key", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor(long, "b")}}, "descriptors[0].entries[0].key: 5000 bytes exceed the limit of 4096"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: make([]*ratelimitv3.RateLimitDescriptor, 65)}, "descriptors: 65 descriptors exceed the limit of 64"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := h.client.ShouldRateLimit(context.Background(), tt.req)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.msg) {
				t.Fatalf("got %v, want InvalidArgument containing %q", err, tt.msg)
			}
		})
	}
}
