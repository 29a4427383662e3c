package rlqs

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFailureLogSummarises: a burst of demand store failures logs one
// line, and the next line, a period later, counts the ones in between.
func TestFailureLogSummarises(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	s := New(Settings{Demand: failingDemand{}, Logger: log})
	t0 := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		s.aggregate(context.Background(), t0.Add(time.Duration(i)*time.Millisecond), nil, nil)
	}
	s.aggregate(context.Background(), t0.Add(logEvery), nil, nil)
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[1], "failures_since_last_log=99") {
		t.Errorf("logged:\n%s\nwant 2 lines, the second counting 99", buf.String())
	}
}
