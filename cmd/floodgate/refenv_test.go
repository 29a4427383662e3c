package main

import (
	"bytes"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestInvocationArgs: invoked as ratelimit (the reference's binary name,
// a link in the image), floodgate serves from the reference environment;
// under its own name the arguments pass unchanged.
func TestInvocationArgs(t *testing.T) {
	tests := []struct {
		argv []string
		want []string
	}{
		{[]string{"/usr/bin/floodgate", "serve", "--config", "x"}, []string{"serve", "--config", "x"}},
		{[]string{"/bin/ratelimit"}, []string{"serve", referenceEnvFlag}},
		{[]string{"ratelimit", "--log-level", "debug"}, []string{"serve", referenceEnvFlag, "--log-level", "debug"}},
		{[]string{"ratelimit.exe"}, []string{"serve", referenceEnvFlag}},
		{[]string{"/bin/ratelimiter"}, []string{}},
		{nil, nil},
	}
	for _, tc := range tests {
		if got := invocationArgs(tc.argv); !slices.Equal(got, tc.want) {
			t.Errorf("invocationArgs(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestWantsReferenceEnv: serve reads the reference environment when asked
// (--reference-env, taken off the arguments), or when $RUNTIME_ROOT is set
// and no --config is given in any spelling.
func TestWantsReferenceEnv(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		want     bool
		wantArgs []string
	}{
		{"nothing", nil, nil, false, nil},
		{"runtime root", nil, map[string]string{"RUNTIME_ROOT": "/srv"}, true, nil},
		{"runtime root, --config", []string{"--config", "a.yaml"}, map[string]string{"RUNTIME_ROOT": "/srv"}, false, []string{"--config", "a.yaml"}},
		{"runtime root, -config=", []string{"-config=a.yaml"}, map[string]string{"RUNTIME_ROOT": "/srv"}, false, []string{"-config=a.yaml"}},
		{"runtime root, FLOODGATE_CONFIG", nil, map[string]string{"RUNTIME_ROOT": "/srv", "FLOODGATE_CONFIG": "a.yaml"}, false, nil},
		{"runtime root, --config-xds-server", []string{"--config-xds-server=x:1"}, map[string]string{"RUNTIME_ROOT": "/srv"}, true, []string{"--config-xds-server=x:1"}},
		{"runtime root, config after --", []string{"--", "--config"}, map[string]string{"RUNTIME_ROOT": "/srv"}, true, []string{"--", "--config"}},
		{"runtime root, a value spelled config", []string{"--redis-prefix", "config"}, map[string]string{"RUNTIME_ROOT": "/srv"}, true, []string{"--redis-prefix", "config"}},
		{"asked", []string{"--log-level=debug", referenceEnvFlag}, nil, true, []string{"--log-level=debug"}},
		{"asked, with --config", []string{referenceEnvFlag, "--config", "b"}, nil, true, []string{"--config", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, args := wantsReferenceEnv(tc.args, mapEnv(tc.env))
			if got != tc.want || !slices.Equal(args, tc.wantArgs) {
				t.Errorf("wantsReferenceEnv = %v, %q; want %v, %q", got, args, tc.want, tc.wantArgs)
			}
		})
	}
}

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// parseRef translates env and parses the flags it gives, as serve does.
func parseRef(t *testing.T, env map[string]string) (refConfig, serveFlags) {
	t.Helper()
	c, err := translateReference(mapEnv(env))
	if err != nil {
		t.Fatalf("translateReference: %v", err)
	}
	var f serveFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f.register(fs)
	if err := parseFlags(fs, c.args, mapEnv(nil)); err != nil {
		t.Fatalf("the translated flags %q do not parse: %v", c.args, err)
	}
	return c, f
}

// TestReferenceDefaults: with nothing set, the reference's defaults: its
// three ports on every address, WARN logs, the runtime folder, Redis on
// its unix socket with 10 connections, denied hits counted, override
// counters shared, no response headers, no local cache.
func TestReferenceDefaults(t *testing.T) {
	c, f := parseRef(t, nil)
	checks := []struct {
		name      string
		got, want any
	}{
		{"grpc-addr", f.grpcAddr, "0.0.0.0:8081"},
		{"http-addr", f.httpAddr, "0.0.0.0:8080"},
		{"pprof", f.pprof, true},
		{"log-level", f.logLevel, "warn"},
		{"log-format", f.logFormat, "text"},
		{"config", f.configPath, "/srv/runtime_data/current/config"},
		{"redis-url", f.redisConn.URL, "unix:///var/run/nutcracker/ratelimit.sock"},
		{"redis-mode", f.redisConn.Mode, "standalone"},
		{"redis-pool-size", f.redisConn.PoolSize, 10},
		{"deny-cache-size", f.denyCacheSize, 0},
		{"count-denied-hits", f.envoy.CountDeniedHits, true},
		{"share-override-counters", f.envoy.ShareOverrideCounters, true},
		{"quota-mode", f.envoy.QuotaMode, false},
		{"shadow-mode", f.envoy.ShadowMode, false},
		{"response-dynamic-metadata", f.envoy.DynamicMetadata, false},
		{"response-headers", f.headers, false},
		{"headers", c.headers == nil, true},
		{"xds", f.xds.opts.Server, ""},
		{"tls", f.tls.Cert, ""},
		{"ignored", len(c.ignored), 0},
		{"floodgate's own Redis timeout and batching kept", slices.ContainsFunc(c.args, func(a string) bool {
			return strings.HasPrefix(a, "--redis-timeout") || strings.HasPrefix(a, "--redis-batch-max-wait") || strings.HasPrefix(a, "--redis-prefix")
		}), false},
		{"env", len(c.env), 0},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
}

// TestReferenceVariables: each variable lands on its floodgate setting.
func TestReferenceVariables(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		check func(c refConfig, f serveFlags) bool
	}{
		{"ports", map[string]string{"HOST": "127.0.0.1", "PORT": "9080", "GRPC_HOST": "::1", "GRPC_PORT": "9081"},
			func(c refConfig, f serveFlags) bool {
				return f.httpAddr == "127.0.0.1:9080" && f.grpcAddr == "[::1]:9081"
			}},
		{"runtime layout", map[string]string{"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_APPDIRECTORY": "rules"},
			func(c refConfig, f serveFlags) bool { return f.configPath == "/data/ratelimit/rules" }},
		{"runtime root only", map[string]string{"RUNTIME_ROOT": "/data"},
			func(c refConfig, f serveFlags) bool { return f.configPath == "/data/config" }},
		{"log level", map[string]string{"LOG_LEVEL": "debug", "LOG_FORMAT": "json"},
			func(c refConfig, f serveFlags) bool { return f.logLevel == "debug" && f.logFormat == "json" }},
		{"log level trace", map[string]string{"LOG_LEVEL": "TRACE"},
			func(c refConfig, f serveFlags) bool { return f.logLevel == "debug" }},
		{"log level info", map[string]string{"LOG_LEVEL": "Info"},
			func(c refConfig, f serveFlags) bool { return f.logLevel == "info" }},
		{"log level warning", map[string]string{"LOG_LEVEL": "warning"},
			func(c refConfig, f serveFlags) bool { return f.logLevel == "warn" }},
		{"log level fatal", map[string]string{"LOG_LEVEL": "fatal"},
			func(c refConfig, f serveFlags) bool { return f.logLevel == "error" }},
		{"redis tcp", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.ns:6379", "REDIS_POOL_SIZE": "3"},
			func(c refConfig, f serveFlags) bool {
				return f.redisConn.URL == "redis://redis.ns:6379" && f.redisConn.Mode == "standalone" && f.redisConn.PoolSize == 3
			}},
		{"redis auth", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_AUTH": "p@ss"},
			func(c refConfig, f serveFlags) bool { return f.redisConn.URL == "redis://:p%40ss@r:6379" }},
		{"redis user auth", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_AUTH": "u:p"},
			func(c refConfig, f serveFlags) bool { return f.redisConn.URL == "redis://u:p@r:6379" }},
		{"redis unix auth", map[string]string{"REDIS_URL": "/run/r.sock", "REDIS_AUTH": "pw"},
			func(c refConfig, f serveFlags) bool { return f.redisConn.URL == "unix://:pw@/run/r.sock" }},
		{"redis url as URL", map[string]string{"REDIS_URL": "redis://r:1/2"},
			func(c refConfig, f serveFlags) bool { return f.redisConn.URL == "redis://r:1/2" }},
		{"redis tls", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_TLS": "true", "REDIS_TLS_CACERT": "/ca", "REDIS_TLS_CLIENT_CERT": "/c", "REDIS_TLS_CLIENT_KEY": "/k"},
			func(c refConfig, f serveFlags) bool {
				return f.redisConn.URL == "rediss://r:6379" && f.redisConn.TLSCAFile == "/ca" && f.redisConn.TLSCertFile == "/c" && f.redisConn.TLSKeyFile == "/k"
			}},
		{"redis tls files without tls", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_TLS_CACERT": "/ca"},
			func(c refConfig, f serveFlags) bool {
				return f.redisConn.URL == "redis://r:6379" && f.redisConn.TLSCAFile == ""
			}},
		{"redis cluster", map[string]string{"REDIS_TYPE": "CLUSTER", "REDIS_URL": "a:1,b:2, c:3"},
			func(c refConfig, f serveFlags) bool {
				return f.redisConn.URL == "redis://a:1?addr=b%3A2&addr=c%3A3" && f.redisConn.Mode == "cluster"
			}},
		{"redis sentinel", map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "mymaster,s1:26379,s2:26379"},
			func(c refConfig, f serveFlags) bool {
				return f.redisConn.URL == "redis://s1:26379?addr=s2%3A26379" && f.redisConn.Mode == "sentinel" && f.redisConn.SentinelMaster == "mymaster"
			}},
		{"redis timeout", map[string]string{"REDIS_TIMEOUT": "250ms"},
			func(c refConfig, f serveFlags) bool {
				return f.redis.Timeout == 250*time.Millisecond && f.redisConn.DialTimeout == 250*time.Millisecond
			}},
		{"pipeline window", map[string]string{"REDIS_PIPELINE_WINDOW": "300us"},
			func(c refConfig, f serveFlags) bool { return f.redis.BatchMaxWait == 300*time.Microsecond }},
		{"cache key prefix", map[string]string{"CACHE_KEY_PREFIX": "rl_"},
			func(c refConfig, f serveFlags) bool { return f.redis.Prefix == "rl_" }},
		{"local cache", map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "1048576"},
			func(c refConfig, f serveFlags) bool { return f.denyCacheSize == 4096 }},
		{"local cache tiny", map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "10"},
			func(c refConfig, f serveFlags) bool { return f.denyCacheSize == 1 }},
		{"memory backend", map[string]string{"BACKEND_TYPE": "memory", "REDIS_URL": "r:1"},
			func(c refConfig, f serveFlags) bool { return f.redisConn.URL == "" && len(c.notes) == 1 }},
		{"answers", map[string]string{"SHADOW_MODE": "true", "QUOTA_MODE": "1", "RESPONSE_DYNAMIC_METADATA": "T", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true"},
			func(c refConfig, f serveFlags) bool {
				return f.envoy.ShadowMode && f.envoy.QuotaMode && f.envoy.DynamicMetadata && !f.envoy.CountDeniedHits && f.envoy.ShareOverrideCounters
			}},
		{"headers", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true"},
			func(c refConfig, f serveFlags) bool {
				return !f.headers && *c.headers == server.ReferenceHeaders{Limit: "RateLimit-Limit", Remaining: "RateLimit-Remaining", Reset: "RateLimit-Reset"}
			}},
		{"header names", map[string]string{"LIMIT_RESPONSE_HEADERS_ENABLED": "true", "LIMIT_LIMIT_HEADER": "L", "LIMIT_REMAINING_HEADER": "R", "LIMIT_RESET_HEADER": "S"},
			func(c refConfig, f serveFlags) bool {
				return *c.headers == server.ReferenceHeaders{Limit: "L", Remaining: "R", Reset: "S"}
			}},
		{"header names without enabling", map[string]string{"LIMIT_LIMIT_HEADER": "L"},
			func(c refConfig, f serveFlags) bool { return c.headers == nil }},
		{"grpc tls", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/c", "GRPC_SERVER_TLS_KEY": "/k", "GRPC_CLIENT_TLS_CACERT": "/ca"},
			func(c refConfig, f serveFlags) bool {
				return f.tls == auth.TLSFiles{Cert: "/c", Key: "/k", ClientCA: "/ca"}
			}},
		{"grpc tls files without tls", map[string]string{"GRPC_SERVER_TLS_CERT": "/c"},
			func(c refConfig, f serveFlags) bool { return f.tls.Cert == "" }},
		{"per-second redis", map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "r:6379", "REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp",
			"REDIS_PERSECOND_URL": "r2:6380", "REDIS_PERSECOND_AUTH": "pw", "REDIS_PERSECOND_TLS": "true", "REDIS_PERSECOND_POOL_SIZE": "3"},
			func(c refConfig, f serveFlags) bool {
				return f.redisConn.URL == "redis://r:6379" && f.redisPerSecond == redisstore.ClientConfig{URL: "rediss://:pw@r2:6380", Mode: "standalone", PoolSize: 3}
			}},
		{"per-second redis defaults", map[string]string{"REDIS_PERSECOND": "true"},
			func(c refConfig, f serveFlags) bool {
				return f.redisPerSecond == redisstore.ClientConfig{URL: "unix:///var/run/nutcracker/ratelimitpersecond.sock", Mode: "standalone", PoolSize: 10}
			}},
		{"per-second sentinel", map[string]string{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_TYPE": "sentinel", "REDIS_PERSECOND_URL": "m2,s1:26379"},
			func(c refConfig, f serveFlags) bool {
				return f.redisPerSecond == redisstore.ClientConfig{URL: "redis://s1:26379", Mode: "sentinel", SentinelMaster: "m2", PoolSize: 10}
			}},
		{"per-second redis off", map[string]string{"REDIS_PERSECOND": "false", "REDIS_PERSECOND_URL": "r2:6380"},
			func(c refConfig, f serveFlags) bool { return f.redisPerSecond.URL == "" && len(c.ignored) == 0 }},
		{"per-second redis, memory backend", map[string]string{"BACKEND_TYPE": "memory", "REDIS_PERSECOND": "true"},
			func(c refConfig, f serveFlags) bool { return f.redisPerSecond.URL == "" }},
		{"merge domains", map[string]string{"MERGE_DOMAIN_CONFIG": "true"},
			func(c refConfig, f serveFlags) bool { return f.ruleLoad.MergeDomains }},
		{"domains unmerged", map[string]string{"MERGE_DOMAIN_CONFIG": "false"},
			func(c refConfig, f serveFlags) bool { return !f.ruleLoad.MergeDomains && f.configPath != "" }},
		{"xds", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW"},
			func(c refConfig, f serveFlags) bool {
				return f.configPath == "" && f.xds.opts.Server == "localhost:18000" && f.xds.opts.NodeID == "default" &&
					f.xds.opts.BackoffMin == 10*time.Second && f.xds.opts.BackoffMax == time.Minute && !f.xds.tls
			}},
		{"xds settings", map[string]string{"CONFIG_TYPE": "grpc_xds_sotw", "CONFIG_GRPC_XDS_SERVER_URL": "cp:9", "CONFIG_GRPC_XDS_NODE_ID": "n",
			"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/ca", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/c", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/k",
			"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "1s", "XDS_CLIENT_BACKOFF_MAX_INTERVAL": "5s"},
			func(c refConfig, f serveFlags) bool {
				return f.xds.opts.Server == "cp:9" && f.xds.opts.NodeID == "n" && f.xds.tls && f.xds.tlsFiles == auth.ClientFiles{CA: "/ca", Cert: "/c", Key: "/k"} &&
					f.xds.opts.BackoffMin == time.Second && f.xds.opts.BackoffMax == 5*time.Second
			}},
		{"xds backoff over retry interval", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "2s", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "1s"},
			func(c refConfig, f serveFlags) bool { return f.xds.opts.BackoffMin == time.Second }},
		{"xds retry interval", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL": "2s"},
			func(c refConfig, f serveFlags) bool { return f.xds.opts.BackoffMin == 2*time.Second }},
		{"tracing", map[string]string{"TRACING_ENABLED": "true", "TRACING_SERVICE_NAMESPACE": "ns", "TRACING_SERVICE_INSTANCE_ID": "i", "TRACING_SAMPLING_RATE": "0.25"},
			func(c refConfig, f serveFlags) bool {
				return c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://localhost:4318" && c.env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf" &&
					c.env["OTEL_SERVICE_NAME"] == "RateLimit" && c.env["OTEL_TRACES_SAMPLER_ARG"] == "0.25" &&
					c.env["OTEL_RESOURCE_ATTRIBUTES"] == "service.name=RateLimit,service.namespace=ns,service.instance.id=i"
			}},
		{"tracing grpc", map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "grpc", "TRACING_SERVICE_NAME": "rl"},
			func(c refConfig, f serveFlags) bool {
				return c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://localhost:4317" && c.env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "grpc" &&
					c.env["OTEL_SERVICE_NAME"] == "rl" && c.env["OTEL_TRACES_SAMPLER_ARG"] == "1"
			}},
		{"tracing off", map[string]string{"TRACING_SERVICE_NAME": "rl"},
			func(c refConfig, f serveFlags) bool { return len(c.env) == 0 }},
		{"prometheus", map[string]string{"USE_PROMETHEUS": "true"},
			func(c refConfig, f serveFlags) bool {
				return len(c.notes) == 1 && strings.Contains(c.notes[0], "/metrics")
			}},
		{"debug port", map[string]string{"DEBUG_PORT": "6071"},
			func(c refConfig, f serveFlags) bool {
				return len(c.notes) == 1 && strings.Contains(c.notes[0], "DEBUG_")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, f := parseRef(t, tc.env)
			if !tc.check(c, f) {
				t.Errorf("flags %q, notes %q, env %v: not as expected", c.args, c.notes, c.env)
			}
		})
	}
}

// TestReferenceRefused: values the reference itself refuses at startup,
// and settings that would change what is decided, stop floodgate too,
// naming the variable.
func TestReferenceRefused(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GRPC_PORT": "x"}, "$GRPC_PORT"},
		{map[string]string{"SHADOW_MODE": "yes"}, "$SHADOW_MODE"},
		{map[string]string{"REDIS_TIMEOUT": "10"}, "$REDIS_TIMEOUT"},
		{map[string]string{"TRACING_ENABLED": "true", "TRACING_SAMPLING_RATE": "half"}, "$TRACING_SAMPLING_RATE"},
		{map[string]string{"TRACING_ENABLED": "true", "TRACING_EXPORTER_PROTOCOL": "zipkin"}, "$TRACING_EXPORTER_PROTOCOL"},
		{map[string]string{"LOG_LEVEL": "loud"}, "$LOG_LEVEL"},
		{map[string]string{"LOG_FORMAT": "xml"}, "$LOG_FORMAT"},
		{map[string]string{"CONFIG_TYPE": "HTTP"}, "$CONFIG_TYPE"},
		{map[string]string{"MERGE_DOMAIN_CONFIG": "true", "CONFIG_TYPE": "GRPC_XDS_SOTW"}, "$MERGE_DOMAIN_CONFIG=true with $CONFIG_TYPE=GRPC_XDS_SOTW"},
		{map[string]string{"MERGE_DOMAIN_CONFIG": "yes"}, "$MERGE_DOMAIN_CONFIG"},
		{map[string]string{"BACKEND_TYPE": "memcache"}, "$BACKEND_TYPE"},
		{map[string]string{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_TYPE": "ring"}, "$REDIS_PERSECOND_TYPE"},
		{map[string]string{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": "r2"}, "$REDIS_PERSECOND_URL"},
		{map[string]string{"REDIS_PERSECOND": "yes"}, "$REDIS_PERSECOND"},
		{map[string]string{"REDIS_TYPE": "ring"}, "$REDIS_TYPE"},
		{map[string]string{"REDIS_SOCKET_TYPE": "udp"}, "$REDIS_SOCKET_TYPE"},
		{map[string]string{"REDIS_TYPE": "sentinel", "REDIS_URL": "s1:26379"}, "sentinel needs <master name>"},
		{map[string]string{"BACKEND_TYPE": "mem"}, "$BACKEND_TYPE"},
		{map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": ",a:1"}, "$REDIS_URL"},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp"}, "$REDIS_URL"},
		{map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379:1"}, "$REDIS_URL"},
		{map[string]string{"REDIS_TYPE": "cluster", "REDIS_URL": "a:1,b"}, "$REDIS_URL"},
		{map[string]string{"LOCAL_CACHE_SIZE_IN_BYTES": "-1"}, "$LOCAL_CACHE_SIZE_IN_BYTES"},
		{map[string]string{"NEAR_LIMIT_RATIO": "0.9", "PORT": "p", "DEBUG_PORT": "6070"}, "$PORT"},
	}
	for _, tc := range tests {
		_, err := translateReference(mapEnv(tc.env))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.env, err, tc.want)
		}
	}
}

// TestReferenceIgnoredNamed: every unsupported variable that is set is
// named with why; one that only asks for what floodgate does anyway
// (USE_STATSD=false) is not.
func TestReferenceIgnoredNamed(t *testing.T) {
	c, err := translateReference(mapEnv(map[string]string{
		"USE_STATSD": "false", "STATSD_HOST": "statsd", "REDIS_PERSECOND": "true", "REDIS_PERSECOND_TIMEOUT": "1s",
		"GRPC_UDS": "/s", "DISABLE_STATS": "false", "NEAR_LIMIT_RATIO": "0.9", "USE_DOG_STATSD": "maybe",
	}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range c.ignored {
		name, why, ok := strings.Cut(s, " (")
		if !ok || len(why) < 5 {
			t.Errorf("%q gives no reason", s)
		}
		names = append(names, name)
	}
	want := []string{"GRPC_UDS", "STATSD_HOST", "USE_DOG_STATSD", "NEAR_LIMIT_RATIO", "REDIS_PERSECOND_TIMEOUT"}
	slices.Sort(names)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("ignored %q, want %q", names, want)
	}
}

// TestUnknownFloodgateVars: FLOODGATE_* variables no serve flag reads are
// named (a typo would otherwise be silently ignored); those of the
// commands that call a server are not.
func TestUnknownFloodgateVars(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	warnUnknownFloodgateVars([]string{"FLOODGATE_REDIS_URL=x", "FLOODGATE_REDIS_ULR=y", "FLOODGATE_ZZZ", "OTHER=1", "FLOODGATE_ZZZ=2"}, log)
	if got := buf.String(); !strings.Contains(got, "FLOODGATE_REDIS_ULR, FLOODGATE_ZZZ\"") || strings.Contains(got, "FLOODGATE_REDIS_URL,") {
		t.Errorf("log %q: want FLOODGATE_REDIS_ULR and FLOODGATE_ZZZ named once, FLOODGATE_REDIS_URL not", got)
	}
	buf.Reset()
	warnUnknownFloodgateVars([]string{"FLOODGATE_TYPO=1"}, log)
	if !strings.Contains(buf.String(), "FLOODGATE_TYPO") {
		t.Errorf("a single unknown variable is not named: %q", buf.String())
	}
	buf.Reset()
	warnUnknownFloodgateVars([]string{"FLOODGATE_GRPC_ADDR=:1"}, log)
	warnUnknownFloodgateVars([]string{"FLOODGATE_ADDR=127.0.0.1:8081", "FLOODGATE_TOKEN=t"}, log) // check's, in the same shell
	warnUnknownFloodgateVars(nil, log)
	if buf.Len() != 0 {
		t.Errorf("known or no variables logged %q", buf.String())
	}
}

// TestGetenvWith: the extra values fill only what the environment leaves
// empty.
func TestGetenvWith(t *testing.T) {
	get := getenvWith(mapEnv(map[string]string{"A": "env"}), map[string]string{"A": "extra", "B": "extra"})
	if get("A") != "env" || get("B") != "extra" || get("C") != "" {
		t.Errorf("A=%q B=%q C=%q, want env, extra and empty", get("A"), get("B"), get("C"))
	}
}
