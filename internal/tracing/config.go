package tracing

import (
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
	// Sampler decides which traces are recorded. nil means the SDK's
	// default, parentbased_always_on.
	Sampler sdktrace.Sampler
	// Resource describes this process on every span: service.name first,
	// then the other attributes.
	Resource []attribute.KeyValue
}

// On reports whether c exports spans.
func (c Config) On() bool { return c.Endpoint != "" }

// FromEnv reads the configuration from the OpenTelemetry SDK's
// environment variables through getenv:
//
//   - OTEL_SDK_DISABLED=true, or OTEL_TRACES_EXPORTER=none, turns tracing off;
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (used as it is) or
//     OTEL_EXPORTER_OTLP_ENDPOINT (to which http/protobuf adds /v1/traces)
//     turns it on; without either tracing is off;
//   - OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL:
//     grpc or http/protobuf (the default, as the specification says);
//   - OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG: always_on,
//     always_off, traceidratio and their parentbased_ forms (default
//     parentbased_always_on); an unknown sampler or a bad ratio is logged
//     and the default used, as the specification asks;
//   - OTEL_SERVICE_NAME (default DefaultServiceName) and
//     OTEL_RESOURCE_ATTRIBUTES (key=value,… percent-encoded).
//
// version becomes service.version. A configuration that cannot export
// (an endpoint that is not a URL, an unknown protocol or exporter) is an
// error: floodgate refuses to start rather than silently trace nothing.
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
	return Config{
		Endpoint: endpoint,
		Protocol: protocol,
		Sampler:  samplerFromEnv(getenv, log),
		Resource: res,
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

// samplerFromEnv is the sampler OTEL_TRACES_SAMPLER names; unknown names
// and bad ratios are logged and fall back to the defaults.
func samplerFromEnv(getenv func(string) string, log *slog.Logger) sdktrace.Sampler {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	ratio := func() sdktrace.Sampler {
		arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return sdktrace.TraceIDRatioBased(1)
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			log.Warn("tracing: OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1; sampling every trace", "value", arg)
			r = 1
		}
		return sdktrace.TraceIDRatioBased(r)
	}
	switch name {
	case "always_on":
		return sdktrace.AlwaysSample()
	case "always_off":
		return sdktrace.NeverSample()
	case "traceidratio":
		return ratio()
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample())
	case "parentbased_traceidratio":
		return sdktrace.ParentBased(ratio())
	case "", "parentbased_always_on":
	default:
		log.Warn("tracing: unknown OTEL_TRACES_SAMPLER; using parentbased_always_on", "value", name)
	}
	return sdktrace.ParentBased(sdktrace.AlwaysSample())
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
	if service == "" {
		service = DefaultServiceName
	}
	out := []attribute.KeyValue{attribute.String("service.name", service)}
	if version != "" {
		out = append(out, attribute.String("service.version", version))
	}
	return append(out, attrs...), nil
}
