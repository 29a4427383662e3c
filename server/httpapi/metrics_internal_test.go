package httpapi

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/testkit"
)

// TestMetricsDeclared: the API's metrics are, names and labels, those the
// metrics doc lists; its latency histogram has the gRPC side's buckets;
// nil records nothing.
func TestMetricsDeclared(t *testing.T) {
	testkit.MetricsAsDocumented(t, "metrics.go", func(reg prometheus.Registerer) { newMetrics(reg) })

	reg := prometheus.NewRegistry()
	newMetrics(reg).observe("check", 200, time.Millisecond)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var bounds []float64
	for _, f := range fams {
		if f.GetName() == "floodgate_http_request_duration_seconds" {
			for _, m := range f.GetMetric() {
				if len(bounds) == 0 {
					for _, b := range m.GetHistogram().GetBucket() {
						bounds = append(bounds, b.GetUpperBound())
					}
				}
			}
		}
	}
	if want := observability.RequestDurationBuckets(); !slices.Equal(bounds, want) {
		t.Errorf("latency buckets %v, want the gRPC side's %v", bounds, want)
	}
	var m *metrics = newMetrics(nil)
	if m != nil {
		t.Errorf("newMetrics(nil) = %v, want nil", m)
	}
	m.observe("check", 200, time.Millisecond) // nil records nothing, without a panic
}
