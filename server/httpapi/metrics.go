package httpapi

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics count the API's requests apart from gRPC's grpc_server_*:
//
//	floodgate_http_requests_total{route,code}          counter
//	floodgate_http_request_duration_seconds{route}     histogram
//
// route is check, check_batch, peek, reset or other (no route); code is
// the HTTP status. Both are bounded. The decisions themselves are counted
// in floodgate_decisions_total{api="http"} by the RateLimiter.
type metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// durationBuckets are the gRPC side's, from 100µs to 5s, in seconds.
var durationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// newMetrics registers the metrics on reg; nil records nothing.
func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "floodgate_http_requests_total",
			Help: "HTTP/JSON API requests by route (check, check_batch, peek, reset, other) and HTTP status code. A denial is a 200.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "floodgate_http_request_duration_seconds",
			Help:    "HTTP/JSON API request latency by route, from the handler's start to the answer written, errors included.",
			Buckets: durationBuckets,
		}, []string{"route"}),
	}
	reg.MustRegister(m.requests, m.duration)
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
