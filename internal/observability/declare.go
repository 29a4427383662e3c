package observability

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// Declarer makes floodgate's metrics and registers each as it makes it
// (promauto on an injected registry), so a metric is named once. It
// panics when the registry already holds a metric of the same name.
type Declarer struct{ f promauto.Factory }

// DeclareOn returns a Declarer registering on reg; nil registers nowhere.
func DeclareOn(reg prometheus.Registerer) Declarer {
	return Declarer{promauto.With(reg)}
}

// Counter declares a counter without labels.
func (d Declarer) Counter(name, help string) prometheus.Counter {
	return d.f.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
}

// CounterVec declares a counter with labels.
func (d Declarer) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return d.f.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
}

// Gauge declares a gauge without labels.
func (d Declarer) Gauge(name, help string) prometheus.Gauge {
	return d.f.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
}

// GaugeVec declares a gauge with labels.
func (d Declarer) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return d.f.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
}

// HistogramVec declares a histogram with these buckets and labels.
func (d Declarer) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return d.f.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
}
