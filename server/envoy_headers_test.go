package server_test

import (
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/internal/testkit/sfv"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// headerConfig holds the limits of the header tests.
const headerConfig = `domain: edge
descriptors:
  - key: a
    rate_limit: {algorithm: fixed_window, period: 7s, requests_per_unit: 3}
  - key: s
    shadow_mode: true
    rate_limit: {name: shadowy, unit: minute, requests_per_unit: 1}
  - key: tb
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 60, burst: 10}
  - key: ban
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: closed}
  - key: named
    rate_limit: {name: "caf\u00e9 \"q\"", unit: minute, requests_per_unit: 5}
`

// TestEnvoyHeadersShadowNeverShape: With [a (3/7s), s
// (shadow 1/min)], the headers described the shadow limit (r=0) while the
// enforced one had 2 left. Shadow limits never shape headers, nor the
// numbers of a status (from which Envoy can write its own headers).
func TestEnvoyHeadersShadowNeverShape(t *testing.T) {
	h := startEnvoy(t, headerConfig, nil, server.EnvoySettings{})
	r := h.call(t, testkit.Descriptor("a", "1"), testkit.Descriptor("s", "1"))
	hs := headerMap(r)
	for k, v := range map[string]string{
		"ratelimit":             `"edge.a";r=2;t=2`,
		"ratelimit-policy":      `"edge.a";q=3;w=7`,
		"x-ratelimit-remaining": "2",
		"x-ratelimit-limit":     "3, 3;w=7",
	} {
		if hs[k] != v {
			t.Errorf("%s: got %q, want %q (all: %v)", k, hs[k], v, hs)
		}
	}
	if s := r.Statuses[1]; s.Code != rlsv3.RateLimitResponse_OK || s.CurrentLimit != nil || s.LimitRemaining != 0 {
		t.Errorf("shadow-only descriptor: status %v, want OK with no limit", s)
	}
	// The shadow limit is over now; still not in the headers.
	r = h.call(t, testkit.Descriptor("s", "1"), testkit.Descriptor("a", "1"))
	if got := headerMap(r)["ratelimit"]; got != `"edge.a";r=1;t=2` {
		t.Errorf("shadow over its limit: ratelimit %q, want the enforced limit's", got)
	}
	// Only shadow limits: no quota headers at all.
	r = h.call(t, testkit.Descriptor("s", "1"))
	if codesOf(r) != "OK:OK" || len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("shadow only: got %s %v, want OK and no headers", codesOf(r), headerMap(r))
	}
	g := startEnvoy(t, headerConfig, nil, server.EnvoySettings{ShadowMode: true})
	for i := range 5 {
		r := g.call(t, testkit.Descriptor("a", "1"), testkit.Descriptor("ban", "x"))
		if codesOf(r) != "OK:OK,OK" || len(r.ResponseHeadersToAdd) != 0 || r.Statuses[0].CurrentLimit != nil {
			t.Fatalf("--shadow-mode, call %d: got %s %v %v, want OK, no headers, no limits", i, codesOf(r), headerMap(r), r.Statuses)
		}
	}
}

// TestEnvoyHeadersDegraded: a degraded answer claimed zero
// quota (x-ratelimit-remaining: 0, r=0;t=0, limit_remaining 0), telling
// clients "none left, retry now". Now it says nothing about the quota.
func TestEnvoyHeadersDegraded(t *testing.T) {
	mem := memstore.New(memstore.Config{})
	h := startEnvoy(t, headerConfig, failingStore{mem}, server.EnvoySettings{})
	r := h.call(t, testkit.Descriptor("a", "1"))
	hs := headerMap(r)
	if codesOf(r) != "OK:OK" || hs["x-ratelimit-degraded"] != "true" || len(hs) != 1 {
		t.Errorf("open: got %s %v, want OK with only x-ratelimit-degraded", codesOf(r), hs)
	}
	if s := r.Statuses[0]; s.CurrentLimit != nil || s.LimitRemaining != 0 || s.DurationUntilReset != nil {
		t.Errorf("open: status %v, want no limit, remaining or reset", s)
	}
	r = h.call(t, testkit.Descriptor("closed", "1"))
	hs = headerMap(r)
	if codesOf(r) != "OVER_LIMIT:OVER_LIMIT" || hs["x-ratelimit-degraded"] != "true" || hs["retry-after"] != "1" || len(hs) != 2 {
		t.Errorf("closed: got %s %v, want OVER_LIMIT with x-ratelimit-degraded and retry-after 1 only", codesOf(r), hs)
	}
	if s := r.Statuses[0]; s.CurrentLimit != nil || s.DurationUntilReset != nil {
		t.Errorf("closed: status %v, want no limit or reset", s)
	}
	// A ban is known without the store: it still describes itself.
	r = h.call(t, testkit.Descriptor("a", "1"), testkit.Descriptor("ban", "x"))
	if hs := headerMap(r); hs["ratelimit-policy"] != `"edge.ban";q=0;w=1` || hs["x-ratelimit-degraded"] != "true" {
		t.Errorf("degraded with a ban: got %v", hs)
	}
}

// TestEnvoyHeadersMeaning: a token bucket of 60/min
// burst 10 advertised q=10;w=60 (six times too slow); a ban answered t=0,
// x-ratelimit-reset 0 and no Retry-After (retry now, in a loop).
func TestEnvoyHeadersMeaning(t *testing.T) {
	h := startEnvoy(t, headerConfig, nil, server.EnvoySettings{})
	r := h.call(t, testkit.Descriptor("tb", "1"))
	if got := headerMap(r)["ratelimit-policy"]; got != `"edge.tb";q=10;w=10` {
		t.Errorf("token bucket 60/min burst 10: ratelimit-policy %q, want q=10;w=10", got)
	}
	if got := headerMap(r)["x-ratelimit-limit"]; got != "10, 10;w=10" {
		t.Errorf("token bucket 60/min burst 10: x-ratelimit-limit %q, want 10, 10;w=10", got)
	}
	r = h.call(t, testkit.Descriptor("ban", "x"))
	hs := headerMap(r)
	for k, v := range map[string]string{
		"ratelimit-policy":  `"edge.ban";q=0;w=1`,
		"ratelimit":         `"edge.ban";r=0;t=86400`,
		"x-ratelimit-reset": "86400",
		"retry-after":       "86400",
	} {
		if hs[k] != v {
			t.Errorf("ban: %s is %q, want %q (all: %v)", k, hs[k], v, hs)
		}
	}
	if d := r.Statuses[0].DurationUntilReset.AsDuration(); d != 24*time.Hour {
		t.Errorf("ban: duration_until_reset %v, want 24h", d)
	}
}

// TestEnvoyHeadersStructuredFields: Names were escaped
// with strconv.Quote, whose output (raw UTF-8, \u escapes) is no
// Structured Field string. Every header must parse as RFC 9651 says.
func TestEnvoyHeadersStructuredFields(t *testing.T) {
	h := startEnvoy(t, headerConfig, nil, server.EnvoySettings{})
	for _, d := range []string{"named", "a", "tb", "ban"} {
		for range 7 { // allowed, then denied
			r := h.call(t, testkit.Descriptor(d, "1"))
			checkStructured(t, d, headerMap(r))
		}
	}
	if got := headerMap(h.call(t, testkit.Descriptor("named", "2")))["ratelimit-policy"]; got != `"caf%c3%a9 \"q\"";q=5;w=60` {
		t.Errorf("named: ratelimit-policy %q", got)
	}
}

// checkStructured parses the rate-limit headers as Structured Fields:
// RateLimit-Policy and RateLimit a List of one String with Integer
// parameters, X-RateLimit-Limit a List, the rest Integers.
func checkStructured(t *testing.T, what string, hs map[string]string) {
	t.Helper()
	for k, v := range hs {
		switch k {
		case "ratelimit-policy", "ratelimit":
			l, err := sfv.ParseList(v)
			if err != nil || len(l) != 1 {
				t.Errorf("%s: %s %q: %v (%d members)", what, k, v, err, len(l))
				continue
			}
			if _, ok := l[0].Value.(string); !ok {
				t.Errorf("%s: %s %q: member is %T, want a String", what, k, v, l[0].Value)
			}
			for _, p := range l[0].Params {
				if _, ok := p.Value.(int64); !ok {
					t.Errorf("%s: %s %q: %s is not an Integer", what, k, v, p.Key)
				}
			}
		case "x-ratelimit-limit":
			if _, err := sfv.ParseList(v); err != nil {
				t.Errorf("%s: %s: %v", what, k, err)
			}
		case "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after":
			it, err := sfv.ParseItem(v)
			if _, ok := it.Value.(int64); err != nil || !ok {
				t.Errorf("%s: %s %q is not an Integer: %v", what, k, v, err)
			}
		}
	}
}

var _ = context.Background
