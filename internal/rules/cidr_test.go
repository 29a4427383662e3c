package rules

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

// cidrConfig: nested networks (longest wins), IPv6, an allowlist, a ban
// list, per-address and shared counters, and exact and wildcard siblings
// of the networks.
const cidrConfig = `domain: c
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 100, name: any_address}
  - key: remote_address
    value: 10.0.0.0/8
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 0, name: ban_10}
  - key: remote_address
    value: 10.1.0.0/16
    match: cidr
    rate_limit: {unlimited: true, name: allow_10_1}
  - key: remote_address
    value: 10.1.2.0/24
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 5, name: per_address_10_1_2}
  - key: remote_address
    value: 10.1.3.0/24
    match: cidr
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 7, name: shared_10_1_3}
  - key: remote_address
    value: 10.1.2.3
    rate_limit: {unit: second, requests_per_unit: 1, name: exact_10_1_2_3}
  - key: remote_address
    value: 10.1.2.3/32
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 2, name: host_10_1_2_3}
  - key: remote_address
    value: 10.0.0.0/8
    rate_limit: {unit: second, requests_per_unit: 3, name: literal_10_slash_8}
  - key: remote_address
    value: "10.*"
    rate_limit: {unit: second, requests_per_unit: 4, name: wildcard_10}
  - key: remote_address
    value: "192.168.*"
    rate_limit: {unit: second, requests_per_unit: 6, name: wildcard_192_168}
  - key: client
    value: 0.0.0.0/0
    match: cidr
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 8, name: v4_login}
  - key: remote_address
    value: 2001:db8::/32
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 0, name: ban_doc_v6}
  - key: remote_address
    value: 2001:db8:1::/48
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 9, name: per_address_v6}
  - key: remote_address
    value: 2001:db8:1:2::/64
    match: cidr
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 10, name: shared_v6}
  - key: remote_address
    value: ::/0
    match: cidr
    rate_limit: {unit: second, requests_per_unit: 11, name: any_v6}
`

// TestCIDRMatch: at one level an exact value wins, then the longest
// network holding the address, then wildcards, then the key-only rule;
// IPv4-mapped IPv6 addresses are their IPv4 address; values that are no
// address match no network.
func TestCIDRMatch(t *testing.T) {
	c := mustParse(t, cidrConfig)
	tests := []struct {
		name    string
		entries []Entry
		want    string // "" for no limit
	}{
		{"shortest network", e("remote_address", "10.200.0.1"), "ban_10"},
		{"longer network wins", e("remote_address", "10.1.200.1"), "allow_10_1"},
		{"longest network wins", e("remote_address", "10.1.2.4"), "per_address_10_1_2"},
		{"network's first address", e("remote_address", "10.1.2.0"), "per_address_10_1_2"},
		{"network's last address", e("remote_address", "10.1.2.255"), "per_address_10_1_2"},
		{"sibling network", e("remote_address", "10.1.3.9"), "shared_10_1_3"},
		{"exact value beats every network", e("remote_address", "10.1.2.3"), "exact_10_1_2_3"},
		{"a /32 holds its address in any spelling", e("remote_address", "::ffff:10.1.2.3"), "host_10_1_2_3"},
		{"mapped address", e("remote_address", "::ffff:10.9.9.9"), "ban_10"},
		{"mapped address, hex spelling", e("remote_address", "::ffff:a01:204"), "per_address_10_1_2"},
		{"network beats a wildcard", e("remote_address", "10.5.5.5"), "ban_10"},
		{"the literal prefix is an exact value", e("remote_address", "10.0.0.0/8"), "literal_10_slash_8"},
		{"not an address: wildcard", e("remote_address", "10.x"), "wildcard_10"},
		{"not an address: key-only", e("remote_address", "example.com"), "any_address"},
		{"address with a port is no address", e("remote_address", "10.1.2.4:80"), "wildcard_10"},
		{"empty value", e("remote_address", ""), "any_address"},
		{"zone is in no network", e("remote_address", "2001:db8:1::1%eth0"), "any_address"},
		{"wildcard when no network holds the address", e("remote_address", "192.168.1.1"), "wildcard_192_168"},
		{"0.0.0.0/0 takes the address, at its depth only", e("client", "192.168.1.1"), ""},
		{"0.0.0.0/0 then nested", e("client", "192.168.1.1", "path", "/login"), "v4_login"},
		{"0.0.0.0/0 then nested, mapped", e("client", "::ffff:192.168.1.1", "path", "/login"), "v4_login"},
		{"0.0.0.0/0 holds no IPv6", e("client", "2001:db8::1", "path", "/login"), ""},
		{"a limit applies at its depth only", e("remote_address", "10.1.2.4", "path", "/login"), ""},
		{"v6 network", e("remote_address", "2001:db8:ffff::1"), "ban_doc_v6"},
		{"v6 longer", e("remote_address", "2001:db8:1:ffff::1"), "per_address_v6"},
		{"v6 longest", e("remote_address", "2001:db8:1:2::1"), "shared_v6"},
		{"v6 upper case", e("remote_address", "2001:DB8:1:2::1"), "shared_v6"},
		{"v6 default", e("remote_address", "fe80::1"), "any_v6"},
		{"::/0 does not hold IPv4", e("remote_address", "172.16.0.1"), "any_address"},
		{"::/0 does not hold mapped IPv4", e("remote_address", "::ffff:172.16.0.1"), "any_address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := c.Match("c", tt.entries)
			if tt.want == "" {
				if got != nil {
					t.Fatalf("Match(%v) = %v, want nil", tt.entries, names(got))
				}
				return
			}
			if len(got) != 1 || got[0].Name != tt.want {
				t.Fatalf("Match(%v) = %v, want [%s]", tt.entries, names(got), tt.want)
			}
		})
	}
}

// TestCIDRAllowAndBan: an allowlist network is Unlimited, a ban list
// network DenyAll, whatever address inside them asks.
func TestCIDRAllowAndBan(t *testing.T) {
	c := mustParse(t, cidrConfig)
	for _, a := range []string{"10.0.0.0", "10.255.255.255", "::ffff:10.7.0.1", "2001:db8::1", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"} {
		if l := one(t, c, "c", e("remote_address", a)...); !l.DenyAll {
			t.Errorf("%s: %s, want a ban (DenyAll)", a, l.Name)
		}
	}
	for _, a := range []string{"10.1.0.0", "10.1.255.255", "::ffff:10.1.9.9"} {
		if l := one(t, c, "c", e("remote_address", a)...); !l.Unlimited {
			t.Errorf("%s: %s, want the allowlist (Unlimited)", a, l.Name)
		}
	}
}

// TestCIDRCounters: a network counts each address apart, under its
// canonical form (every spelling of one address counts together), unless
// share_threshold makes the network one counter; an exact and a cidr
// value of the same text are different limits.
func TestCIDRCounters(t *testing.T) {
	c := mustParse(t, cidrConfig)
	key := func(v string) string {
		t.Helper()
		entries := e("remote_address", v)
		return string(one(t, c, "c", entries...).AppendKey(nil, entries))
	}
	tests := []struct {
		name   string
		a, b   string
		shared bool
	}{
		{"per address", "10.1.2.4", "10.1.2.5", false},
		{"per address, mapped spelling", "10.1.2.4", "::ffff:10.1.2.4", true},
		{"per address, hex mapped spelling", "10.1.2.4", "::ffff:a01:204", true},
		{"shared network", "10.1.3.4", "10.1.3.5", true},
		{"v6 per address", "2001:db8:1::1", "2001:db8:1::2", false},
		{"v6 per address, spellings", "2001:db8:1::1", "2001:DB8:1:0:0::1", true},
		{"v6 shared", "2001:db8:1:2::1", "2001:db8:1:2::2", true},
		{"different networks", "10.1.2.4", "10.1.3.4", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if ka, kb := key(tt.a), key(tt.b); (ka == kb) != tt.shared {
				t.Errorf("keys %q and %q: shared = %v, want %v", ka, kb, ka == kb, tt.shared)
			}
		})
	}
	cidrLimit := one(t, c, "c", e("remote_address", "10.7.7.7")...)
	exact := one(t, c, "c", e("remote_address", "10.0.0.0/8")...)
	if cidrLimit.ID == exact.ID {
		t.Errorf("match: cidr 10.0.0.0/8 and exact value 10.0.0.0/8 share the ID %q", exact.ID)
	}
	// The key holds the canonical address.
	entries := e("remote_address", "::ffff:10.1.2.4")
	if k := one(t, c, "c", entries...).AppendKey(nil, entries); !strings.HasSuffix(string(k), "|8:10.1.2.4") {
		t.Errorf("key %q does not end with the canonical address", k)
	}
}

// TestCIDRSpellingsAreOneNetwork: 2001:db8::/32 and 2001:0DB8::/32 are
// one network, so a duplicate; the ID and name use the canonical form.
func TestCIDRSpellingsAreOneNetwork(t *testing.T) {
	_, err := Parse("dup.yaml", []byte(`domain: d
descriptors:
  - {key: a, value: 2001:db8::/32, match: cidr, rate_limit: {unit: second, requests_per_unit: 1}}
  - {key: a, value: 2001:0DB8::/32, match: cidr, rate_limit: {unit: second, requests_per_unit: 2}}
`))
	if err == nil || !strings.Contains(err.Error(), "dup.yaml:4:5: duplicate descriptor: key \"a\" with match: cidr 2001:db8::/32 is already defined at line 3, column 5") {
		t.Fatalf("error %v, want a duplicate at 4:5", err)
	}
	c := mustParse(t, `domain: d
descriptors:
  - {key: a, value: 2001:0DB8::/32, match: cidr, rate_limit: {unit: second, requests_per_unit: 1}}
`)
	if l := one(t, c, "d", e("a", "2001:db8::1")...); l.Name != "d.a_2001:db8::/32" {
		t.Errorf("name %q, want the canonical network", l.Name)
	}
}

// TestCIDRInvalid: what match: cidr refuses, with positions.
func TestCIDRInvalid(t *testing.T) {
	rule := "    rate_limit: {unit: second, requests_per_unit: 1}\n"
	tests := []struct {
		name, desc, want string
	}{
		{"prefix too long", "  - key: a\n    value: 10.0.0.0/33\n    match: cidr\n" + rule,
			`4:12: invalid CIDR prefix "10.0.0.0/33": prefix length out of range`},
		{"v6 prefix too long", "  - key: a\n    value: 2001:db8::/129\n    match: cidr\n" + rule,
			`4:12: invalid CIDR prefix "2001:db8::/129": prefix length out of range`},
		{"host bits", "  - key: a\n    value: 10.0.0.1/8\n    match: cidr\n" + rule,
			`4:12: CIDR prefix "10.0.0.1/8" has host bits set: write 10.0.0.0/8 for the network (or the address with /32 for it alone)`},
		{"v6 host bits", "  - key: a\n    value: 2001:db8::1/32\n    match: cidr\n" + rule,
			`4:12: CIDR prefix "2001:db8::1/32" has host bits set: write 2001:db8::/32`},
		{"an address, not a prefix", "  - key: a\n    value: 10.0.0.1\n    match: cidr\n" + rule,
			`4:12: match: cidr wants a network such as 10.0.0.0/8, got "10.0.0.1" (one address: write /32 or /128)`},
		{"a wildcard, not a prefix", "  - key: a\n    value: 10.*\n    match: cidr\n" + rule,
			`4:12: match: cidr wants a network such as 10.0.0.0/8, got "10.*"`},
		{"a name, not a prefix", "  - key: a\n    value: office/24\n    match: cidr\n" + rule,
			`4:12: invalid CIDR prefix "office/24"`},
		{"zone", "  - key: a\n    value: fe80::%eth0/64\n    match: cidr\n" + rule,
			`4:12: invalid CIDR prefix "fe80::%eth0/64"`},
		{"mapped", "  - key: a\n    value: ::ffff:10.0.0.0/104\n    match: cidr\n" + rule,
			`4:12: CIDR prefix "::ffff:10.0.0.0/104" is IPv4-mapped IPv6, which nothing matches (addresses are unmapped before matching): write 10.0.0.0/8`},
		{"no value", "  - key: a\n    match: cidr\n" + rule,
			`4:12: match: cidr needs a value`},
		{"unknown match", "  - key: a\n    value: 10.0.0.0/8\n    match: prefix\n" + rule,
			`5:12: unknown match "prefix" (want cidr`},
		{"match is not a string", "  - key: a\n    value: 10.0.0.0/8\n    match: [cidr]\n" + rule,
			`5:12: `},
		{"share_threshold on an exact value", "  - key: a\n    value: 10.0.0.0/8\n    share_threshold: true\n" + rule,
			`5:22: share_threshold needs a wildcard value (one with a '*') or match: cidr; "10.0.0.0/8" has neither`},
		{"duplicate network", "  - key: a\n    value: 10.0.0.0/8\n    match: cidr\n" + rule + "  - key: a\n    value: 10.0.0.0/8\n    match: cidr\n" + rule,
			`7:5: duplicate descriptor: key "a" with match: cidr 10.0.0.0/8 is already defined at line 3, column 5`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("bad.yaml", []byte("domain: d\ndescriptors:\n"+tt.desc))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), "bad.yaml:"+tt.want) {
				t.Fatalf("error %q, want it to hold %q", err, "bad.yaml:"+tt.want)
			}
		})
	}
	// An exact value and a network of the same text are not duplicates.
	mustParse(t, "domain: d\ndescriptors:\n  - key: a\n    value: 10.0.0.0/8\n    match: cidr\n"+rule+"  - key: a\n    value: 10.0.0.0/8\n"+rule)
}

func TestCIDRMatchDoesNotAllocate(t *testing.T) {
	c := mustParse(t, cidrConfig)
	reqs := [][]Entry{
		e("remote_address", "10.1.2.4"), e("remote_address", "::ffff:10.9.9.9"), e("remote_address", "2001:db8:1:2::1"),
		e("remote_address", "example.com"), e("remote_address", "fe80::1%eth0"), e("client", "192.168.1.1", "path", "/login"),
		e("remote_address", "2001:DB8:1::1"), e("remote_address", "dead.beef"),
	}
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(200, func() {
		for _, r := range reqs {
			for _, l := range c.Match("c", r) {
				buf = l.AppendKey(buf[:0], r)
			}
		}
	}); n != 0 {
		t.Errorf("Match and AppendKey allocate %v times per run, want 0", n)
	}
}

// TestCIDRTrieAgainstLinearScan checks the trie against the obvious
// oracles: lookup finds, of every prefix holding the address, the
// longest; find finds exactly the prefix asked for.
func TestCIDRTrieAgainstLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	prefixes := randomPrefixes(rng, 3000)
	var tab cidrTable
	nodes := map[netip.Prefix]*node{}
	for _, p := range prefixes {
		n := &node{value: p.String()}
		nodes[p] = n
		tab.add(p, n)
	}
	// find is exact: every configured prefix finds its own node; one bit
	// longer or shorter, only a configured prefix finds anything.
	for _, p := range prefixes {
		if got := tab.find(p); got != nodes[p] {
			t.Fatalf("find(%s) = %v, want its own node", p, got)
		}
		for _, bits := range []int{p.Bits() - 1, p.Bits() + 1} {
			if q, err := p.Addr().Prefix(bits); err == nil && tab.find(q) != nodes[q] {
				t.Fatalf("find(%s) = %v, want %v", q, tab.find(q), nodes[q])
			}
		}
	}
	for range 20000 {
		// Addresses near configured prefixes, so most lookups find one.
		p := prefixes[rng.IntN(len(prefixes))]
		var a netip.Addr
		if p.Addr().Is4() {
			b := p.Addr().As4()
			b[2], b[3] = byte(rng.Uint32()), byte(rng.Uint32())
			a = netip.AddrFrom4(b)
		} else {
			b := p.Addr().As16()
			for j := 4 + rng.IntN(12); j < 16; j++ {
				b[j] = byte(rng.Uint32())
			}
			a = netip.AddrFrom16(b)
		}
		var want *node
		best := -1
		for _, p := range prefixes {
			if p.Contains(a) && p.Bits() > best {
				best, want = p.Bits(), nodes[p]
			}
		}
		if got := tab.lookup(a.String()); got != want {
			t.Fatalf("lookup(%s) = %v, want %v", a, got, want)
		}
	}
}

// randomPrefixes returns n distinct random networks, a third IPv4 (lengths
// 8 to 32) and the rest IPv6 (lengths 16 to 128).
func randomPrefixes(rng *rand.Rand, n int) []netip.Prefix {
	seen := map[netip.Prefix]bool{}
	out := make([]netip.Prefix, 0, n)
	for len(out) < n {
		var p netip.Prefix
		if len(out)%3 == 0 {
			var b [4]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			b[0] = byte(rng.IntN(4)) // dense: nested networks happen
			p = netip.PrefixFrom(netip.AddrFrom4(b), 8+rng.IntN(25)).Masked()
		} else {
			var b [16]byte
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			b[0], b[1], b[2] = 0x20, 0x01, byte(rng.IntN(4))
			p = netip.PrefixFrom(netip.AddrFrom16(b), 16+rng.IntN(113)).Masked()
		}
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

// cidrBanList is a file of n random networks of random lengths, a third
// IPv4, each a ban, beside a per-address limit.
func cidrBanList(n int) ([]byte, []netip.Prefix) {
	prefixes := randomPrefixes(rand.New(rand.NewPCG(3, 4)), n)
	var b strings.Builder
	b.Grow(n * 110)
	b.WriteString("domain: edge\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 50}\n")
	for _, p := range prefixes {
		fmt.Fprintf(&b, "  - key: remote_address\n    value: %s\n    match: cidr\n    rate_limit: {unit: second, requests_per_unit: 0}\n", p)
	}
	return []byte(b.String()), prefixes
}

// TestCIDRLoad: a file of networks loads through Load (what `floodgate
// config validate` runs).
func TestCIDRLoad(t *testing.T) {
	c := mustLoad(t, "testdata/cidr/edge.yaml")
	for _, tt := range []struct {
		addr                string
		denyAll, unlimited  bool
		requests            int64
		sharedWithNeighbour bool
	}{
		{addr: "203.0.113.77", denyAll: true},
		{addr: "::ffff:203.0.113.1", denyAll: true},
		{addr: "10.20.30.40", unlimited: true},
		{addr: "2001:db8:5::1", requests: 600, sharedWithNeighbour: true},
		{addr: "198.51.100.1", requests: 50},
	} {
		entries := e("remote_address", tt.addr)
		l := one(t, c, "cidr_edge", entries...)
		if l.DenyAll != tt.denyAll || l.Unlimited != tt.unlimited || l.Rate.Requests != tt.requests || l.Shared(0) != tt.sharedWithNeighbour {
			t.Errorf("%s: %s deny %v unlimited %v requests %d shared %v", tt.addr, l.Name, l.DenyAll, l.Unlimited, l.Rate.Requests, l.Shared(0))
		}
	}
}
