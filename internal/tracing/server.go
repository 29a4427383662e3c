package tracing

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// serverSpans makes the server span of each sampled gRPC call, named and
// described as otelgrpc's, the parent of floodgate's own spans. It decides
// before any span work (spanParent), where otelgrpc's stats handler does
// that work on every call.
type serverSpans struct {
	tracer      trace.Tracer
	propagator  propagation.TextMapPropagator
	headers     []headerFamily // the propagators' headers, the winning first
	rootRatio   float64
	parentBased bool
}

// start starts the call's server span, or returns ctx and nil when the
// call is not sampled.
func (s *serverSpans) start(ctx context.Context, fullMethod string) (context.Context, trace.Span) {
	if !traced(fullMethod) {
		return ctx, nil
	}
	name := strings.TrimPrefix(fullMethod, "/")
	service, method, _ := strings.Cut(name, "/")
	return startSpan(s, ctx, grpcHeaders{ctx}, name,
		attribute.String("rpc.system", "grpc"),
		attribute.String("rpc.service", service),
		attribute.String("rpc.method", method),
	)
}

// startSpan starts a call's server span, named name, in the context
// spanParent gives, or returns nil when the call is not sampled.
func startSpan[H headers](s *serverSpans, ctx context.Context, h H, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	ctx, ok := spanParent(s, ctx, h)
	if !ok {
		return ctx, nil
	}
	ctx, span := s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	if !span.IsRecording() { // a sampler said no after all
		span.End()
		return ctx, nil
	}
	return ctx, span
}

// spanParent decides whether a call with trace headers h gets a server
// span and returns the context to start it in: a root is sampled with one
// random number against the root ratio; with a parent-based sampler, a
// call whose caller did not sample it is not traced; the others have
// their trace context extracted by the propagators.
func spanParent[H headers](s *serverSpans, ctx context.Context, h H) (context.Context, bool) {
	switch callerSampled(h, s.headers) {
	case callerNone:
		if s.rootRatio <= 0 || (s.rootRatio < 1 && rand.Float64() >= s.rootRatio) {
			return ctx, false
		}
		return context.WithValue(ctx, presampledKey{}, true), true
	case callerNotSampled:
		if s.parentBased {
			return ctx, false
		}
	}
	return s.propagator.Extract(ctx, h.carrier()), true
}

// end ends span with the call's status. As the semantic conventions say
// for servers, only the codes that mean the server failed mark it an error.
func end(span trace.Span, err error) {
	code := status.Code(err)
	span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
	switch code {
	case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
		span.SetStatus(otelcodes.Error, status.Convert(err).Message())
	}
	span.End()
}

func (s *serverSpans) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, span := s.start(ctx, info.FullMethod)
	if span == nil {
		return handler(ctx, req)
	}
	resp, err := handler(ctx, req)
	end(span, err)
	return resp, err
}

func (s *serverSpans) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, span := s.start(ss.Context(), info.FullMethod)
	if span == nil {
		return handler(srv, ss)
	}
	err := handler(srv, &middleware.WrappedServerStream{ServerStream: ss, WrappedContext: ctx})
	end(span, err)
	return err
}

// grpcHeaders are a gRPC call's trace headers, read from its incoming
// metadata without copying it.
type grpcHeaders struct{ ctx context.Context }

func (h grpcHeaders) values(key string) []string {
	return metadata.ValueFromIncomingContext(h.ctx, key)
}

func (h grpcHeaders) carrier() propagation.TextMapCarrier {
	md, _ := metadata.FromIncomingContext(h.ctx)
	return metadataCarrier(md)
}

// metadataCarrier reads a call's metadata for the propagators.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string { return slices.Collect(maps.Keys(c)) }
