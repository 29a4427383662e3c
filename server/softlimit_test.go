package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/internal/testkit/sfv"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// warnAlgorithms are the algorithms a warning threshold applies to, as
// the config spells them.
var warnAlgorithms = []string{"token_bucket", "sliding_window", "sliding_window_log", "fixed_window", "leaky_bucket"}

// startPolicies serves the Check API with the policies of yaml.
func startPolicies(t *testing.T, yaml string, s server.Settings) *harness {
	t.Helper()
	cfg, err := rules.Parse("policies.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	s.Rules = testkit.StaticRules(cfg)
	return start(t, nil, s)
}

// TestCheckWarning: 10 per minute warning at 8 (as a count and as 80%),
// per algorithm: checks 1 to 7 answer no warning, 8 (at) to 10 (above)
// answer it with ratelimit-warning metadata, the 11th is denied without
// it.
func TestCheckWarning(t *testing.T) {
	for _, alg := range warnAlgorithms {
		for _, warnAt := range []string{"8", "80%"} {
			t.Run(alg+"/"+warnAt, func(t *testing.T) {
				h := startPolicies(t, fmt.Sprintf("policies:\n  p: {algorithm: %s, requests: 10, period: 1m, warn_at: %q}\n", alg, warnAt), server.Settings{})
				req := &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "p"}}
				for i := 1; i <= 11; i++ {
					var md metadata.MD
					resp, err := h.client.Check(context.Background(), req, grpc.Header(&md))
					if err != nil {
						t.Fatal(err)
					}
					wantAllowed, wantWarning := i <= 10, i >= 8 && i <= 10
					if resp.Allowed != wantAllowed || resp.Warning != wantWarning || resp.WarnAt != 8 {
						t.Fatalf("check %d: got allowed=%v warning=%v warn_at=%d (remaining %d), want allowed=%v warning=%v warn_at=8",
							i, resp.Allowed, resp.Warning, resp.WarnAt, resp.Remaining, wantAllowed, wantWarning)
					}
					want := []string(nil)
					if wantWarning {
						want = []string{`"p";at=8`}
					}
					if got := md.Get("ratelimit-warning"); strings.Join(got, "|") != strings.Join(want, "|") {
						t.Fatalf("check %d: ratelimit-warning metadata %q, want %q", i, got, want)
					}
				}
			})
		}
	}
}

// TestCheckWarningCost: the usage after the check's whole cost counts: a
// cost of 3 from 5 used reaches 8.
func TestCheckWarningCost(t *testing.T) {
	h := start(t, nil, server.Settings{})
	lim := testkit.Inline(10, time.Minute, 0)
	lim.Limit.WarnAt = 8
	for i, tc := range []struct {
		cost    int64
		warning bool
	}{{5, false}, {2, false}, {3, true}} {
		resp, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Cost: tc.cost, Source: lim})
		if err != nil || !resp.Allowed || resp.Warning != tc.warning {
			t.Fatalf("check %d (cost %d): got %v, %v; want allowed, warning=%v", i, tc.cost, resp, err, tc.warning)
		}
	}
}

// TestCheckWarningShadow: a shadow policy's allow of a deny is over the
// limit, past any threshold: it warns.
func TestCheckWarningShadow(t *testing.T) {
	h := startPolicies(t, "policies:\n  p: {requests: 2, period: 1m, warn_at: 100%, shadow_mode: true}\n", server.Settings{})
	req := &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "p"}, Cost: 2}
	for i, warning := range []bool{true, true} {
		resp, err := h.client.Check(context.Background(), req)
		if err != nil || !resp.Allowed || resp.Warning != warning {
			t.Fatalf("check %d: got %v, %v; want allowed (shadow), warning", i, resp, err)
		}
	}
}

// TestCheckWarningInline: an inline limit carries warn_at or
// warn_at_percent; bad ones are InvalidArgument naming the field.
func TestCheckWarningInline(t *testing.T) {
	h := start(t, nil, server.Settings{})
	check := func(count int64, percent int32) (*floodgatev1.CheckResponse, error) {
		lim := testkit.Inline(10, time.Minute, 20)
		lim.Limit.WarnAt, lim.Limit.WarnAtPercent = count, percent
		return h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: fmt.Sprint(count, percent), Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: 10, Source: lim})
	}
	for _, tc := range []struct {
		count   int64
		percent int32
		warnAt  int64
		warning bool
	}{
		{0, 0, 0, false},
		{10, 0, 10, true}, // 10 of the burst of 20 used
		{11, 0, 11, false},
		{0, 50, 10, true},
		{0, 51, 11, false}, // 10.2 rounds up
	} {
		resp, err := check(tc.count, tc.percent)
		if err != nil || resp.WarnAt != tc.warnAt || resp.Warning != tc.warning {
			t.Errorf("warn_at %d, warn_at_percent %d: got %v, %v; want warn_at %d warning %v", tc.count, tc.percent, resp, err, tc.warnAt, tc.warning)
		}
	}
	for _, tc := range []struct {
		count   int64
		percent int32
		msg     string
	}{
		{-1, 0, "limit.warn_at: must be positive, got -1"},
		{21, 0, "limit.warn_at: 21 is above the limit's capacity of 20, so it would never warn"},
		{0, 101, "limit.warn_at_percent: must be a percentage from 1% to 100%, got 101%"},
		{0, -5, "limit.warn_at_percent: must be a percentage from 1% to 100%, got -5%"},
		{5, 50, "limit.warn_at: give warn_at or warn_at_percent, not both"},
	} {
		_, err := check(tc.count, tc.percent)
		if status.Code(err) != codes.InvalidArgument || status.Convert(err).Message() != tc.msg {
			t.Errorf("warn_at %d, warn_at_percent %d: got %v, want InvalidArgument %q", tc.count, tc.percent, err, tc.msg)
		}
	}
}

// TestCheckBatchWarning: each allowed result says whether it warns; a
// denied batch charged nothing and warns of nothing.
func TestCheckBatchWarning(t *testing.T) {
	h := startPolicies(t, "policies:\n  a: {requests: 10, period: 1m, warn_at: 2}\n  b: {requests: 10, period: 1m, warn_at: 9}\n", server.Settings{})
	batch := func(costB int64) (*floodgatev1.CheckBatchResponse, metadata.MD) {
		var md metadata.MD
		resp, err := h.client.CheckBatch(context.Background(), &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{
			{Key: "k", Cost: 2, Source: &floodgatev1.CheckRequest_Policy{Policy: "a"}},
			{Key: "k", Cost: costB, Source: &floodgatev1.CheckRequest_Policy{Policy: "b"}},
		}}, grpc.Header(&md))
		if err != nil {
			t.Fatal(err)
		}
		return resp, md
	}
	resp, md := batch(1)
	if !resp.Allowed || !resp.Results[0].Warning || resp.Results[1].Warning {
		t.Fatalf("first batch: got %v, want allowed, a warning, b not", resp)
	}
	if got := md.Get("ratelimit-warning"); len(got) != 1 || got[0] != `"a";at=2` {
		t.Fatalf("first batch: metadata %q", got)
	}
	resp, md = batch(10) // b cannot take 10 more: denied, nothing charged
	if resp.Allowed || resp.Results[0].Warning || resp.Results[1].Warning || len(md.Get("ratelimit-warning")) != 0 {
		t.Fatalf("denied batch: got %v, metadata %v; want no warning", resp, md)
	}
	resp, md = batch(8) // a at 6 used, b at 9: both warn
	if !resp.Allowed || !resp.Results[0].Warning || !resp.Results[1].Warning {
		t.Fatalf("third batch: got %v, want both warning", resp)
	}
	if got := md.Get("ratelimit-warning"); len(got) != 1 || got[0] != `"a";at=2, "b";at=9` {
		t.Fatalf("third batch: metadata %q", got)
	}
}

// TestCheckWarningDegraded: an answer of the failure mode knows no usage
// and never warns.
func TestCheckWarningDegraded(t *testing.T) {
	cfg, err := rules.Parse("policies.yaml", []byte("policies:\n  p: {requests: 10, period: 1m, warn_at: 1, failure_mode: open}\n"))
	if err != nil {
		t.Fatal(err)
	}
	d := start(t, failingStore{memstore.New(memstore.Config{})}, server.Settings{Rules: testkit.StaticRules(cfg)})
	resp, err := d.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "p"}})
	if err != nil || !resp.Allowed || !resp.Degraded || resp.Warning {
		t.Fatalf("got %v, %v; want allowed, degraded, no warning", resp, err)
	}
}

// TestPeekWarning: Peek says whether a Check of its cost would warn.
func TestPeekWarning(t *testing.T) {
	h := startPolicies(t, "policies:\n  p: {requests: 10, period: 1m, warn_at: 5}\n", server.Settings{})
	src := &floodgatev1.PeekRequest_Policy{Policy: "p"}
	for _, tc := range []struct {
		cost    int64
		warning bool
	}{{4, false}, {5, true}} {
		resp, err := h.client.Peek(context.Background(), &floodgatev1.PeekRequest{Key: "k", Cost: tc.cost, Source: src})
		if err != nil || !resp.Allowed || resp.Warning != tc.warning || resp.WarnAt != 5 {
			t.Fatalf("peek cost %d: got %v, %v; want warning %v", tc.cost, resp, err, tc.warning)
		}
	}
}

// warnConfig has a rule of each algorithm warning at 8 of 10, a shadow
// rule and a second rule for requests with two descriptors.
func warnConfig() string {
	var b strings.Builder
	b.WriteString("domain: edge\ndescriptors:\n")
	for _, alg := range warnAlgorithms {
		fmt.Fprintf(&b, "  - key: %s\n    rate_limit: {name: %s, unit: minute, requests_per_unit: 10, algorithm: %s, warn_at: 80%%}\n", alg, alg, alg)
	}
	b.WriteString("  - key: shadow\n    rate_limit: {name: shadow, unit: minute, requests_per_unit: 2, warn_at: 2, shadow_mode: true}\n")
	b.WriteString("  - key: other\n    rate_limit: {name: other, unit: minute, requests_per_unit: 4, warn_at: 1}\n")
	return b.String()
}

// TestEnvoyWarning: per algorithm, requests 1 to 7 answer without
// ratelimit-warning, 8 to 10 with it (a Structured Field List), the 11th
// is over the limit without it. (The leaky bucket is TestEnvoyWarningLeaky.)
func TestEnvoyWarning(t *testing.T) {
	for _, alg := range warnAlgorithms {
		if alg == "leaky_bucket" {
			continue
		}
		t.Run(alg, func(t *testing.T) {
			h := startEnvoy(t, warnConfig(), nil, server.EnvoySettings{})
			for i := 1; i <= 11; i++ {
				r := h.call(t, testkit.Descriptor(alg, "1"))
				wantCode, want := "OK:OK", ""
				if i >= 8 {
					want = `"` + alg + `";at=8`
				}
				if i == 11 {
					wantCode, want = "OVER_LIMIT:OVER_LIMIT", ""
				}
				hs := headerMap(r)
				if codesOf(r) != wantCode || hs["ratelimit-warning"] != want {
					t.Fatalf("request %d: got %s, ratelimit-warning %q; want %s, %q", i, codesOf(r), hs["ratelimit-warning"], wantCode, want)
				}
				if want != "" {
					l, err := sfv.ParseList(hs["ratelimit-warning"])
					if err != nil || len(l) != 1 || l[0].Value != alg || len(l[0].Params) != 1 || l[0].Params[0].Key != "at" || l[0].Params[0].Value != int64(8) {
						t.Fatalf("request %d: ratelimit-warning %q parses as %+v, %v", i, hs["ratelimit-warning"], l, err)
					}
				}
			}
		})
	}
}

// TestEnvoyWarningLeaky: Envoy's leaky bucket admits only a request
// that may start now, after which the next would wait: nothing remains,
// so every admitted request is past its threshold and warns; one sent
// before its slot is over the limit, without the warning.
func TestEnvoyWarningLeaky(t *testing.T) {
	h := startEnvoy(t, warnConfig(), nil, server.EnvoySettings{})
	for i := 1; i <= 3; i++ {
		r := h.call(t, testkit.Descriptor("leaky_bucket", "1"))
		if got := headerMap(r)["ratelimit-warning"]; codesOf(r) != "OK:OK" || r.Statuses[0].LimitRemaining != 0 || got != `"leaky_bucket";at=8` {
			t.Fatalf("request %d: got %s, remaining %d, %q; want OK, 0, the warning", i, codesOf(r), r.Statuses[0].LimitRemaining, got)
		}
		r = h.call(t, testkit.Descriptor("leaky_bucket", "1"))
		if got := headerMap(r)["ratelimit-warning"]; codesOf(r) != "OVER_LIMIT:OVER_LIMIT" || got != "" {
			t.Fatalf("request %d, early: got %s, %q; want OVER_LIMIT, no warning", i, codesOf(r), got)
		}
		h.clock.Advance(6 * time.Second) // one slot of 10 a minute
	}
}

// TestEnvoyWarningSeveral: the header lists every limit past its
// threshold, shadow ones included; an over-limit answer lists none.
func TestEnvoyWarningSeveral(t *testing.T) {
	h := startEnvoy(t, warnConfig(), nil, server.EnvoySettings{})
	shadow, other := testkit.Descriptor("shadow", "1"), testkit.Descriptor("other", "1")
	for i, want := range []struct{ code, warning string }{
		{"OK:OK,OK", `"other";at=1`},                // shadow 1 of 2 used, other 1 of 4
		{"OK:OK,OK", `"shadow";at=2, "other";at=1`}, // shadow 2 of 2
		{"OK:OK,OK", `"shadow";at=2, "other";at=1`}, // shadow over, answered OK
		{"OK:OK,OK", `"shadow";at=2, "other";at=1`}, // other 4 of 4
		{"OVER_LIMIT:OK,OVER_LIMIT", ""},            // other over
	} {
		r := h.call(t, shadow, other)
		if got := headerMap(r)["ratelimit-warning"]; codesOf(r) != want.code || got != want.warning {
			t.Fatalf("request %d: got %s, %q; want %s, %q", i+1, codesOf(r), got, want.code, want.warning)
		}
	}
}

// TestWarningNearLimitMetric: a rule's floodgate_near_limit_total counts
// the allowed decisions at or above its own threshold (here 3 of 10, far
// below the 80% of a rule without one), on both APIs.
func TestWarningNearLimitMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := observability.NewMetrics(reg)
	h := startEnvoy(t, "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {name: r, unit: minute, requests_per_unit: 10, warn_at: 3}\n", nil, server.EnvoySettings{Settings: server.Settings{Metrics: m}})
	for range 5 {
		h.call(t, testkit.Descriptor("k", "1"))
	}
	c := startPolicies(t, "policies:\n  p: {requests: 10, period: 1m, warn_at: 3}\n", server.Settings{Metrics: m})
	for range 5 {
		if _, err := c.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != "floodgate_near_limit_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "rule" {
					got[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	if got["r"] != 3 || got["p"] != 3 {
		t.Fatalf("floodgate_near_limit_total by rule: %v, want r 3 and p 3 (decisions 3, 4 and 5)", got)
	}
}
