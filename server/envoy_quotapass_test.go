package server_test

import (
	"context"
	"slices"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
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

// TestEnvoyQuotaMarks: a call whose context carries QuotaMarks learns
// which statuses are quota-mode descriptors' (own quota_mode or the
// server's; never an unlimited or rule-less one).
func TestEnvoyQuotaMarks(t *testing.T) {
	cfg, err := rules.Parse("edge.yaml", []byte(referenceRules))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		global bool
		want   []bool
	}{
		{false, []bool{true, false, false, false, true}},
		{true, []bool{true, true, false, false, true}},
	} {
		st := memstore.New(memstore.Config{})
		t.Cleanup(func() { st.Close() })
		clock := testkit.NewClock(testkit.T0)
		e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: testkit.StaticRules(cfg), Clock: clock.Now}, QuotaMode: tc.global})
		ctx, marks := server.WithQuotaMarks(context.Background())
		_, err := e.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{
			d("service", "s1", -1), d("regular", "r", -1), d("free", "x", -1), d("nosuch", "x", -1), d("ghost", "g", -1)}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(marks.Quota, tc.want) {
			t.Errorf("global %v: marks %v, want %v", tc.global, marks.Quota, tc.want)
		}
		if _, err := e.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{d("service", "s2", -1)}}); err != nil {
			t.Fatalf("without marks: %v", err)
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
