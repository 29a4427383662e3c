package rlqs

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/observability"
)

// Metrics are the Rate Limit Quota Service's metrics. Their labels are
// bounded by the config (a quota bucket entry's name, or "unmatched") and
// by fixed sets; the domain and bucket ids Envoy reports never appear.
//
//	floodgate_quota_streams                             gauge
//	floodgate_quota_buckets                             gauge
//	floodgate_quota_bucket_id_bytes                     gauge
//	floodgate_quota_reports_total                       counter
//	floodgate_quota_reported_requests_total{rule,result} counter
//	floodgate_quota_assignments_total{action}           counter
//	floodgate_quota_stream_errors_total{code}           counter
//	floodgate_quota_demand_errors_total                 counter
//	floodgate_quota_refused_bucket_ids_total            counter
type Metrics struct {
	streams      prometheus.Gauge
	buckets      prometheus.Gauge
	idBytes      prometheus.Gauge
	reports      prometheus.Counter
	requests     *prometheus.CounterVec
	assignments  *prometheus.CounterVec
	streamErrors *prometheus.CounterVec
	demandErrors prometheus.Counter
	refusedIDs   prometheus.Counter
}

// unmatchedRule is the rule label of buckets no quota_buckets entry matches.
const unmatchedRule = "unmatched"

// NewMetrics registers the metrics on reg. Like prometheus.MustRegister,
// it panics when reg already holds them.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	d := observability.DeclareOn(reg)
	return &Metrics{
		streams: d.Gauge("floodgate_quota_streams", "Open Rate Limit Quota Service streams."),
		buckets: d.Gauge("floodgate_quota_buckets", "Buckets subscribed on open streams (one per stream and bucket id)."),
		idBytes: d.Gauge("floodgate_quota_bucket_id_bytes",
			"Bytes the subscribed bucket ids hold (with their copies), bounded per stream and in total; a report past a bound ends its stream ResourceExhausted."),
		reports: d.Counter("floodgate_quota_reports_total", "Bucket usage reports processed."),
		requests: d.CounterVec("floodgate_quota_reported_requests_total",
			"Requests Envoy reported as allowed or denied, by quota bucket entry (rule) and result.",
			"rule", "result"),
		assignments: d.CounterVec("floodgate_quota_assignments_total",
			"Bucket actions sent, by action: rate_limit, allow_all, deny_all, abandon.",
			"action"),
		streamErrors: d.CounterVec("floodgate_quota_stream_errors_total", "Streams ended by an error, by gRPC code.", "code"),
		demandErrors: d.Counter("floodgate_quota_demand_errors_total",
			"Demand aggregations the store could not do (shares then come from the last totals or this replica's view)."),
		refusedIDs: d.Counter("floodgate_quota_refused_bucket_ids_total",
			"Bucket usage reports dropped because their bucket id is not UTF-8 (no assignment is sent for such a bucket; the stream goes on)."),
	}
}
