package server_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

// llmRules is the LLM example of docs/check-api.md: a tenant's tokens per minute and
// per day. The request path sends [tenant] (hits_addend: the estimate, 1
// here); the stream-done call sends [tenant, usage=actual] with the actual
// tokens, charged after the fact to the tenant's counters.
const llmRules = `domain: edge
descriptors:
  - key: tenant
    rate_limits:
      - {name: tpm, algorithm: token_bucket, unit: minute, requests_per_unit: 1000}
      - {name: tpd, algorithm: token_bucket, unit: day, requests_per_unit: 20000}
    descriptors:
      - key: usage
        value: actual
        charge: after
`

// TestEnvoyChargeAfter: the stream-done descriptor (charge: after) is
// charged with its hits_addend as debt and answered OK, even beyond the
// limit; the request path is then denied until the debt is repaid, to the
// millisecond.
func TestEnvoyChargeAfter(t *testing.T) {
	h := startEnvoy(t, llmRules, nil, server.EnvoySettings{})
	request := func() *ratelimitv3.RateLimitDescriptor { return testkit.Descriptor("tenant", "a") }
	done := func(tokens uint64) *ratelimitv3.RateLimitDescriptor {
		d := testkit.Descriptor("tenant", "a", "usage", "actual")
		d.HitsAddend = wrapperspb.UInt64(tokens)
		return d
	}
	if got := codesOf(h.call(t, request())); got != "OK:OK" {
		t.Fatalf("request path: %s", got)
	}
	// 1499 more tokens used: 1500 in all, 500 over the minute's 1000.
	r := h.call(t, done(1499))
	if got := codesOf(r); got != "OK:OK" {
		t.Fatalf("stream done with 1499 tokens: %s, want OK (charged as debt)", got)
	}
	if rem := r.Statuses[0].LimitRemaining; rem != 0 {
		t.Errorf("remaining in debt: %d, want 0", rem)
	}
	// The request path owes 500 tokens, then needs 1: 501 at 1000/min.
	h.clock.Advance(30059 * time.Millisecond)
	if got := codesOf(h.call(t, request())); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("request path 1ms before the debt is repaid: %s", got)
	}
	h.clock.Advance(time.Millisecond)
	if got := codesOf(h.call(t, request())); got != "OK:OK" {
		t.Fatalf("request path once the debt is repaid: %s", got)
	}
	// Another tenant is not touched.
	if got := codesOf(h.call(t, testkit.Descriptor("tenant", "b"))); got != "OK:OK" {
		t.Fatalf("tenant b: %s", got)
	}
	// Far beyond the capacity: still OK (the excess is not recorded).
	if got := codesOf(h.call(t, done(1_000_000))); got != "OK:OK" {
		t.Fatalf("a huge usage: %s, want OK", got)
	}
	// An unchanged request-path descriptor is never charged as debt.
	for range 2000 {
		h.call(t, request())
	}
	if got := codesOf(h.call(t, request())); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("request path after its limit: %s", got)
	}
}
