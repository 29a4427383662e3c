package e2e

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
)

// loopbackName is a host name other than "localhost" that resolves only
// to loopback addresses (the host's own name, as /etc/hosts often maps
// it), so that a port bound to it is reachable from this host only while
// floodgate cannot tell it from a name beyond loopback; the test skips
// when there is none.
func loopbackName(t *testing.T) string {
	t.Helper()
	name, err := os.Hostname()
	if err != nil || name == "" || name == "localhost" {
		t.Skipf("no host name other than localhost (%q, %v)", name, err)
	}
	ips, err := net.LookupIP(name)
	if err != nil || len(ips) == 0 {
		t.Skipf("host name %q does not resolve: %v", name, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			t.Skipf("host name %q resolves beyond loopback (%v): not bound here", name, ip)
		}
	}
	return name
}

// TestResetRefusedBeyondLoopback: a binary with no --auth-token-file whose
// ports are bound to anything but a loopback address or "localhost"
// serves decisions on both doors but refuses Reset and refunds (gRPC
// PermissionDenied, HTTP 403, naming the fix; Envoy's negative hits
// decided as 0 hits), and says so at start; bound to 127.0.0.1 it
// resets.
func TestResetRefusedBeyondLoopback(t *testing.T) {
	host := loopbackName(t)
	p := startServe(t, "--grpc-addr", host+":0", "--http-addr", host+":0", "--config", writeRules(t, "domain: e2e\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n"))
	c := p.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if r, err := c.Check(ctx, inlineTB("k", 5, 1)); err != nil || !r.Allowed {
		t.Fatalf("Check: %v, %v; want a decision", r, err)
	}
	_, err := c.Reset(ctx, &floodgatev1.ResetRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--auth-token-file") {
		t.Errorf("gRPC Reset on %s: %v, want PermissionDenied naming --auth-token-file", host, err)
	}
	if a := post(t, p, "/v1/check", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"}}`); a.status != 200 {
		t.Errorf("HTTP check: %d %s, want 200", a.status, a.body)
	}
	a := post(t, p, "/v1/reset", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET"}`)
	if e := errorOf(t, a); a.status != 403 || e.Code != "PERMISSION_DENIED" || !strings.Contains(e.Message, "--auth-token-file") {
		t.Errorf("HTTP reset on %s: %d %s, want 403 PERMISSION_DENIED naming --auth-token-file", host, a.status, a.body)
	}
	// Refunds pass the same rule: a settlement below its reservation is
	// refused on both doors, and Envoy's negative hits are decided as 0
	// hits (no error answer, which Envoy would let through).
	inline := &floodgatev1.SettleRequest_Limit{Limit: &floodgatev1.Limit{Requests: 5, Period: durationpb.New(time.Minute)}}
	_, err = c.Settle(ctx, &floodgatev1.SettleRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Reserved: 1000000, IdempotencyKey: "x1", Source: inline})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "--auth-token-file") {
		t.Errorf("gRPC Settle refund on %s: %v, want PermissionDenied naming --auth-token-file", host, err)
	}
	a = post(t, p, "/v1/settle", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET","limit":{"requests":5,"period":"60s"},"reserved":"1000000","actual":"0","idempotencyKey":"x2"}`)
	if e := errorOf(t, a); a.status != 403 || e.Code != "PERMISSION_DENIED" || !strings.Contains(e.Message, "--auth-token-file") {
		t.Errorf("HTTP settle refund on %s: %d %s, want 403 PERMISSION_DENIED naming --auth-token-file", host, a.status, a.body)
	}
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	spend := &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("k", "v")}}
	if r, err := rls.ShouldRateLimit(ctx, spend); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("Envoy charge: %v %v", r, err)
	}
	give := rlsDesc("k", "v")
	give.IsNegativeHits, give.HitsAddend = true, wrapperspb.UInt64(1000000)
	if r, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{give}}); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("Envoy negative hits on %s: %v %v, want OVER_LIMIT (decided as 0 hits), no error", host, r, err)
	}
	if r, err := rls.ShouldRateLimit(ctx, spend); err != nil || r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("Envoy charge after the refused refund: %v %v, want OVER_LIMIT (nothing given back)", r, err)
	}
	for _, door := range []string{"gRPC port", "HTTP/JSON API"} {
		if !p.logs.Contains("Reset is refused on the " + door) {
			t.Errorf("no warning at start for the %s\n%s", door, p.logs)
		}
	}

	local := startServe(t)
	if _, err := local.Client(t).Reset(ctx, &floodgatev1.ResetRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET}); err != nil {
		t.Errorf("gRPC Reset on 127.0.0.1: %v, want it served", err)
	}
	if a := post(t, local, "/v1/reset", "", `{"key":"k","algorithm":"ALGORITHM_TOKEN_BUCKET"}`); a.status != 200 {
		t.Errorf("HTTP reset on 127.0.0.1: %d %s, want 200", a.status, a.body)
	}
}
