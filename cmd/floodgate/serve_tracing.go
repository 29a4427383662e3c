package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/floodgate/floodgate/internal/tracing"
)

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
