package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestErrorLogAtMostOncePerInterval(t *testing.T) {
	var logs bytes.Buffer
	now := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newErrorLog(slog.New(slog.NewTextHandler(&logs, nil)), "tracing: export failed", func() time.Time { return now })
	steps := []struct {
		after time.Duration
		lines int    // logged so far
		last  string // in the last line
	}{
		{0, 1, "errors_not_logged=0"},
		{time.Second, 1, ""},
		{ErrorLogInterval - 2*time.Second, 1, ""}, // 1s short of the interval
		{2 * time.Second, 2, "errors_not_logged=2"},
		{ErrorLogInterval, 3, "errors_not_logged=0"},
	}
	for i, s := range steps {
		now = now.Add(s.after)
		l.report(errors.New("connection refused"))
		lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
		if len(lines) != s.lines {
			t.Fatalf("step %d: %d lines, want %d:\n%s", i, len(lines), s.lines, logs.String())
		}
		if s.last != "" && !strings.Contains(lines[len(lines)-1], s.last) {
			t.Errorf("step %d: last line %q, want %q in it", i, lines[len(lines)-1], s.last)
		}
	}
}

// failingExporter fails every export, as one to an unreachable collector.
type failingExporter struct{ calls int }

func (f *failingExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error {
	f.calls++
	return errors.New("rpc error: code = Unavailable desc = connection refused")
}
func (f *failingExporter) Shutdown(context.Context) error { return nil }

func TestLoggedExporterSwallowsAndLogs(t *testing.T) {
	var logs bytes.Buffer
	next := &failingExporter{}
	e := &loggedExporter{next: next, errs: newErrorLog(slog.New(slog.NewTextHandler(&logs, nil)), "tracing: export failed", time.Now)}
	for range 3 {
		if err := e.ExportSpans(context.Background(), nil); err != nil {
			t.Fatalf("ExportSpans: %v, want nil (logged here, not by the global handler)", err)
		}
	}
	if next.calls != 3 {
		t.Errorf("%d exports, want 3", next.calls)
	}
	if n := strings.Count(logs.String(), "tracing: export failed"); n != 1 || !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("logs %q: want one line with the error", logs.String())
	}
}
