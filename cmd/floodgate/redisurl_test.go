package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestRedisURLForms: --redis-url takes a URL or a bare host:port (read as
// redis://host:port); a value of no form names the flag, the value
// (without a password) and the forms wanted.
func TestRedisURLForms(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"127.0.0.1:6379", "redis://127.0.0.1:6379", ""},
		{"localhost:6380", "redis://localhost:6380", ""},
		{"[::1]:6379", "redis://[::1]:6379", ""},
		{"redis.internal:7000", "redis://redis.internal:7000", ""},
		{"redis://127.0.0.1:6379/2", "redis://127.0.0.1:6379/2", ""},
		{"rediss://u:p@h:1", "rediss://u:p@h:1", ""},
		{"unix:///run/redis.sock", "unix:///run/redis.sock", ""},
		{"", "", ""},
		{"localhost", "", `--redis-url "localhost": want redis://`},
		{"127.0.0.1:", "", `--redis-url "127.0.0.1:"`},
		{":6379", "", `--redis-url ":6379"`},
		{"127.0.0.1:port", "", "host:port"},
		{"127.0.0.1:99999", "", "unix:///path/to/redis.sock"},
		{"127.0.0.1:0", "", `--redis-url "127.0.0.1:0"`},
		{"/run/redis.sock", "", `--redis-url "/run/redis.sock"`},
		{"user:s3cret@127.0.0.1:6379", "", "xxxxx@127.0.0.1:6379"},
		{"s3cret@127.0.0.1:6379", "", "xxxxx@127.0.0.1:6379"},
		{"run/redis:6379", "", `--redis-url "run/redis:6379"`},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := redisURLOf(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "s3cret") {
					t.Fatalf("redisURLOf(%q) = %q, %v; want an error containing %q and no password", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("redisURLOf(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestServeRedisURLReal: serve's --redis-url reaches a real Redis given as
// a bare host:port and as unix:///path over a unix socket; a bad one fails
// buildStore naming the flag.
func TestServeRedisURLReal(t *testing.T) {
	redistest.Require(t)
	sock := filepath.Join(t.TempDir(), "redis.sock")
	srv := redistest.StartServer(t, "--unixsocket", sock, "--unixsocketperm", "700")
	for _, tc := range []struct {
		url     string
		wantErr string
	}{
		{srv.Addr(), ""},
		{"unix://" + sock, ""},
		{"localhost", "--redis-url"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			f, err := parseServeFlags([]string{"--redis-url", tc.url, "--redis-timeout", "2s"}, func(string) string { return "" }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			st, _, err := buildStore(context.Background(), f, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("buildStore: %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("buildStore: %v", err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := st.Ping(ctx); err != nil {
				t.Fatalf("ping over %s: %v", tc.url, err)
			}
		})
	}
}
