package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/floodgate/floodgate/internal/giveback"
	"github.com/floodgate/floodgate/internal/hostcheck"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/server/httpapi"
	"github.com/floodgate/floodgate/store"
)

// adminServer is the admin HTTP server and the listener it serves.
type adminServer struct {
	srv *http.Server
	lis net.Listener
}

// buildAdmin listens on --http-addr and builds the admin HTTP server
// (health, readiness, metrics, pprof, the HTTP/JSON API, /debug/config)
// on st, with the decision APIs and the gRPC pipeline p's tokens and
// tracing; /readyz turns not ready once draining is set. It is nil when
// --http-addr is empty.
func (e serveEnv) buildAdmin(st store.Store, apis decisionAPIs, p grpcPipeline, draining *atomic.Bool) (*adminServer, error) {
	f, tokens, s := e.f, p.tokens, apis.settings
	if f.httpAddr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", f.httpAddr)
	if err != nil {
		return nil, fmt.Errorf("http listen: %w", err)
	}
	// The gRPC port's connection caps, counted apart: a client that holds
	// half-sent requests (each up to the read-header timeout) holds at most
	// --max-connections-per-client of them, all clients --max-connections.
	lis = server.NewGate(server.TransportLimits{MaxConnections: f.limits.MaxConnections, MaxConnectionsPerClient: f.limits.MaxConnectionsPerClient}).Listener(lis)
	as := server.AdminSettings{
		Ready:     readiness(st, draining),
		Metrics:   promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}),
		Pprof:     f.pprof,
		API:       e.httpAPI(st, apis, p),
		Rules:     s.Rules, // nil without --config: /debug/config says so
		Limited:   s.Limited,
		Explain:   explainHandler(s.Rules, f.redis.Prefix),
		AdminAuth: tokens, // nil without --auth-token-file
	}
	h := hostcheck.Guard(server.NewAdminHandler(as), strings.Split(f.httpAllowedHosts, ","), openToAnyHost, "--http-allowed-hosts")
	srv := server.NewAdminServer(server.LogHTTP(cmp.Or(s.Logger, e.log, slog.Default()), time.Now, h))
	return &adminServer{srv: srv, lis: lis}, nil
}

// openToAnyHost reports whether r may name the HTTP port by any Host
// (hostcheck): probes, /metrics and decisions, which callers reach by
// service names and a DNS-rebinding page gains nothing from. Everything
// else (Reset, Settle, /debug/, the admin page) needs a Host that names
// the server without a rebindable name.
func openToAnyHost(r *http.Request) bool {
	return slices.Contains([]string{"/healthz", "/readyz", "/healthcheck", "/metrics",
		httpapi.PathCheck, httpapi.PathCheckBatch, httpapi.PathPeek, httpapi.PathEnvoyJSON}, r.URL.Path)
}

// httpAPI is the HTTP/JSON API (nil with --http-api=false): a
// RateLimiter like the gRPC one, on the same store and config, whose
// decisions the metrics count under api="http", and at /json the gRPC
// side's Envoy service itself, traced like gRPC calls (p's tracing), its
// callers checked with p's tokens.
func (e serveEnv) httpAPI(st store.Store, apis decisionAPIs, p grpcPipeline) http.Handler {
	f, tokens, tr, reg, s := e.f, p.tokens, p.tracing, e.reg, apis.settings
	if !f.httpAPI {
		return nil
	}
	hs := httpapi.Settings{
		Rules:          s.Rules,
		MaxBodyBytes:   int64(f.maxRecvMsgBytes),
		Timeout:        f.limits.UnaryTimeout,
		AllowedOrigins: strings.Split(f.httpCORSOrigins, ","),
		Metrics:        reg,
		Logger:         s.Logger,
		Envoy:          apis.envoy,
		DenyStatus:     f.httpDenyStatus,
		Auth:           tokens,
	}
	if hs.ResetRefused = giveback.PortRefusal(f.httpAddr, tokens != nil); hs.ResetRefused != "" {
		s.Logger.Warn("Reset is refused on the HTTP/JSON API, and so are refunds: its port is bound beyond loopback without --auth-token-file", "http_addr", f.httpAddr)
	}
	return tr.HTTPHandler(httpapi.New(server.NewRateLimiter(st, server.CheckSettings{Settings: s, API: observability.APIHTTP}), hs))
}
