package rules

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"net/netip"
	"strings"

	"github.com/floodgate/floodgate/internal/keys"
)

// This file holds `match: cidr`: descriptor values that are networks
// (10.0.0.0/8, 2001:db8::/32) matching every address inside them, the
// longest prefix first. The prefixes of one key at one level live in a
// cidrTable: two path-compressed binary tries (IPv4, IPv6) of at most
// two nodes per prefix, so a lookup follows at most one node per bit of
// the address, and in practice about log2(prefixes) of them, whatever
// their number; it does not allocate.

// matchCIDR is the one value of a descriptor's `match`.
const matchCIDR = "cidr"

// parseCIDR reads the value of a `match: cidr` descriptor: a network in
// canonical form. Host bits set (10.0.0.1/8) and IPv4-mapped IPv6
// prefixes are refused rather than rewritten: both say something other
// than what they match (addresses are unmapped before matching, so a
// mapped prefix would match nothing). The error message names the fix.
func parseCIDR(value string) (netip.Prefix, error) {
	if value == "" {
		return netip.Prefix{}, fmt.Errorf("match: cidr needs a value: a network such as 10.0.0.0/8 or 2001:db8::/32")
	}
	if !strings.Contains(value, "/") {
		return netip.Prefix{}, fmt.Errorf("match: cidr wants a network such as 10.0.0.0/8, got %q (one address: write /32 or /128)", value)
	}
	p, err := netip.ParsePrefix(value)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("invalid CIDR prefix %q: %s", value, strings.TrimPrefix(err.Error(), fmt.Sprintf("netip.ParsePrefix(%q): ", value)))
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("CIDR prefix %q has host bits set: write %s for the network (or the address with /%d for it alone)",
			value, m, p.Addr().BitLen())
	}
	if p.Addr().Is4In6() {
		v4 := netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		return netip.Prefix{}, fmt.Errorf("CIDR prefix %q is IPv4-mapped IPv6, which nothing matches (addresses are unmapped before matching): write %s", value, v4)
	}
	return p, nil
}

// cidrTable holds the `match: cidr` children of one key at one level.
type cidrTable struct {
	v4, v6 cidrTrie
}

// add inserts the prefix p (valid and masked, see parseCIDR) leading to n.
func (t *cidrTable) add(p netip.Prefix, n *node) {
	tr, hi, lo := t.of(p.Addr())
	tr.insert(hi, lo, p.Bits(), n)
}

// lookup returns the node of the longest prefix holding the address s, or
// nil when s is no address (then no cidr entry matches it) or no prefix
// holds it. An IPv4-mapped IPv6 address (::ffff:10.1.2.3) is its IPv4
// address; an address with a zone (fe80::1%eth0) is in no prefix, as
// netip.Prefix.Contains has it. It does not allocate.
func (t *cidrTable) lookup(s string) *node {
	a, ok := parseAddr(s)
	if !ok {
		return nil
	}
	tr, hi, lo := t.of(a)
	return tr.lookup(hi, lo, a.BitLen())
}

// find returns the node of exactly the prefix p (valid and masked), or
// nil; t may be nil.
func (t *cidrTable) find(p netip.Prefix) *node {
	if t == nil {
		return nil
	}
	tr, hi, lo := t.of(p.Addr())
	if n := tr.lookup(hi, lo, p.Bits()); n != nil && netip.MustParsePrefix(n.value) == p {
		return n
	}
	return nil
}

// of returns the trie of a's family, and a as 128 bits (addrBits).
func (t *cidrTable) of(a netip.Addr) (tr *cidrTrie, hi, lo uint64) {
	hi, lo = addrBits(a)
	if a.Is4() {
		return &t.v4, hi, lo
	}
	return &t.v6, hi, lo
}

// nodes appends the table's children to out.
func (t *cidrTable) nodes(out []*node) []*node {
	for _, tr := range []*cidrTrie{&t.v4, &t.v6} {
		for i := range tr.nodes {
			if n := tr.nodes[i].n; n != nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// parseAddr reads a request value as an address to look up: unmapped, and
// false for anything else, a zone included. It does not allocate for an
// address, nor for a value that has a character no address has (a name,
// a zone): netip.ParseAddr's error would.
func parseAddr(s string) (netip.Addr, bool) {
	if !addrChars(s) {
		return netip.Addr{}, false
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// addrChars reports whether s could be an address without a zone: at
// most 45 characters (the longest IPv6 form), digits and dots, or hex
// digits, colons and dots with at least one colon.
func addrChars(s string) bool {
	if s == "" || len(s) > len("ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255") {
		return false
	}
	v6 := strings.IndexByte(s, ':') >= 0
	for i := range len(s) {
		switch c := s[i]; {
		case '0' <= c && c <= '9', c == '.':
		case v6 && (c == ':' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'):
		default:
			return false
		}
	}
	return true
}

// appendAddrField appends the counter field of a value that matched a
// per-address `match: cidr` rule: the address in canonical form, so that
// "::ffff:10.0.0.1" and "10.0.0.1", or "2001:DB8::1" and "2001:db8::1",
// count together. It does not allocate for a value already canonical
// (what Envoy sends).
func appendAddrField(dst []byte, v string) []byte {
	a, ok := parseAddr(v)
	if !ok {
		return keys.AppendField(dst, v)
	}
	var buf [64]byte
	c := a.AppendTo(buf[:0])
	if string(c) == v {
		return keys.AppendField(dst, v)
	}
	return keys.AppendField(dst, string(c))
}

// addrBits is an address as 128 bits, most significant first; an IPv4
// address fills the top 32.
func addrBits(a netip.Addr) (hi, lo uint64) {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:])) << 32, 0
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// cidrTrie is a path-compressed binary trie of prefixes: every node is a
// prefix, either configured (n != nil) or a branch where two configured
// prefixes part. Children are indexes into nodes plus one (0: none).
type cidrTrie struct {
	nodes []cidrNode
	root  int32
}

type cidrNode struct {
	hi, lo uint64 // the prefix's bits, the rest zero
	n      *node  // the rule's node, nil for a branch
	child  [2]int32
	bits   uint8 // the prefix length
}

// bitAt is bit i (0 the most significant) of a 128-bit value.
func bitAt(hi, lo uint64, i int) int {
	if i < 64 {
		return int(hi >> (63 - i) & 1)
	}
	return int(lo >> (127 - i) & 1)
}

// commonBits is the number of leading bits a and b share (128 if equal).
func commonBits(ahi, alo, bhi, blo uint64) int {
	if x := ahi ^ bhi; x != 0 {
		return bits.LeadingZeros64(x)
	}
	return 64 + bits.LeadingZeros64(alo^blo)
}

// maskBits keeps the top l bits of a 128-bit value.
func maskBits(hi, lo uint64, l int) (uint64, uint64) {
	switch {
	case l == 0:
		return 0, 0
	case l <= 64:
		return hi &^ (1<<(64-l) - 1), 0
	case l < 128:
		return hi, lo &^ (1<<(128-l) - 1)
	}
	return hi, lo
}

func (t *cidrTrie) newNode(hi, lo uint64, l int, n *node) int32 {
	t.nodes = append(t.nodes, cidrNode{hi: hi, lo: lo, bits: uint8(l), n: n})
	return int32(len(t.nodes))
}

// link sets the child on side of parent (0: the root) to c.
func (t *cidrTrie) link(parent int32, side int, c int32) {
	if parent == 0 {
		t.root = c
		return
	}
	t.nodes[parent-1].child[side] = c
}

// insert adds the masked prefix (hi, lo)/l leading to n.
func (t *cidrTrie) insert(hi, lo uint64, l int, n *node) {
	parent, side, cur := int32(0), 0, t.root
	for cur != 0 {
		x := t.nodes[cur-1]
		xl := int(x.bits)
		c := min(commonBits(hi, lo, x.hi, x.lo), xl, l)
		switch {
		case c == xl && c == l: // the same prefix: a branch becomes a rule
			t.nodes[cur-1].n = n
			return
		case c == xl: // x holds the prefix: go down
			parent, side, cur = cur, bitAt(hi, lo, xl), x.child[bitAt(hi, lo, xl)]
			continue
		case c == l: // the prefix holds x: it goes above x
			nn := t.newNode(hi, lo, l, n)
			t.nodes[nn-1].child[bitAt(x.hi, x.lo, l)] = cur
			t.link(parent, side, nn)
			return
		}
		// They part at bit c: a branch with both below.
		bhi, blo := maskBits(hi, lo, c)
		br := t.newNode(bhi, blo, c, nil)
		leaf := t.newNode(hi, lo, l, n)
		t.nodes[br-1].child[bitAt(hi, lo, c)] = leaf
		t.nodes[br-1].child[bitAt(x.hi, x.lo, c)] = cur
		t.link(parent, side, br)
		return
	}
	t.link(parent, side, t.newNode(hi, lo, l, n))
}

// lookup returns the node of the longest configured prefix holding the
// address (hi, lo) of alen bits, or nil.
func (t *cidrTrie) lookup(hi, lo uint64, alen int) *node {
	var best *node
	for cur := t.root; cur != 0; {
		x := &t.nodes[cur-1]
		if commonBits(hi, lo, x.hi, x.lo) < int(x.bits) {
			break
		}
		if x.n != nil {
			best = x.n
		}
		if int(x.bits) >= alen {
			break
		}
		cur = x.child[bitAt(hi, lo, int(x.bits))]
	}
	return best
}
