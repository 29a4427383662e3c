package httpapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/observability"
)

// metrics count the API's requests apart from gRPC's grpc_server_*:
//
//	floodgate_http_requests_total{route,code}          counter
//	floodgate_http_request_duration_seconds{route}     histogram
//
// Both labels are bounded: route is a route's name or other, code the
// HTTP status. The decisions are counted by the RateLimiter.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// newMetrics registers the metrics on reg; nil records nothing.
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	d := observability.DeclareOn(reg)
	m := &metrics{
		requests: d.CounterVec("floodgate_http_requests_total",
			"HTTP/JSON API requests by route (check, check_batch, peek, reset, settle, json, other) and HTTP status code. A denial is a 200 unless a 429 is asked for; /json answers 429.",
			"route", "code"),
		// The gRPC side's buckets, so the two APIs' latencies compare.
		duration: d.HistogramVec("floodgate_http_request_duration_seconds",
			"HTTP/JSON API request latency by route, from the handler's start to the answer written, errors included.",
			observability.RequestDurationBuckets(), "route"),
	}
	for _, r := range []string{"check", "check_batch", "peek", "reset"} {
		m.requests.WithLabelValues(r, "200")
		m.duration.WithLabelValues(r)
	}
	return m
}

func (m *metrics) observe(route string, code int, d time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(route).Observe(d.Seconds())
}
