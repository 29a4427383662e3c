package tracing

import (
	"context"
	"log/slog"
	"testing"

	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fakeStream is a server stream with a context and nothing else.
type fakeStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s fakeStream) Context() context.Context { return s.ctx }

func TestServerSpanStatus(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		code   int64
		status otelcodes.Code // only the server's failures are errors
		stream bool
	}{
		{name: "ok", code: 0, status: otelcodes.Unset},
		{name: "over the limit is no error", err: status.Error(codes.InvalidArgument, "cost"), code: 3, status: otelcodes.Unset},
		{name: "store down", err: status.Error(codes.Unavailable, "redis"), code: 14, status: otelcodes.Error},
		{name: "internal", err: status.Error(codes.Internal, "bug"), code: 13, status: otelcodes.Error},
		{name: "stream ok", code: 0, status: otelcodes.Unset, stream: true},
		{name: "stream canceled", err: status.Error(codes.Canceled, "gone"), code: 1, status: otelcodes.Unset, stream: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr := New(exp, Config{}, slog.New(slog.DiscardHandler))
			unary, stream := tr.ServerInterceptors()
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("traceparent", sampledTP))
			var inHandler trace.SpanContext
			if tc.stream {
				info := &grpc.StreamServerInfo{FullMethod: "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"}
				_ = stream(nil, fakeStream{ctx: ctx}, info, func(_ any, ss grpc.ServerStream) error {
					inHandler = trace.SpanContextFromContext(ss.Context())
					return tc.err
				})
			} else {
				info := &grpc.UnaryServerInfo{FullMethod: "/floodgate.v1.RateLimiter/Check"}
				_, _ = unary(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
					inHandler = trace.SpanContextFromContext(ctx)
					return nil, tc.err
				})
			}
			if err := tr.provider.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if s.SpanContext.SpanID() != inHandler.SpanID() || s.SpanKind != trace.SpanKindServer {
				t.Errorf("the handler's span %v, want the server span %v (kind %v)", inHandler.SpanID(), s.SpanContext.SpanID(), s.SpanKind)
			}
			if s.Parent.SpanID().String() != "00f067aa0ba902b7" {
				t.Errorf("parent %v, want the traceparent's", s.Parent.SpanID())
			}
			var code int64 = -1
			for _, kv := range s.Attributes {
				if kv.Key == "rpc.grpc.status_code" {
					code = kv.Value.AsInt64()
				}
			}
			if code != tc.code || s.Status.Code != tc.status {
				t.Errorf("status code %d, span status %v; want %d, %v", code, s.Status.Code, tc.code, tc.status)
			}
		})
	}
}

func TestHealthAndReflectionNotTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tr := New(exp, Config{Sampler: "always_on"}, slog.New(slog.DiscardHandler))
	unary, stream := tr.ServerInterceptors()
	ctx := context.Background()
	_, _ = unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/grpc.health.v1.Health/Check"}, func(context.Context, any) (any, error) { return nil, nil })
	_ = stream(nil, fakeStream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"}, func(any, grpc.ServerStream) error { return nil })
	_, _ = unary(ctx, nil, &grpc.UnaryServerInfo{FullMethod: "/floodgate.v1.RateLimiter/Check"}, func(context.Context, any) (any, error) { return nil, nil })
	if err := tr.provider.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if spans := exp.GetSpans(); len(spans) != 1 || spans[0].Name != "floodgate.v1.RateLimiter/Check" {
		t.Errorf("spans %v, want Check's only", spans)
	}
}
