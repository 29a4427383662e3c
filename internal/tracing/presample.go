package tracing

import (
	"strings"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// What a call's trace headers say of its sampling.
const (
	callerNone            = iota // no trace header: a root
	callerNotSampled             // the caller did not sample it
	callerSampledOrUnsure        // sampled, deferred, or headers the propagators will judge
)

// callerSampled reads the sampled flag of the call's trace headers of the
// families given, the winning first, without copying the metadata.
// Anything it does not fully understand, and other propagators' headers,
// are callerSampledOrUnsure, left to the propagators.
func callerSampled[H headers](h H, families []headerFamily) int {
	for _, f := range families {
		var got int
		switch f.kind {
		case traceparentHeaders:
			got = traceparentSampled(h)
		case b3Headers:
			got = b3Sampled(h)
		default:
			for _, name := range f.fields {
				if len(h.values(name)) > 0 {
					got = callerSampledOrUnsure
					break
				}
			}
		}
		if got != callerNone {
			return got
		}
	}
	return callerNone
}

func traceparentSampled[H headers](h H) int {
	v := h.values("traceparent")
	if len(v) == 0 {
		return callerNone
	}
	// version-traceid-spanid-flags: 2+1+32+1+16+1+2 characters.
	if tp := v[0]; len(tp) == 55 && tp[52] == '-' && tp[54] != '-' {
		if f := tp[54]; f == '0' || f == '2' || f == '4' || f == '6' || f == '8' || f == 'a' || f == 'c' || f == 'e' {
			return callerNotSampled
		}
	}
	return callerSampledOrUnsure
}

func b3Sampled[H headers](h H) int {
	if v := h.values("b3"); len(v) > 0 {
		// traceid-spanid[-sampled[-parentspanid]], or the sampled state alone.
		b := v[0]
		if b == "0" {
			return callerNotSampled
		}
		if parts := strings.SplitN(b, "-", 4); len(parts) >= 3 && parts[2] == "0" {
			return callerNotSampled
		}
		return callerSampledOrUnsure
	}
	if len(h.values("x-b3-traceid")) > 0 {
		if s := h.values("x-b3-sampled"); len(s) > 0 && (s[0] == "0" || s[0] == "false") &&
			len(h.values("x-b3-flags")) == 0 {
			return callerNotSampled
		}
		return callerSampledOrUnsure
	}
	return callerNone
}

// headers are a call's trace headers: gRPC metadata or HTTP headers.
// A type parameter rather than an interface value, so that reading them
// allocates nothing.
type headers interface {
	// values are the values of the header named key (lower case).
	values(key string) []string
	// carrier is the headers for the propagators.
	carrier() propagation.TextMapCarrier
}

// traced reports whether a call of the method gets a span: not health
// checks (probes would flood the traces) nor reflection.
func traced(fullMethod string) bool {
	return !strings.HasPrefix(fullMethod, "/grpc.health.v1.Health/") && !strings.HasPrefix(fullMethod, "/grpc.reflection.")
}

// presampledKey marks the context of a root call that the server
// interceptor sampled, for presampled.ShouldSample.
type presampledKey struct{}

// presampled samples the root calls the server interceptor sampled and
// every span under them (a sampler that is not parent-based would judge
// them anew), and asks next about every other span.
type presampled struct{ next sdktrace.Sampler }

// ShouldSample implements sdktrace.Sampler.
func (s presampled) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if p.ParentContext.Value(presampledKey{}) != nil {
		return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
	}
	return s.next.ShouldSample(p)
}

// Description implements sdktrace.Sampler.
func (s presampled) Description() string { return s.next.Description() }
