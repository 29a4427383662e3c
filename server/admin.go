package server

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/floodgate/floodgate/internal/auth"
	"github.com/floodgate/floodgate/internal/configview"
	"github.com/floodgate/floodgate/internal/limited"
	"github.com/floodgate/floodgate/internal/observability"
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
	AdminAuth *auth.TokenAuth
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
		for path, h := range map[string]http.HandlerFunc{"": pprof.Index, "cmdline": pprof.Cmdline, "profile": pprof.Profile, "symbol": pprof.Symbol, "trace": pprof.Trace} {
			mux.Handle("/debug/pprof/"+path, adminOnly(s.AdminAuth, h))
		}
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

// adminOnly serves h behind authz when it is set: a request then needs
// "Authorization: Bearer <token>" with an admin token (or HTTP Basic auth
// with the token as the password, any user name, which is how a browser
// opening the page at / sends it), else it answers 401 (no known token,
// with WWW-Authenticate challenges for both) or 403 (a token that is not
// an admin one) and h never runs.
func adminOnly(authz *auth.TokenAuth, h http.Handler) http.Handler {
	if authz == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authorization := r.Header.Get("Authorization")
		if _, password, ok := r.BasicAuth(); ok {
			authorization = "Bearer " + password
		}
		if err := authz.AuthorizeAdmin(r.Context(), authorization); err != nil {
			code := http.StatusUnauthorized
			if status.Code(err) == codes.PermissionDenied {
				code = http.StatusForbidden
			} else {
				w.Header().Add("WWW-Authenticate", `Bearer realm="floodgate admin"`)
				w.Header().Add("WWW-Authenticate", `Basic realm="floodgate admin", charset="UTF-8"`)
			}
			http.Error(w, status.Convert(err).Message(), code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// debugConfig serves GET /debug/config (NewAdminHandler puts it behind
// adminOnly): the live rules as JSON, each with where it was defined, and
// when they were loaded, as `floodgate config explain --json` shows them.
func debugConfig(src RuleSource) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, configview.New(currentRules(src)))
	}
}

// debugLimited serves GET /debug/limited, the heaviest denied keys of
// each rule (see package limited) as JSON, from t at clock's time
// (NewAdminHandler puts it behind adminOnly). Query parameters: rule,
// domain, k, by (denied or cost), window (1m or 15m); a bad one answers
// 400 naming it. Without a tracker it answers 404.
func debugLimited(t *limited.Tracker, clock func() time.Time) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if t == nil {
			http.Error(w, "heavy-hitter tracking is off (--limited-keys 0)", http.StatusNotFound)
			return
		}
		q, err := limitedQuery(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		WriteJSON(w, t.Report(clock(), q))
	}
}

// limitedQuery reads a limited.Query from r's query parameters.
func limitedQuery(r *http.Request) (limited.Query, error) {
	v := r.URL.Query()
	q := limited.Query{Rule: v.Get("rule"), Domain: v.Get("domain"), By: v.Get("by"), Window: v.Get("window")}
	if s := v.Get("k"); s != "" {
		k, err := strconv.Atoi(s)
		if err != nil {
			return q, errors.New("k: want a whole number of keys, got " + strconv.Quote(s))
		}
		q.K = k
	}
	return q, q.Validate()
}

// WriteJSON answers v as indented JSON, not to be cached and not to be
// sniffed as another type: the one way the admin endpoints answer JSON.
func WriteJSON(w http.ResponseWriter, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)+1))
	_, _ = w.Write(append(body, '\n'))
}

// LogHTTP logs each request h serves at debug level, like the gRPC calls:
// method, path (without its query), status, duration and remote address;
// never a header or a body, so no token shows. Without debug logs on log
// it returns h itself, costing nothing. now reads the clock.
func LogHTTP(log *slog.Logger, now func() time.Time, h http.Handler) http.Handler {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		sw := &observability.StatusRecorder{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		log.LogAttrs(r.Context(), slog.LevelDebug, "finished HTTP call",
			slog.String("method", r.Method),
			slog.String("path", r.URL.Path),
			slog.Int("status", sw.Code()),
			slog.String("duration", now().Sub(start).String()),
			slog.String("remote", r.RemoteAddr))
	})
}
