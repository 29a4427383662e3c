package observability

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFailureLogLines: an outage of a minute at 1,000 failed decisions a
// second writes one WARN when it starts, one summary per interval with
// the count, and one INFO when the store decides again; a store that
// flaps (one failure, one success, over and over) writes at most two
// lines per interval.
func TestFailureLogLines(t *testing.T) {
	var buf bytes.Buffer
	f := NewFailureLog(slog.New(slog.NewTextHandler(&buf, nil)), APICheck)
	ctx := context.Background()
	errDown := errors.New("dial tcp: connection refused")
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	for range 60_000 {
		f.Failed(ctx, now, errDown)
		now = now.Add(time.Millisecond)
	}
	f.OK(ctx, now)
	f.OK(ctx, now.Add(time.Millisecond))
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := 1 + 5 + 1 // the start, a summary every 10s of the remaining 50s, the recovery
	if len(lines) != want {
		t.Fatalf("%d lines for a minute's outage, want %d:\n%s", len(lines), want, buf.String())
	}
	if !strings.Contains(lines[0], "store could not decide") || !strings.Contains(lines[0], "failed=1 ") {
		t.Errorf("first line %q", lines[0])
	}
	if !strings.Contains(lines[1], "store still failing") || !strings.Contains(lines[1], "failed=10000 ") {
		t.Errorf("summary %q, want 10000 failures", lines[1])
	}
	if last := lines[len(lines)-1]; !strings.Contains(last, "store deciding again") || !strings.Contains(last, "failed=60000 ") {
		t.Errorf("last line %q, want the recovery with 60000 failures", last)
	}

	buf.Reset()
	for range 60_000 {
		f.Failed(ctx, now, errDown)
		now = now.Add(500 * time.Microsecond)
		f.OK(ctx, now)
		now = now.Add(500 * time.Microsecond)
	}
	if n := strings.Count(buf.String(), "\n"); n > 2*7 {
		t.Errorf("%d lines for a minute of flapping, want at most 2 per 10s:\n%s", n, buf.String())
	}
}
