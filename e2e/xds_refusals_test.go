package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/xdstest"
)

// nestedLimit is a RateLimitConfig whose descriptors nest depth levels.
func nestedLimit(name string, depth int) *rlconfv3.RateLimitConfig {
	leaf := &rlconfv3.RateLimitDescriptor{Key: "k", RateLimit: &rlconfv3.RateLimitPolicy{Unit: rlconfv3.RateLimitUnit_HOUR, RequestsPerUnit: 1}}
	for range depth - 1 {
		leaf = &rlconfv3.RateLimitDescriptor{Key: "k", Descriptors: []*rlconfv3.RateLimitDescriptor{leaf}}
	}
	return &rlconfv3.RateLimitConfig{Name: name, Domain: "deep", Descriptors: []*rlconfv3.RateLimitDescriptor{leaf}}
}

// TestXDSNewerUnitsAndDeepResource: the binary's xDS client takes the
// calendar units newer control planes send (WEEK, MONTH, YEAR) as rules,
// and refuses a resource nested 3,000 levels deep, naming the resource,
// without the memory such a resource used to cost, while the rules before
// it keep deciding.
func TestXDSNewerUnitsAndDeepResource(t *testing.T) {
	t.Parallel()
	m := xdstest.Start(t, "127.0.0.1:0", xdsNode)
	p := startServe(t, "--config-xds-server", m.Addr(), "--config-xds-node-id", xdsNode,
		"--config-xds-backoff-min", "50ms", "--config-xds-backoff-max", "200ms")
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))

	// WEEK = 7, MONTH = 5, YEAR = 6 in the ratelimit config proto.
	calendar := func(name string, unit rlconfv3.RateLimitUnit, n uint32) *rlconfv3.RateLimitConfig {
		c := userLimit(name, name, n)
		c.Descriptors[0].RateLimit.Unit = unit
		return c
	}
	units := []*rlconfv3.RateLimitConfig{calendar("week", rlconfv3.RateLimitUnit_WEEK, 7), calendar("month", rlconfv3.RateLimitUnit_MONTH, 5), calendar("year", rlconfv3.RateLimitUnit_YEAR, 6)}
	m.Set(t, "v1", units...)
	m.Wait(t, 10*time.Second, "ACK of v1", func(r *discoverygrpc.DiscoveryRequest) bool {
		return r.GetVersionInfo() == "v1" && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil
	})
	for _, c := range units {
		if got := limitIn(t, rls, c.Domain); got != c.Descriptors[0].RateLimit.RequestsPerUnit {
			t.Errorf("domain %q (unit %v): limit %d, want %d", c.Domain, c.Descriptors[0].RateLimit.Unit, got, c.Descriptors[0].RateLimit.RequestsPerUnit)
		}
	}

	before := peakRSS(t, p.cmd.Process.Pid)
	m.Set(t, "v2", append(units, nestedLimit("deep", 3000))...)
	r := m.Wait(t, 10*time.Second, "NACK of a resource 3,000 levels deep", func(r *discoverygrpc.DiscoveryRequest) bool {
		return strings.Contains(r.GetErrorDetail().GetMessage(), "nest deeper than 32 levels")
	})
	if msg := r.GetErrorDetail().GetMessage(); !strings.HasPrefix(msg, "xds:deep: descriptors[0]") {
		t.Errorf("NACK of the deep resource: %q, want it to name the resource and the path", msg)
	}
	if grew := peakRSS(t, p.cmd.Process.Pid) - before; grew > 64<<10 {
		t.Errorf("peak RSS grew %d MiB converting a resource 3,000 levels deep, want under 64 MiB", grew>>10)
	}
	if got := limitIn(t, rls, "week"); got != 7 {
		t.Errorf("after the NACK of v2: limit %d, want 7 (v1)", got)
	}
}

// TestXDSDomainMovesFromAFile: a domain moving from a --config file to
// xDS (xDS sends it while the file still defines it: refused; then the
// file goes) applies as soon as the file goes, without the management
// server resending: repeated NACKs of one version back off for 20 s
// here, longer than the test waits. The refusal names no local path.
func TestXDSDomainMovesFromAFile(t *testing.T) {
	t.Parallel()
	m := xdstest.Start(t, "127.0.0.1:0", xdsNode)
	dir := t.TempDir()
	moving := filepath.Join(dir, "moving.yaml")
	writeConfig(t, moving, "domain: moving\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 3}\n")
	writeConfig(t, filepath.Join(dir, "stays.yaml"), "domain: stays\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: 4}\n")
	p := startServe(t, "--config", dir, "--config-xds-server", m.Addr(), "--config-xds-node-id", xdsNode,
		"--config-xds-backoff-min", "20s", "--config-xds-backoff-max", "20s")
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))

	m.Set(t, "v1", userLimit("other", "other", 5), userLimit("moved", "moving", 11))
	r := m.Wait(t, 10*time.Second, "NACK of the moving domain", func(r *discoverygrpc.DiscoveryRequest) bool {
		return r.GetErrorDetail() != nil
	})
	if msg := r.GetErrorDetail().GetMessage(); strings.Contains(msg, dir) || msg != `xds:moved: domain "moving" is defined by this server's local config files too` {
		t.Errorf("NACK: %q, want the resource and the domain named, no local path", msg)
	}
	if got := limitIn(t, rls, "moving"); got != 3 {
		t.Errorf("after the NACK: limit %d, want 3 (the file's)", got)
	}
	if err := os.Remove(moving); err != nil {
		t.Fatal(err)
	}
	took := waitLimit(t, p, rls, "moving", 11)
	t.Logf("the moved domain applied %v after its file went", took)
	if a, b := limitIn(t, rls, "stays"), limitIn(t, rls, "other"); a != 4 || b != 5 {
		t.Errorf("after the move: limits %d and %d, want 4 (file) and 5 (xDS)", a, b)
	}
}
