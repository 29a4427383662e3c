package rules

import (
	"testing"

	"github.com/floodgate/floodgate/internal/softlimit"
)

// TestWarnAt reads warn_at on rate_limits and policies: a count or a whole
// percentage of the capacity, and every bad one refused at its line and
// column with what is wrong.
func TestWarnAt(t *testing.T) {
	rule := func(rl string) string {
		return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {" + rl + "}\n"
	}
	policy := func(p string) string {
		return "policies:\n  p: {" + p + "}\n"
	}
	tests := []struct {
		name, yaml string
		want       softlimit.Threshold
		err        string // the whole error, "" when valid
	}{
		{"count", rule("unit: minute, requests_per_unit: 1000, warn_at: 800"), softlimit.Threshold{Count: 800}, ""},
		{"percent", rule("unit: minute, requests_per_unit: 1000, warn_at: 80%"), softlimit.Threshold{Percent: 80}, ""},
		{"quoted percent", rule(`unit: minute, requests_per_unit: 1000, warn_at: "90%"`), softlimit.Threshold{Percent: 90}, ""},
		{"at the limit", rule("unit: minute, requests_per_unit: 1000, warn_at: 1000"), softlimit.Threshold{Count: 1000}, ""},
		{"100 percent", rule("unit: minute, requests_per_unit: 10, warn_at: 100%"), softlimit.Threshold{Percent: 100}, ""},
		{"token bucket's burst", rule("unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 50, warn_at: 40"), softlimit.Threshold{Count: 40}, ""},
		{"leaky bucket", rule("unit: second, requests_per_unit: 10, algorithm: leaky_bucket, warn_at: 8"), softlimit.Threshold{Count: 8}, ""},
		{"policy count", policy("requests_per_min: 60, warn_at: 50"), softlimit.Threshold{Count: 50}, ""},
		{"policy percent", policy("requests: 10, period: 1s, algorithm: sliding_window, warn_at: 75%"), softlimit.Threshold{Percent: 75}, ""},
		{"none", rule("unit: minute, requests_per_unit: 1000"), softlimit.Threshold{}, ""},

		{"negative", rule("unit: minute, requests_per_unit: 1000, warn_at: -5"), softlimit.Threshold{},
			"test.yaml:4:66: warn_at must be positive, got -5"},
		{"zero", rule("unit: minute, requests_per_unit: 1000, warn_at: 0"), softlimit.Threshold{},
			`test.yaml:4:66: warn_at must be positive, got "0" (leave it out for no warning)`},
		{"zero percent", rule("unit: minute, requests_per_unit: 1000, warn_at: 0%"), softlimit.Threshold{},
			`test.yaml:4:66: warn_at must be positive, got "0%" (leave it out for no warning)`},
		{"above the limit", rule("unit: minute, requests_per_unit: 1000, warn_at: 1200"), softlimit.Threshold{},
			"test.yaml:4:66: warn_at 1200 is above the limit's capacity of 1000 (its requests per period), so it would never warn"},
		{"above the burst", rule("unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 50, warn_at: 60"), softlimit.Threshold{},
			"test.yaml:4:100: warn_at 60 is above the limit's capacity of 50 (its burst), so it would never warn"},
		{"above 100 percent", rule("unit: minute, requests_per_unit: 1000, warn_at: 120%"), softlimit.Threshold{},
			"test.yaml:4:66: warn_at must be a percentage from 1% to 100%, got 120%"},
		{"a word", rule("unit: minute, requests_per_unit: 1000, warn_at: eighty"), softlimit.Threshold{},
			`test.yaml:4:66: warn_at must be a count of units (800) or a whole percentage of the limit (80%), got "eighty"`},
		{"a fraction", rule("unit: minute, requests_per_unit: 1000, warn_at: 0.8"), softlimit.Threshold{},
			`test.yaml:4:66: warn_at must be a count of units (800) or a whole percentage of the limit (80%), got "0.8"`},
		{"a decimal percent", rule("unit: minute, requests_per_unit: 1000, warn_at: 99.5%"), softlimit.Threshold{},
			`test.yaml:4:66: warn_at must be a count of units (800) or a whole percentage of the limit (80%), got "99.5%"`},
		{"a list", rule("unit: minute, requests_per_unit: 1000, warn_at: [80]"), softlimit.Threshold{},
			`test.yaml:4:66: want a string, got a list`},
		{"unlimited", rule("unlimited: true, warn_at: 10"), softlimit.Threshold{},
			"test.yaml:4:44: warn_at does not apply to an unlimited rate_limit"},
		{"deny all", rule("unit: minute, requests_per_unit: 0, warn_at: 10"), softlimit.Threshold{},
			"test.yaml:4:63: warn_at does not apply when requests_per_unit is 0 (every matching request is denied)"},
		{"policy above", policy("requests_per_min: 60, warn_at: 61"), softlimit.Threshold{},
			`test.yaml:2:38: policy "p": warn_at 61 is above the limit's capacity of 60 (its requests per period), so it would never warn`},
		{"policy negative percent", policy("requests_per_min: 60, warn_at: -10%"), softlimit.Threshold{},
			`test.yaml:2:38: policy "p": warn_at must be a percentage from 1% to 100%, got -10%`},
		{"quota bucket", "domain: d\nquota_buckets:\n  - bucket_id: {k: v}\n    rate_limit: {unit: second, requests_per_unit: 10, warn_at: 5}\n", softlimit.Threshold{},
			"test.yaml:4:64: warn_at does not apply to a quota bucket (Envoy enforces its share itself and answers no warning)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(tt.yaml))
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("Parse error:\n got %v\nwant %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got softlimit.Threshold
			if p, ok := c.Policy("p"); ok {
				got = p.Warn
			} else {
				got = one(t, c, "d", e("k", "x")...).Warn
			}
			if got != tt.want {
				t.Errorf("Warn = %+v, want %+v", got, tt.want)
			}
		})
	}
}
