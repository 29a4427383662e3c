package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
	grpchealth "google.golang.org/grpc/health"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/denycache"
	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/xdsrules"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/rlqs"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
)

// serveFlags are the settings of `floodgate serve`. The flags of a
// setting a package's config holds are registered into that config.
type serveFlags struct {
	grpcAddr     string
	httpAddr     string
	configPath   string
	ruleLoad     rules.Options   // how --config is loaded
	memory       memstore.Config // the embedded store; MaxKeys and MaxBytes bound failure_mode local's memory, SettleWindow Redis' too
	maxKeyBytes  int
	failureMode  string
	logLevel     string
	logFormat    string
	drainTimeout time.Duration
	headers      bool
	gcPercent    int

	envoy  server.EnvoySettings   // its flags of Envoy's API; Settings and the No* fields are set in buildAPIs
	limits server.TransportLimits // Auth is set in buildGRPCPipeline
	redis  redisstore.Config      // Mode and SettleWindow are set in openRedis
	// redisConn is the main Redis' client (Password read from
	// redisPasswordFile by check; the timeouts of reads and writes set
	// for each use); redisPerSecond the per-second limits' (empty URL:
	// the main one), with the main one's TLS files and dial timeout.
	redisConn, redisPerSecond redisstore.ClientConfig
	redisPasswordFile         string
	denyCacheSize             int

	tls                  auth.TLSFiles
	authTokenFile        string
	maxConcurrentStreams uint
	maxRecvMsgBytes      int
	envoyRefunds         bool
	pprof                bool
	httpAPI              bool
	httpCORSOrigins      string
	httpAllowedHosts     string
	httpDenyStatus       int
	traceValues          bool

	local localFlags    // failure_mode local (serve_local.go)
	quota rlqs.Settings // Envoy RLQS: MaxBucketsPerStream and AssignmentTTL; the rest set in openQuota
	xds   xdsFlags      // rules from an xDS management server (serve_xds.go)

	limited limitedFlags // heaviest denied keys (serve_limited.go)
}

func (f *serveFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:8081", "gRPC listen address (floodgate.v1.RateLimiter, Envoy's ratelimit.v3, health, reflection)")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "HTTP listen address (/healthz, /readyz, /metrics, the HTTP/JSON API under /v1/, /debug/pprof with --pprof); empty disables")
	fs.BoolVar(&f.httpAPI, "http-api", true, "serve the HTTP/JSON API (POST /v1/check, /v1/check:batch, /v1/peek, /v1/reset, /v1/settle, and Envoy's API as JSON at /json) on --http-addr, with the gRPC side's tokens, --max-recv-msg-bytes and --unary-timeout")
	fs.IntVar(&f.httpDenyStatus, "http-deny-status", 200, "HTTP/JSON API: the status of a denied /v1/check or /v1/check:batch, 200 (\"allowed\": false says it) or 429; a request may ask with ?deny_status=")
	fs.StringVar(&f.httpCORSOrigins, "http-cors-origins", "", "HTTP/JSON API: comma-separated origins browsers may call it from (\"*\": any); empty: CORS off")
	fs.StringVar(&f.httpAllowedHosts, "http-allowed-hosts", "", "HTTP port: comma-separated host names (\"*\": any) its Host header may carry, besides localhost and IP addresses, for everything but probes, /metrics and decisions (Reset, Settle, /debug/, the admin page): a guard against DNS rebinding")
	fs.StringVar(&f.configPath, "config", "", "YAML config file or folder (envoyproxy/ratelimit format plus policies); hot-reloaded")
	registerRuleFlags(fs, &f.ruleLoad)
	fs.IntVar(&f.memory.MaxKeys, "memory-max-keys", 1_000_000, "embedded store, and failure_mode local's memory on Redis: most keys kept at once (a live key is never evicted: when full, a new key is refused and its failure mode answers)")
	byteSizeVar(fs, &f.memory.MaxBytes, "memory-max-bytes", memstore.DefaultMaxBytes, "embedded store (and failure_mode local's memory): most memory its keys take, by its own accounting (refuses like --memory-max-keys; at least 1MiB; a size in bytes, such as 256MiB, 1GiB or 64MB)")
	fs.DurationVar(&f.memory.SettleWindow, "settle-window", store.DefaultSettleWindow, "Settle: how long a settlement's idempotency_key is remembered, so a retry within it charges nothing again (a record per settlement: in Redis a key with this TTL; in the embedded store an entry capped apart from the counters, at --memory-max-keys/--memory-max-bytes of its own)")
	byteSizeVar(fs, &f.maxKeyBytes, "max-key-bytes", server.DefaultMaxKeyBytes, "longest key, domain or descriptor value accepted, in bytes")
	fs.StringVar(&f.failureMode, "failure-mode", "open", "when the store cannot decide and a limit does not say: open (allow, degraded), closed (deny) or local (each replica enforces its share of the limit in memory: see --replicas)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug (request logs), info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.IntVar(&f.gcPercent, "gc-percent", defaultGCPercent, "Go GC target percentage (GOGC) unless $GOGC is set; higher trades memory for CPU (bound memory with $GOMEMLIMIT)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long in-flight calls may take before the server stops")
	fs.BoolVar(&f.envoy.ShadowMode, "shadow-mode", false, "Envoy API: every limit in shadow mode (decide and count, always answer OK)")
	fs.BoolVar(&f.envoy.QuotaMode, "quota-mode", false, "Envoy API: every limit in quota mode (as quota_mode: true; the reference's QUOTA_MODE): over only when a limit not in quota mode is over, or every quota-mode descriptor is")
	fs.BoolVar(&f.envoy.DynamicMetadata, "response-dynamic-metadata", false, "Envoy API: fill the response's dynamic_metadata (domain, descriptors, hits addend, the matched rules' metadata) as the reference's RESPONSE_DYNAMIC_METADATA")
	fs.BoolVar(&f.envoy.CountDeniedHits, "count-denied-hits", false, "Envoy API: count the hits of a denied request too on "+algorithms.Names(algorithms.Which(func(f algorithms.Facts) bool { return f.Afresh }), "and", algorithms.Algorithm.String)+" limits, as debt that ends with the window (the reference's default; its STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=true is false here); off, a denied request charges nothing")
	fs.BoolVar(&f.envoy.ShareOverrideCounters, "share-override-counters", false, "Envoy API: a descriptor's limit override counts under the matched rule's key, as the reference does (off: each override rate counts apart)")
	fs.BoolVar(&f.headers, "response-headers", true, "Envoy API: add RateLimit-*, X-RateLimit-* and Retry-After response headers")
	fs.IntVar(&f.envoy.DetailedMetricSeries, "detailed-metric-series", 0, "Envoy API: per rule with detailed_metric or value_to_metric, how many request values may appear in the metrics' rule label (0: none, the rule's name only; values may be secrets)")
	fs.BoolVar(&f.envoyRefunds, "envoy-refunds", true, "Envoy API: accept refunds (is_negative_hits); with --auth-token-file only from tokens with the refund or admin role, without it only on a loopback port; false refuses them (decided as 0 hits)")
	fs.BoolVar(&f.traceValues, "trace-values", false, "tracing (on when $OTEL_EXPORTER_OTLP_ENDPOINT or $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; see the README): put keys and descriptor values into spans (they can be personal data)")
	fs.BoolVar(&f.pprof, "pprof", false, "serve the Go profiler on the HTTP admin address (/debug/pprof/)")

	fs.StringVar(&f.redisConn.URL, "redis-url", "", "Redis: redis://[user:pass@]host:port[/db], rediss:// (TLS), unix:///path/to/redis.sock or a bare host:port (as redis://host:port); cluster nodes as redis://h:p1?addr=h:p2&addr=h:p3; empty = embedded store")
	fs.StringVar(&f.redisPasswordFile, "redis-password-file", "", "Redis: a file whose first line is the password, used instead of the one in --redis-url (a command line is visible to other processes and in /debug/pprof/cmdline)")
	fs.StringVar(&f.redisConn.Mode, "redis-mode", "standalone", "Redis: standalone, cluster or sentinel")
	fs.StringVar(&f.redisConn.SentinelMaster, "redis-sentinel-master", "", "Redis: the master's name (sentinel mode)")
	fs.IntVar(&f.redisConn.PoolSize, "redis-pool-size", 0, "Redis: connections per node for single calls (0 = go-redis' default, 10 per CPU); pipelines add a pool of at most 10 more")
	fs.StringVar(&f.redisPerSecond.URL, "redis-persecond-url", "", "Redis: a second Redis for the limits of a one-second period (the reference's REDIS_PERSECOND_URL), in --redis-url's forms; the others stay on --redis-url. A request with limits on both is all or nothing (docs/envoy.md); TLS files, timeouts and prefix are --redis-url's")
	fs.StringVar(&f.redisPerSecond.Mode, "redis-persecond-mode", "standalone", "Redis: --redis-persecond-url's mode: standalone, cluster or sentinel")
	fs.StringVar(&f.redisPerSecond.SentinelMaster, "redis-persecond-sentinel-master", "", "Redis: --redis-persecond-url's master name (sentinel mode)")
	fs.IntVar(&f.redisPerSecond.PoolSize, "redis-persecond-pool-size", 0, "Redis: --redis-persecond-url's connections per node (0 = go-redis' default)")
	fs.DurationVar(&f.redis.Timeout, "redis-timeout", redisstore.DefaultTimeout, "Redis: the longest a decision waits for Redis before its failure mode answers")
	fs.DurationVar(&f.redisConn.DialTimeout, "redis-dial-timeout", time.Second, "Redis: connection timeout")
	fs.StringVar(&f.redis.Prefix, "redis-prefix", redisstore.DefaultPrefix, "Redis: prefix of every key floodgate writes")
	fs.IntVar(&f.redis.BatchMaxSize, "redis-batch-max-size", redisstore.DefaultBatchMaxSize, "Redis: most script calls per pipeline (1 disables batching)")
	fs.DurationVar(&f.redis.BatchMaxWait, "redis-batch-max-wait", redisstore.DefaultBatchMaxWait, "Redis: how long a call waits for others to share its pipeline beyond those already queued (0: none)")
	fs.IntVar(&f.redis.BatchPipelines, "redis-pipelines", redisstore.DefaultBatchPipelines, "Redis: pipelines in flight at once; calls queue for the next meanwhile")
	fs.StringVar(&f.redisConn.TLSCAFile, "redis-tls-ca", "", "Redis TLS (rediss://): PEM file of the CA that signed Redis' certificate, for a private CA")
	fs.StringVar(&f.redisConn.TLSCertFile, "redis-tls-cert", "", "Redis TLS: client certificate file, when Redis asks for one (tls-auth-clients)")
	fs.StringVar(&f.redisConn.TLSKeyFile, "redis-tls-key", "", "Redis TLS: the client certificate's key file")
	fs.IntVar(&f.denyCacheSize, "deny-cache-size", denycache.DefaultMaxEntries, "Redis: denied keys answered from memory until their retry_after (0 disables)")

	fs.StringVar(&f.tls.Cert, "tls-cert", "", "gRPC TLS: certificate file (PEM); reloaded when it changes")
	fs.StringVar(&f.tls.Key, "tls-key", "", "gRPC TLS: private key file (PEM)")
	fs.StringVar(&f.tls.ClientCA, "tls-client-ca", "", "gRPC mTLS: CA file; clients must present a certificate it signed")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "bearer tokens, one per line (\"TOKEN\" or \"TOKEN admin\"; Reset needs admin); reloaded when it changes")
	fs.UintVar(&f.maxConcurrentStreams, "max-concurrent-streams", server.DefaultMaxConcurrentStreams, "gRPC: concurrent calls per connection")
	byteSizeVar(fs, &f.maxRecvMsgBytes, "max-recv-msg-bytes", server.DefaultMaxRecvMsgBytes, "gRPC: largest request message; HTTP/JSON API: largest request body")
	byteSizeVar(fs, &f.limits.MaxHeaderListBytes, "max-header-list-bytes", server.DefaultMaxHeaderListBytes, "gRPC: largest request metadata (headers), refused before any handler runs")
	fs.DurationVar(&f.limits.UnaryTimeout, "unary-timeout", server.DefaultUnaryTimeout, "gRPC: the longest a unary call may take from its headers, the wait for its message included (DeadlineExceeded past it); HTTP/JSON API: the same per request (504)")
	fs.IntVar(&f.limits.MaxStreams, "max-streams", server.DefaultMaxStreams, "gRPC: calls in flight in total; more are refused (ResourceExhausted)")
	fs.IntVar(&f.limits.MaxStreamsPerClient, "max-streams-per-client", server.DefaultMaxStreamsPerClient, "gRPC: calls in flight from one client IP address; more are refused (ResourceExhausted)")
	fs.IntVar(&f.limits.MaxConnections, "max-connections", server.DefaultMaxConnections, "gRPC, and apart the HTTP port: open connections in total; more are closed when accepted")
	fs.IntVar(&f.quota.MaxBucketsPerStream, "quota-max-buckets-per-stream", rlqs.DefaultMaxBucketsPerStream, "Envoy RLQS: most buckets one stream may report; past it the stream ends (ResourceExhausted)")
	fs.DurationVar(&f.quota.AssignmentTTL, "quota-assignment-ttl", rlqs.DefaultAssignmentTTL, "Envoy RLQS: least assignment_time_to_live of an assignment (raised to twice a bucket's reporting interval plus 1s)")
	f.xds.register(fs)
	f.local.register(fs)
	f.limited.register(fs)
	fs.IntVar(&f.limits.MaxConnectionsPerClient, "max-connections-per-client", server.DefaultMaxConnectionsPerClient, "gRPC, and apart the HTTP port: open connections from one client IP address; more are closed when accepted")
}

// serveEnv is what serve's builders share: the checked flags, the failure
// mode they name, the logger, and the metrics with their registry.
type serveEnv struct {
	f           *serveFlags
	failureMode rules.FailureMode
	log         *slog.Logger
	reg         *prometheus.Registry
	metrics     *observability.Metrics
	limited     *limited.Tracker // nil: tracking off
}

// runServe runs `floodgate serve` until ctx ends: it checks the flags,
// loads the rules, opens the store, builds the APIs, the gRPC server and
// the admin HTTP server, serves until a signal, then drains.
func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (err error) {
	ref, args, getenv, err := referenceServe(args, getenv) // refenv.go
	if err != nil {
		return failed(stderr, "serve", 2, err)
	}
	f, err := parseServeFlags(args, getenv, stdout, stderr)
	if err != nil {
		return err
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return failed(stderr, "serve", 2, err)
	}
	defer func() { err = logFatal(log, err) }()
	if ref != nil {
		ref.log(log)
		f.envoy.ReferenceHeaders = ref.headers
	}
	warnUnknownFloodgateVars(os.Environ(), log)
	// go-redis logs through one process-wide logger, by default as plain
	// lines on stderr that break --log-format json.
	redis.SetLogger(&quietRedisLog{log: log, now: time.Now})
	setGCPercent(getenv, f.gcPercent)
	failureMode, err := f.check()
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// SIGHUP reloads the files (reloadOnHangup) instead of ending the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	tr, flushTraces, err := startTracing(ctx, getenv, log)
	if err != nil {
		return err
	}
	defer flushTraces() // after the gRPC server drained: its calls' spans are ended

	reg, metrics := newMetrics()
	env := serveEnv{f: &f, failureMode: failureMode, log: log, reg: reg, metrics: metrics}
	if env.limited, err = f.limited.tracker(reg); err != nil {
		return err
	}
	var quotaSvc atomic.Pointer[rlqs.Service] // told of reloads once built
	live := xdsrules.NewLive(func() {
		if q := quotaSvc.Load(); q != nil {
			q.ConfigChanged()
		}
	})
	rulesFiles, err := env.loadRules(ctx, live)
	if err != nil && f.logFormat == "text" {
		return failed(stderr, "serve", 1, err) // file:line:column, as config validate
	}
	if err != nil {
		return err
	}
	defer closeFiles(rulesFiles)
	stopXDS, err := env.startXDS(ctx, live) // serve_xds.go
	if err != nil {
		return err
	}
	defer func() { cancel(); stopXDS() }()
	var cfg server.RuleSource // nil without rules: inline limits only
	if f.configPath != "" || f.xds.opts.Server != "" {
		cfg = live
	}

	// Before the store, whose breaker reports its health.
	pipe, err := env.buildGRPCPipeline(ctx)
	if err != nil {
		return err
	}
	defer pipe.close()
	pipe.tracing = tr
	var health *grpchealth.Server // set once the gRPC server is built
	local := newLocalFailure(f)
	defer local.share.Discard()
	st, backend, err := env.buildStore(ctx, breakerReporter(metrics, log, &health), local)
	if err != nil {
		return err
	}
	defer st.Close()

	apis := env.buildAPIs(st, cfg, local.share, tr.Tracer())
	quota, quotaCloser, err := openQuota(f, cfg, reg, log)
	if err != nil {
		return err
	}
	defer quotaCloser.Close()
	quotaSvc.Store(quota)
	grpcSrv, hs := env.buildGRPC(pipe, apis, quota)
	health = hs
	metrics.GRPC.InitializeMetrics(grpcSrv)

	lis, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return fmt.Errorf("grpc listen: %w", err)
	}
	lis = pipe.gate.Listener(lis)
	var draining atomic.Bool // set on SIGTERM: /readyz turns not ready
	admin, err := env.buildAdmin(st, apis, pipe, &draining)
	if err != nil {
		lis.Close()
		return err
	}
	go reloadOnHangup(ctx, hup, append(rulesFiles, pipe.files...), log)
	return serveUntilSignal(ctx, f, running{
		grpc:     grpcSrv,
		lis:      lis,
		health:   health,
		admin:    admin,
		quota:    quota,
		draining: &draining,
		attrs:    []any{"store", backend, "version", version, "tls", f.tls.Cert != "", "auth", f.authTokenFile != ""},
	}, log)
}

const serveSynopsis = `Runs the rate-limit server. Without --redis-url it uses the embedded in-memory store.

--reference-env reads envoyproxy/ratelimit's environment variables (REDIS_URL,
RUNTIME_ROOT, USE_STATSD, ...) instead of these flags, as does serve without
--config when $RUNTIME_ROOT is set, and the binary run as ratelimit
(docs/envoy.md lists each variable).`

// parseServeFlags parses serve's flags and environment; a bad flag has
// been reported on stderr and ends the program with status 2.
func parseServeFlags(args []string, getenv func(string) string, stdout, stderr io.Writer) (serveFlags, error) {
	var f serveFlags
	fs := newFlagSet("serve [flags]", serveSynopsis, stdout)
	f.register(fs)
	if err := parseCommand(fs, args, getenv, stderr); err != nil {
		return f, err
	}
	if err := f.resolveRedisURLs(fs, getenv); err != nil { // redisurl.go
		return f, failed(stderr, "serve", 2, err)
	}
	if f.httpDenyStatus != 200 && f.httpDenyStatus != 429 {
		return f, failed(stderr, "serve", 2, fmt.Errorf("--http-deny-status must be 200 or 429, got %d", f.httpDenyStatus))
	}
	return f, nil
}

// check checks the flags that need more than parsing, and returns the
// failure mode they name.
func (f *serveFlags) check() (rules.FailureMode, error) {
	var failureMode rules.FailureMode
	if err := failureMode.UnmarshalText([]byte(f.failureMode)); err != nil {
		return failureMode, fmt.Errorf("--failure-mode %w", err)
	}
	if (f.tls.Cert == "") != (f.tls.Key == "") || (f.tls.ClientCA != "" && f.tls.Cert == "") {
		return failureMode, errors.New("--tls-cert and --tls-key go together, and --tls-client-ca needs them")
	}
	for _, check := range []func() error{f.checkNumbers, f.limited.check, f.readRedisPassword} {
		if err := check(); err != nil {
			return failureMode, err
		}
	}
	return failureMode, nil
}

// defaultGCPercent is --gc-percent's default. A rate limiter's live heap
// is small while every decision allocates, so at Go's default of 100 the
// collector takes a large share of the CPU (bench/RESULTS.md); the heap
// grows to up to 5× the live data, which $GOMEMLIMIT caps.
const defaultGCPercent = 400

// setGCPercent applies --gc-percent unless the operator set $GOGC, which
// the runtime has already applied.
func setGCPercent(getenv func(string) string, percent int) {
	if getenv("GOGC") == "" && percent != 0 {
		debug.SetGCPercent(percent)
	}
}

// readRedisPassword reads --redis-password-file's first line into
// f.redisConn.Password. The file needs --redis-url, and must hold a password.
func (f *serveFlags) readRedisPassword() error {
	if f.redisPasswordFile == "" {
		return nil
	}
	if f.redisConn.URL == "" {
		return errors.New("--redis-password-file needs --redis-url")
	}
	b, err := os.ReadFile(f.redisPasswordFile)
	if err != nil {
		return fmt.Errorf("--redis-password-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f.redisConn.Password = strings.TrimSuffix(line, "\r")
	if f.redisConn.Password == "" {
		return fmt.Errorf("--redis-password-file %s: the first line is empty", f.redisPasswordFile)
	}
	return nil
}
