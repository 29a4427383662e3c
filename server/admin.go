package server

import (
	"context"
	"net/http"
	"net/http/pprof"
	"time"
)

// AdminSettings configure the HTTP admin endpoints. The zero value serves
// /healthz and pprof, and a /readyz that is always ready.
type AdminSettings struct {
	// Ready reports whether the server can decide (config loaded, store
	// reachable or failing in its declared mode). nil means always ready.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics; nil leaves it out.
	Metrics http.Handler
}

// NewAdminHandler serves the operational endpoints:
//
//	/healthz       200 while the process runs (liveness)
//	/readyz        200 when Ready says so, else 503 with the reason
//	/metrics       Prometheus metrics, when configured
//	/debug/pprof/  the Go profiler
func NewAdminHandler(s AdminSettings) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
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
		_, _ = w.Write([]byte("ok\n"))
	})
	if s.Metrics != nil {
		mux.Handle("GET /metrics", s.Metrics)
	}
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}
