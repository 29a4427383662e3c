package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/floodgate/floodgate/internal/observability"
)

// LogHTTP logs each request h serves at debug level, like the gRPC calls:
// method, path (without its query), status, duration and remote address;
// never a header or a body, so no token shows. Without debug logs on log
// it returns h itself, costing nothing. now reads the clock.
func LogHTTP(log *slog.Logger, now func() time.Time, h http.Handler) http.Handler {
	if !log.Enabled(context.Background(), slog.LevelDebug) {
		return h
	}
	return &httpLogger{log: log, now: now, next: h}
}

// httpLogger is LogHTTP's handler.
type httpLogger struct {
	log  *slog.Logger
	now  func() time.Time
	next http.Handler
}

func (l *httpLogger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := l.now()
	sw := &observability.StatusRecorder{ResponseWriter: w}
	l.next.ServeHTTP(sw, r)
	status := sw.Code()
	l.log.LogAttrs(r.Context(), slog.LevelDebug, "finished HTTP call",
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.String("duration", l.now().Sub(start).String()),
		slog.String("remote", r.RemoteAddr))
}
