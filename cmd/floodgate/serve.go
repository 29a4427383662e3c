package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/config"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// serveFlags are the settings of `floodgate serve`.
type serveFlags struct {
	grpcAddr      string
	httpAddr      string
	configPath    string
	memoryMaxKeys int
	maxKeyBytes   int
	failureMode   string
	logLevel      string
	logFormat     string
	drainTimeout  time.Duration
	shadowMode    bool
	headers       bool
}

func (f *serveFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.grpcAddr, "grpc-addr", "127.0.0.1:8081", "gRPC listen address (floodgate.v1.RateLimiter, health, reflection)")
	fs.StringVar(&f.httpAddr, "http-addr", "127.0.0.1:8080", "HTTP admin listen address (/healthz, /readyz, /debug/pprof); empty disables")
	fs.StringVar(&f.configPath, "config", "", "YAML config file or folder (envoyproxy/ratelimit format plus policies); hot-reloaded")
	fs.IntVar(&f.memoryMaxKeys, "memory-max-keys", 1_000_000, "embedded store: most keys kept at once (the nearest-to-full are evicted first)")
	fs.IntVar(&f.maxKeyBytes, "max-key-bytes", server.DefaultMaxKeyBytes, "longest key accepted, in bytes")
	fs.StringVar(&f.failureMode, "failure-mode", "open", "when the store cannot decide and a limit does not say: open (allow, degraded) or closed (deny)")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug (request logs), info, warn, error")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.BoolVar(&f.shadowMode, "shadow-mode", false, "Envoy API: every limit in shadow mode (decide and count, always answer OK)")
	fs.BoolVar(&f.headers, "response-headers", true, "Envoy API: add RateLimit-*, X-RateLimit-* and Retry-After response headers")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 10*time.Second, "on SIGTERM, how long in-flight calls may take before the server stops")
}

func runServe(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	var f serveFlags
	fs := newFlagSet("serve [flags]", "Runs the rate-limit server. Without --redis-url it uses the embedded in-memory store.", stderr)
	f.register(fs)
	if err := parseFlags(fs, args, getenv); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		fmt.Fprintln(stderr, "floodgate serve:", err)
		return exitCode(2)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "floodgate serve: unexpected argument %q\n", fs.Arg(0))
		return exitCode(2)
	}
	log, err := newLogger(stderr, f.logLevel, f.logFormat)
	if err != nil {
		return err
	}
	failureMode, err := parseFailureMode(f.failureMode)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var cfg server.ConfigSource
	if f.configPath != "" {
		w, err := config.Watch(ctx, f.configPath,
			func(c *config.Config) {
				log.Info("config loaded", "files", len(c.Files()), "domains", len(c.Domains()))
			},
			func(err error) { log.Error("config rejected; the previous config keeps serving", "err", err) })
		if err != nil {
			return err
		}
		defer w.Close()
		cfg = w
	}

	st, err := openStore(f)
	if err != nil {
		return err
	}
	defer st.Close()

	rl := server.NewRateLimiter(st, server.Settings{
		Config:      cfg,
		MaxKeyBytes: f.maxKeyBytes,
		FailureMode: failureMode,
		Logger:      log,
	})
	envoy := server.NewEnvoy(st, server.EnvoySettings{
		Config:      cfg,
		MaxKeyBytes: f.maxKeyBytes,
		FailureMode: failureMode,
		ShadowMode:  f.shadowMode,
		NoHeaders:   !f.headers,
		Logger:      log,
	})
	grpcSrv, health := server.NewGRPCServer(rl, envoy, server.GRPCSettings{Logger: log})

	lis, err := net.Listen("tcp", f.grpcAddr)
	if err != nil {
		return fmt.Errorf("grpc listen: %w", err)
	}
	var httpSrv *http.Server
	var httpLis net.Listener
	if f.httpAddr != "" {
		httpLis, err = net.Listen("tcp", f.httpAddr)
		if err != nil {
			lis.Close()
			return fmt.Errorf("http listen: %w", err)
		}
		httpSrv = &http.Server{
			Handler:           server.NewAdminHandler(server.AdminSettings{Ready: func(ctx context.Context) error { return st.Ping(ctx) }}),
			ReadHeaderTimeout: 5 * time.Second,
		}
	}

	errc := make(chan error, 2)
	go func() { errc <- grpcSrv.Serve(lis) }()
	if httpSrv != nil {
		go func() {
			if err := httpSrv.Serve(httpLis); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	health.SetServingStatus("floodgate.v1.RateLimiter", healthpb.HealthCheckResponse_SERVING)
	attrs := []any{"grpc", lis.Addr().String(), "store", storeName(f), "version", version}
	if httpLis != nil {
		attrs = append(attrs, "http", httpLis.Addr().String())
	}
	log.Info("serving", attrs...)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}

	// Drain: report NOT_SERVING so balancers stop sending, let in-flight
	// calls finish, and stop hard after the drain timeout.
	log.Info("shutting down", "drain_timeout", f.drainTimeout)
	health.Shutdown()
	stopped := make(chan struct{})
	go func() { grpcSrv.GracefulStop(); close(stopped) }()
	timer := time.NewTimer(f.drainTimeout)
	select {
	case <-stopped:
		timer.Stop()
	case <-timer.C:
		log.Warn("drain timeout; stopping in-flight calls")
		grpcSrv.Stop()
	}
	if httpSrv != nil {
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		_ = httpSrv.Shutdown(sctx)
	}
	log.Info("stopped")
	return nil
}

// openStore opens the store the flags ask for.
func openStore(f serveFlags) (store.Store, error) {
	if f.memoryMaxKeys <= 0 {
		return nil, fmt.Errorf("--memory-max-keys must be positive, got %d", f.memoryMaxKeys)
	}
	return memstore.New(memstore.Config{MaxKeys: f.memoryMaxKeys}), nil
}

func storeName(f serveFlags) string { return "memory" }

func parseFailureMode(s string) (config.FailureMode, error) {
	switch strings.ToLower(s) {
	case "open":
		return config.FailureOpen, nil
	case "closed":
		return config.FailureClosed, nil
	}
	return config.FailureDefault, fmt.Errorf("--failure-mode must be open or closed, got %q", s)
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level must be debug, info, warn or error, got %q", level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", format)
}
