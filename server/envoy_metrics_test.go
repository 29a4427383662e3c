package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

// detailedConfig has an envoyproxy/ratelimit rule with detailed_metric,
// one with value_to_metric, and a plain one.
const detailedConfig = `domain: edge
descriptors:
  - key: api_key
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: tenant
    value_to_metric: true
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: later
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

// flood sends n distinct values of key, 64 descriptors a request, each
// value valueBytes long.
func flood(t *testing.T, h *envoyHarness, key string, n, valueBytes int) {
	t.Helper()
	for sent := 0; sent < n; {
		var descs []*ratelimitv3.RateLimitDescriptor
		for ; sent < n && len(descs) < server.MaxDescriptors; sent++ {
			v := fmt.Sprintf("secret-%08d-", sent)
			descs = append(descs, testkit.Descriptor(key, v+strings.Repeat("x", max(valueBytes-len(v), 0))))
		}
		if _, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs}); err != nil {
			t.Fatal(err)
		}
	}
}

// series is one series of floodgate_decisions_total: its labels and count.
type series struct {
	labels map[string]string
	n      float64
}

// decisionSamples returns the series of floodgate_decisions_total in reg.
func decisionSamples(t *testing.T, reg *prometheus.Registry) []series {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []series
	for _, f := range fams {
		if f.GetName() != "floodgate_decisions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			s := series{labels: map[string]string{}, n: m.GetCounter().GetValue()}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			out = append(out, s)
		}
	}
	return out
}

// decisionSeries returns the rule labels of floodgate_decisions_total with
// their counts.
func decisionSeries(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, s := range decisionSamples(t, reg) {
		out[s.labels["rule"]] += s.n
	}
	return out
}

// TestEnvoyDetailedMetricDefault: detailed_metric put
// every raw descriptor value (API keys) in a label of the unauthenticated
// /metrics, unbounded: 11,000 requests with 4 KB values took /metrics to
// 82 MB, and past the 10,000-series cap new rules were counted as
// _overflow. Without the operator's opt-in, no request value reaches a
// label: such rules count under their name; and a new rule stays
// countable after a flood.
func TestEnvoyDetailedMetricDefault(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := startEnvoy(t, detailedConfig, nil, server.EnvoySettings{Settings: server.Settings{Metrics: observability.NewMetrics(reg)}})
	const n = 10_100
	flood(t, h, "api_key", n, 64)
	flood(t, h, "tenant", 100, 16)
	h.call(t, testkit.Descriptor("later", "x"))

	got := decisionSeries(t, reg)
	for rule := range got {
		if strings.Contains(rule, "secret-") {
			t.Fatalf("a request's value is in a rule label: %.80q", rule)
		}
	}
	want := map[string]float64{"edge.api_key": n, "edge.tenant": 100, "edge.later": 1}
	for rule, v := range want {
		if got[rule] != v {
			t.Errorf("rule %q: %v decisions, want %v (rules: %d)", rule, got[rule], v, len(got))
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d rule labels, want %d", len(got), len(want))
	}
}

// TestEnvoyDetailedMetricOptIn: with EnvoySettings.DetailedMetricSeries
// (--detailed-metric-series), detailed_metric and value_to_metric rules
// show request values, envoyproxy/ratelimit style, for at most that many
// values per rule; the rest count under the rule's name, so every decision
// is still counted, and long values are never labels.
func TestEnvoyDetailedMetricOptIn(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := startEnvoy(t, detailedConfig, nil, server.EnvoySettings{Settings: server.Settings{Metrics: observability.NewMetrics(reg)}, DetailedMetricSeries: 5})
	flood(t, h, "api_key", 300, 24)
	flood(t, h, "tenant", 300, 24)
	h.call(t, testkit.Descriptor("api_key", strings.Repeat("k", 4096))) // too long to be a label
	h.call(t, testkit.Descriptor("later", "x"))

	got := decisionSeries(t, reg)
	details := map[string]int{}
	var total float64
	for rule, v := range got {
		total += v
		if len(rule) > observability.MaxDetailBytes {
			t.Errorf("a %d-byte label", len(rule))
		}
		for _, base := range []string{"edge.api_key_", "edge.tenant_"} {
			if strings.HasPrefix(rule, base) {
				details[base]++
			}
		}
	}
	if details["edge.api_key_"] != 5 || details["edge.tenant_"] != 5 {
		t.Errorf("detailed labels per rule: %v, want 5 each", details)
	}
	if got["edge.api_key_secret-00000000-xxxxxxxx"] != 1 {
		t.Errorf("the first value has no series of its own: %v", got)
	}
	if got["edge.api_key"] != 300-5+1 || got["edge.tenant"] != 300-5 || got["edge.later"] != 1 {
		t.Errorf("under the rule names: api_key %v tenant %v later %v, want 296, 295, 1", got["edge.api_key"], got["edge.tenant"], got["edge.later"])
	}
	if total != 602 {
		t.Errorf("%v decisions counted, want 602", total)
	}
}

// TestDecisionLabels: a decision is counted under the api, domain, rule,
// algorithm and result it had, on both APIs.
func TestDecisionLabels(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := startEnvoy(t, detailedConfig, nil, server.EnvoySettings{Settings: server.Settings{Metrics: observability.NewMetrics(reg)}})
	h.call(t, testkit.Descriptor("later", "x"))
	hasSeries(t, reg, map[string]string{"api": "envoy", "domain": "edge", "rule": "edge.later", "algorithm": "fixed_window", "result": "allowed"})

	reg = prometheus.NewRegistry()
	c := start(t, nil, server.Settings{Metrics: observability.NewMetrics(reg)})
	if _, err := c.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 10, Period: durationpb.New(time.Minute)}}}); err != nil {
		t.Fatal(err)
	}
	hasSeries(t, reg, map[string]string{"api": "check", "domain": "", "rule": "inline", "algorithm": "sliding_window", "result": "allowed"})
}

// hasSeries fails t unless reg holds floodgate_decisions_total with
// exactly labels, counted once.
func hasSeries(t *testing.T, reg *prometheus.Registry, labels map[string]string) {
	t.Helper()
	for _, s := range decisionSamples(t, reg) {
		if fmt.Sprint(s.labels) == fmt.Sprint(labels) && s.n == 1 {
			return
		}
	}
	t.Errorf("no floodgate_decisions_total %v = 1 in %v", labels, decisionSeries(t, reg))
}

// TestEnvoyDetailedMetricNotUTF8: a descriptor value that is not UTF-8
// (Envoy copies header bytes into values) on detailed_metric and
// value_to_metric rules is decided and counted like any other, under a
// label with the bad bytes replaced, and the requests after it are too.
func TestEnvoyDetailedMetricNotUTF8(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := startEnvoy(t, detailedConfig, nil, server.EnvoySettings{Settings: server.Settings{Metrics: observability.NewMetrics(reg)}, DetailedMetricSeries: 5})
	for _, key := range []string{"api_key", "tenant"} {
		for range 3 {
			for _, v := range []string{"a\xffb", "ok"} {
				resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge",
					Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor(key, v)}})
				if err != nil {
					t.Fatalf("%s=%q: %v", key, v, err)
				}
				if resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
					t.Fatalf("%s=%q: %v", key, v, resp.GetOverallCode())
				}
			}
		}
	}
	got := decisionSeries(t, reg)
	if got["edge.api_key_a\uFFFDb"] != 3 || got["edge.tenant_a\uFFFDb"] != 3 || got["edge.api_key_ok"] != 3 || got["edge.tenant_ok"] != 3 {
		t.Errorf("series: %v", got)
	}
}
