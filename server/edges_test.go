package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// The tests here pin edges that only e2e covered, or nothing did: each
// fails when its mutant of the API layer is applied (a comparison turned,
// a per-rule setting ignored, a rounding direction flipped).

// TestKeyLengthLimit: a key, domain, entry key or entry value of exactly
// MaxKeyBytes is accepted, one byte more is refused (`>` turned `>=`
// refused the first).
func TestKeyLengthLimit(t *testing.T) {
	const max = 16
	at, over := strings.Repeat("k", max), strings.Repeat("k", max+1)
	t.Run("check key", func(t *testing.T) {
		h := start(t, nil, server.Settings{MaxKeyBytes: max})
		check := func(key string) error {
			_, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: key, Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(1, time.Second, 0)})
			return err
		}
		if err := check(at); err != nil {
			t.Errorf("key of %d bytes, the limit: %v, want accepted", max, err)
		}
		wantMsg := fmt.Sprintf("key: %d bytes exceed the limit of %d", max+1, max)
		if err := check(over); status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), wantMsg) {
			t.Errorf("key of %d bytes: %v, want InvalidArgument %q", max+1, err, wantMsg)
		}
	})
	h := startEnvoy(t, "domain: edge\n", nil, server.EnvoySettings{Settings: server.Settings{MaxKeyBytes: max}})
	for _, tc := range []struct {
		field string
		req   func(s string) *rlsv3.RateLimitRequest
	}{
		{"domain", func(s string) *rlsv3.RateLimitRequest {
			return &rlsv3.RateLimitRequest{Domain: s, Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("a", "1")}}
		}},
		{"descriptors[0].entries[0].key", func(s string) *rlsv3.RateLimitRequest {
			return &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor(s, "1")}}
		}},
	} {
		t.Run("envoy "+tc.field, func(t *testing.T) {
			if _, err := h.client.ShouldRateLimit(context.Background(), tc.req(at)); err != nil {
				t.Errorf("%d bytes, the limit: %v, want accepted", max, err)
			}
			wantMsg := fmt.Sprintf("%s: %d bytes exceed the limit of %d", tc.field, max+1, max)
			_, err := h.client.ShouldRateLimit(context.Background(), tc.req(over))
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), wantMsg) {
				t.Errorf("%d bytes: %v, want InvalidArgument %q", max+1, err, wantMsg)
			}
		})
	}
}

// failureRules has a rule and a policy for each failure mode, and one of
// each that sets none.
const failureRules = `domain: edge
descriptors:
  - key: unset
    rate_limit: {unit: minute, requests_per_unit: 5}
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: open}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: closed}
policies:
  unset: {requests_per_min: 5}
  open: {requests_per_min: 5, failure_mode: open}
  closed: {requests_per_min: 5, failure_mode: closed}
`

// TestFailureModes: when the store cannot decide, a rule's or policy's own
// failure mode answers, and the service's default (Settings.FailureMode)
// answers for those that set none and for inline limits.
func TestFailureModes(t *testing.T) {
	cfg := testkit.ParseRules(t, failureRules)
	for _, def := range []rules.FailureMode{rules.FailureOpen, rules.FailureClosed} {
		for _, own := range []string{"unset", "open", "closed"} {
			wantAllowed := own == "open" || (own == "unset" && def == rules.FailureOpen)
			t.Run(fmt.Sprintf("default %v, %s", def, own), func(t *testing.T) {
				mem := memstore.New(memstore.Config{})
				h := start(t, failingStore{mem}, server.Settings{Rules: testkit.StaticRules(cfg), FailureMode: def})
				r, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: own}})
				if err != nil || r.Allowed != wantAllowed || !r.Degraded {
					t.Errorf("policy %s: got %v %v, want degraded, allowed %v", own, r, err, wantAllowed)
				}
				e := startEnvoy(t, failureRules, failingStore{mem}, server.EnvoySettings{Settings: server.Settings{FailureMode: def}})
				want := "OK:OK"
				if !wantAllowed {
					want = "OVER_LIMIT:OVER_LIMIT"
				}
				if got := codesOf(e.call(t, testkit.Descriptor(own, "1"))); got != want {
					t.Errorf("rule %s: got %s, want %s", own, got, want)
				}
			})
		}
		t.Run(fmt.Sprintf("default %v, inline", def), func(t *testing.T) {
			h := start(t, failingStore{memstore.New(memstore.Config{})}, server.Settings{FailureMode: def})
			r, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(5, time.Minute, 0)})
			if want := def == rules.FailureOpen; err != nil || r.Allowed != want || !r.Degraded {
				t.Errorf("inline: got %v %v, want degraded, allowed %v", r, err, want)
			}
		})
	}
}

// choiceRules has limits whose denies wait differently: short (1 per 2s),
// long (1 per minute) and a ban (never), and two allowing limits of
// different sizes.
const choiceRules = `domain: edge
descriptors:
  - key: short
    rate_limit: {algorithm: fixed_window, period: 2s, requests_per_unit: 1}
  - key: long
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 1}
  - key: ban
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: small
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 3}
  - key: big
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 10}
`

// TestEnvoyHeadersChoice: when several descriptors answer, the headers
// describe the most restrictive, in whatever order the descriptors come:
// of two denies the longer wait (its RateLimit fields and Retry-After), a
// ban over any wait, a deny over an allow, and of two allows the one with
// fewer remaining.
func TestEnvoyHeadersChoice(t *testing.T) {
	d := testkit.Descriptor
	cases := []struct {
		name       string
		spend      []string // descriptors spent to their limit first
		descs      [2]string
		wantCodes  string // for descs in the order given
		wantHeader map[string]string
	}{
		{"two denies: the longer wait", []string{"short", "long"}, [2]string{"short", "long"}, "OVER_LIMIT:OVER_LIMIT,OVER_LIMIT", map[string]string{
			"ratelimit": `"edge.long";r=0;t=60`, "retry-after": "60", "x-ratelimit-reset": "60"}},
		{"a ban over a wait", []string{"long"}, [2]string{"ban", "long"}, "OVER_LIMIT:OVER_LIMIT,OVER_LIMIT", map[string]string{
			"ratelimit-policy": `"edge.ban";q=0;w=1`, "retry-after": "86400"}},
		{"a deny over an allow", []string{"short"}, [2]string{"short", "big"}, "OVER_LIMIT:OVER_LIMIT,OK", map[string]string{
			"ratelimit": `"edge.short";r=0;t=2`, "retry-after": "2"}},
		{"two allows: fewer remaining", nil, [2]string{"big", "small"}, "OK:OK,OK", map[string]string{
			"ratelimit": `"edge.small";r=2;t=60`, "x-ratelimit-remaining": "2"}},
	}
	for _, tc := range cases {
		for _, reversed := range []bool{false, true} {
			name := tc.name
			descs, want := tc.descs, tc.wantCodes
			if reversed {
				name += ", reversed"
				descs[0], descs[1] = descs[1], descs[0]
				parts := strings.Split(strings.SplitN(want, ":", 2)[1], ",")
				want = strings.SplitN(want, ":", 2)[0] + ":" + parts[1] + "," + parts[0]
			}
			t.Run(name, func(t *testing.T) {
				h := startEnvoy(t, choiceRules, nil, server.EnvoySettings{})
				for _, s := range tc.spend {
					h.call(t, d(s, "1"))
				}
				r := h.call(t, d(descs[0], "1"), d(descs[1], "1"))
				if got := codesOf(r); got != want {
					t.Errorf("codes: got %s, want %s", got, want)
				}
				hs := headerMap(r)
				for k, v := range tc.wantHeader {
					if hs[k] != v {
						t.Errorf("%s: got %q, want %q (all: %v)", k, hs[k], v, hs)
					}
				}
			})
		}
	}
}

// TestEnvoyHeadersRoundUp: waits of a fraction of a second are rounded up
// in the headers, never down to a reset or retry too early (or to 0,
// retry at once): 1.5s left in the window is X-RateLimit-Reset 2.
func TestEnvoyHeadersRoundUp(t *testing.T) {
	h := startEnvoy(t, choiceRules, nil, server.EnvoySettings{})
	h.clock.Advance(500 * time.Millisecond) // 1.5s left of the 2s window
	r := h.call(t, testkit.Descriptor("short", "1"))
	if hs := headerMap(r); hs["x-ratelimit-reset"] != "2" || hs["ratelimit"] != `"edge.short";r=0;t=2` {
		t.Errorf("allowed, 1.5s to reset: got %v, want x-ratelimit-reset 2 and t=2", hs)
	}
	if d := r.Statuses[0].DurationUntilReset.AsDuration(); d != 1500*time.Millisecond {
		t.Errorf("duration_until_reset %v, want 1.5s (exact: Envoy rounds itself)", d)
	}
	h.clock.Advance(900 * time.Millisecond) // 0.6s left
	r = h.call(t, testkit.Descriptor("short", "1"))
	if hs := headerMap(r); codesOf(r) != "OVER_LIMIT:OVER_LIMIT" || hs["retry-after"] != "1" || hs["x-ratelimit-reset"] != "1" {
		t.Errorf("denied, 0.6s to reset: got %s %v, want OVER_LIMIT with retry-after 1 and x-ratelimit-reset 1", codesOf(r), hs)
	}
}
