package observability_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// scrape GETs reg's metrics like Prometheus would, served as serve's
// /metrics serves them, and parses the text format.
func scrape(t testing.TB, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	ts := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	defer ts.Close()
	resp, err := http.Get(ts.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// sample finds the series of family name whose labels include want, and
// returns its counter, gauge or histogram-count value.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f, ok := fams[name]
	if !ok {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Gauge != nil:
			return m.GetGauge().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

func labels(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

func TestMetricsScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	m.SetBuildInfo("v0.0.0-test")
	m.SetBuildInfo("v1.2.3")

	for range 3 {
		m.ObserveDecision(observability.Labels{API: observability.APICheck, Domain: "", Rule: "login", Algorithm: algorithms.SlidingWindow, Result: observability.ResultAllowed}, false)
	}
	m.ObserveDecision(observability.Labels{API: observability.APICheck, Domain: "", Rule: "login", Algorithm: algorithms.SlidingWindow, Result: observability.ResultAllowed}, true)
	m.ObserveDecision(observability.Labels{API: observability.APICheck, Domain: "", Rule: "login", Algorithm: algorithms.SlidingWindow, Result: observability.ResultDenied}, true) // near ignored on deny
	m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: "remote_address", Algorithm: algorithms.TokenBucket, Result: observability.ResultShadowDenied}, false)
	m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: "remote_address", Algorithm: algorithms.TokenBucket, Result: observability.ResultDegraded}, false)
	m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: "remote_address", Algorithm: algorithms.TokenBucket, Result: "bogus"}, false)
	m.ObserveDenyCacheHits(4)
	m.ObserveConfigReload(nil)
	m.ObserveConfigReload(nil)
	m.ObserveConfigReload(errors.New("bad yaml"))
	m.SetBreakerOpen(true)

	// Real gRPC calls through the metrics interceptors.
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	srv, hs := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{}), nil, server.GRPCSettings{
		Logger:             slog.New(slog.DiscardHandler),
		UnaryInterceptors:  []grpc.UnaryServerInterceptor{m.GRPC.UnaryServerInterceptor()},
		StreamInterceptors: []grpc.StreamServerInterceptor{m.GRPC.StreamServerInterceptor()},
	})
	m.GRPC.InitializeMetrics(srv)
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx := context.Background()
	rl := floodgatev1.NewRateLimiterClient(conn)
	for range 2 {
		if _, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(5, time.Minute, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rl.Check(ctx, &floodgatev1.CheckRequest{Key: ""}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty key: got %v, want InvalidArgument", err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	fams := scrape(t, reg)
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"floodgate_decisions_total", labels("api", "check", "domain", "", "rule", "login", "algorithm", "sliding_window", "result", "allowed"), 4},
		{"floodgate_decisions_total", labels("api", "check", "domain", "", "rule", "login", "algorithm", "sliding_window", "result", "denied"), 1},
		{"floodgate_decisions_total", labels("api", "envoy", "domain", "edge", "rule", "remote_address", "algorithm", "token_bucket", "result", "shadow_denied"), 1},
		{"floodgate_decisions_total", labels("api", "envoy", "domain", "edge", "rule", "remote_address", "algorithm", "token_bucket", "result", "degraded"), 1},
		{"floodgate_decisions_total", labels("api", "envoy", "domain", "edge", "rule", "remote_address", "algorithm", "token_bucket", "result", "other"), 1},
		{"floodgate_near_limit_total", labels("api", "check", "domain", "", "rule", "login", "algorithm", "sliding_window"), 1},
		{"floodgate_deny_cache_hits_total", nil, 4},
		{"floodgate_config_reloads_total", labels("result", "success"), 2},
		{"floodgate_config_reloads_total", labels("result", "error"), 1},
		{"floodgate_breaker_state", nil, 1},
		{"floodgate_build_info", labels("version", "v1.2.3"), 1},
		{"grpc_server_handled_total", labels("grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check", "grpc_code", "OK"), 2},
		{"grpc_server_handled_total", labels("grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check", "grpc_code", "InvalidArgument"), 1},
		{"grpc_server_handled_total", labels("grpc_service", "grpc.health.v1.Health", "grpc_method", "Check", "grpc_code", "OK"), 1},
		// Initialized by GRPC.InitializeMetrics, never called.
		{"grpc_server_handled_total", labels("grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Reset", "grpc_code", "OK"), 0},
		{"grpc_server_handling_seconds", labels("grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check"), 3},
	}
	for _, w := range want {
		got, ok := sample(fams, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s%v: got %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
	// Exactly the label sets observed, and one build version.
	if n := len(fams["floodgate_decisions_total"].GetMetric()); n != 5 {
		t.Errorf("floodgate_decisions_total has %d series, want 5", n)
	}
	if n := len(fams["floodgate_build_info"].GetMetric()); n != 1 {
		t.Errorf("floodgate_build_info has %d series, want 1", n)
	}
	if _, ok := fams["floodgate_near_limit_total"]; !ok {
		t.Error("floodgate_near_limit_total missing")
	}

	m.SetBreakerOpen(false)
	if got, _ := sample(scrape(t, reg), "floodgate_breaker_state", nil); got != 0 {
		t.Errorf("breaker closed: got %v, want 0", got)
	}
}

// failingStore is a real store whose Decide fails; the error path of the
// decorator needs one.
type failingStore struct{ store.Store }

func (failingStore) Decide(context.Context, time.Time, []store.Request, []algorithms.Decision) error {
	return fmt.Errorf("redis: %w", store.ErrUnavailable)
}

func TestInstrumentStore(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	mem := memstore.New(memstore.Config{})
	t.Cleanup(func() { mem.Close() })
	st := observability.InstrumentStore(mem, m, "memory")
	ctx := context.Background()
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Minute}

	reqs := []store.Request{{Key: "a", Limit: lim, Cost: 1}, {Key: "b", Limit: lim, Cost: 1}, {Key: "c", Limit: lim, Cost: 1}}
	out := make([]algorithms.Decision, len(reqs))
	if err := st.Decide(ctx, now, reqs, out); err != nil {
		t.Fatal(err)
	}
	if !out[0].Allowed || out[0].Remaining != 9 {
		t.Fatalf("decision through the decorator: got %+v, want allowed with 9 remaining", out[0])
	}
	if err := st.Decide(ctx, now, reqs[:1], out[:1]); err != nil {
		t.Fatal(err)
	}
	// A mismatched out slice is an error of the wrapped store.
	if err := st.Decide(ctx, now, reqs, out[:1]); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("mismatched out: got %v, want ErrInvalid", err)
	}
	if err := st.Reset(ctx, algorithms.TokenBucket, "a"); err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	down := observability.InstrumentStore(failingStore{mem}, m, "redis")
	if err := down.Decide(ctx, now, reqs[:1], out[:1]); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("failing store: got %v, want ErrUnavailable", err)
	}

	fams := scrape(t, reg)
	want := []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"floodgate_store_duration_seconds", labels("backend", "memory", "op", "decide"), 3},
		{"floodgate_store_duration_seconds", labels("backend", "memory", "op", "reset"), 1},
		{"floodgate_store_duration_seconds", labels("backend", "memory", "op", "ping"), 1},
		{"floodgate_store_errors_total", labels("backend", "memory", "op", "decide"), 1},
		{"floodgate_store_errors_total", labels("backend", "memory", "op", "reset"), 0},
		{"floodgate_store_errors_total", labels("backend", "redis", "op", "decide"), 1},
		{"floodgate_store_batch_size", labels("backend", "memory"), 3},
	}
	for _, w := range want {
		got, ok := sample(fams, w.name, w.labels)
		if !ok || got != w.value {
			t.Errorf("%s%v: got %v (present %v), want %v", w.name, w.labels, got, ok, w.value)
		}
	}
	// The batch sizes were 3, 1 and 3.
	for _, m := range fams["floodgate_store_batch_size"].GetMetric() {
		if m.GetLabel()[0].GetValue() == "memory" && m.GetHistogram().GetSampleSum() != 7 {
			t.Errorf("batch size sum: got %v, want 7", m.GetHistogram().GetSampleSum())
		}
	}
	if observability.InstrumentStore(mem, nil, "memory") != store.Store(mem) {
		t.Error("InstrumentStore with nil metrics should return the store itself")
	}
}

// TestDecisionSeriesNewRuleCountable: past a cap of
// 10,000 label sets, new rules were counted as "_overflow" until restart.
// Rule names come from the config, which bounds them: every rule keeps a
// series of its own, however many there were before.
func TestDecisionSeriesNewRuleCountable(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	const n = observability.MaxDetailedSeries + 50
	for i := range n {
		m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "d", Rule: fmt.Sprintf("rule%d", i), Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}, false)
	}
	m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "d", Rule: "rule0", Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}, false)
	fm := scrape(t, reg)
	if got := len(fm["floodgate_decisions_total"].GetMetric()); got != n {
		t.Fatalf("got %d series, want %d", got, n)
	}
	for _, c := range []struct {
		rule string
		want float64
	}{{"rule0", 2}, {fmt.Sprintf("rule%d", n-1), 1}} {
		if got, ok := sample(fm, "floodgate_decisions_total", labels("rule", c.rule)); !ok || got != c.want {
			t.Errorf("rule %s: got %v (present %v), want %v", c.rule, got, ok, c.want)
		}
	}
}

// TestDetailedSeriesBounded: detailed labels are bounded per rule and
// across rules (MaxDetailedSeries); past the bounds they count under the
// rule, and a plain rule is still counted under its own name.
func TestDetailedSeriesBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	const perRule = 3
	rules := observability.MaxDetailedSeries/perRule + 10
	for r := range rules {
		for v := range perRule + 2 {
			rule := fmt.Sprintf("r%d", r)
			m.ObserveDetailedDecision(observability.Labels{API: observability.APIEnvoy, Domain: "d", Rule: rule, Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}, fmt.Sprintf("%s_v%d", rule, v), perRule, false)
		}
	}
	m.ObserveDetailedDecision(observability.Labels{API: observability.APIEnvoy, Domain: "d", Rule: "r0", Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}, "r0_v0", perRule, false) // admitted before
	m.ObserveDetailedDecision(observability.Labels{API: observability.APIEnvoy, Domain: "d", Rule: "r1", Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}, "r1_"+strings.Repeat("x", observability.MaxDetailBytes), 100, false)
	m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "d", Rule: "plain", Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}, false)
	fm := scrape(t, reg)
	details, total := 0, 0.0
	for _, s := range fm["floodgate_decisions_total"].GetMetric() {
		total += s.GetCounter().GetValue()
		for _, l := range s.GetLabel() {
			if l.GetName() == "rule" && strings.Contains(l.GetValue(), "_") {
				details++
			}
		}
	}
	if details != observability.MaxDetailedSeries {
		t.Errorf("%d detailed labels, want %d", details, observability.MaxDetailedSeries)
	}
	if want := float64(rules*(perRule+2) + 3); total != want {
		t.Errorf("%v decisions counted, want %v", total, want)
	}
	for _, c := range []struct {
		rule string
		want float64
	}{{"r0_v0", 2}, {"r0", 2}, {"r1", 3}, {"plain", 1}, {fmt.Sprintf("r%d", rules-1), perRule + 2}} {
		if got, ok := sample(fm, "floodgate_decisions_total", labels("rule", c.rule)); !ok || got != c.want {
			t.Errorf("rule %s: got %v (present %v), want %v", c.rule, got, ok, c.want)
		}
	}
}

func TestNearLimit(t *testing.T) {
	tests := []struct {
		d      algorithms.Decision
		warnAt int64
		want   bool
	}{
		// Without a warning threshold: remaining at most 20% of the limit.
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 21}, 0, false},
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 20}, 0, true},
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 0}, 0, true},
		{algorithms.Decision{Allowed: true, Limit: 5, Remaining: 1}, 0, true},
		{algorithms.Decision{Allowed: true, Limit: 5, Remaining: 2}, 0, false},
		{algorithms.Decision{Allowed: true, Limit: 1, Remaining: 0}, 0, true},
		{algorithms.Decision{Allowed: false, Limit: 100, Remaining: 0}, 0, false},
		{algorithms.Decision{Allowed: true, Limit: 0, Remaining: 0}, 0, false},
		// With one: the usage (limit − remaining) reached it, exactly
		// when the answer warns.
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 51}, 50, false},
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 50}, 50, true},
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 49}, 50, true},
		{algorithms.Decision{Allowed: true, Limit: 100, Remaining: 10}, 95, false},
		{algorithms.Decision{Allowed: false, Limit: 100, Remaining: 0}, 50, false},
	}
	for _, tc := range tests {
		if got := observability.NearLimit(tc.d, tc.warnAt); got != tc.want {
			t.Errorf("NearLimit(limit %d remaining %d allowed %v, warnAt %d): got %v, want %v", tc.d.Limit, tc.d.Remaining, tc.d.Allowed, tc.warnAt, got, tc.want)
		}
	}
}

// TestObserveDecisionNoAlloc pins the hot path: a warm label set costs no
// allocation.
func TestObserveDecisionNoAlloc(t *testing.T) {
	m := observability.NewMetrics(nil)
	m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: "remote_address", Algorithm: algorithms.TokenBucket, Result: observability.ResultAllowed}, true)
	allocs := testing.AllocsPerRun(1000, func() {
		m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: "remote_address", Algorithm: algorithms.TokenBucket, Result: observability.ResultAllowed}, true)
	})
	if allocs != 0 {
		t.Fatalf("got %v allocations per warm ObserveDecision, want 0", allocs)
	}
}

// BenchmarkObserveDecision measures the warm hot path over 64 distinct
// label sets, spread across goroutines.
func BenchmarkObserveDecision(b *testing.B) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	const n = 64
	rules := make([]string, n)
	for i := range rules {
		rules[i] = fmt.Sprintf("rule_%02d", i)
		m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: rules[i], Algorithm: algorithms.SlidingWindow, Result: observability.ResultAllowed}, false)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.ObserveDecision(observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: rules[i%n], Algorithm: algorithms.SlidingWindow, Result: observability.ResultAllowed}, i%8 == 0)
			i++
		}
	})
	b.StopTimer()
	// The benchmark spread its calls over n distinct series.
	fams, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "floodgate_decisions_total" && len(f.GetMetric()) != n {
			b.Fatalf("%d series, want %d", len(f.GetMetric()), n)
		}
	}
}

// TestObserveRuleByResult: a RuleSeries counts each result under its own
// series, and a label that is not a Result constant counts as "other".
func TestObserveRuleByResult(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	var rs observability.RuleSeries
	l := observability.Labels{API: observability.APIEnvoy, Domain: "edge", Rule: "r", Algorithm: algorithms.FixedWindow}
	for _, res := range []string{observability.ResultAllowed, observability.ResultDenied, observability.ResultDenied, observability.ResultLocal, "bogus"} {
		l.Result = res
		m.ObserveRule(&rs, l, false)
	}
	fm := scrape(t, reg)
	for res, want := range map[string]float64{"allowed": 1, "denied": 2, "local": 1, "other": 1} {
		if got, ok := sample(fm, "floodgate_decisions_total", labels("rule", "r", "result", res)); !ok || got != want {
			t.Errorf("result %s: got %v (present %v), want %v", res, got, ok, want)
		}
	}
}

// TestDetailedSeriesPerDomain: the per-rule bound on detailed labels
// counts a rule of each domain apart.
func TestDetailedSeriesPerDomain(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	for _, domain := range []string{"a", "b"} {
		l := observability.Labels{API: observability.APIEnvoy, Domain: domain, Rule: "r", Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}
		m.ObserveDetailedDecision(l, "r_"+domain, 1, false)
	}
	fm := scrape(t, reg)
	for _, domain := range []string{"a", "b"} {
		if got, ok := sample(fm, "floodgate_decisions_total", labels("domain", domain, "rule", "r_"+domain)); !ok || got != 1 {
			t.Errorf("domain %s: detailed label counted %v (present %v), want 1", domain, got, ok)
		}
	}
}

// TestLabelsNotUTF8: label values that are not UTF-8 (a domain, rule or
// detail holding a request's bytes) are counted under the value with each
// bad run replaced by U+FFFD, never a panic, and values that differ only
// in their bad bytes share one detailed label.
func TestLabelsNotUTF8(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	l := observability.Labels{API: observability.APIEnvoy, Domain: "d\xfe", Rule: "r\xff", Algorithm: algorithms.FixedWindow, Result: observability.ResultAllowed}
	m.ObserveDecision(l, true)
	m.ObserveDecision(l, false)
	l.Domain, l.Rule = "d", "r"
	for _, detail := range []string{"r_\xff", "r_\xfe", "r_ok"} {
		m.ObserveDetailedDecision(l, detail, 2, false)
	}
	m.ObserveDetailedDecision(l, "r_ok2", 2, false) // no room: under the rule
	fm := scrape(t, reg)
	for _, c := range []struct {
		domain, rule string
		want         float64
	}{{"d\uFFFD", "r\uFFFD", 2}, {"d", "r_\uFFFD", 2}, {"d", "r_ok", 1}, {"d", "r", 1}} {
		if got, ok := sample(fm, "floodgate_decisions_total", labels("domain", c.domain, "rule", c.rule)); !ok || got != c.want {
			t.Errorf("domain %q rule %q: got %v (present %v), want %v", c.domain, c.rule, got, ok, c.want)
		}
	}
}
