package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/redistest"
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
		st, _, err := buildStore(context.Background(), f, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil, nil)
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
			t.Errorf("auth %q over %s: ping %v, want ok=%v", tc.auth, f.redisURL, err, tc.wantOK)
		}
	}
}
