package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// sample is one line of the Prometheus text format.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

// scrape GETs /metrics and parses it.
func scrape(t *testing.T, p *proc) []sample {
	t.Helper()
	resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	samples, err := parseMetrics(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return samples
}

// parseMetrics reads the Prometheus text exposition format: one sample
// per line, name{label="value",...} value, with \\, \" and \n escapes in
// label values; comments and blank lines skipped.
func parseMetrics(r io.Reader) ([]sample, error) {
	var out []sample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s := sample{labels: map[string]string{}}
		i := strings.IndexAny(line, "{ ")
		if i < 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		s.name = line[:i]
		rest := line[i:]
		if rest[0] == '{' {
			rest = rest[1:]
			for rest[0] != '}' {
				eq := strings.IndexByte(rest, '=')
				if eq < 0 || len(rest) < eq+2 || rest[eq+1] != '"' {
					return nil, fmt.Errorf("metrics line %q: bad label", line)
				}
				name := rest[:eq]
				rest = rest[eq+2:]
				var val strings.Builder
				for {
					if rest == "" {
						return nil, fmt.Errorf("metrics line %q: unterminated label value", line)
					}
					c := rest[0]
					rest = rest[1:]
					if c == '"' {
						break
					}
					if c == '\\' && rest != "" {
						c, rest = rest[0], rest[1:]
						if c == 'n' {
							c = '\n'
						}
					}
					val.WriteByte(c)
				}
				s.labels[name] = val.String()
				rest = strings.TrimPrefix(rest, ",")
				if rest == "" {
					return nil, fmt.Errorf("metrics line %q: unterminated labels", line)
				}
			}
			rest = rest[1:]
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("metrics line %q: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, sc.Err()
}

// metricValue sums the samples named name whose labels include want
// (label=value pairs); found reports whether any matched.
func metricValue(samples []sample, name string, want ...string) (sum float64, found bool) {
	for _, s := range samples {
		if s.name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(want); i += 2 {
			if s.labels[want[i]] != want[i+1] {
				ok = false
				break
			}
		}
		if ok {
			sum += s.value
			found = true
		}
	}
	return sum, found
}

// wantMetric fails t unless the samples named name with labels want sum
// to value; a value of 0 may also be no sample at all.
func wantMetric(t *testing.T, samples []sample, value float64, name string, want ...string) {
	t.Helper()
	got, found := metricValue(samples, name, want...)
	if (!found && value != 0) || got != value {
		t.Errorf("%s%v = %v (found %v), want %v", name, want, got, found, value)
	}
}

// metricsRules: policies for each decision result, an Envoy rule, on Redis.
const metricsRules = `domain: metrics
descriptors:
  - key: k
    rate_limit: {name: per_k, unit: hour, requests_per_unit: 1, algorithm: fixed_window}
policies:
  m_pol:    {requests: 2, period: 1h}
  m_shadow: {requests: 1, period: 1h, algorithm: sliding_window, shadow_mode: true}
  m_attack: {requests: 1, period: 1h, algorithm: sliding_window_log}
`

// TestMetricsAfterDecisions: after a few decisions of each kind on both
// APIs, /metrics counts them by api, rule, algorithm and result, with the
// gRPC server metrics, the store latency histogram, the build info, the
// deny cache's hits under an attack on one key, and config reloads.
func TestMetricsAfterDecisions(t *testing.T) {
	r := redistest.StartServer(t)
	rules := writeRules(t, metricsRules)
	p := startServe(t, "--config", rules, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s")
	conn := p.Conn(t)
	c := floodgatev1.NewRateLimiterClient(conn)
	rls := rlsv3.NewRateLimitServiceClient(conn)
	ctx := context.Background()

	before := scrape(t, p)
	wantMetric(t, before, 1, "floodgate_config_reloads_total", "result", "success")
	wantMetric(t, before, 0, "floodgate_config_reloads_total", "result", "error")
	wantMetric(t, before, 0, "grpc_server_handled_total", "grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check")
	for _, name := range []string{"floodgate_build_info", "floodgate_breaker_state", "floodgate_config_reloads_total", "grpc_server_handled_total", "go_memstats_heap_inuse_bytes"} {
		if _, ok := metricValue(before, name); !ok {
			t.Errorf("%s missing before any call", name)
		}
	}
	if _, ok := metricValue(before, "floodgate_config_reloads_total", "result", "error"); !ok {
		t.Error("floodgate_config_reloads_total{result=error} missing before any error")
	}
	for _, s := range before {
		if s.name == "floodgate_build_info" && (s.value != 1 || s.labels["version"] == "") {
			t.Errorf("floodgate_build_info: %v %v, want 1 with a version", s.labels, s.value)
		}
	}

	check := func(policy, key string, want bool) {
		t.Helper()
		resp, err := c.Check(ctx, policyCheck(policy, key))
		if err != nil || resp.Allowed != want || resp.Degraded {
			t.Fatalf("%s %s: %v %v, want allowed=%v", policy, key, resp, err, want)
		}
	}
	check("m_pol", "a", true)
	check("m_pol", "a", true) // near the limit: nothing remains
	check("m_pol", "a", false)
	check("m_shadow", "a", true)
	check("m_shadow", "a", true) // shadow: denied, answered allowed
	check("m_attack", "a", true)
	const attack = 20
	for range attack {
		check("m_attack", "a", false) // the first from Redis, the rest from the deny cache
	}
	checks := 5 + 1 + attack
	if _, err := c.Check(ctx, policyCheck("no_such_policy", "a")); status.Code(err) != codes.NotFound {
		t.Fatalf("unknown policy: %v, want NotFound", err)
	}
	if _, err := c.Check(ctx, &floodgatev1.CheckRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty check: %v, want InvalidArgument", err)
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "metrics", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("k", "v")}})
		if err != nil || resp.OverallCode != want {
			t.Fatalf("envoy call %d: %v %v, want %v", i, resp, err, want)
		}
	}

	m := scrape(t, p)
	dec := "floodgate_decisions_total"
	wantMetric(t, m, 2, dec, "api", "check", "rule", "m_pol", "algorithm", "token_bucket", "result", "allowed")
	wantMetric(t, m, 1, dec, "api", "check", "rule", "m_pol", "algorithm", "token_bucket", "result", "denied")
	wantMetric(t, m, 1, dec, "api", "check", "rule", "m_shadow", "algorithm", "sliding_window", "result", "allowed")
	wantMetric(t, m, 1, dec, "api", "check", "rule", "m_shadow", "algorithm", "sliding_window", "result", "shadow_denied")
	wantMetric(t, m, 1, dec, "api", "check", "rule", "m_attack", "algorithm", "sliding_window_log", "result", "allowed")
	wantMetric(t, m, attack, dec, "api", "check", "rule", "m_attack", "algorithm", "sliding_window_log", "result", "denied")
	wantMetric(t, m, 0, dec, "result", "degraded")
	wantMetric(t, m, 1, dec, "api", "envoy", "domain", "metrics", "rule", "per_k", "algorithm", "fixed_window", "result", "allowed")
	wantMetric(t, m, 1, dec, "api", "envoy", "domain", "metrics", "rule", "per_k", "algorithm", "fixed_window", "result", "denied")
	wantMetric(t, m, float64(checks+2), dec)
	// The second m_pol check left 0 of 2: a soft-limit warning.
	wantMetric(t, m, 1, "floodgate_near_limit_total", "api", "check", "rule", "m_pol")

	// The attack: every deny after the first was answered from memory.
	hits, _ := metricValue(m, "floodgate_deny_cache_hits_total")
	hits0, _ := metricValue(before, "floodgate_deny_cache_hits_total")
	if hits-hits0 != attack-1 {
		t.Errorf("deny cache hits rose by %v during an attack of %d denies, want %d", hits-hits0, attack, attack-1)
	}
	// Every other decision went to Redis, timed in the histogram.
	storeCalls := float64(checks+2) - (hits - hits0)
	wantMetric(t, m, storeCalls, "floodgate_store_duration_seconds_count", "backend", "redis", "op", "decide")
	wantMetric(t, m, storeCalls, "floodgate_store_duration_seconds_bucket", "backend", "redis", "op", "decide", "le", "+Inf")
	if _, ok := metricValue(m, "floodgate_store_duration_seconds_bucket", "backend", "redis", "op", "decide", "le", "0.05"); !ok {
		t.Error("floodgate_store_duration_seconds has no 50ms bucket")
	}
	wantMetric(t, m, 0, "floodgate_store_errors_total", "backend", "redis", "op", "decide")
	wantMetric(t, m, 0, "floodgate_breaker_state")

	// gRPC server metrics.
	handled := "grpc_server_handled_total"
	wantMetric(t, m, float64(checks), handled, "grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check", "grpc_type", "unary", "grpc_code", "OK")
	wantMetric(t, m, 1, handled, "grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check", "grpc_code", "NotFound")
	wantMetric(t, m, 1, handled, "grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check", "grpc_code", "InvalidArgument")
	wantMetric(t, m, 2, handled, "grpc_service", "envoy.service.ratelimit.v3.RateLimitService", "grpc_method", "ShouldRateLimit", "grpc_code", "OK")
	wantMetric(t, m, float64(checks+2), "grpc_server_handling_seconds_count", "grpc_service", "floodgate.v1.RateLimiter", "grpc_method", "Check")

	// Config reloads: a valid rewrite counts a success, a broken one an
	// error (the previous config keeps serving).
	reloads := func(result string) float64 {
		v, _ := metricValue(scrape(t, p), "floodgate_config_reloads_total", "result", result)
		return v
	}
	must(t, os.WriteFile(rules, []byte(strings.Replace(metricsRules, "requests: 2,", "requests: 3,", 1)), 0o644))
	t.Logf("valid reload counted after %v", waitFor(t, 5*time.Second, "reload success counted", func() bool { return reloads("success") == 2 }))
	must(t, os.WriteFile(rules, []byte("domain: metrics\ndescriptors: [\n"), 0o644))
	t.Logf("rejected reload counted after %v", waitFor(t, 5*time.Second, "reload error counted", func() bool { return reloads("error") == 1 }))
	check("m_pol", "b", true) // still served, by the valid config
	if v := reloads("success"); v != 2 {
		t.Errorf("reload successes after the broken file: %v, want 2", v)
	}
}
