package tracing

import (
	"log/slog"
	"slices"
	"strings"

	"go.opentelemetry.io/contrib/propagators/autoprop"
	"go.opentelemetry.io/otel/propagation"
)

// DefaultPropagators are used when OTEL_PROPAGATORS is unset: B3 in its
// multiple headers (Envoy sends B3 unless told otherwise) and W3C
// traceparent, which wins when a call carries both.
var DefaultPropagators = []string{"b3multi", "tracecontext"}

// propagatorsFromEnv is OTEL_PROPAGATORS as a list of the names autoprop
// knows, without repeats: nil when unset, empty for none. Other names are
// logged and left out.
func propagatorsFromEnv(getenv func(string) string, log *slog.Logger) []string {
	raw := strings.TrimSpace(getenv("OTEL_PROPAGATORS"))
	if raw == "" {
		return nil
	}
	names := []string{}
	for name := range strings.SplitSeq(raw, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch _, err := autoprop.TextMapPropagator(name); {
		case name == "" || slices.Contains(names, name):
		case name == "none":
			if raw != "none" {
				log.Warn("tracing: OTEL_PROPAGATORS lists none with others; reading no trace context", "value", raw)
			}
			return []string{}
		case err != nil:
			log.Warn("tracing: OTEL_PROPAGATORS names a propagator floodgate does not read; ignoring it", "name", name)
		default:
			names = append(names, name)
		}
	}
	return names
}

// propagator reads a caller's trace context with the named propagators
// (nil means DefaultPropagators), the last named winning. It also returns
// the trace headers they read, the winning first, for callerSampled.
func propagator(names []string) (propagation.TextMapPropagator, []headerFamily) {
	if names == nil {
		names = DefaultPropagators
	}
	var ps []propagation.TextMapPropagator
	var fs []headerFamily
	for _, n := range names {
		p, err := autoprop.TextMapPropagator(n)
		if err != nil || n == "none" {
			continue
		}
		ps = append(ps, p)
		if n == "baggage" { // carries no trace context: the call stays a root
			continue
		}
		f := familyOf(p.Fields())
		same := func(g headerFamily) bool { return g.kind == f.kind && slices.Equal(g.fields, f.fields) }
		if i := slices.IndexFunc(fs, same); i >= 0 {
			fs = slices.Delete(fs, i, i+1)
		}
		fs = slices.Insert(fs, 0, f)
	}
	return propagation.NewCompositeTextMapPropagator(ps...), fs
}

// headerFamily is a kind of trace header the pre-sampling reads: W3C
// traceparent and B3, whose sampled flag it understands, or the headers
// of another propagator, whose presence leaves the judgement to it.
type headerFamily struct {
	kind   uint8    // traceparentHeaders, b3Headers or otherHeaders
	fields []string // otherHeaders: the header names, lower case
}

const (
	traceparentHeaders = iota + 1
	b3Headers
	otherHeaders
)

// familyOf is the family of a propagator that writes the given headers.
func familyOf(fields []string) headerFamily {
	f := headerFamily{kind: otherHeaders}
	for _, h := range fields {
		h = strings.ToLower(h)
		switch h {
		case "traceparent":
			return headerFamily{kind: traceparentHeaders}
		case "b3", "x-b3-traceid":
			return headerFamily{kind: b3Headers}
		}
		f.fields = append(f.fields, h)
	}
	return f
}
