package rules

import (
	"strings"
	"testing"
)

// TestExplainCIDR: Explain sees match: cidr networks: the limit an
// address reaches, networks among the nearest rules (with why they did
// not match), and every network limit has its source, also over xDS.
func TestExplainCIDR(t *testing.T) {
	c := mustParse(t, cidrConfig)
	m := c.Explain("c", [][]Entry{e("remote_address", "::ffff:10.1.2.4")})[0]
	if len(m.Matches) != 1 || m.Matches[0].Limit.Name != "per_address_10_1_2" || !strings.HasSuffix(m.Matches[0].StoreKey, "|8:10.1.2.4") {
		t.Fatalf("Explain(::ffff:10.1.2.4) = %+v", m)
	}
	d := c.Explain("c", [][]Entry{e("client", "192.168.1.1")})[0]
	if len(d.Matches) != 0 || len(d.Candidates) == 0 || !strings.Contains(strings.Join(d.Candidates[0].Reasons, "; "), "rule needs 2") {
		t.Fatalf("Explain(client only) = %+v, want the nested /login rule, one entry short", d)
	}
	d = c.Explain("c", [][]Entry{e("client", "2001:db8::1", "path", "/login")})[0]
	if len(d.Candidates) == 0 || !strings.Contains(d.Candidates[0].Reasons[0], `does not match "0.0.0.0/0"`) {
		t.Fatalf("Explain(IPv6 client) = %+v, want 0.0.0.0/0 not matching", d)
	}
	for _, l := range c.Limits() {
		if l.Source().Line == 0 {
			t.Errorf("limit %s has no source", l.Name)
		}
	}
	x, err := ParseXDS("xds:c", "cidr-res", "v1", []byte(cidrConfig))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range x.Limits() {
		if l.Source().XDSResource != "cidr-res" {
			t.Errorf("xds limit %s has source %v", l.Name, l.Source())
		}
	}
}
