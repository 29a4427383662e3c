package rules

import (
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
)

// The reference's example config: quota_mode on descriptors, with the
// metadata quota-based service selection reads.
const quotaModeYAML = `domain: d
descriptors:
  - key: service
    value: service_1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      service_with_quota:
        name: "service_1"
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 1, name: plain_limit}
  - key: own
    rate_limits:
      - {unit: minute, requests_per_unit: 1, quota_mode: true}
      - {unit: hour, requests_per_unit: 10}
  - key: kinds
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      int: 7
      float: 1.5
      big: 18446744073709551615
      yes: true
      none: null
      text: "7"
      when: 2001-12-14
      list: [1, a, {x: y}]
      1: numeric key
`

func TestQuotaModeAndMetadata(t *testing.T) {
	c, err := Parse("q.yaml", []byte(quotaModeYAML))
	if err != nil {
		t.Fatal(err)
	}
	one := func(key, value string) []*Limit {
		return c.Match("d", []Entry{{Key: key, Value: value}})
	}
	tests := []struct {
		name       string
		limits     []*Limit
		quota      []bool
		metadata   string // protojson of the first limit's Metadata, "" for nil
		configured string
	}{
		{"descriptor quota_mode", one("service", "service_1"), []bool{true}, `{"service_with_quota":{"name":"service_1"}}`, ""},
		{"no quota_mode, a name", one("plain", "x"), []bool{false}, "", "plain_limit"},
		{"quota_mode on one rate_limit", one("own", "x"), []bool{true, false}, "", ""},
		{"YAML types as the reference reads them", one("kinds", "x"), []bool{false},
			`{"1":"numeric key","big":18446744073709552000,"float":1.5,"int":7,"list":[1,"a",{"x":"y"}],"none":null,"text":"7","when":"2001-12-14","yes":true}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if len(tt.limits) != len(tt.quota) {
				t.Fatalf("%d limits, want %d", len(tt.limits), len(tt.quota))
			}
			for i, l := range tt.limits {
				if l.QuotaMode != tt.quota[i] {
					t.Errorf("limit %d QuotaMode = %v, want %v", i, l.QuotaMode, tt.quota[i])
				}
			}
			got := ""
			if m := tt.limits[0].Metadata; m != nil {
				b, err := protojson.MarshalOptions{}.Marshal(m)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if norm(got) != norm(tt.metadata) {
				t.Errorf("Metadata = %s\nwant       %s", got, tt.metadata)
			}
			if n := tt.limits[0].ConfiguredName(); n != tt.configured {
				t.Errorf("ConfiguredName = %q, want %q", n, tt.configured)
			}
			if tt.configured == "" && tt.limits[0].Name == "" {
				t.Error("a limit without name has no derived Name")
			}
		})
	}
}

// norm drops the blanks protojson may put between tokens.
func norm(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != ' ' {
			out = append(out, s[i])
		}
	}
	return string(out)
}
