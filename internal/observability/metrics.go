package observability

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	grpcprom "github.com/grpc-ecosystem/go-grpc-middleware/providers/prometheus"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/softlimit"
	"github.com/floodgate/floodgate/store"
)

// The api label of floodgate_decisions_total: which front door decided.
const (
	APICheck = "check" // floodgate.v1.RateLimiter over gRPC
	APIEnvoy = "envoy" // envoy.service.ratelimit.v3
	APIHTTP  = "http"  // floodgate.v1.RateLimiter over HTTP/JSON (server/httpapi)
)

// The result label of floodgate_decisions_total.
const (
	// ResultAllowed: the store admitted the cost.
	ResultAllowed = "allowed"
	// ResultDenied: over the limit, answered as denied.
	ResultDenied = "denied"
	// ResultShadowDenied: over the limit, but answered allowed because the
	// rule (or the server) is in shadow mode.
	ResultShadowDenied = "shadow_denied"
	// ResultDegraded: the store could not decide and the limit's failure
	// mode answered (allowed when open, denied when closed).
	ResultDegraded = "degraded"
	// ResultLocal: the store could not decide and the replica's share of
	// the limit decided in memory (failure mode local).
	ResultLocal = "local"
	// resultOther replaces any other value, so the label stays bounded.
	resultOther = "other"
)

// nearLimitPercent is the near-limit threshold of a limit without a
// warning threshold: remaining at most this percentage of the limit.
const nearLimitPercent = 20

// NearLimit reports whether d is an allowed decision near its limit: past
// its warning threshold warnAt, or without one, nearLimitPercent.
func NearLimit(d algorithms.Decision, warnAt int64) bool {
	if warnAt > 0 {
		return d.Allowed && softlimit.Reached(d.Limit, d.Remaining, warnAt)
	}
	return d.Allowed && d.Limit > 0 && d.Remaining*100 <= d.Limit*nearLimitPercent
}

// Bounds on detailed labels (ObserveDetailedDecision).
const (
	// MaxDetailedSeries bounds the detailed labels of all rules together.
	MaxDetailedSeries = 10_000
	// MaxDetailBytes is the longest detailed label; a longer one is counted
	// under its rule's name.
	MaxDetailBytes = 256
)

// Buckets of the store's histograms: its latency in seconds, from 100µs
// (a memory or local Redis call) to a second, dense around the default
// Redis timeout (tens of ms); and its batch sizes.
var (
	storeDurationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}
	batchSizeBuckets     = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// RequestDurationBuckets returns the buckets of the request latency
// histograms (gRPC's grpc_server_handling_seconds and the HTTP/JSON API's
// floodgate_http_request_duration_seconds), in seconds: from 100µs to 5s.
func RequestDurationBuckets() []float64 {
	return []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}
}

// Metrics are floodgate's Prometheus metrics, registered on an injected
// registry (TestMetricsDeclared pins this list to the declarations):
//
//	floodgate_decisions_total{api,domain,rule,algorithm,result}  counter
//	floodgate_near_limit_total{api,domain,rule,algorithm}        counter
//	floodgate_store_duration_seconds{backend,op}                 histogram
//	floodgate_store_errors_total{backend,op}                     counter
//	floodgate_store_batch_size{backend}                          histogram
//	floodgate_deny_cache_hits_total                              counter
//	floodgate_settlements_total{api,algorithm,result}            counter
//	floodgate_settle_unrecorded_units_total{api,algorithm}       counter
//	floodgate_config_reloads_total{result}                       counter
//	floodgate_breaker_state                                      gauge
//	floodgate_givebacks_refused_total{api,kind}                  counter
//	floodgate_handler_panics_total{api}                          counter
//	floodgate_build_info{version}                                gauge
//
// and go-grpc-middleware's grpc_server_*. Label values are bounded: domain
// and rule are config names, never a caller's key, the others enumerations;
// the one exception is opt-in and bounded (ObserveDetailedDecision).
type Metrics struct {
	decisions *prometheus.CounterVec
	nearLimit *prometheus.CounterVec
	series    sync.Map // Labels -> *decisionSeries

	details     sync.Map // detailKey -> struct{}: detailed labels admitted
	detailsFull sync.Map // ruleKey -> struct{}: rules with no room for more
	detailMu    sync.Mutex
	nDetails    map[ruleKey]int // guarded by detailMu
	nAllDetails int             // guarded by detailMu

	storeDuration *prometheus.HistogramVec
	storeErrors   *prometheus.CounterVec
	storeBatch    *prometheus.HistogramVec

	denyCacheHits prometheus.Counter
	configReloads *prometheus.CounterVec
	breakerState  prometheus.Gauge
	buildInfo     *prometheus.GaugeVec
	settlements   *prometheus.CounterVec // settle.go
	unrecorded    *prometheus.CounterVec
	refused       *prometheus.CounterVec // guards.go
	panics        *prometheus.CounterVec

	// GRPC records go-grpc-middleware's grpc_server_* metrics, registered
	// with the others: the server installs its interceptors (calls the
	// Gate refuses, a token or the stream caps, never reach them) and,
	// once every service is registered, calls its InitializeMetrics, so
	// each method's series exist before its first call.
	GRPC *grpcprom.ServerMetrics
}

// Labels are the labels of one decision's series: the front door (API,
// an API constant), the config domain, the rule or policy name, the
// algorithm, and the Result (a Result constant; other values count as
// "other").
type Labels struct {
	API, Domain, Rule string
	Algorithm         algorithms.Algorithm
	Result            string
}

// ruleKey names a rule; detailKey one of its detailed labels.
type (
	ruleKey   struct{ domain, rule string }
	detailKey struct{ domain, rule, detail string }
)

// decisionSeries are the pre-resolved counters of one label set.
type decisionSeries struct {
	decisions prometheus.Counter
	nearLimit prometheus.Counter // nil unless the result is allowed
}

// NewMetrics creates the metrics and registers them on reg (nil: a fresh
// registry, which nothing serves). It panics, as prometheus.MustRegister
// does, when reg already holds them: call it once, at startup.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{nDetails: map[ruleKey]int{}}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	d := DeclareOn(reg)
	m.decisions = d.CounterVec("floodgate_decisions_total",
		"Rate-limit decisions by front door (api), config domain, rule or policy name, algorithm and result (allowed, denied, shadow_denied, degraded, local).",
		"api", "domain", "rule", "algorithm", "result")
	m.nearLimit = d.CounterVec("floodgate_near_limit_total",
		"Allowed decisions that left at most 20% of the limit remaining (soft-limit warnings).",
		"api", "domain", "rule", "algorithm")
	m.storeDuration = d.HistogramVec("floodgate_store_duration_seconds",
		"Latency of store calls by backend and op (decide, reset, ping), errors included.",
		storeDurationBuckets, "backend", "op")
	m.storeErrors = d.CounterVec("floodgate_store_errors_total",
		"Store calls that could not decide (backend down or slow, context ended), by backend and op.",
		"backend", "op")
	m.storeBatch = d.HistogramVec("floodgate_store_batch_size",
		"Requests per store Decide call (descriptors of one Envoy request, checks of one CheckBatch).",
		batchSizeBuckets, "backend")
	m.denyCacheHits = d.Counter("floodgate_deny_cache_hits_total",
		"Requests answered denied from the local deny cache, without the store.")
	m.configReloads = d.CounterVec("floodgate_config_reloads_total",
		"Config loads by result: success, or error (the previous config kept serving).",
		"result")
	m.breakerState = d.Gauge("floodgate_breaker_state",
		"Store circuit breaker: 0 closed (store healthy), 1 open (store known down; failure modes answer).")
	m.buildInfo = d.GaugeVec("floodgate_build_info",
		"Always 1; the version label says which floodgate is running.",
		"version")
	m.settlements = d.CounterVec("floodgate_settlements_total",
		"Settlements of usage known afterwards by front door (api), algorithm and result (debt, refund, even, duplicate, conflict, degraded).",
		"api", "algorithm", "result")
	m.unrecorded = d.CounterVec("floodgate_settle_unrecorded_units_total",
		"Units of settled usage not recorded because the key's debt reached its bound (one capacity), by front door and algorithm.",
		"api", "algorithm")
	m.refused = d.CounterVec("floodgate_givebacks_refused_total",
		"Give-backs the authorization rule refused, by front door (api) and kind (reset, refund); on the Envoy API a refused refund is decided as 0 hits.",
		"api", "kind")
	m.panics = d.CounterVec("floodgate_handler_panics_total",
		"Panics caught under a decision handler, by front door (api); on the Envoy API each is answered by the limits' failure modes.",
		"api")
	m.GRPC = grpcprom.NewServerMetrics(
		grpcprom.WithServerHandlingTimeHistogram(grpcprom.WithHistogramBuckets(RequestDurationBuckets())),
	)
	reg.MustRegister(m.GRPC)
	// Both results exist from the start, so an alert on errors has a zero
	// to compare against.
	m.configReloads.WithLabelValues("success")
	m.configReloads.WithLabelValues("error")
	return m
}

// ObserveDecision counts one decision under l; nearLimit (see NearLimit)
// also counts floodgate_near_limit_total, with ResultAllowed only.
// l.Domain and l.Rule must come from the config, never a caller's key.
func (m *Metrics) ObserveDecision(l Labels, nearLimit bool) {
	s := m.seriesFor(l)
	s.decisions.Inc()
	if nearLimit && s.nearLimit != nil {
		s.nearLimit.Inc()
	}
}

// seriesFor returns k's counters, resolving them on first use.
func (m *Metrics) seriesFor(k Labels) *decisionSeries {
	if s, ok := m.series.Load(k); ok {
		return s.(*decisionSeries)
	}
	return m.newSeries(k)
}

// newSeries resolves the counters of a label set not seen yet.
func (m *Metrics) newSeries(k Labels) *decisionSeries {
	l := k
	if resultIndex(l.Result) < 0 {
		l.Result = resultOther
	}
	api, domain, rule, alg := labelValue(l.API), labelValue(l.Domain), labelValue(l.Rule), l.Algorithm.String()
	s := &decisionSeries{decisions: m.decisions.WithLabelValues(api, domain, rule, alg, l.Result)}
	if l.Result == ResultAllowed {
		s.nearLimit = m.nearLimit.WithLabelValues(api, domain, rule, alg)
	}
	v, _ := m.series.LoadOrStore(k, s)
	return v.(*decisionSeries)
}

// labelValue is v as a Prometheus label value, which must be UTF-8 (the
// client library panics otherwise): a rule's or domain's name can hold a
// request's bytes.
func labelValue(v string) string { return strings.ToValidUTF8(v, "\uFFFD") }

// RuleSeries caches one rule's decisions series, one per result, so that
// counting a decision costs no map lookup (Metrics.ObserveRule). The zero
// value is ready to use.
type RuleSeries struct {
	byResult [len(results)]atomic.Pointer[decisionSeries] // by resultIndex
}

// results are the Result constants.
var results = [...]string{ResultAllowed, ResultDenied, ResultShadowDenied, ResultDegraded, ResultLocal}

// resultIndex is result's index in results, or -1.
func resultIndex(result string) int { return slices.Index(results[:], result) }

// ObserveRule counts a decision as ObserveDecision does, through rs, which
// must always be given the same labels but the Result.
func (m *Metrics) ObserveRule(rs *RuleSeries, l Labels, nearLimit bool) {
	i := resultIndex(l.Result)
	if i < 0 {
		m.ObserveDecision(l, nearLimit)
		return
	}
	s := rs.byResult[i].Load()
	if s == nil {
		s = m.seriesFor(l)
		rs.byResult[i].Store(s)
	}
	s.decisions.Inc()
	if nearLimit && s.nearLimit != nil {
		s.nearLimit.Inc()
	}
}

// ObserveDetailedDecision counts a decision as ObserveDecision does, under
// detail instead of l.Rule: a label holding a request's values
// (detailed_metric, value_to_metric), which may hold secrets, so only on
// the operator's opt-in. A rule gets at most maxPerRule detailed labels
// (the first seen), all rules MaxDetailedSeries, none longer than
// MaxDetailBytes; other decisions count under l.Rule.
func (m *Metrics) ObserveDetailedDecision(l Labels, detail string, maxPerRule int, nearLimit bool) {
	detail = labelValue(detail)
	if detail != l.Rule && m.admitDetail(l.Domain, l.Rule, detail, maxPerRule) {
		l.Rule = detail
	}
	m.ObserveDecision(l, nearLimit)
}

// admitDetail reports whether detail may be a label of rule, admitting it
// when there is room.
func (m *Metrics) admitDetail(domain, rule, detail string, maxPerRule int) bool {
	dk := detailKey{domain, rule, detail}
	if _, ok := m.details.Load(dk); ok {
		return true
	}
	rk := ruleKey{domain, rule}
	if maxPerRule <= 0 || len(detail) > MaxDetailBytes {
		return false
	}
	if _, full := m.detailsFull.Load(rk); full {
		return false
	}
	m.detailMu.Lock()
	defer m.detailMu.Unlock()
	if _, ok := m.details.Load(dk); ok {
		return true
	}
	if m.nDetails[rk] >= maxPerRule || m.nAllDetails >= MaxDetailedSeries {
		m.detailsFull.Store(rk, struct{}{})
		return false
	}
	m.details.Store(dk, struct{}{})
	m.nDetails[rk]++
	m.nAllDetails++
	return true
}

// ObserveDenyCacheHits counts n requests answered from the deny cache. Its
// signature fits denycache.Config.OnHit.
func (m *Metrics) ObserveDenyCacheHits(n int) { m.denyCacheHits.Add(float64(n)) }

// ObserveConfigReload counts a config load: success when err is nil.
func (m *Metrics) ObserveConfigReload(err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.configReloads.WithLabelValues(result).Inc()
}

// SetBreakerOpen sets floodgate_breaker_state: 1 while the store's circuit
// is open, 0 when closed. Its signature fits breaker.Config.OnChange.
func (m *Metrics) SetBreakerOpen(open bool) {
	if open {
		m.breakerState.Set(1)
		return
	}
	m.breakerState.Set(0)
}

// SetBuildInfo sets floodgate_build_info{version} to 1, replacing any
// version set before.
func (m *Metrics) SetBuildInfo(version string) {
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(version).Set(1)
}

// InstrumentStore wraps s so every call is timed and counted under
// backend, a fixed name ("memory", "redis"). Wrap the store that talks to
// the backend, under the breaker and the deny cache, so latencies are the
// backend's own. When m is nil, s is returned as is.
func InstrumentStore(s store.Store, m *Metrics, backend string) store.Store {
	if m == nil {
		return s
	}
	op := func(name string) storeOp {
		return storeOp{m.storeDuration.WithLabelValues(backend, name), m.storeErrors.WithLabelValues(backend, name)}
	}
	return &instrumentedStore{
		next: s, decide: op("decide"), reset: op("reset"), ping: op("ping"),
		batch: m.storeBatch.WithLabelValues(backend),
	}
}

// instrumentedStore is the store decorator of InstrumentStore; its
// observers are resolved once, so a call costs no label lookup.
type instrumentedStore struct {
	next                store.Store
	decide, reset, ping storeOp
	batch               prometheus.Observer
}

// storeOp is the latency and the error count of one op.
type storeOp struct {
	duration prometheus.Observer
	errors   prometheus.Counter
}

// done records a call of the op that began at start and returned err.
func (o storeOp) done(start time.Time, err error) error {
	o.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		o.errors.Inc()
	}
	return err
}

var _ store.Store = (*instrumentedStore)(nil)

// Decide implements store.Store.
func (s *instrumentedStore) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	start := time.Now()
	err := s.next.Decide(ctx, now, reqs, out)
	s.batch.Observe(float64(len(reqs)))
	return s.decide.done(start, err)
}

// Reset implements store.Store.
func (s *instrumentedStore) Reset(ctx context.Context, alg algorithms.Algorithm, key string, scopes ...string) error {
	start := time.Now()
	return s.reset.done(start, s.next.Reset(ctx, alg, key, scopes...))
}

// Settle implements store.Settler when the wrapped store does; its
// errors count as decide errors.
func (s *instrumentedStore) Settle(ctx context.Context, now time.Time, st store.Settlement) (store.SettleResult, error) {
	next, ok := s.next.(store.Settler)
	if !ok {
		return store.SettleResult{}, fmt.Errorf("settle: %w: %T cannot settle", store.ErrInvalid, s.next)
	}
	r, err := next.Settle(ctx, now, st)
	if err != nil && !errors.Is(err, store.ErrSettleConflict) && !errors.Is(err, store.ErrInvalid) {
		s.decide.errors.Inc()
	}
	return r, err
}

// Ping implements store.Store.
func (s *instrumentedStore) Ping(ctx context.Context) error {
	start := time.Now()
	return s.ping.done(start, s.next.Ping(ctx))
}

// Close implements store.Store.
func (s *instrumentedStore) Close() error { return s.next.Close() }
