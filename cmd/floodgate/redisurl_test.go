package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestRedisURLForms: --redis-url takes a URL or a bare host:port (read as
// redis://host:port); a value of no form, or one the Redis client's own
// parser refuses for --redis-mode, is an error that starts with the flag
// (or $FLOODGATE_REDIS_URL when the environment gave it), names the value
// without its password and says the forms wanted.
func TestRedisURLForms(t *testing.T) {
	tests := []struct {
		in, mode, want, wantErr string
	}{
		{"127.0.0.1:6379", "", "redis://127.0.0.1:6379", ""},
		{"localhost:6380", "", "redis://localhost:6380", ""},
		{"[::1]:6379", "", "redis://[::1]:6379", ""},
		{"redis.internal:7000", "", "redis://redis.internal:7000", ""},
		{"redis://127.0.0.1:6379/2", "", "redis://127.0.0.1:6379/2", ""},
		{"rediss://u:p@h:1", "", "rediss://u:p@h:1", ""},
		{"unix:///run/redis.sock", "", "unix:///run/redis.sock", ""},
		{"", "", "", ""},
		{"127.0.0.1:7000", "cluster", "redis://127.0.0.1:7000", ""},
		{"redis://a:1?addr=b:2&addr=c:3", "cluster", "redis://a:1?addr=b:2&addr=c:3", ""},
		{"redis://s1:26379?addr=s2:26379", "sentinel", "redis://s1:26379?addr=s2:26379", ""},
		{"redis://s1:26379?addr=s2:26379&replica_only=true", "sentinel", "redis://s1:26379?addr=s2:26379&replica_only=true", ""},
		{"unix:///run/redis.sock", "cluster", "", `--redis-url: ` + "redisstore: bad redis client config: redis URL unix:///run/redis.sock: a unix socket needs a path and mode standalone"},
		{"localhost", "", "", `--redis-url "localhost": not a URL, nor a host:port; want redis://`},
		{"127.0.0.1:", "", "", `--redis-url "127.0.0.1:": `},
		{":6379", "", "", `--redis-url ":6379": `},
		{"127.0.0.1:port", "", "", "host:port"},
		{"127.0.0.1:99999", "", "", "unix:///path/to/redis.sock"},
		{"127.0.0.1:0", "", "", `--redis-url "127.0.0.1:0": `},
		{"/run/redis.sock", "", "", `--redis-url "/run/redis.sock": `},
		{"user:s3cret@127.0.0.1:6379", "", "", `--redis-url "user:xxxxx@127.0.0.1:6379": `},
		{"s3cret@127.0.0.1:6379", "", "", `--redis-url "xxxxx@127.0.0.1:6379": `},
		{"run/redis:6379", "", "", `--redis-url "run/redis:6379": `},
		// What the Redis client's own parser refuses.
		{"redis://u:s3cret@127.0.0.1:6379/abc", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://u:xxxxx@127.0.0.1:6379/abc: redis: invalid database number: "abc"; want redis://`},
		{"redis://127.0.0.1:6379/0/1", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://127.0.0.1:6379/0/1: redis: invalid URL path`},
		{"http://127.0.0.1:6379", "", "", `--redis-url: redisstore: bad redis client config: redis URL http://127.0.0.1:6379: scheme must be redis, rediss or unix, got "http"; want`},
		{"redis://127.0.0.1:6379?dial_timeout=soon", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://127.0.0.1:6379?dial_timeout=soon: redis: invalid dial_timeout duration`},
		{"redis://127.0.0.1:6379?colour=blue", "", "", `redis URL redis://127.0.0.1:6379?colour=blue: redis: unexpected option: colour`},
		{"redis://127.0.0.1:6379?colour=blue", "cluster", "", `redis cluster URL redis://127.0.0.1:6379?colour=blue: redis: unexpected option: colour`},
		{"redis://127.0.0.1:6379?addr=b:2&colour=blue", "sentinel", "", "redis sentinel URL redis://127.0.0.1:6379?addr=b:2&colour=blue: redis: unexpected option: colour"},
		{"redis://:s3cret@[::1", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://:xxxxx@[::1: missing ']' in host; want`},
		{"redis://u:s3cret@h:port", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://u:xxxxx@h:port: invalid port ":port" after host; want`},
		{"redis:///0", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis:///0: no host; want`},
		// A password that the parser's message repeats, or that holds an @.
		{"redis://u:s3cret@h:6379/s3cret", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://u:xxxxx@h:6379/xxxxx: redis: invalid database number: "xxxxx"`},
		{"redis://s3cret@h:6379/s3cret", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://xxxxx@h:6379/xxxxx: redis: invalid database number: "xxxxx"`},
		{"redis://u:pa@s3cret@h:port", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://u:xxxxx@h:port: invalid port`},
		{"redis://u:s3cret@/0", "", "", `--redis-url: redisstore: bad redis client config: redis URL redis://u:xxxxx@/0: no host`},
	}
	for _, tc := range tests {
		t.Run(tc.in+" "+tc.mode, func(t *testing.T) {
			args := []string{"--redis-url", tc.in}
			if tc.mode != "" {
				args = append(args, "--redis-mode", tc.mode)
			}
			var stderr strings.Builder
			f, err := parseServeFlags(args, func(string) string { return "" }, io.Discard, &stderr)
			if tc.wantErr != "" {
				msg := stderr.String()
				if err == nil || !strings.HasPrefix(msg, "floodgate serve: --redis-url") || !strings.Contains(msg, tc.wantErr) || strings.Contains(msg, "s3cret") {
					t.Fatalf("parseServeFlags(%q) = %q, %v, printing %q; want an error starting with --redis-url, containing %q and no password", args, f.redisConn.URL, err, msg, tc.wantErr)
				}
				return
			}
			if err != nil || f.redisConn.URL != tc.want {
				t.Fatalf("parseServeFlags(%q) = %q, %v (%s); want %q", args, f.redisConn.URL, err, stderr.String(), tc.want)
			}
		})
	}
}

// TestRedisURLFromEnvironment: a bad $FLOODGATE_REDIS_URL is named as the
// variable, not the flag, with its password masked; the flag, when given
// too, wins and is the one named.
func TestRedisURLFromEnvironment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "FLOODGATE_REDIS_URL" {
				return v
			}
			return ""
		}
	}
	for _, tc := range []struct {
		args      []string
		env, want string
	}{
		{nil, "redis://u:s3cret@h:6379/x", `floodgate serve: $FLOODGATE_REDIS_URL: redisstore: bad redis client config: redis URL redis://u:xxxxx@h:6379/x: redis: invalid database number: "x"; want redis://`},
		{nil, "s3cret@h:6379", `floodgate serve: $FLOODGATE_REDIS_URL="xxxxx@h:6379": not a URL, nor a host:port; want`},
		{[]string{"--redis-url", "h:port"}, "redis://h:6379", `floodgate serve: --redis-url "h:port": `},
	} {
		var stderr strings.Builder
		f, err := parseServeFlags(tc.args, env(tc.env), io.Discard, &stderr)
		if err == nil || !strings.HasPrefix(stderr.String(), tc.want) || strings.Contains(stderr.String(), "s3cret") {
			t.Errorf("args %q, $FLOODGATE_REDIS_URL=%q: %q, %v, printing %q; want it to start %q, no password", tc.args, tc.env, f.redisConn.URL, err, stderr.String(), tc.want)
		}
	}
	f, err := parseServeFlags(nil, env("127.0.0.1:6379"), io.Discard, io.Discard)
	if err != nil || f.redisConn.URL != "redis://127.0.0.1:6379" {
		t.Errorf("$FLOODGATE_REDIS_URL=127.0.0.1:6379: %q, %v; want redis://127.0.0.1:6379", f.redisConn.URL, err)
	}
}

// TestRedisPerSecondURL: --redis-persecond-url, or its variable, is read
// and checked as --redis-url is, and its errors name it.
func TestRedisPerSecondURL(t *testing.T) {
	none := func(string) string { return "" }
	env := func(k string) string {
		if k == "FLOODGATE_REDIS_PERSECOND_URL" {
			return "u:s3cret@h"
		}
		return ""
	}
	for _, tc := range []struct {
		args   []string
		getenv func(string) string
		want   string
	}{
		{[]string{"--redis-persecond-url", "localhost"}, none, `floodgate serve: --redis-persecond-url "localhost": not a URL, nor a host:port; want redis://`},
		{[]string{"--redis-persecond-url", "redis://h:2?colour=blue"}, none, "floodgate serve: --redis-persecond-url: redisstore: bad redis client config: redis URL redis://h:2?colour=blue: redis: unexpected option: colour; want redis://"},
		{nil, env, `floodgate serve: $FLOODGATE_REDIS_PERSECOND_URL="u:xxxxx@h": not a URL, nor a host:port; want`},
	} {
		var stderr strings.Builder
		f, err := parseServeFlags(append([]string{"--redis-url", "h:1"}, tc.args...), tc.getenv, io.Discard, &stderr)
		if err == nil || !strings.HasPrefix(stderr.String(), tc.want) || strings.Contains(stderr.String(), "s3cret") {
			t.Errorf("%q: %q, %v, printing %q; want it to start %q, no password", tc.args, f.redisPerSecond.URL, err, stderr.String(), tc.want)
		}
	}
	f, err := parseServeFlags([]string{"--redis-url", "h:1", "--redis-persecond-url", "h:2"}, none, io.Discard, io.Discard)
	if err != nil || f.redisPerSecond.URL != "redis://h:2" {
		t.Errorf("--redis-persecond-url h:2: %q, %v; want redis://h:2", f.redisPerSecond.URL, err)
	}
}

// TestServeRedisURLReal: serve's --redis-url reaches a real Redis given as
// a bare host:port and as unix:///path over a unix socket.
func TestServeRedisURLReal(t *testing.T) {
	redistest.Require(t)
	sock := filepath.Join(t.TempDir(), "redis.sock")
	srv := redistest.StartServer(t, "--unixsocket", sock, "--unixsocketperm", "700")
	for _, url := range []string{srv.Addr(), "unix://" + sock} {
		t.Run(url, func(t *testing.T) {
			f, err := parseServeFlags([]string{"--redis-timeout", "2s", "--redis-url", url}, func(string) string { return "" }, io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			st, _, err := serveEnv{f: &f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}.buildStore(context.Background(), nil, nil)
			if err != nil {
				t.Fatalf("buildStore: %v", err)
			}
			defer st.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := st.Ping(ctx); err != nil {
				t.Fatalf("ping over %s: %v", url, err)
			}
			// The quota service's own client takes the same URL.
			_, quotaClient, err := openQuota(f, nil, prometheus.NewRegistry(), slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err != nil {
				t.Fatalf("openQuota: %v", err)
			}
			quotaClient.Close()
		})
	}
}
