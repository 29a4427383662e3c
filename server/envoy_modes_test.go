package server_test

import (
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestEnvoyChargeAfterLeakyBucketNoWait: a charge-after descriptor on a
// leaky bucket is charged as debt and still decided without waiting
// (Envoy cannot hold a request): once anything is queued, nothing may
// start now, so it answers 0 remaining, as the next request-path call
// (denied) shows.
func TestEnvoyChargeAfterLeakyBucketNoWait(t *testing.T) {
	const yaml = `domain: edge
descriptors:
  - key: job
    rate_limit: {algorithm: leaky_bucket, unit: minute, requests_per_unit: 5}
    descriptors:
      - key: usage
        value: actual
        charge: after
`
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{})
	r := h.call(t, testkit.Descriptor("job", "a", "usage", "actual"))
	if got := codesOf(r); got != "OK:OK" {
		t.Fatalf("charge after: %s, want OK", got)
	}
	if rem := r.Statuses[0].LimitRemaining; rem != 0 {
		t.Errorf("charge after on a queued leaky bucket: %d remaining, want 0 (nothing may start now)", rem)
	}
	if got := codesOf(h.call(t, testkit.Descriptor("job", "a"))); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Errorf("request path behind the queued charge: %s, want OVER_LIMIT (it would have to wait)", got)
	}
}

// TestEnvoyShadowZeroHitCheck: a 0-hit check of a shadow limit charges
// nothing, whether the request passes or is denied by another limit.
func TestEnvoyShadowZeroHitCheck(t *testing.T) {
	rec := &keyRecorder{Store: memstore.New(memstore.Config{}), seen: map[int64]store.Request{}}
	h := startEnvoy(t, shadowRules, rec, server.EnvoySettings{})
	for range 5 {
		if got := codesOf(h.call(t, d("trial", "z", 0))); got != "OK:OK" {
			t.Fatalf("0-hit shadow check: %s", got)
		}
	}
	if got := rec.remaining(t, 3); got != 3 {
		t.Fatalf("after five 0-hit checks the shadow limit of 3 has %d left, want 3", got)
	}
	for range 3 { // spend the enforced limit of 2, then be denied by it
		h.call(t, testkit.Descriptor("enforced", "z"), d("trial", "z", 0))
	}
	if got := rec.remaining(t, 3); got != 3 {
		t.Fatalf("after 0-hit checks beside an enforced limit the shadow limit has %d left, want 3", got)
	}
}

// TestEnvoyShareOverrideOtherUnit: an override shares its rule's counter
// only when the rule counts in fixed windows of the override's own unit;
// an override of another unit counts under a key of its unit.
func TestEnvoyShareOverrideOtherUnit(t *testing.T) {
	hour := func(n uint32) *ratelimitv3.RateLimitDescriptor {
		return withOverride(d("named", "u", -1), n, typev3.RateLimitUnit_HOUR)
	}
	runSteps(t, server.EnvoySettings{ShareOverrideCounters: true}, []refStep{
		{"rule, 1 of 2 a minute", dl{d("named", "u", -1)}, 0, ok, []refStatus{{ok, 1, "per_minute", left}}},
		{"override 5 an hour: not the minute's count", dl{hour(5)}, 0, ok, []refStatus{{ok, 4, "", -1}}},
		{"rule: its own count", dl{d("named", "u", -1)}, 0, ok, []refStatus{{ok, 0, "per_minute", left}}},
		{"override 5 an hour again", dl{hour(5)}, 0, ok, []refStatus{{ok, 3, "", -1}}},
	})
}

// TestEnvoyZeroHitCheckHeaders: a 0-hit check reports what is left now:
// after a denied check the headers say none is left (the look's one hit
// is given back only when it fitted), after an allowed one they say all
// that is left, never more than the limit.
func TestEnvoyZeroHitCheckHeaders(t *testing.T) {
	h := startEnvoy(t, headerConfig, nil, server.EnvoySettings{})
	for i, want := range []string{"3", "3", "2", "1", "0", "0"} {
		hits := 0
		if i == 2 || i == 3 || i == 4 {
			hits = 1
		}
		r := h.call(t, d("a", "peek", hits))
		if got := headerMap(r)["x-ratelimit-remaining"]; got != want {
			t.Errorf("call %d (%d hits): x-ratelimit-remaining %q, want %q (all: %v)", i, hits, got, want, headerMap(r))
		}
	}
}

// TestEnvoyDeniedRequestRefund: a refund (is_negative_hits) in a denied
// request is not applied, with denied hits counted too: the request is
// all or nothing, and only its positive hits are counted as debt.
func TestEnvoyDeniedRequestRefund(t *testing.T) {
	refund := func(n int) *ratelimitv3.RateLimitDescriptor {
		desc := d("tokens", "t", n)
		desc.IsNegativeHits = true
		return desc
	}
	runSteps(t, server.EnvoySettings{CountDeniedHits: true}, []refStep{
		{"spend 5 of 10 tokens", dl{d("tokens", "t", 5)}, 0, ok, []refStatus{{ok, 5, "", -1}}},
		{"spend regular", dl{d("regular", "r", -1)}, 0, ok, []refStatus{{ok, 0, "", -1}}},
		{"denied by regular, with a refund of 3", dl{d("regular", "r", -1), refund(3)}, 0, over, []refStatus{{over, 0, "", -1}, {ok, -1, "", -1}}},
		{"tokens: the refund was not applied", dl{d("tokens", "t", 0)}, 0, ok, []refStatus{{ok, 5, "", -1}}},
	})
}

// TestEnvoyOverrideQuotaAndShadow: with the server's quota mode a limit
// override is a quota like every limit (over beside a fitting quota: OK),
// and under the server's shadow mode an unlimited descriptor shows no
// numbers either (shadow limits never shape them).
func TestEnvoyOverrideQuotaAndShadow(t *testing.T) {
	o := func() *ratelimitv3.RateLimitDescriptor {
		return withOverride(d("nothing", "q", -1), 1, typev3.RateLimitUnit_MINUTE)
	}
	runSteps(t, server.EnvoySettings{QuotaMode: true}, []refStep{
		{"override fits", dl{o()}, 0, ok, []refStatus{{ok, 0, "", left}}},
		{"override over beside a fitting quota: OK", dl{o(), d("regular", "q", -1)}, 0, ok, []refStatus{{over, 0, "", left}, {ok, 0, "", left}}},
	})
	runSteps(t, server.EnvoySettings{ShadowMode: true}, []refStep{
		{"unlimited under global shadow", dl{d("free", "x", -1)}, 0, ok, []refStatus{{ok, 0, "", 0}}},
	})
}

// TestEnvoyShareOverrideCalendar: a calendar day is no fixed window of a
// day: an override of unit day does not share its count.
func TestEnvoyShareOverrideCalendar(t *testing.T) {
	const yaml = "domain: edge\ndescriptors:\n  - key: cal\n    rate_limit: {algorithm: fixed_window, period: calendar_day, requests_per_unit: 2}\n"
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{ShareOverrideCounters: true})
	if r := h.call(t, d("cal", "x", -1)); r.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("calendar rule: remaining %d, want 1", r.Statuses[0].LimitRemaining)
	}
	r := h.call(t, withOverride(d("cal", "x", -1), 5, typev3.RateLimitUnit_DAY))
	if codesOf(r) != "OK:OK" || r.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("override of a day beside a calendar day: %s remaining %d, want OK 4", codesOf(r), r.Statuses[0].LimitRemaining)
	}
}

// TestEnvoyShareOverrideChargeAfter: an override on a charge-after
// descriptor does not share the counter its charge goes to: the request
// path's count is not spent by it.
func TestEnvoyShareOverrideChargeAfter(t *testing.T) {
	const yaml = `domain: edge
descriptors:
  - key: job
    rate_limit: {unit: minute, requests_per_unit: 5}
    descriptors:
      - key: usage
        value: actual
        charge: after
`
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{ShareOverrideCounters: true})
	if r := h.call(t, d("job", "a", -1)); r.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("request path: remaining %d, want 4", r.Statuses[0].LimitRemaining)
	}
	done := withOverride(testkit.Descriptor("job", "a", "usage", "actual"), 10, typev3.RateLimitUnit_MINUTE)
	if r := h.call(t, done); codesOf(r) != "OK:OK" {
		t.Fatalf("override on the charge-after descriptor: %s", codesOf(r))
	}
	if r := h.call(t, d("job", "a", -1)); r.Statuses[0].LimitRemaining != 3 {
		t.Errorf("request path after the override: remaining %d, want 3 (the override counted apart)", r.Statuses[0].LimitRemaining)
	}
}
