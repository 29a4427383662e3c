package rules

import (
	"bytes"
	"testing"
)

// TestChargeAfter: a descriptor with `charge: after` matches with its
// parent's limits, marked ChargeAfter, counted under the parent's keys (the
// stream-done entry is not part of the key); `before` is the default.
func TestChargeAfter(t *testing.T) {
	c := mustParse(t, `
domain: llm
descriptors:
  - key: tenant
    rate_limits:
      - {name: tpm, algorithm: token_bucket, unit: minute, requests_per_unit: 1000}
      - {name: tpd, algorithm: token_bucket, unit: day, requests_per_unit: 20000}
    descriptors:
      - key: usage
        value: actual
        charge: after
      - key: usage
        value: other
        charge: before
        rate_limit: {unit: minute, requests_per_unit: 5}
`)
	parent := c.Match("llm", e("tenant", "a"))
	after := c.Match("llm", e("tenant", "a", "usage", "actual"))
	if len(parent) != 2 || len(after) != 2 {
		t.Fatalf("got %d and %d limits, want 2 and 2", len(parent), len(after))
	}
	for i := range parent {
		p, a := parent[i], after[i]
		if p.ChargeAfter || !a.ChargeAfter || a.Rate != p.Rate || a.Name != p.Name || a.ID == p.ID {
			t.Errorf("limit %d: parent %+v, after %+v", i, p, a)
		}
		pk := p.AppendKey(nil, e("tenant", "a"))
		ak := a.AppendKey(nil, e("tenant", "a", "usage", "actual"))
		if !bytes.Equal(pk, ak) {
			t.Errorf("limit %d: the charge after key %q differs from the parent's %q", i, ak, pk)
		}
		if ok := a.AppendKey(nil, e("tenant", "b", "usage", "actual")); bytes.Equal(ok, pk) {
			t.Errorf("limit %d: tenants b and a share a key", i)
		}
	}
	if other := one(t, c, "llm", e("tenant", "a", "usage", "other")...); other.ChargeAfter {
		t.Errorf("charge: before made a ChargeAfter limit")
	}
}
