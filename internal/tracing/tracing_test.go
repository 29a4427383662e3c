package tracing

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

const testRules = `domain: edge
descriptors:
  - key: user
    rate_limit: {name: per_user, unit: second, requests_per_unit: 5}
`

type staticRules struct{ cfg *rules.Set }

func (s staticRules) Current() *rules.Set { return s.cfg }

// serveEnvoy serves ShouldRateLimit over bufconn with tr's server handler
// and tracer, and returns a client connection.
func serveEnvoy(t testing.TB, tr *Tracing) *grpc.ClientConn {
	t.Helper()

	cfg, err := rules.Parse("edge.yaml", []byte(testRules))
	if err != nil {
		t.Fatal(err)
	}
	st := memstore.New(memstore.Config{})
	t.Cleanup(func() { st.Close() })
	envoy := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: staticRules{cfg}, Tracer: tr.Tracer()}})
	unary, stream := tr.ServerInterceptors()
	srv, hs := server.NewGRPCServer(server.NewRateLimiter(st, server.CheckSettings{Settings: server.Settings{Tracer: tr.Tracer()}}), envoy, server.GRPCSettings{TraceUnary: unary, TraceStream: stream})
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	lis := bufconn.Listen(1 << 20)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

var envoyRequest = &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
	{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "bob"}}},
}}

func TestServerSpanParentedToCaller(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	for _, tc := range []struct {
		name  string
		props []string // Config.Propagators
		md    []string
		root  bool // the call's headers are not read: no parent
	}{
		{name: "W3C traceparent", md: []string{"traceparent", "00-" + traceID + "-" + spanID + "-01"}},
		{name: "B3 single header", md: []string{"b3", traceID + "-" + spanID + "-1"}},
		{name: "B3 multiple headers (Envoy's default)", md: []string{"x-b3-traceid", traceID, "x-b3-spanid", spanID, "x-b3-sampled", "1"}},
		{name: "both: traceparent wins", md: []string{
			"traceparent", "00-" + traceID + "-" + spanID + "-01",
			"x-b3-traceid", "11111111111111111111111111111111", "x-b3-spanid", "2222222222222222", "x-b3-sampled", "1"}},
		{name: "OTEL_PROPAGATORS=tracecontext,b3multi: B3 wins", props: []string{"tracecontext", "b3multi"}, md: []string{
			"traceparent", "00-11111111111111111111111111111111-2222222222222222-01",
			"x-b3-traceid", traceID, "x-b3-spanid", spanID, "x-b3-sampled", "1"}},
		{name: "OTEL_PROPAGATORS=tracecontext: B3 is not read", props: []string{"tracecontext"}, md: []string{"b3", traceID + "-" + spanID + "-1"}, root: true},
		{name: "OTEL_PROPAGATORS=jaeger: read by its propagator", props: []string{"jaeger"}, md: []string{"uber-trace-id", traceID + ":" + spanID + ":0:1"}},
		{name: "OTEL_PROPAGATORS=none", props: []string{}, md: []string{"traceparent", "00-" + traceID + "-" + spanID + "-01"}, root: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr := New(exp, Config{Propagators: tc.props}, slog.New(slog.DiscardHandler))
			conn := serveEnvoy(t, tr)
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			if _, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, envoyRequest); err != nil {
				t.Fatal(err)
			}
			// Health checks are not traced.
			if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatal(err)
			}
			if err := tr.provider.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			byName := map[string]tracetest.SpanStub{}
			for _, s := range exp.GetSpans() {
				byName[s.Name] = s
			}
			srvSpan, ok := byName["envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"]
			if !ok || len(byName) != 3 {
				t.Fatalf("spans %v: want the server span and its two children, no health check", byName)
			}
			if srvSpan.SpanKind != trace.SpanKindServer {
				t.Errorf("server span kind %v", srvSpan.SpanKind)
			}
			if tc.root {
				if srvSpan.Parent.IsValid() || srvSpan.SpanContext.TraceID().String() == traceID {
					t.Errorf("server span parented to %v in trace %s; want a root", srvSpan.Parent.SpanID(), srvSpan.SpanContext.TraceID())
				}
			} else if got := srvSpan.Parent.TraceID().String(); got != traceID || srvSpan.SpanContext.TraceID().String() != traceID {
				t.Errorf("trace %s (parent's %s), want %s", srvSpan.SpanContext.TraceID(), got, traceID)
			}
			if got := srvSpan.Parent.SpanID().String(); !tc.root && (got != spanID || !srvSpan.Parent.IsRemote()) {
				t.Errorf("parent span %s (remote %v), want the caller's %s", got, srvSpan.Parent.IsRemote(), spanID)
			}
			for _, n := range []string{"floodgate.match", "floodgate.store"} {
				if byName[n].Parent.SpanID() != srvSpan.SpanContext.SpanID() {
					t.Errorf("%s: parent %s, want the server span %s", n, byName[n].Parent.SpanID(), srvSpan.SpanContext.SpanID())
				}
			}
		})
	}
}

func TestUnsampledCallerIsNotTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := New(exp, Config{}, slog.New(slog.DiscardHandler)) // parentbased: the caller's flag decides
	conn := serveEnvoy(t, tr)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	if _, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, envoyRequest); err != nil {
		t.Fatal(err)
	}
	if err := tr.provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(exp.GetSpans()); n != 0 {
		t.Errorf("%d spans of a call whose caller did not sample it", n)
	}
}

func TestOff(t *testing.T) {
	tr, err := Start(context.Background(), Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	unary, stream := tr.ServerInterceptors()
	if tr.On() || tr.Tracer() != nil || unary != nil || stream != nil || tr.Shutdown(context.Background()) != nil {
		t.Errorf("off tracing: on %v, tracer %v, interceptors %v %v", tr.On(), tr.Tracer(), unary != nil, stream != nil)
	}
	var nilTracing *Tracing
	if u, _ := nilTracing.ServerInterceptors(); nilTracing.On() || u != nil {
		t.Error("nil tracing is on")
	}
}

// TestUnreachableCollector checks that decisions do not wait for a
// collector that is down, and that shutdown gives up when its context
// ends.
func TestUnreachableCollector(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there now
	for _, protocol := range []string{ProtocolGRPC, ProtocolHTTP} {
		t.Run(protocol, func(t *testing.T) {
			tr, err := Start(context.Background(), Config{Endpoint: "http://" + addr + "/v1/traces", Protocol: protocol, Sampler: "always_on"}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			client := rlsv3.NewRateLimitServiceClient(serveEnvoy(t, tr))
			start := time.Now()
			for range 200 {
				if _, err := client.ShouldRateLimit(context.Background(), envoyRequest); err != nil {
					t.Fatal(err)
				}
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("200 decisions took %v with the collector down", d)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			start = time.Now()
			_ = tr.Shutdown(ctx) // fails: the spans cannot be sent
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("shutdown took %v past its 500ms context", d)
			}
		})
	}
}
