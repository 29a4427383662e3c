package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/xdstest"
)

// xdsNode is the node id floodgate is started with in these tests.
const xdsNode = "floodgate-e2e"

// userLimit is a RateLimitConfig of domain with one rule: "user", n per
// hour.
func userLimit(name, domain string, n uint32) *rlconfv3.RateLimitConfig {
	return &rlconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlconfv3.RateLimitDescriptor{{
		Key:       "user",
		RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_HOUR, RequestsPerUnit: n},
	}}}
}

// limitIn is the limit floodgate reports for user=x in domain without
// counting a hit; 0 when no rule applies (an unknown domain).
func limitIn(t *testing.T, rls rlsv3.RateLimitServiceClient, domain string) uint32 {
	t.Helper()
	d := rlsDesc("user", "x")
	d.HitsAddend = wrapperspb.UInt64(0)
	r, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{d}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return r.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

// waitLimit polls until floodgate reports limit in domain, for at most
// 10s, and returns how long that took.
func waitLimit(t *testing.T, p *proc, rls rlsv3.RateLimitServiceClient, domain string, limit uint32) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := limitIn(t, rls, domain)
		if got == limit {
			return time.Since(start)
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("after 10s the limit in %q is %d, want %d\n%s", domain, got, limit, p.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestXDSConfig runs floodgate against go-control-plane's management
// server: it serves before the server is up, loads the first snapshot,
// applies an update, NACKs an invalid one and one clashing with its
// --config file while the old rules keep deciding, and reconnects to a
// restarted management server.
func TestXDSConfig(t *testing.T) {
	// A free port for the management server, which is not up yet.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mgmtAddr := l.Addr().String()
	l.Close()

	file := writeRules(t, "domain: filed\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
	p := startServe(t, "--config", file,
		"--config-xds-server", mgmtAddr, "--config-xds-node-id", xdsNode,
		"--config-xds-backoff-min", "50ms", "--config-xds-backoff-max", "200ms")
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))

	// Serving at once: the file's domain decides, the xDS one is unknown.
	if got := limitIn(t, rls, "filed"); got != 3 {
		t.Fatalf("file domain: limit %d, want 3", got)
	}
	if got := limitIn(t, rls, "xd"); got != 0 {
		t.Fatalf("xDS domain before the management server is up: limit %d, want none", got)
	}

	m := xdstest.Start(t, mgmtAddr, xdsNode)
	m.Set(t, "v1", userLimit("rl-xd", "xd", 7))
	d := waitLimit(t, p, rls, "xd", 7)
	t.Logf("initial load: applied %v after the management server came up", d)
	m.Wait(t, 10*time.Second, "ACK of v1", func(r *discoverygrpc.DiscoveryRequest) bool {
		return r.GetVersionInfo() == "v1" && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil
	})
	if r := m.Wait(t, 10*time.Second, "first request", func(*discoverygrpc.DiscoveryRequest) bool { return true }); r.GetNode().GetId() != xdsNode || r.GetTypeUrl() != resourcev3.RateLimitConfigType {
		t.Errorf("first request: node %q, type %q", r.GetNode().GetId(), r.GetTypeUrl())
	}

	// Updates: each measured from publishing to the first decision by it
	// (polled every 5ms over gRPC, so a few ms are the polling's).
	var delays []time.Duration
	for i, n := range []uint32{20, 21, 22, 23, 8} {
		start := time.Now()
		m.Set(t, fmt.Sprintf("v2.%d", i), userLimit("rl-xd", "xd", n))
		waitLimit(t, p, rls, "xd", n)
		delays = append(delays, time.Since(start))
	}
	slices.Sort(delays)
	t.Logf("updates: applied %v after SetSnapshot (median of %d; slowest %v)", delays[len(delays)/2], len(delays), delays[len(delays)-1])

	// Invalid: a rate_limit without a unit. NACKed with the error, naming
	// the resource and the field; v2 keeps deciding.
	bad := userLimit("rl-xd", "xd", 9)
	bad.Descriptors[0].RateLimit.Unit = rlconfv3.RateLimitUnit_UNKNOWN
	m.Set(t, "v3", bad)
	nack := m.Wait(t, 10*time.Second, "NACK of v3", func(r *discoverygrpc.DiscoveryRequest) bool { return r.GetErrorDetail() != nil })
	if msg := nack.GetErrorDetail().GetMessage(); nack.GetVersionInfo() != "v2.4" ||
		!strings.Contains(msg, "xds:rl-xd: descriptors[0].rate_limit: rate_limit needs a unit") {
		t.Errorf("NACK: version %q (want v2.4), error_detail %q", nack.GetVersionInfo(), msg)
	}
	if got := limitIn(t, rls, "xd"); got != 8 {
		t.Errorf("after the NACK: limit %d, want 8 (v2)", got)
	}

	// go-control-plane sends a NACKed version back at once, for every
	// NACK: floodgate's NACKs of one version back off (50ms doubling to
	// 200ms here; they spun at ~850 a second before).
	m.Forget()
	time.Sleep(time.Second)
	if n := m.Count(func(*discoverygrpc.DiscoveryRequest) bool { return true }); n > 20 {
		t.Errorf("%d NACKs of v3 in a second, want them backing off", n)
	}
	// A domain the --config file defines: refused the same way, naming
	// the resource and the domain to the management server, and the
	// file only in the local log.
	m.Forget()
	m.Set(t, "v4", userLimit("rl-xd", "xd", 10), userLimit("rl-clash", "filed", 11))
	nack = m.Wait(t, 10*time.Second, "NACK of v4", func(r *discoverygrpc.DiscoveryRequest) bool {
		return strings.Contains(r.GetErrorDetail().GetMessage(), "local config files")
	})
	if msg := nack.GetErrorDetail().GetMessage(); msg != `xds:rl-clash: domain "filed" is defined by this server's local config files too` || strings.Contains(msg, file) {
		t.Errorf("NACK of v4: error_detail %q", msg)
	}
	// Logged before the NACK is sent, but read from the process' stderr
	// after the management server may have seen the NACK.
	waitFor(t, 10*time.Second, "the local log naming the clashing file", func() bool { return p.logs.Contains(`already defined by ` + file) })
	if a, b := limitIn(t, rls, "xd"), limitIn(t, rls, "filed"); a != 8 || b != 3 {
		t.Errorf("after the NACK of v4: limits %d and %d, want 8 and 3", a, b)
	}
	if !p.logs.Contains("xds: config rejected (NACK)") {
		t.Errorf("no log line for the NACK\n%s", p.logs)
	}

	// The management server restarts (on the same address, a new cache):
	// v2 keeps deciding meanwhile, and floodgate reconnects and loads the
	// new server's snapshot.
	m.Stop()
	time.Sleep(300 * time.Millisecond)
	if got := limitIn(t, rls, "xd"); got != 8 {
		t.Errorf("management server down: limit %d, want 8 (v2)", got)
	}
	m2 := xdstest.Start(t, mgmtAddr, xdsNode)
	start := time.Now()
	m2.Set(t, "w1", userLimit("rl-xd", "xd", 12))
	waitLimit(t, p, rls, "xd", 12)
	t.Logf("management server restart: rules applied %v after it came back", time.Since(start))
	if got := limitIn(t, rls, "filed"); got != 3 {
		t.Errorf("file domain after the restart: limit %d, want 3", got)
	}
}
