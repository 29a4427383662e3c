package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

const tracingConfig = `domain: edge
descriptors:
  - key: user
    rate_limit: {name: per_user, algorithm: sliding_window, unit: second, requests_per_unit: 1}
`

// secretValue is a descriptor value or key that must reach a span only
// with the operator's opt-in.
const secretValue = "alice@example.com"

// traced is a tracer provider that keeps its spans in memory, and the
// server span the decision's spans are children of.
type traced struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newTraced(t *testing.T, sampler sdktrace.Sampler) traced {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(sampler))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	return traced{tp: tp, exp: exp}
}

// spans are the ended spans by name; it fails unless each name is there once.
func (tr traced) spans(t *testing.T, names ...string) map[string]tracetest.SpanStub {
	t.Helper()
	got := map[string]tracetest.SpanStub{}
	for _, s := range tr.exp.GetSpans() {
		if _, dup := got[s.Name]; dup {
			t.Fatalf("span %q twice", s.Name)
		}
		got[s.Name] = s
	}
	for _, n := range names {
		if _, ok := got[n]; !ok {
			t.Fatalf("no span %q among %v", n, tr.exp.GetSpans().Snapshots())
		}
	}
	if len(got) != len(names) {
		t.Fatalf("spans %v, want %v", keysOf(got), names)
	}
	return got
}

func keysOf(m map[string]tracetest.SpanStub) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// attrs is a span's attributes as strings (slices joined by "|").
func attrs(s tracetest.SpanStub) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes {
		if kv.Value.Type() == attribute.STRINGSLICE {
			m[string(kv.Key)] = strings.Join(kv.Value.AsStringSlice(), "|")
			continue
		}
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

// mentions reports whether any attribute or event of the spans holds s.
func mentions(spans map[string]tracetest.SpanStub, s string) bool {
	for _, sp := range spans {
		for _, v := range attrs(sp) {
			if strings.Contains(v, s) {
				return true
			}
		}
		for _, ev := range sp.Events {
			for _, kv := range ev.Attributes {
				if strings.Contains(kv.Value.String(), s) {
					return true
				}
			}
		}
	}
	return false
}

func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %s: %s = %q, want %q (all: %v)", s.Name, k, got[k], v, got)
		}
	}
}

func TestTracingEnvoySpans(t *testing.T) {
	for _, tc := range []struct {
		name     string
		values   bool
		st       func() store.Store
		decision string // of the second call
		degraded string
	}{
		{name: "decided", st: func() store.Store { return memstore.New(memstore.Config{}) }, decision: "denied", degraded: "false"},
		{name: "values opted in", values: true, st: func() store.Store { return memstore.New(memstore.Config{}) }, decision: "denied", degraded: "false"},
		{name: "store down, failing open", st: func() store.Store { return failingStore{memstore.New(memstore.Config{})} }, decision: "allowed", degraded: "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTraced(t, sdktrace.AlwaysSample())
			cfg, err := rules.Parse("edge.yaml", []byte(tracingConfig))
			if err != nil {
				t.Fatal(err)
			}
			st := tc.st()
			defer st.Close()
			e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: testkit.StaticRules(cfg), Tracer: tr.tp.Tracer("test"), TraceValues: tc.values, Clock: func() time.Time { return testkit.T0 }}})
			req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs(testkit.Descriptor("user", secretValue))}
			if _, err := e.ShouldRateLimit(context.Background(), req); err != nil { // no server span: no spans
				t.Fatal(err)
			}
			if n := len(tr.exp.GetSpans()); n != 0 {
				t.Fatalf("%d spans without a recording parent, want 0", n)
			}
			ctx, server := tr.tp.Tracer("test").Start(context.Background(), "server")
			if _, err := e.ShouldRateLimit(ctx, req); err != nil {
				t.Fatal(err)
			}
			server.End()
			spans := tr.spans(t, "server", "floodgate.match", "floodgate.store")
			for _, n := range []string{"floodgate.match", "floodgate.store"} {
				if p := spans[n].Parent.SpanID(); p != server.SpanContext().SpanID() {
					t.Errorf("%s: parent %v, want the server span %v", n, p, server.SpanContext().SpanID())
				}
			}
			wantAttrs(t, spans["floodgate.match"], map[string]string{
				"floodgate.domain": "edge", "floodgate.descriptors": "1",
				"floodgate.rules": "per_user", "floodgate.algorithms": "sliding_window",
			})
			wantAttrs(t, spans["floodgate.store"], map[string]string{
				"floodgate.batch_size": "1", "floodgate.rules": "per_user", "floodgate.algorithms": "sliding_window",
				"floodgate.decision": tc.decision, "floodgate.degraded": tc.degraded, "floodgate.shadow": "false",
			})
			if got := mentions(spans, secretValue); got != tc.values {
				t.Errorf("a span mentions the descriptor value: %v, want %v (the opt-in)", got, tc.values)
			}
			if tc.values {
				wantAttrs(t, spans["floodgate.match"], map[string]string{"floodgate.values": "user=" + secretValue})
			}
			if hasError := len(spans["floodgate.store"].Events) > 0; hasError != (tc.degraded == "true") {
				t.Errorf("store span events %v: want the store error recorded only when degraded", spans["floodgate.store"].Events)
			}
		})
	}
}

func descs(d ...*ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor { return d }

func TestTracingEnvoyUnknownDomain(t *testing.T) {
	tr := newTraced(t, sdktrace.AlwaysSample())
	st := memstore.New(memstore.Config{})
	defer st.Close()
	e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Tracer: tr.tp.Tracer("test")}})
	ctx, server := tr.tp.Tracer("test").Start(context.Background(), "server")
	if _, err := e.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "nowhere", Descriptors: descs(testkit.Descriptor("user", "x"))}); err != nil {
		t.Fatal(err)
	}
	server.End()
	spans := tr.spans(t, "server", "floodgate.match") // no store call
	wantAttrs(t, spans["floodgate.match"], map[string]string{"floodgate.domain": "nowhere", "floodgate.rules": ""})
}

func TestTracingCheckSpans(t *testing.T) {
	for _, tc := range []struct {
		name     string
		values   bool
		down     bool // the store cannot decide: failing open
		degraded string
	}{
		{name: "default", degraded: "false"},
		{name: "values opted in", values: true, degraded: "false"},
		{name: "store down, failing open", down: true, degraded: "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTraced(t, sdktrace.AlwaysSample())
			var st store.Store = memstore.New(memstore.Config{})
			defer st.Close()
			if tc.down {
				st = failingStore{st}
			}
			r := server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Tracer: tr.tp.Tracer("test"), TraceValues: tc.values, Clock: func() time.Time { return testkit.T0 }}})
			ctx, server := tr.tp.Tracer("test").Start(context.Background(), "server")
			resp, err := r.Check(ctx, &floodgatev1.CheckRequest{
				Key: secretValue, Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
				Source: testkit.Inline(5, time.Minute, 0),
			})
			if err != nil || !resp.Allowed {
				t.Fatalf("Check: %v, %v", resp, err)
			}
			server.End()
			spans := tr.spans(t, "server", "floodgate.match", "floodgate.store")
			wantAttrs(t, spans["floodgate.match"], map[string]string{"floodgate.rules": "inline", "floodgate.algorithms": "token_bucket", "floodgate.batch_size": "1"})
			wantAttrs(t, spans["floodgate.store"], map[string]string{
				"floodgate.rules": "inline", "floodgate.algorithms": "token_bucket", "floodgate.batch_size": "1",
				"floodgate.decision": "allowed", "floodgate.degraded": tc.degraded, "floodgate.dry_run": "false",
			})
			if got := mentions(spans, secretValue); got != tc.values {
				t.Errorf("a span mentions the key: %v, want %v (the opt-in)", got, tc.values)
			}
			if hasError := len(spans["floodgate.store"].Events) > 0; hasError != tc.down {
				t.Errorf("store span events %v: want the store error recorded only when degraded", spans["floodgate.store"].Events)
			}
			if code := spans["floodgate.store"].Status.Code; code == codes.Error {
				t.Errorf("store span status %v: a call the failure mode answered is no error", spans["floodgate.store"].Status)
			}
		})
	}
}

// TestTracingUnsampledAllocates checks that tracing costs no allocation
// on a call that is not sampled, nor when it is off.
func TestTracingUnsampledAllocates(t *testing.T) {
	cfg, err := rules.Parse("edge.yaml", []byte(tracingConfig))
	if err != nil {
		t.Fatal(err)
	}
	tr := newTraced(t, sdktrace.NeverSample())
	// The server span of an unsampled call: in the context, not recording.
	unsampled, srvSpan := tr.tp.Tracer("test").Start(context.Background(), "server")
	defer srvSpan.End()
	if srvSpan.IsRecording() {
		t.Fatal("the server span records")
	}
	req := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs(testkit.Descriptor("user", "bob"))}
	allocs := func(s server.Settings, ctx context.Context) float64 {
		st := memstore.New(memstore.Config{})
		defer st.Close()
		s.Rules = testkit.StaticRules(cfg)
		e := server.NewEnvoy(st, server.EnvoySettings{Settings: s})
		return testing.AllocsPerRun(200, func() {
			if _, err := e.ShouldRateLimit(ctx, req); err != nil {
				t.Fatal(err)
			}
		})
	}
	off := allocs(server.Settings{}, context.Background())
	on := allocs(server.Settings{Tracer: tr.tp.Tracer("test"), TraceValues: true}, unsampled)
	if on != off {
		t.Errorf("an unsampled call allocates %v times, %v with tracing off: want equal", on, off)
	}
	if n := len(tr.exp.GetSpans()); n != 0 {
		t.Errorf("%d spans exported from unsampled calls", n)
	}
}
