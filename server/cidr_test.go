package server_test

import (
	"testing"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

// cidrRules: match: cidr networks as a ban list, an allowlist inside it,
// per-address counters and one shared counter.
const cidrRules = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: remote_address
    value: 10.0.0.0/8
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: remote_address
    value: 10.1.0.0/16
    match: cidr
    rate_limit: {unlimited: true}
  - key: remote_address
    value: 192.168.0.0/16
    match: cidr
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: remote_address
    value: 172.16.0.0/12
    match: cidr
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: remote_address
    value: 2001:db8::/32
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 0}
`

// TestCIDRRules runs ShouldRateLimit against networks on the embedded
// store and on Redis: a banned network is OVER_LIMIT, an allowlisted one
// inside it OK, a per-address network counts each address apart (every
// spelling of one address together), a share_threshold network counts
// all its addresses together.
func TestCIDRRules(t *testing.T) {
	for name, newStore := range identityStores(t) {
		t.Run(name, func(t *testing.T) {
			h := startEnvoy(t, cidrRules, newStore(t), server.EnvoySettings{})
			steps := []struct {
				what, addr, want string
			}{
				{"allowlisted network inside the banned one (longest prefix wins)", "10.1.2.3", "OK:OK"},
				{"banned network", "10.2.3.4", "OVER_LIMIT:OVER_LIMIT"},
				{"banned network, mapped spelling", "::ffff:10.2.3.4", "OVER_LIMIT:OVER_LIMIT"},
				{"banned IPv6 network", "2001:db8::7", "OVER_LIMIT:OVER_LIMIT"},
				{"outside every network", "198.51.100.1", "OK:OK"},
				{"per address 1st", "192.168.1.1", "OK:OK"},
				{"per address 2nd", "192.168.1.1", "OK:OK"},
				{"per address 3rd", "192.168.1.1", "OVER_LIMIT:OVER_LIMIT"},
				{"per address, mapped spelling counts with it", "::ffff:192.168.1.1", "OVER_LIMIT:OVER_LIMIT"},
				{"per address, another address", "192.168.1.2", "OK:OK"},
				{"per address, another address 2nd", "192.168.9.9", "OK:OK"},
				{"shared 1st", "172.16.0.1", "OK:OK"},
				{"shared 2nd, another address", "172.20.5.5", "OK:OK"},
				{"shared 3rd, another address", "172.31.255.255", "OVER_LIMIT:OVER_LIMIT"},
			}
			for _, s := range steps {
				if got := codesOf(h.call(t, testkit.Descriptor("remote_address", s.addr))); got != s.want {
					t.Errorf("%s (%s): %s, want %s", s.what, s.addr, got, s.want)
				}
			}
			for range 20 {
				if got := codesOf(h.call(t, testkit.Descriptor("remote_address", "10.1.200.200"))); got != "OK:OK" {
					t.Fatalf("allowlisted address: %s, want OK:OK every time", got)
				}
			}
			// One request with a banned and an allowlisted descriptor.
			if got := codesOf(h.call(t, testkit.Descriptor("remote_address", "10.1.0.1"), testkit.Descriptor("remote_address", "10.9.0.1"))); got != "OVER_LIMIT:OK,OVER_LIMIT" {
				t.Errorf("allowlisted and banned descriptors: %s, want OVER_LIMIT:OK,OVER_LIMIT", got)
			}
		})
	}
}
