package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/internal/breaker"
	"github.com/floodgate/floodgate/internal/denycache"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
	"github.com/floodgate/floodgate/store/splitstore"
)

// buildStore opens the store the flags ask for: the embedded memory store,
// or Redis behind the metrics decorator, a circuit breaker and the deny
// cache; with a per-second Redis, each Redis has its own decorator and
// breaker (splitstore). On Redis, local (nil: none) gets the replica
// heartbeat and hears the breaker, for failure_mode local.
func (e serveEnv) buildStore(ctx context.Context, onBreaker func(open bool, cause error), local *localFailure) (store.Store, string, error) {
	f, log, m := *e.f, e.log, e.metrics
	if f.redisConn.URL == "" && f.redisPerSecond.URL != "" {
		return nil, "", errors.New("--redis-persecond-url needs --redis-url (the Redis of the other limits)")
	}
	if f.redisConn.URL == "" {
		if f.memory.MaxBytes < memstore.MinMaxBytes {
			return nil, "", fmt.Errorf("--memory-max-bytes must be at least %d (1 MiB), got %d", memstore.MinMaxBytes, f.memory.MaxBytes)
		}
		return observability.InstrumentStore(memstore.New(f.memory), m, "memory"), "memory", nil
	}
	rs, client, err := openRedis(ctx, f, f.redisConn, log)
	if err != nil {
		return nil, "", err
	}
	var beat io.Closer = io.NopCloser(nil)
	if local != nil {
		beat = local.startHeartbeat(client, f, log)
		onBreaker = local.onBreaker(onBreaker, log)
	}
	var main store.Store = redisCloser{rs, client, beat}
	if f.redisPerSecond.URL == "" {
		main = breaker.New(observability.InstrumentStore(main, m, "redis"), breaker.Config{OnChange: onBreaker})
	} else {
		c, ps := f.redisConn, f.redisPerSecond
		ps.TLSCAFile, ps.TLSCertFile, ps.TLSKeyFile, ps.DialTimeout = c.TLSCAFile, c.TLSCertFile, c.TLSKeyFile, c.DialTimeout
		rs2, client2, err := openRedis(ctx, f, ps, log)
		if err != nil {
			main.Close()
			return nil, "", fmt.Errorf("--redis-persecond-url: %w", err)
		}
		h := &sidesHealth{report: onBreaker}
		main = splitstore.New(
			breaker.New(observability.InstrumentStore(main, m, "redis"), breaker.Config{OnChange: h.side(0, "the main Redis (--redis-url)")}),
			breaker.New(observability.InstrumentStore(redisCloser{rs2, client2, io.NopCloser(nil)}, m, "redis-persecond"), breaker.Config{OnChange: h.side(1, "the per-second Redis (--redis-persecond-url)")}))
		log.Info("per-second limits on their own Redis", "redis", redisstore.Redact(f.redisPerSecond.URL, f.redisPerSecond.URL), "mode", f.redisPerSecond.Mode)
	}
	st := main
	if f.denyCacheSize > 0 {
		st = denycache.New(st, denycache.Config{MaxEntries: f.denyCacheSize, OnHit: m.ObserveDenyCacheHits})
	}
	return st, "redis-" + f.redisConn.Mode, nil
}

// openRedis opens the Redis store of client c with the other --redis-*
// flags of f and checks it: one that answers but cannot decide in its
// mode is an error; one that does not answer yet is logged.
func openRedis(ctx context.Context, f serveFlags, c redisstore.ClientConfig, log *slog.Logger) (*redisstore.Store, redis.UniversalClient, error) {
	c.ReadTimeout, c.WriteTimeout = f.redis.Timeout, f.redis.Timeout
	client, err := redisstore.NewClient(c)
	if err != nil {
		return nil, nil, err
	}
	cfg := f.redis
	cfg.Mode, cfg.SettleWindow = c.Mode, f.memory.SettleWindow
	rs, err := redisstore.New(client, cfg)
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, c.DialTimeout+time.Second)
	err = rs.CheckServer(cctx)
	cancel()
	switch {
	case errors.Is(err, store.ErrMisconfigured):
		rs.Close()
		client.Close()
		return nil, nil, err
	case err != nil:
		log.Warn("Redis does not answer yet: answering by failure modes until it does", "redis", redisstore.Redact(c.URL, c.URL), "err", err)
	}
	return rs, client, nil
}

// sidesHealth joins the breakers of the two Redis of a split store into
// one report: the store is down (report's open) while either is, with
// the cause naming which. Each breaker still decides for its own limits.
type sidesHealth struct {
	report func(open bool, cause error) // nil: none
	mu     sync.Mutex
	open   [2]bool // guarded by mu
}

// side is the OnChange of breaker i, named name in causes.
func (h *sidesHealth) side(i int, name string) func(open bool, cause error) {
	return func(open bool, cause error) {
		h.mu.Lock()
		defer h.mu.Unlock() // the breakers deliver one at a time each; this orders the two
		was := h.open[0] || h.open[1]
		h.open[i] = open
		now := h.open[0] || h.open[1]
		if h.report == nil {
			return
		}
		switch {
		case open:
			h.report(true, fmt.Errorf("%s: %w", name, cause))
		case was && !now:
			h.report(false, nil)
		}
	}
}

// redisCloser closes the replica heartbeat (leaving the replica set), the
// Redis store and then their client.
type redisCloser struct {
	*redisstore.Store
	client io.Closer
	beat   io.Closer
}

func (c redisCloser) Close() error {
	return errors.Join(c.beat.Close(), c.Store.Close(), c.client.Close())
}

// storeHealthService is the grpc.health.v1 service name that reports the
// store: NOT_SERVING while it is unreachable. The overall service ("")
// stays SERVING: the failure modes still answer.
const storeHealthService = "floodgate.store"

// breakerReporter is the store breaker's OnChange: it sets the breaker
// metric, logs the change and, once *health is set, reports the store's
// health.
func breakerReporter(metrics *observability.Metrics, log *slog.Logger, health **grpchealth.Server) func(open bool, cause error) {
	return func(open bool, cause error) {
		metrics.SetBreakerOpen(open)
		switch {
		case open && errors.Is(cause, store.ErrMisconfigured):
			log.Error("store misconfigured: answering by failure modes and not ready until fixed", "err", cause)
		case open:
			log.Warn("store unreachable: answering by failure modes until it returns", "err", cause)
		default:
			log.Info("store reachable again")
		}
		if hs := *health; hs != nil {
			st := healthpb.HealthCheckResponse_SERVING
			if open {
				st = healthpb.HealthCheckResponse_NOT_SERVING
			}
			hs.SetServingStatus(storeHealthService, st)
		}
	}
}

// readiness is /readyz: not ready while draining, or while the store is
// misconfigured (a Redis Cluster node in standalone mode, a replica). An
// unreachable store keeps the replica ready: it still answers by failure
// modes, closed ones included, where a balancer left with no endpoint
// would let Envoy's own fallback allow everything.
func readiness(st store.Store, draining *atomic.Bool) func(context.Context) error {
	return func(ctx context.Context) error {
		if draining.Load() {
			return errors.New("shutting down")
		}
		if err := st.Ping(ctx); errors.Is(err, store.ErrMisconfigured) {
			return err
		}
		return nil
	}
}
