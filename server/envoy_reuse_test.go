package server_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// swapConfig is a RuleSource a test reloads by hand.
type swapConfig struct{ cfg atomic.Pointer[rules.Set] }

func (s *swapConfig) Current() *rules.Set { return s.cfg.Load() }

// TestEnvoyAnswerFollowsReload: the Envoy service builds the parts of an
// answer that depend on the limit alone (headers, current_limit, metrics
// series) once per limit; a reload that changes a rule's numbers or name
// must show in the next answer and series, not the old rule's.
func TestEnvoyAnswerFollowsReload(t *testing.T) {
	src := &swapConfig{}
	src.cfg.Store(testkit.ParseRules(t, "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"))
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: src, Clock: (testkit.NewClock(testkit.T0)).Now, Metrics: m}})
	call := func() *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := e.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("k", "v")}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	check := func(resp *rlsv3.RateLimitResponse, name string, perUnit uint32, unit rlsv3.RateLimitResponse_RateLimit_Unit, policy string) {
		t.Helper()
		cl := resp.Statuses[0].GetCurrentLimit()
		if cl.GetName() != name || cl.GetRequestsPerUnit() != perUnit || cl.GetUnit() != unit {
			t.Errorf("current_limit %v, want %s %d/%v", cl, name, perUnit, unit)
		}
		if got := headerMap(resp)["ratelimit-policy"]; got != policy {
			t.Errorf("ratelimit-policy %q, want %q", got, policy)
		}
	}
	check(call(), "", 10, rlsv3.RateLimitResponse_RateLimit_MINUTE, `"edge.k";q=10;w=60`)

	src.cfg.Store(testkit.ParseRules(t, "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {name: renamed, unit: hour, requests_per_unit: 20}\n"))
	check(call(), "renamed", 20, rlsv3.RateLimitResponse_RateLimit_HOUR, `"renamed";q=20;w=3600`)
	check(call(), "renamed", 20, rlsv3.RateLimitResponse_RateLimit_HOUR, `"renamed";q=20;w=3600`)

	got := decisionSeries(t, reg)
	if want := map[string]float64{"edge.k": 1, "renamed": 2}; len(got) != len(want) || got["edge.k"] != 1 || got["renamed"] != 2 {
		t.Errorf("decisions by rule %v, want %v", got, want)
	}
}

// TestEnvoyManyDescriptors: a request with more descriptors, limits and
// entries than a request's fixed-size working memory holds answers like a
// small one: every status in order, each with its own limit, all or
// nothing.
func TestEnvoyManyDescriptors(t *testing.T) {
	const n = 7
	yaml := "domain: edge\ndescriptors:\n"
	for i := range n {
		k := "k" + strconv.Itoa(i)
		// Two limits per descriptor, three entries deep.
		yaml += "  - key: " + k + "\n    descriptors:\n      - key: a\n        descriptors:\n          - key: b\n            rate_limits:\n" +
			"              - {name: " + k + "_small, unit: minute, requests_per_unit: " + strconv.Itoa(i+1) + "}\n" +
			"              - {name: " + k + "_big, unit: hour, requests_per_unit: 1000}\n"
	}
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{})
	descs := make([]*ratelimitv3.RateLimitDescriptor, n)
	for i := range descs {
		descs[i] = testkit.Descriptor("k"+strconv.Itoa(i), "x", "a", "1", "b", "2")
	}
	for round := 1; round <= 2; round++ {
		r := h.call(t, descs...)
		if len(r.Statuses) != n {
			t.Fatalf("round %d: %d statuses, want %d", round, len(r.Statuses), n)
		}
		for i, s := range r.Statuses {
			// Descriptor 0 allows 1 a minute: the second round is over
			// its limit, and so, all or nothing, charges nobody.
			want, left := rlsv3.RateLimitResponse_OK, uint32(i+1-round)
			if i == 0 && round == 2 {
				want, left = rlsv3.RateLimitResponse_OVER_LIMIT, 0
			}
			name := "k" + strconv.Itoa(i) + "_small"
			if s.Code != want || s.GetCurrentLimit().GetName() != name || s.GetCurrentLimit().GetRequestsPerUnit() != uint32(i+1) || s.LimitRemaining != left {
				t.Errorf("round %d status %d: %v, want %v %s remaining %d", round, i, s, want, name, left)
			}
		}
	}
	// Nothing was charged in round 2: descriptor 1 still has 1 left.
	r := h.call(t, descs[1])
	if s := r.Statuses[0]; s.Code != rlsv3.RateLimitResponse_OK || s.LimitRemaining != 0 {
		t.Errorf("after the denied round, descriptor 1: %v, want OK with 0 remaining", s)
	}
}
