package server_test

import (
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestEnvoyQuotaPassers: the descriptors the reference counts as quotas
// that passed (shouldRateLimitWorker): a shadow quota-mode descriptor
// (its status is OK, over or not) and, with the global quota mode, a
// descriptor no limit applies to. With one of them in the request, the
// other quotas being over does not make it OVER_LIMIT.
func TestEnvoyQuotaPassers(t *testing.T) {
	t.Run("shadow quota", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{}, []refStep{
			{"fill ghost", dl{d("ghost", "g", -1)}, 0, ok, []refStatus{{ok, -1, "", -1}}},
			{"ghost over, still OK", dl{d("ghost", "g", -1)}, 0, ok, []refStatus{{ok, -1, "", -1}}},
			{"fill s1", dl{d("service", "s1", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
			{"s1 over beside a shadow quota: OK", dl{d("ghost", "g", -1), d("service", "s1", -1)}, 0, ok, []refStatus{{ok, -1, "", -1}, {over, 0, "", left}}},
			{"s1 alone: OVER_LIMIT", dl{d("service", "s1", -1)}, 0, over, []refStatus{{over, 0, "", left}}},
		})
	})
	t.Run("a shadow limit out of quota mode is no quota", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{}, []refStep{
			{"fill s1", dl{d("service", "s1", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
			{"s1 over beside a plain shadow limit: OVER_LIMIT", dl{d("trial", "t", -1), d("service", "s1", -1)}, 0, over, []refStatus{{ok, -1, "", -1}, {over, 0, "", left}}},
		})
	})
	t.Run("one of a descriptor's quota limits over", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{}, []refStep{
			{"both fit", dl{d("tiers", "x", -1)}, 0, ok, []refStatus{{ok, 0, "", -1}}},
			{"the first over, the second fits: over its quota", dl{d("tiers", "x", -1)}, 0, over, []refStatus{{over, 0, "", -1}}},
		})
	})
	t.Run("global, no rule", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{QuotaMode: true}, []refStep{
			{"fill regular", dl{d("regular", "n", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
			{"no rule beside it: OK", dl{d("nosuch", "x", -1), d("regular", "n", -1)}, 0, ok, []refStatus{{ok, 0, "", 0}, {over, 0, "", left}}},
			{"alone: OVER_LIMIT", dl{d("regular", "n", -1)}, 0, over, []refStatus{{over, 0, "", left}}},
			{"unlimited beside it: OVER_LIMIT", dl{d("free", "x", -1), d("regular", "n", -1)}, 0, over, []refStatus{{ok, 4294967295, "", 0}, {over, 0, "", left}}},
		})
	})
	t.Run("not global, no rule", func(t *testing.T) {
		runSteps(t, server.EnvoySettings{}, []refStep{
			{"fill s1", dl{d("service", "s1", -1)}, 0, ok, []refStatus{{ok, 0, "", left}}},
			{"no rule is no quota: OVER_LIMIT", dl{d("nosuch", "x", -1), d("service", "s1", -1)}, 0, over, []refStatus{{ok, 0, "", 0}, {over, 0, "", left}}},
		})
	})
}

// TestEnvoyReferenceHeaders: with ReferenceHeaders, an answer carries
// the reference's three headers in place of floodgate's, picked as the
// reference picks them: an over-limit status takes precedence unless it is
// a quota-mode descriptor's (own quota_mode or the server's; never a
// rule-less one), which competes only by least remaining.
func TestEnvoyReferenceHeaders(t *testing.T) {
	names := &server.ReferenceHeaders{Limit: "L", Remaining: "R", Reset: "S"}
	limitOf := func(r *rlsv3.RateLimitResponse) string {
		var parts []string
		for _, hv := range r.GetResponseHeadersToAdd() {
			parts = append(parts, hv.GetKey()+"="+hv.GetValue())
		}
		if len(parts) != 3 || !strings.HasPrefix(parts[0], "L=") {
			t.Fatalf("headers %q, want L, R and S alone", parts)
		}
		return parts[0]
	}
	for _, tc := range []struct {
		global        bool
		quotas, mixed string // the L of two over quotas (s1, s2), and of s2 and regular over
	}{
		{false, "L=1", "L=1"}, // regular, over and no quota, takes precedence
		{true, "L=1", "L=2"},  // regular is a quota too: s2 comes first
	} {
		h := startEnvoy(t, referenceRules, nil, server.EnvoySettings{ReferenceHeaders: names, QuotaMode: tc.global})
		h.call(t, d("service", "s1", -1))
		h.call(t, d("service", "s2", -1))
		h.call(t, d("service", "s2", -1))
		h.call(t, d("regular", "r", -1))
		// Both over: the quota-mode s2 does not take precedence over s1.
		if got := limitOf(h.call(t, d("service", "s1", -1), d("service", "s2", -1))); got != tc.quotas {
			t.Errorf("global %v: two over quotas: %s, want %s", tc.global, got, tc.quotas)
		}
		if got := limitOf(h.call(t, d("service", "s2", -1), d("regular", "r", -1))); got != tc.mixed {
			t.Errorf("global %v: s2 and regular over: %s, want %s", tc.global, got, tc.mixed)
		}
		if r := h.call(t, d("nosuch", "x", -1)); len(r.GetResponseHeadersToAdd()) != 0 {
			t.Errorf("global %v: no limit, headers %v, want none", tc.global, r.GetResponseHeadersToAdd())
		}
	}
}

// TestEnvoyQuotaRoundTrips: only a request with an enforced quota-mode
// limit pays quota mode's look before the charge; a shadow quota-mode
// limit is decided on its own, as any shadow limit.
func TestEnvoyQuotaRoundTrips(t *testing.T) {
	for _, tc := range []struct {
		what  string
		descs dl
		calls int64
	}{
		{"a regular limit", dl{d("regular", "rt", -1)}, 1},
		{"a regular limit and a shadow quota", dl{d("regular", "rt2", -1), d("ghost", "rt2", -1)}, 2},
		{"a regular limit and a quota", dl{d("regular", "rt3", -1), d("service", "s1", -1)}, 2},
	} {
		cc := &callCounter{Store: memstore.New(memstore.Config{})}
		h := startEnvoy(t, referenceRules, cc, server.EnvoySettings{})
		h.call(t, tc.descs...)
		if got := cc.calls.Load(); got != tc.calls {
			t.Errorf("%s: %d store calls, want %d", tc.what, got, tc.calls)
		}
	}
}
