package server_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/floodgate/floodgate/server"
)

// TestEnvoyLongValues: a descriptor value of any size (a client's header)
// is matched whole and counted, never an error; long values that differ
// anywhere count apart.
func TestEnvoyLongValues(t *testing.T) {
	mib := strings.Repeat("v", 1<<18) // 256 KiB, twice in a request below the 1 MiB message limit
	other := mib[:len(mib)-1] + "w"
	runSteps(t, server.EnvoySettings{}, []refStep{
		{"256 KiB value: counted", dl{d("unnamed", mib, -1)}, 0, ok, []refStatus{{ok, 1, "", left}}},
		{"256 KiB value again", dl{d("unnamed", mib, -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"256 KiB value over", dl{d("unnamed", mib, -1)}, 0, over, []refStatus{{over, 0, "", left}}},
		{"differs in its last byte: apart", dl{d("unnamed", other, -1)}, 0, ok, []refStatus{{ok, 1, "", left}}},
		{"a wildcard sees the whole value", dl{d("wild", "pre"+mib, -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"and counts it", dl{d("wild", "pre"+mib, -1)}, 0, over, []refStatus{{over, 0, "", left}}},
		{"no match past the prefix", dl{d("wild", "xpre"+mib, -1)}, 0, ok, []refStatus{{ok, 0, "", 0}}},
		{"an override counts a long value", dl{withOverride(d("unnamed", mib+"o", -1), 1, typev3.RateLimitUnit_MINUTE)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"override over", dl{withOverride(d("unnamed", mib+"o", -1), 1, typev3.RateLimitUnit_MINUTE)}, 0, over, []refStatus{{over, 0, "", left}}},
	})
}

// TestEnvoyCountDeniedHits: with CountDeniedHits every descriptor's hits
// are counted, denied or not, as the reference counts (its
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false): the reference's
// check-then-charge pattern (a 0-hit check on the request path, the
// actual usage charged when the stream is done) limits.
func TestEnvoyCountDeniedHits(t *testing.T) {
	runSteps(t, server.EnvoySettings{CountDeniedHits: true}, []refStep{
		{"check", dl{d("tokens", "u", 0)}, 0, ok, []refStatus{{ok, 10, "", left}}},
		{"charge 4", dl{d("tokens", "u", 4)}, 0, ok, []refStatus{{ok, 6, "", left}}},
		{"charge 4", dl{d("tokens", "u", 4)}, 0, ok, []refStatus{{ok, 2, "", left}}},
		{"charge 4: over, counted", dl{d("tokens", "u", 4)}, 0, over, []refStatus{{over, 0, "", left}}},
		{"check: over", dl{d("tokens", "u", 0)}, 0, over, []refStatus{{over, 0, "", -1}}},
		// A denied request charges its other descriptors too.
		{"fill named", dl{d("named", "c", 2)}, 0, ok, []refStatus{{ok, 0, "per_minute", left}}},
		{"denied by named, unnamed counted", dl{d("unnamed", "c", -1), d("named", "c", -1)}, 0, over, []refStatus{{ok, 1, "", left}, {over, 0, "per_minute", -1}}},
		{"unnamed has one left", dl{d("unnamed", "c", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
	})
}

// TestEnvoyCheckThenChargeDefault: without CountDeniedHits a charge that
// does not fit is refused and not counted (all or nothing); the 0-hit
// check still denies once the next unit does not fit.
func TestEnvoyCheckThenChargeDefault(t *testing.T) {
	runSteps(t, server.EnvoySettings{}, []refStep{
		{"charge 5", dl{d("tokens", "v", 5)}, 0, ok, []refStatus{{ok, 5, "", left}}},
		{"charge 5", dl{d("tokens", "v", 5)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"check: over", dl{d("tokens", "v", 0)}, 0, over, []refStatus{{over, 0, "", left}}},
		{"a denied request counts nothing", dl{d("unnamed", "d", -1), d("tokens", "v", 1)}, 0, over, []refStatus{{ok, 1, "", left}, {over, 0, "", left}}},
		{"unnamed untouched", dl{d("unnamed", "d", 0)}, 0, ok, []refStatus{{ok, 2, "", left}}},
	})
}

// TestEnvoyCountDeniedQuota: with quota mode and CountDeniedHits, a
// quota-mode descriptor over its quota in a passing request is counted
// too (the reference increments every key).
func TestEnvoyCountDeniedQuota(t *testing.T) {
	runSteps(t, server.EnvoySettings{CountDeniedHits: true}, []refStep{
		{"fill s1", dl{d("service", "s1", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"s1 over, counted; s2 charged", dl{d("service", "s1", -1), d("service", "s2", -1)}, 0, ok, []refStatus{{over, 0, "", left}, {ok, 1, "", left}}},
		{"s2's last", dl{d("service", "s2", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"both over, both counted", dl{d("service", "s1", -1), d("service", "s2", -1)}, 0, over, []refStatus{{over, 0, "", -1}, {over, 0, "", -1}}},
	})
}

// TestEnvoyShareOverrideCounters: with ShareOverrideCounters a limit
// override counts under the rule's counter when the rule counts fixed
// windows of the override's unit, and overrides of one unit share a
// counter whatever their rate (the reference's key is the descriptor and
// the window); without, each override rate counts apart.
func TestEnvoyShareOverrideCounters(t *testing.T) {
	o := func(value string, n uint32) *ratelimitv3.RateLimitDescriptor {
		return withOverride(d("named", value, -1), n, typev3.RateLimitUnit_MINUTE)
	}
	norule := func(n uint32) *ratelimitv3.RateLimitDescriptor {
		return withOverride(d("nothing", "x", -1), n, typev3.RateLimitUnit_MINUTE)
	}
	t.Run("shared", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{ShareOverrideCounters: true}, []refStep{
			{"rule, 1 of 2", dl{d("named", "s", -1)}, 0, ok, []refStatus{{ok, 1, "per_minute", left}}},
			{"override 5: the rule's count", dl{o("s", 5)}, 0, ok, []refStatus{{ok, 3, "", left}}},
			{"rule: over, the override counted", dl{d("named", "s", -1)}, 0, over, []refStatus{{over, 0, "per_minute", left}}},
			{"changed override keeps the count", dl{o("s", 4)}, 0, ok, []refStatus{{ok, 1, "", left}}},
			{"no rule: override 3", dl{norule(3)}, 0, ok, []refStatus{{ok, 2, "", left}}},
			{"no rule: override 2 shares it", dl{norule(2)}, 0, ok, []refStatus{{ok, 0, "", left}}},
		})
	})
	t.Run("apart", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{}, []refStep{
			{"rule, 1 of 2", dl{d("named", "s", -1)}, 0, ok, []refStatus{{ok, 1, "per_minute", left}}},
			{"override 5 counts apart", dl{o("s", 5)}, 0, ok, []refStatus{{ok, 4, "", left}}},
			{"override 4 starts fresh", dl{o("s", 4)}, 0, ok, []refStatus{{ok, 3, "", left}}},
		})
	})
}

// TestEnvoyOverrideBesideTokenBucket: a rule that does not count fixed
// windows keeps its state to itself; the override counts per unit.
func TestEnvoyOverrideBesideTokenBucket(t *testing.T) {
	yaml := "domain: edge\ndescriptors:\n  - key: tb\n    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 2}\n"
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{ShareOverrideCounters: true})
	for i, want := range []uint32{1, 0} {
		if r := h.call(t, d("tb", "x", -1)); r.Statuses[0].LimitRemaining != want {
			t.Fatalf("rule call %d: remaining %d, want %d", i, r.Statuses[0].LimitRemaining, want)
		}
	}
	resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
		Descriptors: dl{withOverride(d("tb", "x", -1), 5, typev3.RateLimitUnit_MINUTE)}})
	if err != nil || codesOf(resp) != "OK:OK" || resp.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("override beside a token bucket: %v %v, want OK remaining 4", resp, err)
	}
}
