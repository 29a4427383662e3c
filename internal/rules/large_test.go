package rules

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// banList is a realistic IP ban list: a per-address limit and n banned
// addresses (requests_per_unit 0). With refs > 0 it also holds an
// anchored list of 1,000 rules and refs descriptors that alias it; each
// alias makes the parser read the list again: 9,001 more YAML nodes.
func banList(n, refs int) []byte {
	var b strings.Builder
	b.Grow(n*100 + refs*30 + 60_000)
	b.WriteString("domain: edge\ndescriptors:\n")
	b.WriteString("  - key: remote_address\n    rate_limit: {unit: second, requests_per_unit: 50}\n")
	for i := range n {
		fmt.Fprintf(&b, "  - key: remote_address\n    value: 10.%d.%d.%d\n    rate_limit:\n      unit: second\n      requests_per_unit: 0\n",
			i>>16&255, i>>8&255, i&255)
	}
	if refs > 0 {
		b.WriteString("  - key: anchor\n    descriptors: &list\n")
		for i := range 1000 {
			fmt.Fprintf(&b, "      - {key: k%d, rate_limit: {unit: second, requests_per_unit: 1}}\n", i)
		}
		for i := range refs {
			fmt.Fprintf(&b, "  - key: alias%d\n    descriptors: *list\n", i)
		}
	}
	return []byte(b.String())
}

// aliasesPerNode is what one alias of banList's anchored list adds.
const aliasesPerNode = 9_001

// TestLoadLargeBanList: a file of 200,000 descriptors loads (20,000
// under -short or the race detector, which slows the parser tenfold), also with
// aliases that add nearly maxAliased nodes: the guard counts each node of
// the file once, so the file's own size does not eat the aliases' budget.
func TestLoadLargeBanList(t *testing.T) {
	n := 200_000
	if testing.Short() || raceOn {
		// Still 220,000 YAML nodes of the file's own, over twice
		// maxAliased: enough to show they do not eat the aliases' budget.
		n = 20_000
	}
	refs := maxAliased / aliasesPerNode // 11: 99,011 nodes
	path := filepath.Join(t.TempDir(), "ban.yaml")
	if err := os.WriteFile(path, banList(n, refs), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path, Options{})
	if err != nil {
		msg := err.Error()
		if len(msg) > 300 {
			msg = msg[:300]
		}
		t.Fatalf("Load: %s", msg)
	}
	if got, want := len(c.Limits()), n+1+(refs+1)*1000; got != want {
		t.Errorf("%d limits, want %d", got, want)
	}
	last := fmt.Sprintf("10.%d.%d.%d", (n-1)>>16&255, (n-1)>>8&255, (n-1)&255)
	if l := one(t, c, "edge", e("remote_address", last)...); !l.DenyAll {
		t.Errorf("the last banned address: %+v, want DenyAll", l)
	}
	if l := one(t, c, "edge", e("remote_address", "192.0.2.1")...); l.DenyAll || l.Rate.Requests != 50 {
		t.Errorf("another address: %+v, want 50/s", l)
	}
	one(t, c, "edge", e("alias10", "x", "k999", "y")...)
}

// TestAliasBudget: the guard still stops a file whose aliases expand past
// maxAliased nodes, however small the file.
func TestAliasBudget(t *testing.T) {
	refs := maxAliased/aliasesPerNode + 1 // 12: 108,012 nodes
	if _, err := Parse("small.yaml", banList(10, refs-1)); err != nil {
		t.Fatalf("%d aliases: %v", refs-1, err)
	}
	_, err := Parse("small.yaml", banList(10, refs))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "aliases expand too far") {
		t.Fatalf("%d aliases: error %v, want aliases expand too far", refs, err)
	}
}
