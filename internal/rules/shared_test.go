package rules

import (
	"errors"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/algorithms"
)

// TestUnitPeriodMatchesEnvoyEnum pins the unit table to Envoy's proto
// enum: every unit but UNKNOWN resolves by its enum name (what the Envoy
// API passes for a request's own limit) and by its lowercase YAML name,
// with envoyproxy/ratelimit's periods.
func TestUnitPeriodMatchesEnvoyEnum(t *testing.T) {
	day := 24 * time.Hour
	want := map[rlsv3.RateLimitResponse_RateLimit_Unit]time.Duration{
		rlsv3.RateLimitResponse_RateLimit_SECOND: time.Second,
		rlsv3.RateLimitResponse_RateLimit_MINUTE: time.Minute,
		rlsv3.RateLimitResponse_RateLimit_HOUR:   time.Hour,
		rlsv3.RateLimitResponse_RateLimit_DAY:    day,
		rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * day,
		rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * day,
		rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * day,
	}
	for n := range rlsv3.RateLimitResponse_RateLimit_Unit_name {
		u := rlsv3.RateLimitResponse_RateLimit_Unit(n)
		for _, name := range []string{u.String(), strings.ToLower(u.String())} {
			got, ok := UnitPeriod(name)
			if w, known := want[u]; got != w || ok != known {
				t.Errorf("UnitPeriod(%q) = %v, %v; want %v, %v", name, got, ok, w, known)
			}
		}
	}
	if len(want) != len(envoyUnits) {
		t.Errorf("the table has %d units, the enum %d (without UNKNOWN)", len(envoyUnits), len(want))
	}
	for _, name := range []string{"", "fortnight", "seconds", "99", rlsv3.RateLimitResponse_RateLimit_Unit(99).String()} {
		if d, ok := UnitPeriod(name); ok {
			t.Errorf("UnitPeriod(%q) = %v, true; want false", name, d)
		}
	}
	if n := testing.AllocsPerRun(100, func() { UnitPeriod(rlsv3.RateLimitResponse_RateLimit_YEAR.String()) }); n != 0 {
		t.Errorf("UnitPeriod of an enum name allocates %v times", n)
	}
	if got, want := unitList(), "second, minute, hour, day, week, month or year"; got != want {
		t.Errorf("unitList() = %q, want %q", got, want)
	}
}

// TestUnitCaseInsensitive: a YAML unit is read in any case, as
// envoyproxy/ratelimit reads it.
func TestUnitCaseInsensitive(t *testing.T) {
	c := mustParse(t, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: Minute, requests_per_unit: 3}\n")
	if l := one(t, c, "d", e("k", "v")...); l.Rate.Period != time.Minute {
		t.Errorf("period = %v, want 1m", l.Rate.Period)
	}
}

// TestFailureModeText: one spelling for rules and --failure-mode: open,
// closed or local in any case; anything else is an error naming the valid
// values, which reads on after the setting's name.
func TestFailureModeText(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want FailureMode
		err  string
	}{
		{"open", FailureOpen, ""},
		{"closed", FailureClosed, ""},
		{"Open", FailureOpen, ""},
		{"CLOSED", FailureClosed, ""},
		{"local", FailureLocal, ""},
		{"Local", FailureLocal, ""},
		{"", FailureDefault, `must be open, closed or local, got ""`},
		{"default", FailureDefault, `must be open, closed or local, got "default"`},
		{"fail", FailureDefault, `must be open, closed or local, got "fail"`},
		{" open", FailureDefault, `must be open, closed or local, got " open"`},
	} {
		m := FailureClosed // overwritten either way
		err := m.UnmarshalText([]byte(tc.in))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("UnmarshalText(%q) = %v", tc.in, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("UnmarshalText(%q) = %v, want %q", tc.in, err, tc.err)
		}
		if m != tc.want {
			t.Errorf("UnmarshalText(%q) gave %v, want %v", tc.in, m, tc.want)
		}
	}
	for _, m := range []FailureMode{FailureOpen, FailureClosed, FailureLocal} {
		var back FailureMode
		if err := back.UnmarshalText([]byte(m.String())); err != nil || back != m {
			t.Errorf("%v: its String %q reads back as %v, %v", m, m.String(), back, err)
		}
	}
}

// TestFailureModeAnyCase: rules read failure_mode with UnmarshalText, in
// policies and rate_limits alike.
func TestFailureModeAnyCase(t *testing.T) {
	c := mustParse(t, `domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: Closed}
  - key: l
    rate_limit: {unit: second, requests_per_unit: 1, failure_mode: local}
policies:
  p: {requests_per_second: 1, failure_mode: OPEN}
  q: {requests_per_second: 1, failure_mode: LOCAL}
`)
	if l := one(t, c, "d", e("k", "v")...); l.FailureMode != FailureClosed {
		t.Errorf("rate_limit failure mode = %v, want closed", l.FailureMode)
	}
	if p, _ := c.Policy("p"); p.FailureMode != FailureOpen {
		t.Errorf("policy failure mode = %v, want open", p.FailureMode)
	}
	if l := one(t, c, "d", e("l", "v")...); l.FailureMode != FailureLocal {
		t.Errorf("rate_limit failure mode = %v, want local", l.FailureMode)
	}
	if p, _ := c.Policy("q"); p.FailureMode != FailureLocal {
		t.Errorf("policy failure mode = %v, want local", p.FailureMode)
	}
}

// TestLimitRulesShared: a policy and a rate_limit are held to the same
// rules for algorithm, burst, period and failure_mode, with the same
// messages (one validation for both).
func TestLimitRulesShared(t *testing.T) {
	for _, tc := range []struct{ fields, want string }{
		{"algorithm: leaky", `algorithm: unknown algorithm "leaky"`},
		{"algorithm: fixed_window, burst: 5", "burst applies only to token_bucket and leaky_bucket, not fixed_window"},
		{"algorithm: leaky_bucket, burst: 1099511627776", "burst (queue size) 1099511627776 at 5 requests per 1s takes longer than"},
		{"algorithm: token_bucket, burst: 0", "burst must be positive, got 0"},
		{"algorithm: token_bucket, burst: x", `burst must be an integer, got "x"`},
		{"failure_mode: maybe", `failure_mode must be open, closed or local, got "maybe"`},
		{"shadow_mode: 2", `shadow_mode must be true or false, got "2"`},
		{"period: 1us", "period must be a positive whole number of milliseconds, got 1µs"},
		{"bogus: 1", `unknown key "bogus"`},
	} {
		fields := tc.fields
		if !strings.HasPrefix(fields, "period:") {
			fields += ", period: 1s"
		}
		policy := "policies:\n  p: {requests: 5, " + fields + "}\n"
		rule := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {requests_per_unit: 5, " + fields + "}\n"
		for _, yaml := range []string{policy, rule} {
			_, err := Parse("test.yaml", []byte(yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse(%q) = %v, want an error containing %q", yaml, err, tc.want)
			}
		}
	}
}

// TestUnknownKeysRefused: every mapping of a file refuses keys it does not
// know, naming the ones it does.
func TestUnknownKeysRefused(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"domain: d\nextra: 1\n", `test.yaml:2:1: unknown key "extra" in the file (want one of domain, descriptors, default_algorithm, policies, quota_buckets, quota_unmatched)`},
		{"domain: d\ndescriptors:\n  - {key: k, extra: 1}\n", `test.yaml:3:14: unknown key "extra" in a descriptor`},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, extra: 1}\n", `test.yaml:4:54: unknown key "extra" in rate_limit`},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limits: [{unit: second, requests_per_unit: 1, extra: 1}]\n", `test.yaml:4:56: unknown key "extra" in rate_limit`},
		{"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: x, extra: 1}]}\n", `test.yaml:4:75: unknown key "extra" in a replaces entry (want one of name)`},
		{"policies:\n  p: {requests_per_second: 1, extra: 1}\n", `test.yaml:2:31: unknown key "extra" in policy "p"`},
		{"domain: d\nquota_buckets:\n  - {bucket_id: {a: b}, blanket_rule: allow_all, extra: 1}\n", `test.yaml:3:50: unknown key "extra" in a quota bucket (want one of bucket_id, rate_limit, blanket_rule)`},
	} {
		_, err := Parse("test.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains("\n"+err.Error(), "\n"+tc.want) {
			t.Errorf("Parse(%q) = %v, want an error line starting %q", tc.yaml, err, tc.want)
		}
	}
}

// TestErrorsInFileOrder: decoding and validation find problems in two
// passes; the list reads top to bottom all the same.
func TestErrorsInFileOrder(t *testing.T) {
	_, err := Parse("x.yaml", []byte(`domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, burst: 5}
  - key: b
    shadow_mode: maybe
    rate_limit: {unit: fortnight, requests_per_unit: 1}
policies:
  p: {requests_per_second: 1, failure_mode: sideways}
  q: {requests_per_second: x}
`))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("error %v is not an ErrorList", err)
	}
	want := []string{
		"x.yaml:4:61: burst applies only to token_bucket",
		`x.yaml:6:18: shadow_mode must be true or false, got "maybe"`,
		`x.yaml:7:24: invalid rate limit unit "fortnight"`,
		`x.yaml:9:45: failure_mode must be open, closed or local, got "sideways"`,
		`x.yaml:10:28: requests_per_second must be an integer, got "x"`,
	}
	if len(list) != len(want) {
		t.Fatalf("got %d errors:\n%v\nwant %d", len(list), err, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(list[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, list[i].Error(), w)
		}
	}
}

// TestLeakyBucketConfig: leaky_bucket is a config name, for policies and
// rate_limits alike, and its burst is the queue's size.
func TestLeakyBucketConfig(t *testing.T) {
	yaml := "policies:\n  partner: {requests: 10, period: 1s, algorithm: leaky_bucket, burst: 50}\n" +
		"domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 20, algorithm: leaky_bucket}\n"
	c, err := Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	want := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 10, Period: time.Second, Burst: 50}
	if p, ok := c.Policy("partner"); !ok || p.Rate != want {
		t.Errorf("policy partner = %+v, want %+v", p.Rate, want)
	}
	l := one(t, c, "d", e("k", "v")...)
	if want := (algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 20, Period: time.Second}); l.Rate != want {
		t.Errorf("rate_limit = %+v, want %+v", l.Rate, want)
	}
}
