package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// traceReceiver is a minimal OTLP/gRPC trace collector: it keeps every
// span it is sent, with its resource's service.name.
type traceReceiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu      sync.Mutex
	spans   []*tracepb.Span
	service string
	got     chan struct{} // signalled on each export
}

func (r *traceReceiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			if a.GetKey() == "service.name" {
				r.service = a.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			r.spans = append(r.spans, ss.GetSpans()...)
		}
	}
	r.mu.Unlock()
	select {
	case r.got <- struct{}{}:
	default:
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// startTraceReceiver serves a traceReceiver on a free loopback port and
// returns it with its address.
func startTraceReceiver(t *testing.T) (*traceReceiver, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &traceReceiver{got: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, r)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return r, lis.Addr().String()
}

// waitSpans waits until the receiver holds spans named each of names in
// trace traceID, and returns them by name.
func (r *traceReceiver) waitSpans(t *testing.T, traceID string, names ...string) map[string]*tracepb.Span {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		found := map[string]*tracepb.Span{}
		for _, s := range r.spans {
			if hex.EncodeToString(s.GetTraceId()) == traceID {
				found[s.GetName()] = s
			}
		}
		r.mu.Unlock()
		all := true
		for _, n := range names {
			all = all && found[n] != nil
		}
		if all {
			return found
		}
		select {
		case <-r.got:
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatalf("spans %v of trace %s not received; got %v", names, traceID, keysOfSpans(found))
		}
	}
}

func keysOfSpans(m map[string]*tracepb.Span) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// spanAttr is a span attribute's value as a string ("" when absent).
func spanAttr(s *tracepb.Span, key string) string {
	for _, a := range s.GetAttributes() {
		if a.GetKey() != key {
			continue
		}
		v := a.GetValue()
		if arr := v.GetArrayValue(); arr != nil {
			var parts []string
			for _, e := range arr.GetValues() {
				parts = append(parts, e.GetStringValue())
			}
			return strings.Join(parts, "|")
		}
		if s := v.GetStringValue(); s != "" {
			return s
		}
		return v.String()
	}
	return ""
}

const tracingRules = `domain: edge
descriptors:
  - key: user
    rate_limit: {name: per_user, algorithm: sliding_window, unit: minute, requests_per_unit: 10}
`

const tracedValue = "carol@example.com"

func TestTracing(t *testing.T) {
	const (
		traceID = "0af7651916cd43dd8448eb211c80319c"
		spanID  = "b7ad6b7169203331"
	)
	for _, tc := range []struct {
		name   string
		md     []string
		args   []string
		values bool
		// flushOnStop: the batch processor waits a minute, so the spans
		// can only arrive by the flush on SIGTERM.
		flushOnStop bool
	}{
		{name: "traceparent", md: []string{"traceparent", "00-" + traceID + "-" + spanID + "-01"}},
		{name: "traceparent, values opted in", md: []string{"traceparent", "00-" + traceID + "-" + spanID + "-01"}, args: []string{"--trace-values"}, values: true},
		{name: "B3 headers, flushed on SIGTERM", md: []string{"x-b3-traceid", traceID, "x-b3-spanid", spanID, "x-b3-sampled", "1"}, flushOnStop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv, addr := startTraceReceiver(t)
			delay := "100"
			if tc.flushOnStop {
				delay = "60000"
			}
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
			t.Setenv("OTEL_SERVICE_NAME", "floodgate-e2e")
			t.Setenv("OTEL_BSP_SCHEDULE_DELAY", delay) // ms; read by the SDK
			cfg := filepath.Join(t.TempDir(), "rules.yaml")
			if err := os.WriteFile(cfg, []byte(tracingRules), 0o600); err != nil {
				t.Fatal(err)
			}
			p := startServe(t, append([]string{"--config", cfg}, tc.args...)...)
			if !p.logs.Contains(`"msg":"tracing on"`) {
				t.Fatalf("no 'tracing on' log line:\n%s", p.logs)
			}
			client := rlsv3.NewRateLimitServiceClient(p.Conn(t))
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			resp, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
				{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: tracedValue}}},
			}})
			if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
				t.Fatalf("ShouldRateLimit: %v, %v", resp, err)
			}
			if tc.flushOnStop {
				time.Sleep(500 * time.Millisecond)
				recv.mu.Lock()
				early := len(recv.spans)
				recv.mu.Unlock()
				if early != 0 {
					t.Fatalf("%d spans before SIGTERM with a one-minute batch delay", early)
				}
				if err := p.Stop(); err != nil {
					t.Fatal(err)
				}
			}
			spans := recv.waitSpans(t, traceID, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", "floodgate.match", "floodgate.store")
			srv := spans["envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"]
			if got := hex.EncodeToString(srv.GetParentSpanId()); got != spanID {
				t.Errorf("server span's parent %s, want the caller's %s", got, spanID)
			}
			if srv.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
				t.Errorf("server span kind %v", srv.GetKind())
			}
			for _, n := range []string{"floodgate.match", "floodgate.store"} {
				if got, want := hex.EncodeToString(spans[n].GetParentSpanId()), hex.EncodeToString(srv.GetSpanId()); got != want {
					t.Errorf("%s: parent %s, want the server span %s", n, got, want)
				}
			}
			if got := spanAttr(spans["floodgate.match"], "floodgate.rules"); got != "per_user" {
				t.Errorf("match span rules %q, want per_user", got)
			}
			if got := spanAttr(spans["floodgate.store"], "floodgate.decision"); got != "allowed" {
				t.Errorf("store span decision %q, want allowed", got)
			}
			recv.mu.Lock()
			service := recv.service
			recv.mu.Unlock()
			if service != "floodgate-e2e" {
				t.Errorf("service.name %q, want floodgate-e2e", service)
			}
			mentioned := false
			for _, s := range spans {
				for _, a := range s.GetAttributes() {
					mentioned = mentioned || strings.Contains(a.GetValue().String(), tracedValue)
				}
			}
			if mentioned != tc.values {
				t.Errorf("a span holds the descriptor value: %v, want %v (--trace-values)", mentioned, tc.values)
			}
		})
	}
}

// TestTracingCollectorDown checks that floodgate starts and decides when
// the collector it is told to export to does not answer.
func TestTracingCollectorDown(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1000") // ms: each export gives up after a second
	cfg := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(cfg, []byte(tracingRules), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, "--config", cfg)
	client := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	start := time.Now()
	for range 20 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "dave"}}},
		}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("20 decisions took %v with the collector down", d)
	}
	// The failed exports are logged once (rate-limited), as JSON like
	// every other line: nothing of OpenTelemetry's own on stderr.
	deadline := time.Now().Add(15 * time.Second)
	for !p.logs.Contains(`"msg":"tracing: export failed"`) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(p.logs.String(), `"msg":"tracing: export failed"`); n != 1 {
		t.Errorf("%d export-failure lines, want 1 (rate-limited):\n%s", n, p.logs)
	}
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if !json.Valid([]byte(line)) {
			t.Errorf("a log line is not JSON: %q", line)
		}
	}
}
