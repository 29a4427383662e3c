package tracing

import (
	"context"
	"log/slog"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc/metadata"
)

const (
	sampledTP   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	unsampledTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
)

func TestCallerSampled(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   []string
		want int
	}{
		{"no headers", nil, callerNone},
		{"other headers", []string{"x-request-id", "1"}, callerNone},
		{"traceparent sampled", []string{"traceparent", sampledTP}, callerSampledOrUnsure},
		{"traceparent not sampled", []string{"traceparent", unsampledTP}, callerNotSampled},
		{"traceparent flags 02, not sampled", []string{"traceparent", unsampledTP[:53] + "02"}, callerNotSampled},
		{"traceparent flags 03", []string{"traceparent", unsampledTP[:53] + "03"}, callerSampledOrUnsure},
		{"traceparent malformed", []string{"traceparent", "00-zz"}, callerSampledOrUnsure},
		{"traceparent wins over b3", []string{"traceparent", sampledTP, "b3", "0"}, callerSampledOrUnsure},
		{"b3 deny", []string{"b3", "0"}, callerNotSampled},
		{"b3 single not sampled", []string{"b3", "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0"}, callerNotSampled},
		{"b3 single sampled", []string{"b3", "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1"}, callerSampledOrUnsure},
		{"b3 single deferred", []string{"b3", "4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"}, callerSampledOrUnsure},
		{"b3 multi not sampled", []string{"x-b3-traceid", "4bf92f3577b34da6a3ce929d0e0e4736", "x-b3-spanid", "00f067aa0ba902b7", "x-b3-sampled", "0"}, callerNotSampled},
		{"b3 multi sampled", []string{"x-b3-traceid", "4bf92f3577b34da6a3ce929d0e0e4736", "x-b3-spanid", "00f067aa0ba902b7", "x-b3-sampled", "1"}, callerSampledOrUnsure},
		{"b3 multi deferred", []string{"x-b3-traceid", "4bf92f3577b34da6a3ce929d0e0e4736", "x-b3-spanid", "00f067aa0ba902b7"}, callerSampledOrUnsure},
		{"b3 multi debug wins", []string{"x-b3-traceid", "4bf92f3577b34da6a3ce929d0e0e4736", "x-b3-spanid", "00f067aa0ba902b7", "x-b3-sampled", "0", "x-b3-flags", "1"}, callerSampledOrUnsure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs(tc.md...))
			_, families := propagator(nil)
			if got := callerSampled(grpcHeaders{ctx}, families); got != tc.want {
				t.Errorf("callerSampled = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSampling checks who decides: the server interceptor for roots, the
// caller's flag with a parent-based sampler, the sampler alone else.
func TestSampling(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cfg      Config
		md       []string
		calls    int
		min, max int // server spans exported
	}{
		{name: "default, root", cfg: Config{}, calls: 5, min: 5, max: 5},
		{name: "default, caller not sampled", cfg: Config{}, md: []string{"traceparent", unsampledTP}, calls: 5, min: 0, max: 0},
		{name: "default, b3 caller not sampled", cfg: Config{}, md: []string{"b3", "0"}, calls: 5, min: 0, max: 0},
		{name: "parentbased ratio 0, root", cfg: Config{Sampler: "parentbased_traceidratio", SamplerArg: 0}, calls: 5, min: 0, max: 0},
		{name: "parentbased ratio 0, caller sampled", cfg: Config{Sampler: "parentbased_traceidratio", SamplerArg: 0}, md: []string{"traceparent", sampledTP}, calls: 5, min: 5, max: 5},
		{name: "ratio 0.5, roots", cfg: Config{Sampler: "parentbased_traceidratio", SamplerArg: 0.5}, calls: 400, min: 140, max: 260},
		{name: "traceidratio 0.5, roots: children follow their server span", cfg: Config{Sampler: "traceidratio", SamplerArg: 0.5}, calls: 400, min: 140, max: 260},
		{name: "always_on ignores the caller", cfg: Config{Sampler: "always_on"}, md: []string{"traceparent", unsampledTP}, calls: 5, min: 5, max: 5},
		{name: "always_off ignores the caller", cfg: Config{Sampler: "always_off"}, md: []string{"traceparent", sampledTP}, calls: 5, min: 0, max: 0},
		{name: "parentbased_always_off, root", cfg: Config{Sampler: "parentbased_always_off"}, calls: 5, min: 0, max: 0},
		// OTEL_PROPAGATORS: headers of a propagator not named are not read
		// (the call is a root), and the last named wins.
		{name: "tracecontext only: a b3 unsampled caller is a root", cfg: Config{Propagators: []string{"tracecontext"}}, md: []string{"b3", "0"}, calls: 5, min: 5, max: 5},
		{name: "b3 only: a traceparent unsampled caller is a root", cfg: Config{Propagators: []string{"b3"}}, md: []string{"traceparent", unsampledTP}, calls: 5, min: 5, max: 5},
		{name: "none: every caller is a root", cfg: Config{Propagators: []string{}}, md: []string{"traceparent", unsampledTP, "b3", "0"}, calls: 5, min: 5, max: 5},
		{name: "tracecontext,b3: b3 wins", cfg: Config{Propagators: []string{"tracecontext", "b3"}}, md: []string{"traceparent", sampledTP, "b3", "0"}, calls: 5, min: 0, max: 0},
		{name: "tracecontext,baggage: baggage does not hide an unsampled caller", cfg: Config{Propagators: []string{"tracecontext", "baggage"}}, md: []string{"traceparent", unsampledTP, "baggage", "k=v"}, calls: 5, min: 0, max: 0},
		{name: "jaeger,tracecontext: an unsampled jaeger caller is judged by its propagator", cfg: Config{Propagators: []string{"jaeger", "tracecontext"}}, md: []string{"uber-trace-id", "4bf92f3577b34da6a3ce929d0e0e4736:00f067aa0ba902b7:0:0"}, calls: 5, min: 0, max: 0},
		{name: "b3,tracecontext: traceparent wins", cfg: Config{Propagators: []string{"b3", "tracecontext"}}, md: []string{"traceparent", sampledTP, "b3", "0"}, calls: 5, min: 5, max: 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tr := New(exp, tc.cfg, slog.New(slog.DiscardHandler))
			client := rlsv3.NewRateLimitServiceClient(serveEnvoy(t, tr))
			ctx := metadata.AppendToOutgoingContext(context.Background(), tc.md...)
			for range tc.calls {
				if _, err := client.ShouldRateLimit(ctx, envoyRequest); err != nil {
					t.Fatal(err)
				}
			}
			if err := tr.provider.ForceFlush(context.Background()); err != nil {
				t.Fatal(err)
			}
			servers, children := 0, 0
			for _, s := range exp.GetSpans() {
				if s.Name == "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit" {
					servers++
				} else {
					children++
				}
			}
			if servers < tc.min || servers > tc.max || children != 2*servers {
				t.Errorf("%d server spans and %d children of %d calls, want %d to %d server spans with two children each", servers, children, tc.calls, tc.min, tc.max)
			}
		})
	}
}
