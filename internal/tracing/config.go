package tracing

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Protocols of the OTLP exporter (OTEL_EXPORTER_OTLP_PROTOCOL).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// DefaultServiceName is the service.name of floodgate's spans unless
// OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES names another.
const DefaultServiceName = "floodgate"

// Config is what to trace and where to send it. The zero value traces
// nothing. FromEnv reads it from the OpenTelemetry SDK's environment
// variables.
type Config struct {
	// Endpoint is the URL spans are exported to (for http/protobuf the
	// whole URL, with its /v1/traces path). "" turns tracing off.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP.
	Protocol string
	// Sampler is OTEL_TRACES_SAMPLER's name: always_on, always_off,
	// traceidratio or one of them prefixed by parentbased_. "" means
	// parentbased_always_on.
	Sampler string
	// SamplerArg is the ratio of the traceidratio samplers, from 0 to 1.
	SamplerArg float64
	// Resource describes this process on every span: service.name first,
	// then the other attributes.
	Resource []attribute.KeyValue
	// Propagators name how a caller's trace context is read, by
	// OTEL_PROPAGATORS' names, the last winning when a call carries
	// several. nil means DefaultPropagators; empty reads none.
	Propagators []string
}

// On reports whether c exports spans.
func (c Config) On() bool { return c.Endpoint != "" }

// FromEnv reads the configuration from the OpenTelemetry SDK's
// environment variables through getenv (docs/metrics.md lists them);
// version becomes service.version. Unknown samplers, bad ratios and
// unknown propagators are logged and ignored, as the specification asks;
// a configuration that cannot export (an endpoint that is not a URL, an
// unknown protocol or exporter) is an error, so floodgate refuses to start
// rather than silently trace nothing.
func FromEnv(getenv func(string) string, version string, log *slog.Logger) (Config, error) {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return Config{}, nil
	}
	switch exp := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return Config{}, nil
	default:
		return Config{}, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: floodgate exports traces with otlp (or none)", exp)
	}
	protocol, err := protocolFromEnv(getenv)
	if err != nil {
		return Config{}, err
	}
	endpoint, err := endpointFromEnv(getenv, protocol)
	if err != nil || endpoint == "" {
		return Config{}, err
	}
	res, err := resourceFromEnv(getenv, version)
	if err != nil {
		return Config{}, err
	}
	sampler, arg := samplerFromEnv(getenv, log)
	return Config{
		Endpoint:    endpoint,
		Protocol:    protocol,
		Sampler:     sampler,
		SamplerArg:  arg,
		Resource:    res,
		Propagators: propagatorsFromEnv(getenv, log),
	}, nil
}

func protocolFromEnv(getenv func(string) string) (string, error) {
	name, p := "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		name, p = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch p = strings.TrimSpace(p); p {
	case "":
		return ProtocolHTTP, nil
	case ProtocolGRPC, ProtocolHTTP:
		return p, nil
	}
	return "", fmt.Errorf("%s=%q: want grpc or http/protobuf", name, p)
}

// endpointFromEnv is the URL to export to, "" when neither endpoint
// variable is set.
func endpointFromEnv(getenv func(string) string, protocol string) (string, error) {
	name, raw := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
	perSignal := raw != ""
	if !perSignal {
		name, raw = "OTEL_EXPORTER_OTLP_ENDPOINT", strings.TrimSpace(getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s=%q: want a URL such as http://127.0.0.1:4317 (grpc) or http://127.0.0.1:4318 (http/protobuf)", name, raw)
	}
	if protocol == ProtocolHTTP && !perSignal {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String(), nil
}

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names and its ratio;
// unknown names and bad ratios are logged and fall back to the defaults.
func samplerFromEnv(getenv func(string) string, log *slog.Logger) (string, float64) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	switch name {
	case "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return name, 1
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return name, 1
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			log.Warn("tracing: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1; sampling every trace", "value", arg)
			r = 1
		}
		return name, r
	case "":
	default:
		log.Warn("tracing: unknown OTEL_TRACES_SAMPLER; using parentbased_always_on", "value", name)
	}
	return "parentbased_always_on", 1
}

// sampling is how c samples: the SDK sampler of the calls that carry a
// trace context, the ratio of those that do not (roots), which the server
// interceptor decides before any span work, and whether the caller's
// sampled flag decides.
func (c Config) sampling() (_ sdktrace.Sampler, rootRatio float64, parentBased bool) {
	name, parentBased := strings.CutPrefix(c.Sampler, "parentbased_")
	var root sdktrace.Sampler
	ratio := 1.0
	switch name {
	case "always_off":
		root, ratio = sdktrace.NeverSample(), 0
	case "traceidratio":
		root, ratio = sdktrace.TraceIDRatioBased(c.SamplerArg), c.SamplerArg
	default: // always_on, and "" (parentbased_always_on)
		root = sdktrace.AlwaysSample()
		parentBased = parentBased || name == ""
	}
	if parentBased {
		return sdktrace.ParentBased(root), ratio, true
	}
	return root, ratio, false
}

// resourceFromEnv is service.name, service.version and the attributes of
// OTEL_RESOURCE_ATTRIBUTES.
func resourceFromEnv(getenv func(string) string, version string) ([]attribute.KeyValue, error) {
	service := strings.TrimSpace(getenv("OTEL_SERVICE_NAME"))
	var attrs []attribute.KeyValue
	if raw := strings.TrimSpace(getenv("OTEL_RESOURCE_ATTRIBUTES")); raw != "" {
		for pair := range strings.SplitSeq(raw, ",") {
			k, v, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			if !ok || k == "" {
				return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", pair)
			}
			val, err := url.PathUnescape(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %s: %w", k, err)
			}
			if k == "service.name" {
				if service == "" { // OTEL_SERVICE_NAME wins
					service = val
				}
				continue
			}
			attrs = append(attrs, attribute.String(k, val))
		}
	}
	out := []attribute.KeyValue{attribute.String("service.name", cmp.Or(service, DefaultServiceName))}
	if version != "" {
		out = append(out, attribute.String("service.version", version))
	}
	return append(out, attrs...), nil
}
