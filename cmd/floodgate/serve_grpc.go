package main

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	grpchealth "google.golang.org/grpc/health"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/tracing"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/rlqs"
	"github.com/floodgate/floodgate/store"
)

// grpcPipeline is what every gRPC call passes through before a service:
// TLS and transport options, the metrics interceptors, and the Gate that
// admits connections and calls (and checks their tokens).
type grpcPipeline struct {
	opts    []grpc.ServerOption
	unary   []grpc.UnaryServerInterceptor
	stream  []grpc.StreamServerInterceptor
	tokens  *auth.TokenAuth // nil without --auth-token-file
	gate    *server.Gate
	tracing *tracing.Tracing // makes each call's server span when on
	files   []reloadable     // the TLS and token file watchers
}

// close stops watching the TLS and token files.
func (p grpcPipeline) close() { closeFiles(p.files) }

// buildGRPCPipeline loads the TLS certificate and the tokens the flags
// name, watching their files until ctx ends or the pipeline is closed, and
// builds the pipeline; the Gate enforces the transport limits and checks
// the tokens too.
func (e serveEnv) buildGRPCPipeline(ctx context.Context) (p grpcPipeline, err error) {
	f, metrics, log, limits := e.f, e.metrics, e.log, e.f.limits
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	if f.tls.Cert != "" {
		tlsCfg, certs, err := auth.NewTLSConfig(ctx, f.tls, log)
		if err != nil {
			return p, err
		}
		p.files = append(p.files, reloadable{"tls", certs})
		p.opts = append(p.opts, grpc.Creds(credentials.NewTLS(tlsCfg)))
	}
	p.opts = append(p.opts, server.GRPCLimitOptions(uint32(min(f.maxConcurrentStreams, 1<<32-1)), f.maxRecvMsgBytes)...)
	p.unary = []grpc.UnaryServerInterceptor{metrics.GRPC.UnaryServerInterceptor()}
	p.stream = []grpc.StreamServerInterceptor{metrics.GRPC.StreamServerInterceptor()}
	if f.authTokenFile != "" {
		tokens, err := auth.NewTokenAuth(ctx, f.authTokenFile, log)
		if err != nil {
			return p, err
		}
		p.files = append(p.files, reloadable{"tokens", tokens})
		p.tokens = tokens
		limits.Auth = tokens // the Gate checks every call's token when its headers arrive
	}
	if why := giveback.PortRefusal(f.grpcAddr, f.authTokenFile != "" || f.tls.ClientCA != ""); why != "" { // mTLS: every peer is known
		p.unary = append(p.unary, refuseGiveBacks(why))
		log.Warn("Reset is refused on the gRPC port, and so are refunds and negative hits: it is bound beyond loopback without --auth-token-file", "grpc_addr", f.grpcAddr)
	}
	p.gate = server.NewGate(limits)
	return p, nil
}

// decisionAPIs are the two decision services on the store; settings are
// their shared ones, which the HTTP/JSON API's RateLimiter reuses.
type decisionAPIs struct {
	settings    server.Settings
	rateLimiter *server.RateLimiter
	envoy       *server.Envoy
}

// buildAPIs builds floodgate.v1.RateLimiter and Envoy's ShouldRateLimit
// on st, with the rules of cfg (nil: inline limits only) and one local
// share for failure_mode local; tracer (nil: tracing off) starts their
// spans.
func (e serveEnv) buildAPIs(st store.Store, cfg server.RuleSource, local *localshare.Share, tracer trace.Tracer) decisionAPIs {
	f := e.f
	s := server.Settings{
		Rules:       cfg,
		MaxKeyBytes: f.maxKeyBytes,
		FailureMode: e.failureMode,
		Local:       local,
		Logger:      e.log,
		Metrics:     e.metrics,
		Limited:     e.limited,
		Tracer:      tracer,
		TraceValues: f.traceValues, // opt-in: request values in spans
	}
	es := f.envoy // opt-in DetailedMetricSeries: request values in metric labels
	es.Settings = s
	es.NoHeaders, es.NoRefunds = !f.headers, !f.envoyRefunds
	envoy := server.NewEnvoy(st, es)
	return decisionAPIs{settings: s, rateLimiter: server.NewRateLimiter(st, server.CheckSettings{Settings: s}), envoy: envoy}
}

// buildGRPC builds the gRPC server of the APIs and the quota service
// behind p, and its health service.
func (e serveEnv) buildGRPC(p grpcPipeline, apis decisionAPIs, quota *rlqs.Service) (*grpc.Server, *grpchealth.Server) {
	traceUnary, traceStream := p.tracing.ServerInterceptors()
	return server.NewGRPCServer(apis.rateLimiter, apis.envoy, server.GRPCSettings{
		Logger:             e.log,
		ServerOptions:      p.opts,
		UnaryInterceptors:  p.unary,
		StreamInterceptors: p.stream,
		Gate:               p.gate,
		Quota:              quota,
		TraceUnary:         traceUnary,
		TraceStream:        traceStream,
	})
}

// refuseGiveBacks is a unary interceptor that puts the port's refusal
// (reason: giveback.PortRefusal) into every call's context, so that every
// give-back there (Reset, refunds, Envoy's negative hits) is refused.
func refuseGiveBacks(reason string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		return next(giveback.WithRefusal(ctx, reason), req)
	}
}
