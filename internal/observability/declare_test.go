package observability

import (
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/floodgate/floodgate/internal/testkit"
)

// TestDeclarer: each kind of metric is registered as it is declared, with
// its name, help, labels and buckets; a name declared twice panics, as
// prometheus.MustRegister does; nil registers nowhere.
func TestDeclarer(t *testing.T) {
	reg := prometheus.NewRegistry()
	d := DeclareOn(reg)
	d.Counter("t_counter", "a counter").Add(1)
	d.CounterVec("t_counter_vec", "a counter vec", "a", "b").WithLabelValues("x", "y").Add(2)
	d.Gauge("t_gauge", "a gauge").Set(3)
	d.GaugeVec("t_gauge_vec", "a gauge vec", "g").WithLabelValues("z").Set(4)
	d.HistogramVec("t_hist", "a histogram", []float64{1, 10}, "h").WithLabelValues("w").Observe(5)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		help, kind string
		labels     []string
		value      float64
	}
	wants := map[string]want{
		"t_counter":     {"a counter", "COUNTER", nil, 1},
		"t_counter_vec": {"a counter vec", "COUNTER", []string{"a=x", "b=y"}, 2},
		"t_gauge":       {"a gauge", "GAUGE", nil, 3},
		"t_gauge_vec":   {"a gauge vec", "GAUGE", []string{"g=z"}, 4},
		"t_hist":        {"a histogram", "HISTOGRAM", []string{"h=w"}, 5},
	}
	if len(fams) != len(wants) {
		t.Fatalf("%d metric families registered, want %d", len(fams), len(wants))
	}
	for _, f := range fams {
		w, ok := wants[f.GetName()]
		if !ok || f.GetHelp() != w.help || f.GetType().String() != w.kind || len(f.GetMetric()) != 1 {
			t.Errorf("%s: help %q, type %v, %d series; want %+v", f.GetName(), f.GetHelp(), f.GetType(), len(f.GetMetric()), w)
			continue
		}
		m := f.GetMetric()[0]
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if !slices.Equal(labels, w.labels) {
			t.Errorf("%s: labels %v, want %v", f.GetName(), labels, w.labels)
		}
		if got := value(m); got != w.value {
			t.Errorf("%s: value %v, want %v", f.GetName(), got, w.value)
		}
		if h := m.GetHistogram(); h != nil {
			var bounds []float64
			for _, b := range h.GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			if !slices.Equal(bounds, []float64{1, 10}) {
				t.Errorf("%s: buckets %v, want [1 10]", f.GetName(), bounds)
			}
		}
	}

	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("a name declared twice: no panic")
			}
		}()
		d.Counter("t_counter", "again")
	}()
	DeclareOn(nil).Counter("t_counter", "nowhere").Inc() // no registry, no panic
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return m.GetHistogram().GetSampleSum()
	}
	return -1
}

// TestMetricsDeclared: floodgate's own metrics (the gRPC middleware's
// aside) are, names and labels, those the Metrics doc lists; its
// histograms have their buckets.
func TestMetricsDeclared(t *testing.T) {
	testkit.MetricsAsDocumented(t, "metrics.go", func(reg prometheus.Registerer) { NewMetrics(reg) })

	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	m.storeDuration.WithLabelValues("memory", "decide").Observe(0.001)
	m.storeBatch.WithLabelValues("memory").Observe(3)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	buckets := map[string][]float64{}
	var reloads []string
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			if f.GetName() == "floodgate_config_reloads_total" {
				reloads = append(reloads, s.GetLabel()[0].GetValue())
			}
			for _, b := range s.GetHistogram().GetBucket() {
				buckets[f.GetName()] = append(buckets[f.GetName()], b.GetUpperBound())
			}
		}
	}
	for name, want := range map[string][]float64{
		"floodgate_store_duration_seconds": {.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		"floodgate_store_batch_size":       {1, 2, 4, 8, 16, 32, 64, 128, 256},
	} {
		if !slices.Equal(buckets[name], want) {
			t.Errorf("%s buckets %v, want %v", name, buckets[name], want)
		}
	}
	if slices.Sort(reloads); !slices.Equal(reloads, []string{"error", "success"}) {
		t.Errorf("config reload series from the start: %v, want error and success", reloads)
	}
	if got, want := RequestDurationBuckets(), []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}; !slices.Equal(got, want) {
		t.Errorf("RequestDurationBuckets() = %v, want %v (100µs to 5s)", got, want)
	}
}
