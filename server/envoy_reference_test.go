package server_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/server"
)

// The expected values of these tables are envoyproxy/ratelimit's, read
// from its source (src/service/ratelimit.go shouldRateLimitWorker and
// ratelimitToMetadata, src/limiter/base_limiter.go
// GetResponseDescriptorStatus, src/utils CalculateReset, src/config
// GetLimit), not floodgate's output. Where floodgate answers otherwise on
// purpose (all or nothing, a 0-hit check as one hit), the row says so.

// referenceRules: named and unnamed limits, an unlimited key, the
// reference example's quota-mode services with their metadata, a regular
// limit, a wildcard and a limit for the check-then-charge pattern.
const referenceRules = `domain: edge
descriptors:
  - key: named
    rate_limit: {unit: minute, requests_per_unit: 2, name: per_minute}
  - key: unnamed
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: free
    rate_limit: {unlimited: true}
  - key: service
    value: s1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata:
      service_with_quota: {name: service_1}
  - key: service
    value: s2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
    metadata:
      service_with_quota: {name: service_2}
      weight: 2
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 1}
    metadata: {tier: regular}
  - key: wild
    value: "pre*"
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tokens
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: ghost
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: trial
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: tiers
    rate_limits:
      - {quota_mode: true, unit: minute, requests_per_unit: 1}
      - {quota_mode: true, unit: minute, requests_per_unit: 5}
`

// refStatus is one expected descriptor status; remaining -1 skips it.
type refStatus struct {
	code      rlsv3.RateLimitResponse_Code
	remaining int64
	name      string
	reset     time.Duration // 0: none (no current_limit); < 0 skips it
}

var (
	ok   = rlsv3.RateLimitResponse_OK
	over = rlsv3.RateLimitResponse_OVER_LIMIT
)

// refStep is one request and the answer the reference gives.
type refStep struct {
	what    string
	descs   []*ratelimitv3.RateLimitDescriptor
	hits    uint32 // the request's hits_addend
	overall rlsv3.RateLimitResponse_Code
	want    []refStatus
}

// d is a one-entry descriptor; hits < 0 leaves hits_addend unset.
func d(key, value string, hits int) *ratelimitv3.RateLimitDescriptor {
	desc := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: value}}}
	if hits >= 0 {
		desc.HitsAddend = wrapperspb.UInt64(uint64(hits))
	}
	return desc
}

// withOverride gives desc a limit override.
func withOverride(desc *ratelimitv3.RateLimitDescriptor, n uint32, unit typev3.RateLimitUnit) *ratelimitv3.RateLimitDescriptor {
	desc.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: n, Unit: unit}
	return desc
}

// runSteps plays steps against a fresh server with s at T0+10s (a minute
// window has 50 s left: CalculateReset gives 60 - now%60).
func runSteps(t *testing.T, s server.EnvoySettings, steps []refStep) {
	t.Helper()
	h := startEnvoy(t, referenceRules, nil, s)
	h.clock.Advance(10 * time.Second)
	for i, st := range steps {
		resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: st.descs, HitsAddend: st.hits})
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, st.what, err)
		}
		if resp.OverallCode != st.overall {
			t.Errorf("step %d (%s): overall %v, want %v", i, st.what, resp.OverallCode, st.overall)
		}
		for j, w := range st.want {
			got := resp.Statuses[j]
			if got.Code != w.code {
				t.Errorf("step %d (%s) status %d: code %v, want %v", i, st.what, j, got.Code, w.code)
			}
			if w.remaining >= 0 && int64(got.LimitRemaining) != w.remaining {
				t.Errorf("step %d (%s) status %d: limit_remaining %d, want %d", i, st.what, j, got.LimitRemaining, w.remaining)
			}
			if got.GetCurrentLimit().GetName() != w.name {
				t.Errorf("step %d (%s) status %d: name %q, want %q", i, st.what, j, got.GetCurrentLimit().GetName(), w.name)
			}
			if r := got.GetDurationUntilReset().AsDuration(); w.reset >= 0 && ((w.reset == 0) != (got.DurationUntilReset == nil) || r != w.reset) {
				t.Errorf("step %d (%s) status %d: duration_until_reset %v (set: %v), want %v", i, st.what, j, r, got.DurationUntilReset != nil, w.reset)
			}
			if w.reset >= 0 && (w.reset == 0) != (got.CurrentLimit == nil) {
				t.Errorf("step %d (%s) status %d: current_limit %v", i, st.what, j, got.CurrentLimit)
			}
		}
	}
}

const left = 50 * time.Second // of the minute window at T0+10s

// TestEnvoyReferenceNumbers: limit_remaining, name and duration_until_reset
// as GetResponseDescriptorStatus and shouldRateLimitWorker set them.
func TestEnvoyReferenceNumbers(t *testing.T) {
	runSteps(t, server.EnvoySettings{}, []refStep{
		{"named, first hit", []*ratelimitv3.RateLimitDescriptor{d("named", "a", -1)}, 0, ok, []refStatus{{ok, 1, "per_minute", left}}},
		{"unnamed: name empty", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "a", -1)}, 0, ok, []refStatus{{ok, 1, "", left}}},
		{"unlimited: MaxUint32, no limit", []*ratelimitv3.RateLimitDescriptor{d("free", "a", -1)}, 0, ok, []refStatus{{ok, 4294967295, "", 0}}},
		{"no rule: 0, no limit", []*ratelimitv3.RateLimitDescriptor{d("nothing", "a", -1)}, 0, ok, []refStatus{{ok, 0, "", 0}}},
		{"named, last hit", []*ratelimitv3.RateLimitDescriptor{d("named", "a", -1)}, 0, ok, []refStatus{{ok, 0, "per_minute", left}}},
		{"named, over: remaining 0", []*ratelimitv3.RateLimitDescriptor{d("named", "a", -1)}, 0, over, []refStatus{{over, 0, "per_minute", left}}},
		{"untouched key, 0 hits: the whole window left", []*ratelimitv3.RateLimitDescriptor{d("named", "b", 0)}, 0, ok, []refStatus{{ok, 2, "per_minute", left}}},
		{"hits_addend 2 of 2", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "c", -1)}, 2, ok, []refStatus{{ok, 0, "", left}}},
		// The reference charges the OK descriptor too; floodgate charges
		// neither (all or nothing), reporting the same numbers.
		{"deny beside an untouched key", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "fresh", -1), d("named", "a", -1)}, 0, over,
			[]refStatus{{ok, 1, "", left}, {over, 0, "per_minute", left}}},
		{"an override: no name", []*ratelimitv3.RateLimitDescriptor{withOverride(d("named", "o", -1), 5, typev3.RateLimitUnit_MINUTE)}, 0, ok,
			[]refStatus{{ok, 4, "", left}}},
	})
}

// TestEnvoyZeroHitCheck: a 0-hit check answers as a 1-hit check would,
// charging nothing. The reference answers OVER_LIMIT only once the count
// passed the limit (after > limit with nothing added); floodgate denies
// when the next unit would not fit (docs/envoy.md, Differences).
func TestEnvoyZeroHitCheck(t *testing.T) {
	runSteps(t, server.EnvoySettings{}, []refStep{
		{"check, fresh", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "z", 0)}, 0, ok, []refStatus{{ok, 2, "", left}}},
		{"check again: nothing charged", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "z", 0)}, 0, ok, []refStatus{{ok, 2, "", left}}},
		{"charge 2", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "z", 2)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"check at the limit: the next unit does not fit", []*ratelimitv3.RateLimitDescriptor{d("unnamed", "z", 0)}, 0, over, []refStatus{{over, 0, "", left}}},
		{"0-hit check of a ban list denies", []*ratelimitv3.RateLimitDescriptor{withOverride(d("unnamed", "z2", 0), 0, typev3.RateLimitUnit_MINUTE)}, 0, over, []refStatus{{over, 0, "", -1}}},
	})
}
