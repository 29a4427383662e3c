package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/filewatch"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/tracing"
	"github.com/floodgate/floodgate/internal/xdsrules"
	"github.com/floodgate/floodgate/server/rlqs"
)

// newMetrics is the process' Prometheus registry, with the Go and process
// collectors, and floodgate's metrics on it.
func newMetrics() (*prometheus.Registry, *observability.Metrics) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := observability.NewMetrics(reg)
	metrics.SetBuildInfo(version)
	return reg, metrics
}

// loadRules loads the rules at --config into live and watches them until ctx
// ends or the returned watcher (none without a path: the files add no
// rules) is closed; every accepted reload is counted and logged.
func (e serveEnv) loadRules(ctx context.Context, live *xdsrules.Live) ([]reloadable, error) {
	f, metrics, log := e.f, e.metrics, e.log
	path := f.configPath
	if path == "" {
		return nil, nil
	}
	w, err := rules.Watch(ctx, path, f.ruleLoad,
		func(c *rules.Set) {
			retried, err := live.SetFile(c)
			if err != nil {
				metrics.ObserveConfigReload(err)
				log.Error("config rejected; the previous config keeps serving (retried when the xDS config changes)", "err", err)
				return
			}
			metrics.ObserveConfigReload(nil)
			log.Info("config loaded", "files", len(c.Files()), "domains", len(c.Domains()), "policies", len(c.Policies()), "digest", c.Digest())
			if len(c.Files()) == 0 {
				log.Warn("config folder has no files: serving with no rules (every request is under no limit) until files are added", "config", path)
			}
			if retried {
				log.Info("xds config loaded: the xDS response refused earlier applies now", "digest", live.Current().Digest())
			}
		},
		func(err error) {
			if _, ok := errors.AsType[*filewatch.WatchError](err); ok {
				log.Warn("config: file events unavailable", "err", err)
				return
			}
			metrics.ObserveConfigReload(err)
			log.Error("config rejected; the previous config keeps serving", "err", err)
		})
	if err != nil {
		return nil, err
	}
	return []reloadable{{"rules", w}}, nil
}

// running is a built server: the gRPC server and its listener, its health
// service, the admin HTTP server (nil without --http-addr) and the quota
// service, which drains before the gRPC server stops.
type running struct {
	grpc     *grpc.Server
	lis      net.Listener
	health   *grpchealth.Server
	admin    *adminServer
	quota    *rlqs.Service
	draining *atomic.Bool // set on SIGTERM: /readyz turns not ready
	attrs    []any        // for the "serving" log line
}

// servedServices are the gRPC services whose health is reported SERVING
// once the server runs: the overall service (""), the three APIs and the
// store (storeHealthService, which the breaker turns NOT_SERVING).
var servedServices = []string{
	"",
	floodgatev1.RateLimiter_ServiceDesc.ServiceName,
	rlsv3.RateLimitService_ServiceDesc.ServiceName,
	storeHealthService,
	rlqsv3.RateLimitQuotaService_ServiceDesc.ServiceName,
}

// serveUntilSignal serves r until ctx ends (SIGINT, SIGTERM) or a server
// fails, then drains: it reports NOT_SERVING so balancers stop sending,
// lets in-flight calls finish, and stops hard after --drain-timeout.
func serveUntilSignal(ctx context.Context, f serveFlags, r running, log *slog.Logger) error {
	errc := make(chan error, 2)
	go func() { errc <- r.grpc.Serve(r.lis) }()
	if r.admin != nil {
		go func() {
			if err := r.admin.srv.Serve(r.admin.lis); !errors.Is(err, http.ErrServerClosed) {
				errc <- err
			}
		}()
	}
	for _, name := range servedServices {
		r.health.SetServingStatus(name, healthpb.HealthCheckResponse_SERVING)
	}
	attrs := append([]any{"grpc", r.lis.Addr().String()}, r.attrs...)
	if r.admin != nil {
		attrs = append(attrs, "http", r.admin.lis.Addr().String())
	}
	log.Info("serving", attrs...)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}

	log.Info("shutting down", "drain_timeout", f.drainTimeout)
	r.draining.Store(true)
	r.health.Shutdown()
	timer := time.NewTimer(f.drainTimeout)
	// RLQS streams never end by themselves: they send their final
	// assignments and close first, or GracefulStop would wait for them.
	dctx, dcancel := context.WithTimeout(context.Background(), f.drainTimeout)
	r.quota.Drain(dctx)
	dcancel()
	stopped := make(chan struct{})
	go func() { r.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
		timer.Stop()
	case <-timer.C:
		log.Warn("drain timeout; stopping in-flight calls")
		r.grpc.Stop()
	}
	if r.admin != nil {
		sctx, scancel := context.WithTimeout(context.Background(), time.Second)
		defer scancel()
		_ = r.admin.srv.Shutdown(sctx)
	}
	log.Info("stopped")
	return nil
}

// tracingFlushTimeout bounds the flush of the last spans on shutdown, so
// that an unreachable collector cannot hold the process.
const tracingFlushTimeout = 5 * time.Second

// startTracing turns OpenTelemetry tracing on when the OTEL_* environment
// says so (internal/tracing.FromEnv), and returns it with the func that
// flushes its last spans, to call once the gRPC server has stopped.
func startTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (*tracing.Tracing, func(), error) {
	cfg, err := tracing.FromEnv(getenv, version, log)
	if err != nil {
		return nil, nil, err
	}
	if !cfg.On() {
		return &tracing.Tracing{}, func() {}, nil
	}
	// OpenTelemetry's error handler and logger are process-wide, like
	// go-redis' logger: serve owns the process, so it routes them once.
	tracing.RouteGlobalLogs(log)
	tr, err := tracing.Start(ctx, cfg, log)
	if err != nil {
		return nil, nil, err
	}
	log.Info("tracing on", "endpoint", cfg.Endpoint, "protocol", cfg.Protocol, "sampler", cfg.Sampler, "sampler_arg", cfg.SamplerArg)
	flush := func() {
		fctx, cancel := context.WithTimeout(context.Background(), tracingFlushTimeout)
		defer cancel()
		if err := tr.Shutdown(fctx); err != nil {
			log.Warn("tracing: the last spans were not all exported", "err", err)
		}
	}
	return tr, flush, nil
}

// reloadable is the watcher of one file-backed setting, by name: the
// rules, the TLS certificate (with the client CAs), the tokens. A SIGHUP
// reloads it.
type reloadable struct {
	name string
	auth.Reloader
}

// closeFiles stops watching files.
func closeFiles(files []reloadable) {
	for _, f := range files {
		f.Close()
	}
}

// reloadOnHangup reloads every item each time hup delivers (a SIGHUP),
// until ctx ends: "now", where file events are missing or late. A file
// that fails to load keeps its previous value.
func reloadOnHangup(ctx context.Context, hup <-chan os.Signal, items []reloadable, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		var reloaded, failed []string
		for _, it := range items {
			if err := it.Reload(); err != nil {
				failed = append(failed, it.name)
				log.Error("SIGHUP: reload failed; the previous value keeps serving", "what", it.name, "err", err)
				continue
			}
			reloaded = append(reloaded, it.name)
		}
		log.Info("SIGHUP: files reloaded", "reloaded", reloaded, "failed", failed)
	}
}
