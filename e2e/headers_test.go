package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/internal/testkit/sfv"
)

// headerRules are the limits of the header tests.
const headerRules = `domain: e2e
descriptors:
  - key: a
    rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 3}
  - key: s
    shadow_mode: true
    rate_limit: {name: shadowy, unit: minute, requests_per_unit: 1}
  - key: tb
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 60, burst: 10}
  - key: ban
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: named
    rate_limit: {name: "d\u00e9bit \"x\"", unit: hour, requests_per_unit: 2}
  - key: closed
    rate_limit: {unit: hour, requests_per_unit: 5, failure_mode: closed}
`

// TestEnvoyHeaderSyntax: against the binary. Every
// rate-limit header parses as a Structured Field (names were Go-quoted:
// raw UTF-8 and \u escapes); a token bucket of 60/min burst 10 says q=10
// per w=10s (not 60s); a ban says when to come back (it said t=0, reset 0
// and no Retry-After: retry now, in a loop).
func TestEnvoyHeaderSyntax(t *testing.T) {
	p := envoyBackends[0].serve(t, "--config", writeRules(t, headerRules))
	for _, key := range []string{"named", "a", "tb", "ban"} {
		for i := range 4 { // allowed, then denied
			r := p.call(t, rlsDesc(key, "v"))
			if len(r.ResponseHeadersToAdd) == 0 {
				t.Fatalf("%s, call %d: no headers", key, i)
			}
			checkStructured(t, key, rlsHeaders(r))
		}
	}
	wantHeaders(t, "named", p.call(t, rlsDesc("named", "w")), map[string]string{"ratelimit-policy": `"d%c3%a9bit \"x\"";q=2;w=3600`})
	wantHeaders(t, "token bucket", p.call(t, rlsDesc("tb", "w")), map[string]string{
		"ratelimit-policy":  `"e2e.tb";q=10;w=10`,
		"x-ratelimit-limit": "10, 10;w=10",
	})
	r := p.call(t, rlsDesc("ban", "w"))
	wantHeaders(t, "ban", r, map[string]string{
		"ratelimit-policy":  `"e2e.ban";q=0;w=1`,
		"ratelimit":         `"e2e.ban";r=0;t=86400`,
		"x-ratelimit-reset": "86400",
		"retry-after":       "86400",
	})
	if rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT" || r.Statuses[0].DurationUntilReset.GetSeconds() != 86400 {
		t.Errorf("ban: %s, duration_until_reset %v; want OVER_LIMIT and a day", rlsCodes(r), r.Statuses[0].DurationUntilReset)
	}
}

// checkStructured parses the rate-limit headers as RFC 9651 Structured
// Fields: RateLimit-Policy and RateLimit a List of one String with Integer
// parameters, X-RateLimit-Limit a List, the others Integers.
func checkStructured(t *testing.T, what string, hs map[string]string) {
	t.Helper()
	for k, v := range hs {
		switch k {
		case "ratelimit-policy", "ratelimit":
			l, err := sfv.ParseList(v)
			if err != nil || len(l) != 1 {
				t.Errorf("%s: %s %q: %v (%d members)", what, k, v, err, len(l))
				continue
			}
			if _, ok := l[0].Value.(string); !ok {
				t.Errorf("%s: %s %q: the member is %T, want a String", what, k, v, l[0].Value)
			}
			for _, p := range l[0].Params {
				if _, ok := p.Value.(int64); !ok {
					t.Errorf("%s: %s %q: %s is not an Integer", what, k, v, p.Key)
				}
			}
		case "x-ratelimit-limit":
			if _, err := sfv.ParseList(v); err != nil {
				t.Errorf("%s: %s: %v", what, k, err)
			}
		case "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after":
			it, err := sfv.ParseItem(v)
			if _, ok := it.Value.(int64); err != nil || !ok {
				t.Errorf("%s: %s %q is not an Integer (%v)", what, k, v, err)
			}
		}
	}
}

// TestEnvoyHeadersShadow: against the binary. With [a,
// s (shadow 1/min)] the headers described the shadow limit (r=0, remaining
// 0) while the enforced one had 2 left.
func TestEnvoyHeadersShadow(t *testing.T) {
	p := envoyBackends[0].serve(t, "--config", writeRules(t, headerRules))
	for i := range 2 {
		r := p.call(t, rlsDesc("a", "1"), rlsDesc("s", "1"))
		want := []string{`"e2e.a";r=2;t=1200`, `"e2e.a";r=1;t=2400`}[i]
		wantHeaders(t, "a and shadow s", r, map[string]string{"ratelimit": want, "ratelimit-policy": `"e2e.a";q=3;w=3600`})
		if rlsCodes(r) != "OK:OK,OK" || r.Statuses[1].CurrentLimit != nil {
			t.Errorf("call %d: %s, shadow status %v; want OK and no limit on the shadow descriptor", i, rlsCodes(r), r.Statuses[1])
		}
	}
	if r := p.call(t, rlsDesc("s", "2"), rlsDesc("s", "2")); len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("shadow only: headers %v, want none", rlsHeaders(r))
	}
}

// TestEnvoyHeadersDegraded: against the binary on a Redis
// that died. Degraded answers claimed zero quota (x-ratelimit-remaining: 0,
// r=0;t=0, limit_remaining 0): "none left, retry now".
func TestEnvoyHeadersDegraded(t *testing.T) {
	r := redistest.StartServer(t)
	p := startServe(t, "--config", writeRules(t, headerRules), "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "200ms")
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	r.Kill()
	call := func(key string) *rlsv3.RateLimitResponse {
		resp, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc(key, "1")}})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, tc := range []struct{ key, code, retry string }{{"a", "OK:OK", ""}, {"closed", "OVER_LIMIT:OVER_LIMIT", "1"}} {
		resp := call(tc.key)
		hs := rlsHeaders(resp)
		want := 1
		if tc.retry != "" {
			want = 2
		}
		if rlsCodes(resp) != tc.code || hs["x-ratelimit-degraded"] != "true" || hs["retry-after"] != tc.retry || len(hs) != want {
			t.Errorf("%s: %s %v; want %s with x-ratelimit-degraded and retry-after %q only", tc.key, rlsCodes(resp), hs, tc.code, tc.retry)
		}
		if s := resp.Statuses[0]; s.CurrentLimit != nil || s.LimitRemaining != 0 || s.DurationUntilReset != nil {
			t.Errorf("%s: status %v, want no limit, remaining or reset", tc.key, s)
		}
	}
}

// detailedRules: an envoyproxy/ratelimit rule with detailed_metric, as
// configs written for it set it, and a rule added after a flood.
const detailedRules = `domain: e2e
descriptors:
  - key: api_key
    detailed_metric: true
    rate_limit: {unit: minute, requests_per_unit: 100000}
  - key: later
    rate_limit: {unit: minute, requests_per_unit: 10}
`

// TestMetricsDetailedMetric: against the binary. With
// detailed_metric, 11,000 requests with 4 KB values took /metrics from
// 70 KB to 82 MB, put raw values (API keys) on the unauthenticated
// /metrics, and counted new rules as _overflow. The config still loads;
// by default no value reaches a label, and with --detailed-metric-series
// at most that many per rule do.
func TestMetricsDetailedMetric(t *testing.T) {
	rules := writeRules(t, detailedRules)
	for _, tc := range []struct {
		name    string
		args    []string
		details int
	}{
		{"default", nil, 0},
		{"opt-in", []string{"--detailed-metric-series", "3"}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := startServe(t, append([]string{"--config", rules}, tc.args...)...)
			rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
			const n, size = 1_600, 4096
			for sent := 0; sent < n; {
				var descs []*ratelimitv3.RateLimitDescriptor
				for ; sent < n && len(descs) < 64; sent++ {
					v := fmt.Sprintf("sk-%08d", sent)
					descs = append(descs, rlsDesc("api_key", v+strings.Repeat("x", size-len(v))))
				}
				if _, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: descs}); err != nil {
					t.Fatal(err)
				}
			}
			// Short keys fit in a label; still only tc.details of them.
			for i := range 20 {
				if _, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("api_key", "k"+strconv.Itoa(i))}}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("later", "x")}}); err != nil {
				t.Fatal(err)
			}

			resp, err := http.Get("http://" + p.HTTPAddr + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("/metrics: %d bytes after %d distinct 4 KB values", len(body), n)
			if strings.Contains(string(body), "sk-0") {
				t.Errorf("a request's 4 KB value is on /metrics")
			}
			if len(body) > 200_000 {
				t.Errorf("/metrics is %d bytes after the flood, want under 200 KB", len(body))
			}
			m, err := parseMetrics(strings.NewReader(string(body)))
			if err != nil {
				t.Fatal(err)
			}
			details := 0
			for _, s := range m {
				if s.name == "floodgate_decisions_total" && strings.HasPrefix(s.labels["rule"], "e2e.api_key_") {
					details++
				}
			}
			if details != tc.details {
				t.Errorf("%d rule labels hold a request's value, want %d", details, tc.details)
			}
			wantMetric(t, m, n+21, "floodgate_decisions_total", "api", "envoy")
			wantMetric(t, m, 1, "floodgate_decisions_total", "rule", "e2e.later")
		})
	}
}
