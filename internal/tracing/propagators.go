package tracing

import (
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/contrib/propagators/b3"
	"go.opentelemetry.io/otel/propagation"
)

// The propagators floodgate reads a caller's trace context with, by their
// OTEL_PROPAGATORS names.
const (
	// PropagatorTraceContext is W3C traceparent and tracestate.
	PropagatorTraceContext = "tracecontext"
	// PropagatorBaggage is W3C baggage.
	PropagatorBaggage = "baggage"
	// PropagatorB3 is Zipkin's B3, single header (b3). Reading accepts the
	// multiple headers too.
	PropagatorB3 = "b3"
	// PropagatorB3Multi is Zipkin's B3, multiple headers (x-b3-*, Envoy's
	// default). Reading accepts the single header too.
	PropagatorB3Multi = "b3multi"
)

// DefaultPropagators are used when OTEL_PROPAGATORS is unset: B3 (Envoy's
// default) and W3C traceparent, which wins when a call carries both.
// The specification's default is tracecontext,baggage; floodgate sits
// behind Envoy, which sends B3 unless told otherwise.
var DefaultPropagators = []string{PropagatorB3Multi, PropagatorTraceContext}

// propagatorsFromEnv is OTEL_PROPAGATORS as a list: nil when unset (the
// defaults), empty for none. Names floodgate does not implement (jaeger,
// xray, ottrace, typos) are logged and left out, as the specification asks
// of unknown values; repeats are dropped.
func propagatorsFromEnv(getenv func(string) string, log *slog.Logger) []string {
	raw := strings.TrimSpace(getenv("OTEL_PROPAGATORS"))
	if raw == "" {
		return nil
	}
	names := []string{}
	for name := range strings.SplitSeq(raw, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case PropagatorTraceContext, PropagatorBaggage, PropagatorB3, PropagatorB3Multi:
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		case "none":
			if raw != "none" {
				log.Warn("tracing: OTEL_PROPAGATORS lists none with others; reading no trace context", "value", raw)
			}
			return []string{}
		case "":
		default:
			log.Warn("tracing: OTEL_PROPAGATORS names a propagator floodgate does not read; ignoring it (known: tracecontext, baggage, b3, b3multi, none)", "name", name)
		}
	}
	return names
}

// Propagator reads a caller's trace context with the named propagators
// (nil means DefaultPropagators); when a call carries several, the last
// named wins, as in OTEL_PROPAGATORS.
func Propagator(names []string) propagation.TextMapPropagator {
	if names == nil {
		names = DefaultPropagators
	}
	ps := make([]propagation.TextMapPropagator, 0, len(names))
	for _, n := range names {
		switch n {
		case PropagatorTraceContext:
			ps = append(ps, propagation.TraceContext{})
		case PropagatorBaggage:
			ps = append(ps, propagation.Baggage{})
		case PropagatorB3:
			ps = append(ps, b3.New(b3.WithInjectEncoding(b3.B3SingleHeader)))
		case PropagatorB3Multi:
			ps = append(ps, b3.New(b3.WithInjectEncoding(b3.B3MultipleHeader)))
		}
	}
	return propagation.NewCompositeTextMapPropagator(ps...)
}

// headerFamily is a kind of trace header the pre-sampling reads.
type headerFamily uint8

const (
	traceparentHeaders headerFamily = iota + 1
	b3Headers
)

// headerFamilies are the trace headers the named propagators read, the
// winning one first (the last named): what callerSampled looks at, in
// its order.
func headerFamilies(names []string) []headerFamily {
	if names == nil {
		names = DefaultPropagators
	}
	var fs []headerFamily
	for _, n := range slices.Backward(names) {
		f := headerFamily(0)
		switch n {
		case PropagatorTraceContext:
			f = traceparentHeaders
		case PropagatorB3, PropagatorB3Multi:
			f = b3Headers
		}
		if f != 0 && !slices.Contains(fs, f) {
			fs = append(fs, f)
		}
	}
	return fs
}
