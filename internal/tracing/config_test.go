package tracing

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestFromEnvEndpointAndProtocol(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      []string
		endpoint string // "" means off
		protocol string
		err      string
	}{
		{name: "nothing set: off"},
		{name: "only a protocol: off", env: []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}},
		{name: "base endpoint, default protocol http/protobuf adds the signal path",
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, endpoint: "http://127.0.0.1:4318/v1/traces", protocol: ProtocolHTTP},
		{name: "base endpoint with a path",
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318/otlp/"}, endpoint: "https://collector:4318/otlp/v1/traces", protocol: ProtocolHTTP},
		{name: "base endpoint over grpc is used as is",
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, endpoint: "http://127.0.0.1:4317", protocol: ProtocolGRPC},
		{name: "traces endpoint wins and is used as is",
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://b:4318/custom"}, endpoint: "http://b:4318/custom", protocol: ProtocolHTTP},
		{name: "traces protocol wins",
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"}, endpoint: "http://a:4317", protocol: ProtocolGRPC},
		{name: "disabled SDK", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_SDK_DISABLED", "TRUE"}},
		{name: "exporter none", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_TRACES_EXPORTER", "none"}},
		{name: "SDK_DISABLED=false keeps it on",
			env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_SDK_DISABLED", "false"}, endpoint: "http://a:4318/v1/traces", protocol: ProtocolHTTP},
		{name: "unknown exporter", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_TRACES_EXPORTER", "zipkin"}, err: "OTEL_TRACES_EXPORTER"},
		{name: "unknown protocol", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, err: `OTEL_EXPORTER_OTLP_PROTOCOL="http/json"`},
		{name: "endpoint without a scheme", env: []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4317"}, err: "want a URL"},
		{name: "bad traces endpoint", env: []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "ftp://x"}, err: "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := FromEnv(envOf(tc.env...), "v1", slog.New(slog.DiscardHandler))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Endpoint != tc.endpoint || cfg.On() != (tc.endpoint != "") {
				t.Errorf("endpoint %q (on %v), want %q", cfg.Endpoint, cfg.On(), tc.endpoint)
			}
			if tc.endpoint != "" && cfg.Protocol != tc.protocol {
				t.Errorf("protocol %q, want %q", cfg.Protocol, tc.protocol)
			}
		})
	}
}

func TestFromEnvSampler(t *testing.T) {
	for _, tc := range []struct {
		sampler, arg string
		want         string // the sampler's Description
		warn         bool
	}{
		{want: "ParentBased{root:AlwaysOnSampler,"},
		{sampler: "always_on", want: "AlwaysOnSampler"},
		{sampler: "always_off", want: "AlwaysOffSampler"},
		{sampler: "traceidratio", arg: "0.01", want: "TraceIDRatioBased{0.01}"},
		{sampler: "traceidratio", want: "TraceIDRatioBased{1}"},
		{sampler: "parentbased_traceidratio", arg: "0.25", want: "ParentBased{root:TraceIDRatioBased{0.25},"},
		{sampler: "parentbased_always_off", want: "ParentBased{root:AlwaysOffSampler,"},
		{sampler: "parentbased_traceidratio", arg: "2", want: "ParentBased{root:TraceIDRatioBased{1},", warn: true},
		{sampler: "traceidratio", arg: "half", want: "TraceIDRatioBased{1}", warn: true},
		{sampler: "jaeger_remote", want: "ParentBased{root:AlwaysOnSampler,", warn: true},
	} {
		t.Run(tc.sampler+"/"+tc.arg, func(t *testing.T) {
			var logs bytes.Buffer
			cfg, err := FromEnv(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_TRACES_SAMPLER", tc.sampler, "OTEL_TRACES_SAMPLER_ARG", tc.arg), "", slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			sampler, _, _ := cfg.sampling()
			if d := sampler.Description(); !strings.HasPrefix(d, tc.want) {
				t.Errorf("sampler %s, want %s…", d, tc.want)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
}

func TestFromEnvResource(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string // the attributes as k=v,k=v
		err  string
	}{
		{name: "defaults", want: "service.name=floodgate,service.version=v1.2.3"},
		{name: "service name", env: []string{"OTEL_SERVICE_NAME", "edge-limits"}, want: "service.name=edge-limits,service.version=v1.2.3"},
		{name: "attributes, percent-decoded, service.name among them",
			env:  []string{"OTEL_RESOURCE_ATTRIBUTES", "service.name=rl, deployment.environment=prod,team=a%2Cb"},
			want: "service.name=rl,service.version=v1.2.3,deployment.environment=prod,team=a,b"},
		{name: "OTEL_SERVICE_NAME wins over the attribute",
			env:  []string{"OTEL_SERVICE_NAME", "named", "OTEL_RESOURCE_ATTRIBUTES", "service.name=rl"},
			want: "service.name=named,service.version=v1.2.3"},
		{name: "not key=value", env: []string{"OTEL_RESOURCE_ATTRIBUTES", "a=1,oops"}, err: `"oops" is not key=value`},
		{name: "bad escape", env: []string{"OTEL_RESOURCE_ATTRIBUTES", "a=%zz"}, err: "OTEL_RESOURCE_ATTRIBUTES: a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"}, tc.env...)
			cfg, err := FromEnv(envOf(env...), "v1.2.3", slog.New(slog.DiscardHandler))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, kv := range cfg.Resource {
				parts = append(parts, string(kv.Key)+"="+kv.Value.String())
			}
			if got := strings.Join(parts, ","); got != tc.want {
				t.Errorf("resource %s, want %s", got, tc.want)
			}
		})
	}
}

func TestFromEnvPropagators(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  []string // nil: the defaults
		warn  bool
	}{
		{value: "", want: nil},
		{value: "tracecontext,baggage", want: []string{"tracecontext", "baggage"}},
		{value: " B3Multi , tracecontext,b3multi", want: []string{"b3multi", "tracecontext"}},
		{value: "none", want: []string{}},
		{value: "b3,none", want: []string{}, warn: true},
		{value: "jaeger,tracecontext", want: []string{"jaeger", "tracecontext"}},
		{value: "zipkin,tracecontext", want: []string{"tracecontext"}, warn: true},
		{value: "opencensus", want: []string{}, warn: true},
	} {
		t.Run(tc.value, func(t *testing.T) {
			var logs bytes.Buffer
			cfg, err := FromEnv(envOf("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318", "OTEL_PROPAGATORS", tc.value), "", slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			if (cfg.Propagators == nil) != (tc.want == nil) || !slices.Equal(cfg.Propagators, tc.want) {
				t.Errorf("propagators %#v, want %#v", cfg.Propagators, tc.want)
			}
			if warned := strings.Contains(logs.String(), "level=WARN"); warned != tc.warn {
				t.Errorf("warned %v, want %v: %s", warned, tc.warn, logs.String())
			}
		})
	}
}
