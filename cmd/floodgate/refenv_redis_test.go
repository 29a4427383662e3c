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
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestReferenceRedisUnixSocket: the reference's default socket type,
// unix, with REDIS_URL a socket path and REDIS_AUTH its password, reaches
// a Redis that listens only on that socket; a wrong password is refused.
func TestReferenceRedisUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "redis.sock")
	srv := redistest.StartServer(t, "--unixsocket", sock, "--unixsocketperm", "700")
	if err := srv.Client().ConfigSet(context.Background(), "requirepass", "s3cret").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		auth   string
		wantOK bool
	}{{"s3cret", true}, {"default:s3cret", true}, {"wrong", false}} {
		_, f := parseRef(t, map[string]string{"REDIS_URL": sock, "REDIS_AUTH": tc.auth, "REDIS_TIMEOUT": "2s"})
		st, _, err := serveEnv{f: &f, log: slog.New(slog.NewTextHandler(io.Discard, nil))}.buildStore(context.Background(), nil, nil)
		if err != nil {
			if tc.wantOK {
				t.Fatalf("auth %q: buildStore: %v", tc.auth, err)
			}
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = st.Ping(ctx)
		cancel()
		st.Close()
		if (err == nil) != tc.wantOK {
			t.Errorf("auth %q over %s: ping %v, want ok=%v", tc.auth, f.redisConn.URL, err, tc.wantOK)
		}
	}
}

// TestPerSecondRedisStore: --redis-persecond-url opens a second Redis
// (pinged with the main one) and needs --redis-url; a bad URL names its
// flag.
func TestPerSecondRedisStore(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	main, sec := redistest.StartServer(t), redistest.StartServer(t)
	_, f := parseRef(t, map[string]string{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": main.Addr(),
		"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": sec.Addr(), "REDIS_TIMEOUT": "2s"})
	st, _, err := serveEnv{f: &f, log: quiet}.buildStore(context.Background(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Ping(context.Background()); err != nil {
		t.Errorf("ping: %v", err)
	}
	st.Close()
	for _, tc := range []struct {
		f    serveFlags
		want string
	}{
		{serveFlags{redisPerSecond: redisstore.ClientConfig{URL: "redis://" + sec.Addr()}}, "--redis-persecond-url needs --redis-url"},
		{serveFlags{redis: redisstore.Config{Timeout: time.Second},
			redisConn: redisstore.ClientConfig{URL: "redis://" + main.Addr(), Mode: "standalone", DialTimeout: time.Second}, memory: memstore.Config{SettleWindow: time.Hour},
			redisPerSecond: redisstore.ClientConfig{URL: "redis://a b", Mode: "standalone"}}, "--redis-persecond-url"},
	} {
		if _, _, err := (serveEnv{f: &tc.f, log: quiet}).buildStore(context.Background(), nil, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %s", tc.f.redisPerSecond, err, tc.want)
		}
	}
}
