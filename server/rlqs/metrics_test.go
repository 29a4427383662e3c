package rlqs

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/testkit"
)

// TestMetricsDeclared: the service's metrics are, names and labels, those
// the Metrics doc lists.
func TestMetricsDeclared(t *testing.T) {
	testkit.MetricsAsDocumented(t, "metrics.go", func(reg prometheus.Registerer) { NewMetrics(reg) })
}
