package client_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/client"
	"github.com/floodgate/floodgate/internal/api"
)

// twoPerMinute is the limit of the keying tests.
var twoPerMinute = client.Limit{Algorithm: client.SlidingWindow, Requests: 2, Period: time.Minute}

// TestMiddlewareForwardedForForms (issue 16, item 3): behind one trusted
// proxy, an X-Forwarded-For entry with a port, in brackets, or with a zone
// keys its address, so changing the port gets no fresh limit; an IPv6
// entry keeps its /64; an entry that is no address at all falls back to
// the peer (the proxy) instead of becoming a key of its own.
func TestMiddlewareForwardedForForms(t *testing.T) {
	addr, clock := startFloodgate(t, api.Settings{})
	h := client.Middleware(dial(t, addr), client.HTTPConfig{Limit: twoPerMinute, Clock: clock.Now, TrustedProxyHops: 1})(ok)
	for _, tc := range []struct {
		name    string
		remote  string
		entries []string // the last X-Forwarded-For entry of each request
	}{
		{"ipv4 with ports", "10.0.0.1:1", []string{"203.0.113.7:40001", "203.0.113.7:40002", "203.0.113.7", "203.0.113.7:40004", "203.0.113.7:40005"}},
		{"ipv6 bracketed, with ports, in one /64", "10.0.0.1:1", []string{"[2001:db8::1]:443", "[2001:db8::2]:443", "[2001:db8::3]", "2001:db8::4", "[2001:db8::5%eth0]:1"}},
		{"ipv4-mapped with a port", "10.0.0.1:1", []string{"[::ffff:198.51.100.4]:1", "198.51.100.4:2", "[::ffff:198.51.100.4]:3"}},
		{"not an address: the peer", "10.0.0.9:1", []string{"not-an-ip", "garbage:1", "unknown", "[::1", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for i, e := range tc.entries {
				want := 200
				if i >= 2 {
					want = 429
				}
				if got := get(h, tc.remote, "X-Forwarded-For", "6.6.6.6, "+e).Code; got != want {
					t.Fatalf("request %d (X-Forwarded-For %q): got %d, want %d", i+1, e, got, want)
				}
			}
		})
	}
	// The garbage fell back to the proxy's own address, which is now spent.
	if got := get(h, "10.0.0.9:2").Code; got != 429 {
		t.Fatalf("the proxy's address after garbage entries: got %d, want 429", got)
	}
}

// TestMiddlewareMadeUpKeys (issue 16, item 4): by default an API key the
// middleware cannot verify never escapes its address's limit: rotating
// made-up keys from one address stops at the IP limit.
func TestMiddlewareMadeUpKeys(t *testing.T) {
	addr, clock := startFloodgate(t, api.Settings{})
	h := client.Middleware(dial(t, addr), client.HTTPConfig{Limit: twoPerMinute, Clock: clock.Now})(ok)
	for i, key := range []string{"k1", "k2", "k3", "k4", "k5"} {
		want := 200
		if i >= 2 {
			want = 429
		}
		if got := get(h, "192.0.2.1:1", "X-API-Key", key).Code; got != want {
			t.Fatalf("made-up key %s from one address: got %d, want %d", key, got, want)
		}
	}
	// An empty key is no key: the address's limit, already spent.
	if got := get(h, "192.0.2.1:2", "X-API-Key", " ").Code; got != 429 {
		t.Fatalf("blank key: got %d, want 429", got)
	}
}

// TestInterceptorMissingKeyFallsBack (issue 16, item 4): a call without the
// metadata KeyByMetadata reads, or with an empty first value, is limited by
// its peer address, not let through unlimited.
func TestInterceptorMissingKeyFallsBack(t *testing.T) {
	addr, _ := startFloodgate(t, api.Settings{})
	hc := startProtected(t, dial(t, addr), client.InterceptorConfig{
		Limit: twoPerMinute,
		Key:   client.KeyByMetadata("x-api-key"),
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

// TestInterceptorMadeUpKeys (issue 16, item 4): made-up API keys from one
// peer stop at the peer's limit, also in the documented form
// KeyFirst(KeyByMetadata(...), KeyByPeer).
func TestInterceptorMadeUpKeys(t *testing.T) {
	addr, _ := startFloodgate(t, api.Settings{})
	hc := startProtected(t, dial(t, addr), client.InterceptorConfig{
		Limit: twoPerMinute,
		Key:   client.KeyFirst(client.KeyByMetadata("x-api-key"), client.KeyByPeer),
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

// TestKeyByPeerIPv6 (issue 16, item 4): KeyByPeer groups IPv6 peers by
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
		if got := client.KeyByPeer(at(tc.ip), "/m"); got != tc.want {
			t.Errorf("KeyByPeer(%s): got %q, want %q", tc.ip, got, tc.want)
		}
	}
}

// TestMiddlewareVerifiedKeys: a key VerifyAPIKey accepts has its own limit,
// whatever its address; a key it rejects counts as no key.
func TestMiddlewareVerifiedKeys(t *testing.T) {
	addr, clock := startFloodgate(t, api.Settings{})
	h := client.Middleware(dial(t, addr), client.HTTPConfig{
		Limit:        twoPerMinute,
		Clock:        clock.Now,
		VerifyAPIKey: func(_ *http.Request, key string) bool { return strings.HasPrefix(key, "good-") },
	})(ok)
	for i, tc := range []struct {
		key  string
		want int
	}{
		{"good-a", 200}, {"good-a", 200}, {"good-a", 429}, // the key's own limit
		{"good-b", 200}, {"good-b", 200}, // not the address's
		{"made-up-1", 200}, {"made-up-2", 200}, {"made-up-3", 429}, // the address's limit
		{"", 429},
		{"good-c", 200},
	} {
		if got := get(h, "192.0.2.1:1", "X-API-Key", tc.key).Code; got != tc.want {
			t.Fatalf("request %d (key %q): got %d, want %d", i+1, tc.key, got, tc.want)
		}
	}
}

// TestInterceptorTrustMetadataAndExempt: TrustMetadata limits verified
// keys alone; Exempt skips floodgate.
func TestInterceptorTrustMetadataAndExempt(t *testing.T) {
	addr, _ := startFloodgate(t, api.Settings{})
	one := client.Limit{Algorithm: client.SlidingWindow, Requests: 1, Period: time.Minute}
	hc := startProtected(t, dial(t, addr), client.InterceptorConfig{
		Limit:         one,
		Key:           client.KeyByMetadata("x-api-key"),
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
