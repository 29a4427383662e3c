// Package tracing turns OpenTelemetry tracing on from the SDK's standard
// environment variables (FromEnv): an OTLP exporter behind a batch span
// processor, the propagators, and the server spans. Off, it builds nothing
// and the request path pays nothing. Export never blocks a decision: spans
// are dropped when the queue is full, errors logged once per
// ErrorLogInterval.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// InstrumentationName names floodgate's own spans' tracer.
const InstrumentationName = "github.com/floodgate/floodgate"

// Tracing is the process' tracing, on or off. The zero value, and a nil
// *Tracing, is off.
type Tracing struct {
	provider *sdktrace.TracerProvider // nil when off
	spans    *serverSpans             // the server spans of calls, when on
}

// Start builds tracing as cfg says: off when cfg is off, else an OTLP
// exporter to cfg.Endpoint. It does not connect: an unreachable collector
// only shows as logged export errors.
func Start(ctx context.Context, cfg Config, log *slog.Logger) (*Tracing, error) {
	if !cfg.On() {
		return &Tracing{}, nil
	}
	var exp sdktrace.SpanExporter
	var err error
	switch cfg.Protocol {
	case ProtocolGRPC:
		exp, err = otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
	case ProtocolHTTP:
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	default:
		err = fmt.Errorf("unknown protocol %q", cfg.Protocol)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: exporter: %w", err)
	}
	return New(exp, cfg, log), nil
}

// New is tracing on, exporting to exp through a batch span processor,
// sampled and described as cfg says (its Endpoint and Protocol unused).
func New(exp sdktrace.SpanExporter, cfg Config, log *slog.Logger) *Tracing {
	sampler, rootRatio, parentBased := cfg.sampling()
	p := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&loggedExporter{next: exp, errs: newErrorLog(log, "tracing: export failed", time.Now)}),
		sdktrace.WithSampler(presampled{next: sampler}),
		sdktrace.WithResource(resource.NewSchemaless(cfg.Resource...)),
	)
	prop, families := propagator(cfg.Propagators)
	return &Tracing{provider: p, spans: &serverSpans{
		tracer:      p.Tracer(InstrumentationName),
		propagator:  prop,
		headers:     families,
		rootRatio:   rootRatio,
		parentBased: parentBased,
	}}
}

// On reports whether spans are recorded and exported.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Tracer is the tracer of floodgate's own spans, nil when tracing is off
// (so that callers skip even the span lookup).
func (t *Tracing) Tracer() trace.Tracer {
	if !t.On() {
		return nil
	}
	return t.provider.Tracer(InstrumentationName)
}

// ServerInterceptors make each sampled call's server span, the parent of
// floodgate's own, from the caller's trace headers (serverSpans). Health
// checks and reflection are not traced. Both are nil when tracing is off.
func (t *Tracing) ServerInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	if !t.On() {
		return nil, nil
	}
	return t.spans.unary, t.spans.stream
}

// Shutdown flushes the spans not yet exported and stops the exporter,
// giving up when ctx ends. It does nothing when tracing is off.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	if err := t.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}
