package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/server/adminui"
)

// AdminSettings configure the HTTP admin endpoints. The zero value serves
// /healthz, and a /readyz that is always ready.
type AdminSettings struct {
	// Ready reports whether the server can decide (config loaded, store
	// reachable or failing in its declared mode). nil means always ready.
	// A ready server whose Rules hold none answers "ok: no rules loaded".
	Ready func(ctx context.Context) error
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
	// Pprof serves the Go profiler under /debug/pprof/. Off by default:
	// profiles, traces and goroutine dumps show what the server is doing
	// and holds, and a CPU profile or trace costs CPU while it runs.
	Pprof bool
	// API serves the HTTP/JSON decision API under /v1/ and Envoy's API as
	// JSON at /json (server/httpapi); nil leaves them out.
	API http.Handler
	// Rules serves GET /debug/config: the live rules as JSON with where
	// each was defined and when they were loaded (see ConfigView). nil
	// means no rules: /debug/config then says "loaded": false.
	Rules RuleSource
	// AdminAuth, when set, guards the admin-only endpoints, the page at /
	// and everything under /debug/ (/debug/config, /debug/limited,
	// /debug/explain and, with Pprof, /debug/pprof/*, whose
	// cmdline and goroutine dumps show the command line and what the
	// server holds): they then need "Authorization: Bearer <token>" with an
	// admin token, and answer 401 without a known token, 403 with a token
	// that is not an admin one. /healthz, /readyz and /metrics stay open
	// (probes and scrapers carry no token); /v1/ has its own token check.
	AdminAuth AdminAuthorizer
	// Limited serves GET /debug/limited, the heaviest denied keys of each
	// rule (admin-only like /debug/config); nil answers 404 there.
	Limited *limited.Tracker
	// Explain serves GET /debug/explain (admin-only): why a request to
	// ?domain= with ?descriptor=KEY=VALUE[,KEY=VALUE...] is limited, as
	// `floodgate config explain --json` says it, against the live rules.
	// nil leaves it out.
	Explain http.Handler
	// Clock reads the time of /debug/limited's reports; nil means
	// time.Now.
	Clock func() time.Time
}

// NewAdminHandler serves the operational endpoints:
//
//	/healthz       200 while the process runs (liveness)
//	/readyz        200 when Ready says so, else 503 with the reason
//	/healthcheck   the same as /readyz (envoyproxy/ratelimit's probe path)
//	/metrics       Prometheus metrics, when configured
//	/debug/pprof/  the Go profiler, when Pprof is set (needs an admin token with AdminAuth)
//	/v1/           the HTTP/JSON decision API, when API is set
//	/json          Envoy's rate-limit API as JSON, when API is set
//	/debug/config  the live rules as JSON (needs an admin token with AdminAuth)
//	/debug/limited the heaviest denied keys of each rule as JSON (admin-only)
//	/debug/explain why a descriptor is limited, when Explain is set (admin-only)
//	/              the page of the three above (package adminui; admin-only)
func NewAdminHandler(s AdminSettings) http.Handler {
	mux := http.NewServeMux()
	clock := s.Clock
	if clock == nil {
		clock = time.Now
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	ready := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if s.Ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), time.Second)
			defer cancel()
			if err := s.Ready(ctx); err != nil {
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
				return
			}
		}
		if s.Rules != nil && s.Rules.Current().Empty() {
			_, _ = w.Write([]byte("ok: no rules loaded\n"))
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	}
	mux.HandleFunc("GET /readyz", ready)
	// The reference rate-limit service's probe path, so that a Deployment
	// migrated unchanged keeps its probes.
	mux.HandleFunc("GET /healthcheck", ready)
	if s.Metrics != nil {
		mux.Handle("GET /metrics", s.Metrics)
	}
	if s.API != nil {
		mux.Handle("/v1/", s.API)
		mux.Handle("/json", s.API)
	}
	mux.Handle("GET /debug/config", adminOnly(s.AdminAuth, debugConfig(s.Rules)))
	mux.Handle("GET /debug/limited", adminOnly(s.AdminAuth, debugLimited(s.Limited, clock)))
	if s.Explain != nil {
		mux.Handle("GET /debug/explain", adminOnly(s.AdminAuth, s.Explain))
	}
	page := adminOnly(s.AdminAuth, adminui.Handler())
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /ui/", page)
	if s.Pprof {
		mux.Handle("/debug/pprof/", adminOnly(s.AdminAuth, http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", adminOnly(s.AdminAuth, http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", adminOnly(s.AdminAuth, http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", adminOnly(s.AdminAuth, http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", adminOnly(s.AdminAuth, http.HandlerFunc(pprof.Trace)))
	}
	return mux
}

// Timeouts of NewAdminServer.
const (
	// adminReadHeaderTimeout bounds reading a request's headers.
	adminReadHeaderTimeout = 5 * time.Second
	// adminReadTimeout bounds reading a whole request, body included, so a
	// client that stops half-way through a body cannot hold a connection.
	// Only the HTTP/JSON API takes bodies, small ones (it bounds its own
	// requests' time more tightly, see server/httpapi).
	adminReadTimeout = 10 * time.Second
	// adminIdleTimeout closes a keep-alive connection with no request for
	// this long. Shorter than the usual 15s-60s Prometheus scrape interval,
	// so a scraper reconnects for each scrape: one TCP handshake, while
	// idle connections cannot pile up.
	adminIdleTimeout = 10 * time.Second
)

// NewAdminServer is the HTTP server of the admin endpoints h, with
// adminReadHeaderTimeout, adminReadTimeout and adminIdleTimeout. It sets
// no write timeout: a CPU profile or trace (with Pprof) streams for as
// long as its ?seconds= asks.
func NewAdminServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: adminReadHeaderTimeout,
		ReadTimeout:       adminReadTimeout,
		IdleTimeout:       adminIdleTimeout,
	}
}
