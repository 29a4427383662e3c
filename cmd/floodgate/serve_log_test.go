package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestQuietRedisLogJSON: a go-redis line through quietRedisLog is one
// JSON record at WARN, the text in "log".
func TestQuietRedisLogJSON(t *testing.T) {
	var buf bytes.Buffer
	q := &quietRedisLog{log: slog.New(slog.NewJSONHandler(&buf, nil)), now: time.Now}
	q.Printf(context.Background(), "redis: connection pool: failed to dial after %d attempts: %v\n", 5, "dial tcp 127.0.0.1:1: connect: connection refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("got %d lines: %q", len(lines), buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	if rec["level"] != "WARN" || rec["msg"] != "go-redis" || rec["log"] != "redis: connection pool: failed to dial after 5 attempts: dial tcp 127.0.0.1:1: connect: connection refused" {
		t.Fatalf("record %v", rec)
	}
}
