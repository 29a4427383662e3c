package main

import (
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/redisstore"
)

// The reference environment: envoyproxy/ratelimit is configured only by
// environment variables. serve reads them instead of its flags (turned
// into serve flags, with the reference's defaults) when it starts without
// --config while $RUNTIME_ROOT is set, with --reference-env, or when the
// binary is invoked as ratelimit.

// referenceName is the reference's binary name: invoked under it,
// floodgate serves from the reference environment.
const referenceName = "ratelimit"

// referenceEnvFlag asks serve to read the reference environment. It is
// taken off the arguments before the flags are parsed.
const referenceEnvFlag = "--reference-env"

// invocationArgs are the arguments run sees: argv without the program
// name, or, invoked as ratelimit, serve in the reference environment
// followed by any arguments given.
func invocationArgs(argv []string) []string {
	if len(argv) == 0 {
		return nil
	}
	name := strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	if name != referenceName {
		return argv[1:]
	}
	return append([]string{"serve", referenceEnvFlag}, argv[1:]...)
}

// wantsReferenceEnv reports whether serve reads the reference environment
// and returns args without referenceEnvFlag: asked for, or no --config
// given (on the command line or as $FLOODGATE_CONFIG) while $RUNTIME_ROOT
// is set.
func wantsReferenceEnv(args []string, getenv func(string) string) (bool, []string) {
	rest := slices.DeleteFunc(slices.Clone(args), func(a string) bool { return a == referenceEnvFlag })
	if len(rest) != len(args) {
		return true, rest
	}
	if getenv("RUNTIME_ROOT") == "" || getenv(envName("config")) != "" {
		return false, args
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && name == "config" {
			return false, args
		}
	}
	return true, args
}

// refConfig is the reference environment turned into floodgate's terms.
type refConfig struct {
	args    []string                 // serve flags, before the command line's own
	env     map[string]string        // OTEL_* variables the tracing reads, when not set
	notes   []string                 // how a setting was read where it is not one flag
	ignored []string                 // reference variables set but not supported, with why
	headers *server.ReferenceHeaders // the reference's response headers; nil: off
}

// envReader reads the reference's variables with its defaults and parsing
// (strconv for booleans and numbers, time.ParseDuration for durations; a
// bad value stops the reference at startup, and floodgate too).
type envReader struct {
	getenv func(string) string
	errs   []string
}

func (r *envReader) str(name, def string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	return def
}

func (r *envReader) set(name string) bool { return r.getenv(name) != "" }

func (r *envReader) boolean(name string, def bool) bool {
	return parsed(r, name, def, strconv.ParseBool, "a boolean")
}

func (r *envReader) integer(name string, def int) int {
	return parsed(r, name, def, strconv.Atoi, "an integer")
}

func (r *envReader) duration(name string, def time.Duration) time.Duration {
	return parsed(r, name, def, time.ParseDuration, "a duration")
}

// parsed is the variable name read by parse, def when it is not set; a
// value parse refuses is recorded as not being what (and gives parse's
// result, as the reference's own parsing would).
func parsed[T any](r *envReader, name string, def T, parse func(string) (T, error), what string) T {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	x, err := parse(v)
	if msg := fmt.Sprintf("$%s=%q is not %s", name, v, what); err != nil && !slices.Contains(r.errs, msg) {
		r.errs = append(r.errs, msg) // once, however often it is read
	}
	return x
}

// translateReference reads the reference environment. An error names
// every variable whose value the reference itself would refuse, or that
// floodgate cannot honour without changing what is decided.
func translateReference(getenv func(string) string) (refConfig, error) {
	r := &envReader{getenv: getenv}
	c := refConfig{env: map[string]string{}}
	flag := func(name, value string) { c.args = append(c.args, "--"+name+"="+value) }

	// The reference's debug port has no listener of its own here.
	flag("grpc-addr", net.JoinHostPort(r.str("GRPC_HOST", "0.0.0.0"), strconv.Itoa(r.integer("GRPC_PORT", 8081))))
	flag("http-addr", net.JoinHostPort(r.str("HOST", "0.0.0.0"), strconv.Itoa(r.integer("PORT", 8080))))
	flag("pprof", "true")
	if r.set("DEBUG_HOST") || r.set("DEBUG_PORT") {
		c.notes = append(c.notes, "DEBUG_HOST/DEBUG_PORT: pprof (/debug/pprof/) and the config dump (/debug/config) are on the HTTP port")
	}

	level, ok := refLogLevels[strings.ToLower(r.str("LOG_LEVEL", "WARN"))]
	if !ok {
		r.errs = append(r.errs, fmt.Sprintf("$LOG_LEVEL=%q: trace, debug, info, warn, error, fatal or panic", r.getenv("LOG_LEVEL")))
	}
	flag("log-level", level)
	format := strings.ToLower(r.str("LOG_FORMAT", "text"))
	if format != "text" && format != "json" {
		r.errs = append(r.errs, fmt.Sprintf("$LOG_FORMAT=%q: text or json", format))
	}
	flag("log-format", format)

	// Where the rules come from.
	merge := r.boolean("MERGE_DOMAIN_CONFIG", false)
	switch ct := r.str("CONFIG_TYPE", "FILE"); strings.ToUpper(ct) {
	case "FILE":
		// $RUNTIME_ROOT/$RUNTIME_SUBDIRECTORY/$RUNTIME_APPDIRECTORY
		flag("config", filepath.Join(r.str("RUNTIME_ROOT", "/srv/runtime_data/current"), r.str("RUNTIME_SUBDIRECTORY", ""), r.str("RUNTIME_APPDIRECTORY", "config")))
		flag("config-all-files", "true")
		flag("merge-domains", strconv.FormatBool(merge))
	case "GRPC_XDS_SOTW":
		refXDS(r, flag)
		if merge {
			r.errs = append(r.errs, "$MERGE_DOMAIN_CONFIG=true with $CONFIG_TYPE=GRPC_XDS_SOTW is not supported: xDS resources defining one domain are refused (merging applies to config files)")
		}
	default:
		r.errs = append(r.errs, fmt.Sprintf("$CONFIG_TYPE=%q: FILE or GRPC_XDS_SOTW", ct))
	}

	// The store.
	refStore(r, &c, flag)

	flag("shadow-mode", strconv.FormatBool(r.boolean("SHADOW_MODE", false)))
	flag("quota-mode", strconv.FormatBool(r.boolean("QUOTA_MODE", false)))
	flag("response-dynamic-metadata", strconv.FormatBool(r.boolean("RESPONSE_DYNAMIC_METADATA", false)))
	flag("count-denied-hits", strconv.FormatBool(!r.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", false)))
	flag("share-override-counters", "true")
	flag("response-headers", "false") // floodgate's own set; the reference's below
	if r.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", false) {
		c.headers = &server.ReferenceHeaders{
			Limit:     r.str("LIMIT_LIMIT_HEADER", "RateLimit-Limit"),
			Remaining: r.str("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
			Reset:     r.str("LIMIT_RESET_HEADER", "RateLimit-Reset"),
		}
	}

	// gRPC server TLS.
	if r.boolean("GRPC_SERVER_USE_TLS", false) {
		flag("tls-cert", r.str("GRPC_SERVER_TLS_CERT", ""))
		flag("tls-key", r.str("GRPC_SERVER_TLS_KEY", ""))
		flagsOf(r, flag, "GRPC_CLIENT_TLS_CACERT", "tls-client-ca")
	}

	refTracing(r, &c)
	if r.boolean("USE_PROMETHEUS", false) { // Prometheus is floodgate's only exporter, always on
		c.notes = append(c.notes, "USE_PROMETHEUS: Prometheus metrics are at /metrics on the HTTP port (floodgate's names)")
	}
	c.ignored = append(c.ignored, refUnsupported(r)...)
	if len(r.errs) > 0 {
		return c, fmt.Errorf("reference environment: %s", strings.Join(r.errs, "; "))
	}
	return c, nil
}

// refLogLevels are floodgate's levels for logrus' (in any case): trace
// and debug log requests, fatal and panic are errors.
var refLogLevels = map[string]string{"trace": "debug", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
	"error": "error", "fatal": "error", "panic": "error"}

// refXDS maps CONFIG_TYPE=GRPC_XDS_SOTW's settings.
func refXDS(r *envReader, flag func(name, value string)) {
	flag("config-xds-server", r.str("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"))
	flag("config-xds-node-id", r.str("CONFIG_GRPC_XDS_NODE_ID", "default"))
	if r.boolean("CONFIG_GRPC_XDS_SERVER_USE_TLS", false) {
		flag("config-xds-tls", "true")
		flagsOf(r, flag, "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", "config-xds-tls-ca",
			"CONFIG_GRPC_XDS_CLIENT_TLS_CERT", "config-xds-tls-cert", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "config-xds-tls-key")
	}
	backoff := r.duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", 10*time.Second)
	if r.set("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL") && !r.set("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL") {
		backoff = r.duration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", 3*time.Second)
	}
	flag("config-xds-backoff-min", backoff.String())
	flag("config-xds-backoff-max", r.duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL", 60*time.Second).String())
}

// flagsOf sets, for each pair of a variable and a flag, the flag to the
// variable's value when it is set.
func flagsOf(r *envReader, flag func(name, value string), pairs ...string) {
	for i := 0; i < len(pairs); i += 2 {
		if v := r.getenv(pairs[i]); v != "" {
			flag(pairs[i+1], v)
		}
	}
}

// refTracing maps TRACING_* onto the OpenTelemetry variables the tracing
// reads; variables the operator set themselves win.
func refTracing(r *envReader, c *refConfig) {
	if !r.boolean("TRACING_ENABLED", false) {
		return
	}
	proto := strings.ToLower(r.str("TRACING_EXPORTER_PROTOCOL", "http"))
	switch proto {
	case "http":
		c.env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
		c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://localhost:4318"
	case "grpc":
		c.env["OTEL_EXPORTER_OTLP_PROTOCOL"] = "grpc"
		c.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://localhost:4317"
	default:
		r.errs = append(r.errs, fmt.Sprintf("$TRACING_EXPORTER_PROTOCOL=%q: http or grpc", proto))
	}
	attrs := []string{"service.name=" + r.str("TRACING_SERVICE_NAME", "RateLimit")}
	flagsOf(r, func(name, v string) { attrs = append(attrs, name+"="+v) },
		"TRACING_SERVICE_NAMESPACE", "service.namespace", "TRACING_SERVICE_INSTANCE_ID", "service.instance.id")
	c.env["OTEL_SERVICE_NAME"] = r.str("TRACING_SERVICE_NAME", "RateLimit")
	c.env["OTEL_RESOURCE_ATTRIBUTES"] = strings.Join(attrs, ",")
	c.env["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
	c.env["OTEL_TRACES_SAMPLER_ARG"] = strconv.FormatFloat(parsed(r, "TRACING_SAMPLING_RATE", 1,
		func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }, "a number"), 'g', -1, 64)
}

// getenvWith is getenv with extra's values for the variables it leaves
// empty.
func getenvWith(getenv func(string) string, extra map[string]string) func(string) string {
	return func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return extra[name]
	}
}

// log logs the one line that says the reference environment is
// read, and a warning naming every reference variable that is set but not
// supported.
func (c refConfig) log(log *slog.Logger) {
	// At warn: the reference's default LOG_LEVEL is WARN.
	log.Warn("configured from envoyproxy/ratelimit's environment variables (RUNTIME_ROOT, REDIS_URL, ...); floodgate's flags given on the command line win", "flags", strings.Join(redactedArgs(c.args), " "))
	for _, n := range c.notes {
		log.Info("reference environment", "mapped", n)
	}
	if len(c.ignored) > 0 {
		log.Warn("reference environment: variables set but not supported, ignored", "variables", strings.Join(c.ignored, "; "))
	}
}

// redactedArgs are args (--name=value) as they may be shown: every URL
// flag's password masked (redisstore.Redact). REDIS_AUTH, REDIS_PERSECOND_AUTH
// and a REDIS_URL with a password end up in such URLs.
func redactedArgs(args []string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if name, value, ok := strings.Cut(a, "="); ok && strings.HasSuffix(name, "-url") {
			out[i] = name + "=" + redisstore.Redact(value, value)
		}
	}
	return out
}

// referenceServe decides whether serve reads the reference environment
// (see wantsReferenceEnv) and, if so, returns the configuration it gives
// (nil otherwise), the arguments to parse (its flags, then the command
// line's, which win) and the getenv to parse them with (adding the
// OpenTelemetry variables its tracing settings give).
func referenceServe(args []string, getenv func(string) string) (*refConfig, []string, func(string) string, error) {
	on, rest := wantsReferenceEnv(args, getenv)
	if !on {
		return nil, args, getenv, nil
	}
	c, err := translateReference(getenv)
	if err != nil {
		return nil, nil, nil, err
	}
	return &c, append(slices.Clone(c.args), rest...), getenvWith(getenv, c.env), nil
}

// warnUnknownFloodgateVars logs a warning naming every FLOODGATE_*
// variable of environ ("NAME=value" entries) that no flag of serve, nor of the commands
// that call a server (check, settle, bench: FLOODGATE_ADDR and
// FLOODGATE_TOKEN set for them in the same shell), reads.
func warnUnknownFloodgateVars(environ []string, log *slog.Logger) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	(&serveFlags{}).register(fs)
	for _, register := range []func(*pflag.FlagSet){(&checkFlags{}).register, (&settleFlags{}).register, (&benchFlags{}).register} {
		other := pflag.NewFlagSet("client", pflag.ContinueOnError)
		register(other)
		other.VisitAll(func(f *pflag.Flag) {
			if fs.Lookup(f.Name) == nil {
				fs.AddFlag(f)
			}
		})
	}
	if names := unknownFloodgateVars(environ, fs); len(names) > 0 {
		log.Warn("unknown environment variables, ignored (no floodgate flag reads them)", "variables", strings.Join(names, ", "))
	}
}

// unknownFloodgateVars names the FLOODGATE_* variables of environ that no
// flag of fs reads (a typo, or a flag of another command), sorted.
func unknownFloodgateVars(environ []string, fs *pflag.FlagSet) []string {
	known := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, envPrefix) && !known[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
