package grpclimit_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/client/grpclimit"
	"github.com/floodgate/floodgate/client/internal/floodgatetest"
)

// twoPerMinute is the limit of the keying tests.
var twoPerMinute = client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Minute}

// TestInterceptorMissingKeyFallsBack: a call without the
// metadata KeyByMetadata reads, or with an empty first value, is limited by
// its peer address, not let through unlimited.
func TestInterceptorMissingKeyFallsBack(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit: twoPerMinute,
		Key:   grpclimit.KeyByMetadata("x-api-key"),
	})
	for i, md := range []metadata.MD{
		nil,
		metadata.Pairs("x-api-key", ""),
		metadata.Pairs("x-api-key", "", "x-api-key", "k1"),
		nil,
	} {
		ctx := context.Background()
		if md != nil {
			ctx = metadata.NewOutgoingContext(ctx, md)
		}
		want := codes.OK
		if i >= 2 {
			want = codes.ResourceExhausted
		}
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != want {
			t.Fatalf("call %d (metadata %v): got %v, want %v", i+1, md, err, want)
		}
	}
}

// TestInterceptorMadeUpKeys: made-up API keys from one
// peer stop at the peer's limit, also in the documented form
// KeyFirst(KeyByMetadata(...), KeyByPeer).
func TestInterceptorMadeUpKeys(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit: twoPerMinute,
		Key:   grpclimit.KeyFirst(grpclimit.KeyByMetadata("x-api-key"), grpclimit.KeyByPeer),
	})
	for i, key := range []string{"k1", "k2", "k3", "k4"} {
		want := codes.OK
		if i >= 2 {
			want = codes.ResourceExhausted
		}
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != want {
			t.Fatalf("made-up key %s: got %v, want %v", key, err, want)
		}
	}
}

// TestKeyByPeerIPv6: KeyByPeer groups IPv6 peers by
// their /64, as the HTTP middleware does, and keys IPv4-mapped peers as
// IPv4.
func TestKeyByPeerIPv6(t *testing.T) {
	at := func(ip string) context.Context {
		return peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.ParseIP(ip), Port: 5555}})
	}
	for _, tc := range []struct{ ip, want string }{
		{"2001:db8:1:2::1", "peer:2001:db8:1:2::/64"},
		{"2001:db8:1:2:ffff:ffff:ffff:ffff", "peer:2001:db8:1:2::/64"},
		{"2001:db8:1:3::1", "peer:2001:db8:1:3::/64"},
		{"::ffff:192.0.2.7", "peer:192.0.2.7"},
		{"192.0.2.7", "peer:192.0.2.7"},
	} {
		if got := grpclimit.KeyByPeer(at(tc.ip), "/m"); got != tc.want {
			t.Errorf("KeyByPeer(%s): got %q, want %q", tc.ip, got, tc.want)
		}
	}
}

// TestInterceptorTrustMetadataAndExempt: TrustMetadata limits verified
// keys alone; Exempt skips floodgate.
func TestInterceptorTrustMetadataAndExempt(t *testing.T) {
	addr, _ := floodgatetest.Start(t, nil)
	one := client.Limit{Algorithm: algorithms.SlidingWindow, Requests: 1, Period: time.Minute}
	hc := startProtected(t, floodgatetest.Dial(t, addr), grpclimit.Config{
		Limit:         one,
		Key:           grpclimit.KeyByMetadata("x-api-key"),
		TrustMetadata: true,
		Exempt: func(ctx context.Context, _ string) bool {
			md, _ := metadata.FromIncomingContext(ctx)
			return len(md.Get("internal")) > 0
		},
	})
	for i, tc := range []struct {
		md   []string
		want codes.Code
	}{
		{[]string{"x-api-key", "a"}, codes.OK}, {[]string{"x-api-key", "b"}, codes.OK}, {[]string{"x-api-key", "c"}, codes.OK},
		{[]string{"x-api-key", "a"}, codes.ResourceExhausted},
		{nil, codes.OK}, {nil, codes.ResourceExhausted}, // no key: the peer's limit
		{[]string{"internal", "1"}, codes.OK}, {[]string{"internal", "1"}, codes.OK},
	} {
		ctx := context.Background()
		if tc.md != nil {
			ctx = metadata.AppendToOutgoingContext(ctx, tc.md...)
		}
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); status.Code(err) != tc.want {
			t.Fatalf("call %d (%v): got %v, want %v", i+1, tc.md, err, tc.want)
		}
	}
}
