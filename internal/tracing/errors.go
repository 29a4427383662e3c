package tracing

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/floodgate/floodgate/internal/observability"
)

// ErrorLogInterval is the least time between two logged export errors;
// the errors in between are counted in the next line.
const ErrorLogInterval = time.Minute

// errorLog logs errors at most once per ErrorLogInterval, with the count
// of those it did not log, so a collector that is down for hours fills no
// disk.
type errorLog struct {
	log   *slog.Logger
	msg   string
	clock func() time.Time
	every observability.LogLimiter
}

func newErrorLog(log *slog.Logger, msg string, clock func() time.Time) *errorLog {
	return &errorLog{log: cmp.Or(log, slog.Default()), msg: msg, clock: clock}
}

// report logs err unless a line was logged less than ErrorLogInterval ago.
func (l *errorLog) report(err error) {
	if n, ok := l.every.Allow(l.clock(), ErrorLogInterval); ok {
		l.log.Warn(l.msg, "err", err, "errors_not_logged", n, "next_log_after", ErrorLogInterval)
	}
}

// loggedExporter is an exporter whose errors are logged by errs and not
// passed on: the batch processor would hand them to OpenTelemetry's
// process-wide error handler, which prints each one to stderr.
type loggedExporter struct {
	next sdktrace.SpanExporter
	errs *errorLog
}

// ExportSpans exports spans, logging a failure; the spans are dropped.
func (e *loggedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if err := e.next.ExportSpans(ctx, spans); err != nil {
		e.errs.report(err)
	}
	return nil
}

// Shutdown stops the exporter.
func (e *loggedExporter) Shutdown(ctx context.Context) error { return e.next.Shutdown(ctx) }

// RouteGlobalLogs sends OpenTelemetry's process-wide error handler and
// internal logger (plain stderr lines by default, which break --log-format
// json) to log. Only the command that owns the process calls it, once.
func RouteGlobalLogs(log *slog.Logger) {
	errs := newErrorLog(log, "tracing: error", time.Now)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(errs.report))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
}
