package rules

import (
	"errors"
	"strings"
	"testing"
)

func mergePart(t *testing.T, name, yaml string) *Set {
	t.Helper()
	c, err := Parse(name, []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMerge(t *testing.T) {
	a := mergePart(t, "a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\npolicies:\n  p: {requests: 1, period: 1s}\n")
	b := mergePart(t, "xds:b", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	b2 := mergePart(t, "xds:b2", "domain: b\ndescriptors:\n  - key: j\n    rate_limit: {unit: minute, requests_per_unit: 3}\n")
	pol := mergePart(t, "p.yaml", "policies:\n  p: {requests: 2, period: 1s}\n")

	m, err := Merge(a, nil, b)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.Domains(), ","); got != "a,b" {
		t.Errorf("domains %s, want a,b", got)
	}
	if got := strings.Join(m.Files(), ","); got != "a.yaml,xds:b" {
		t.Errorf("files %s", got)
	}
	if l := m.Match("b", []Entry{{"k", "v"}}); len(l) != 1 || l[0].Rate.Requests != 2 {
		t.Errorf("b's rule: %v", l)
	}
	if _, ok := m.Policy("p"); !ok || len(m.Limits()) != 2 {
		t.Errorf("policy p %v, limits %d", ok, len(m.Limits()))
	}
	if again, _ := Merge(a, b); again.Digest() != m.Digest() || m.Digest() == a.Digest() {
		t.Error("digests: the same parts must give the same digest, other parts another")
	}
	if one, _ := Merge(nil, a); one != a {
		t.Error("one part: not itself")
	}
	if none, err := Merge(nil); none != nil || err != nil {
		t.Errorf("no parts: %v, %v", none, err)
	}

	tests := []struct {
		name  string
		parts []*Set
		want  string
	}{
		{"domain twice", []*Set{a, b, b2}, `xds:b2: duplicate domain "b": already defined by xds:b`},
		{"policy twice", []*Set{a, pol}, `p.yaml: duplicate policy "p": already defined by a.yaml`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Merge(tt.parts...)
			if err == nil || err.Error() != tt.want || !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v, want %q (ErrInvalid)", err, tt.want)
			}
		})
	}
}

// TestMergeKeepsQuota: a part's quota buckets and quota_unmatched come
// along with its domain.
func TestMergeKeepsQuota(t *testing.T) {
	a := mergePart(t, "a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n")
	q := mergePart(t, "xds:q", "domain: q\nquota_unmatched: deny_all\nquota_buckets:\n  - bucket_id: {name: x}\n    blanket_rule: allow_all\n")
	m, err := Merge(a, q)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(m.QuotaBuckets("q")); got != 1 {
		t.Errorf("domain q: %d quota buckets, want 1", got)
	}
	if got, want := m.QuotaUnmatched("q"), q.QuotaUnmatched("q"); got != want || got == DefaultQuotaUnmatched {
		t.Errorf("domain q: quota_unmatched %v, want the part's %v", got, want)
	}
}

// TestMergeKeepsSources: /debug/config and explain read where each policy
// was written and when the rules were loaded, from the merged Set too.
func TestMergeKeepsSources(t *testing.T) {
	a := mergePart(t, "a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\npolicies:\n  p: {requests: 1, period: 1s}\n")
	b := mergePart(t, "xds:b", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	m, err := Merge(a, b)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := m.PolicySource("p"), a.PolicySource("p"); got != want || got.File != "a.yaml" || got.Line == 0 {
		t.Errorf("merged PolicySource(p) = %+v, want %+v", got, want)
	}
	newest := a.LoadedAt()
	if b.LoadedAt().After(newest) {
		newest = b.LoadedAt()
	}
	if got := m.LoadedAt(); !got.Equal(newest) || got.IsZero() {
		t.Errorf("merged LoadedAt = %v, want the newest part's, %v", got, newest)
	}
}
