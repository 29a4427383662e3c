package server_test

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// panickingStore is a real store whose Decide panics.
type panickingStore struct{ store.Store }

func (panickingStore) Decide(context.Context, time.Time, []store.Request, []algorithms.Decision) error {
	panic("a bug under the handler")
}

// panickingRules is a rule source that panics.
type panickingRules struct{}

func (panickingRules) Current() *rules.Set { panic("a bug in the rules") }

// TestEnvoyPanicIsFailureMode: a panic anywhere under ShouldRateLimit is
// never an error answer (Envoy would let the request through): it is the
// failure-mode answer of the request's limits, closed denying and open
// admitting, degraded, and counted; before the limits are known, the
// server's failure mode answers for every descriptor.
func TestEnvoyPanicIsFailureMode(t *testing.T) {
	const yaml = `domain: edge
descriptors:
  - key: closed
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: closed}
  - key: open
    rate_limit: {unit: minute, requests_per_unit: 5, failure_mode: open}
`
	reg := prometheus.NewRegistry()
	h := startEnvoy(t, yaml, panickingStore{memstore.New(memstore.Config{})}, server.EnvoySettings{Settings: server.Settings{Metrics: observability.NewMetrics(reg)}})
	for _, tc := range []struct {
		descs []*ratelimitv3.RateLimitDescriptor
		want  string
	}{
		{[]*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("closed", "a")}, "OVER_LIMIT:OVER_LIMIT"},
		{[]*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("open", "a")}, "OK:OK"},
		{[]*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("open", "a"), testkit.Descriptor("closed", "a")}, "OVER_LIMIT:OK,OVER_LIMIT"},
	} {
		r := h.call(t, tc.descs...)
		if got := codesOf(r); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.descs, got, tc.want)
		}
		if headerMap(r)["x-ratelimit-degraded"] != "true" {
			t.Errorf("%v: headers %v, want the degraded mark", tc.descs, headerMap(r))
		}
	}
	if got := counterValue(t, reg, "floodgate_handler_panics_total", map[string]string{"api": "envoy"}); got != 3 {
		t.Errorf("floodgate_handler_panics_total %v, want 3", got)
	}

	for _, mode := range []rules.FailureMode{rules.FailureClosed, rules.FailureOpen} {
		st := memstore.New(memstore.Config{})
		t.Cleanup(func() { st.Close() })
		e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: panickingRules{}, FailureMode: mode}})
		r, err := e.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("k", "v"), testkit.Descriptor("j", "v")}})
		want := "OK:OK,OK"
		if mode == rules.FailureClosed {
			want = "OVER_LIMIT:OVER_LIMIT,OVER_LIMIT"
		}
		if err != nil || codesOf(r) != want {
			t.Errorf("%v server, rules panicking: %v %v, want %s", mode, r, err, want)
		}
	}
}
