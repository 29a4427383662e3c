package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/internal/redistest"
)

// TestRedisCredentialsStartup: a Redis that refuses floodgate's password
// is a configuration error like a cluster-mode mismatch: serve refuses to
// start and names the fix. The right password, read from
// --redis-password-file, never shows in the command line
// (/debug/pprof/cmdline). A wrong password used to start a server whose
// every decision was degraded while it reported itself healthy and ready.
func TestRedisCredentialsStartup(t *testing.T) {
	r := redistest.StartServer(t)
	const password = "s3cret-redis-pw-Qx7"
	if err := r.Client().Do(context.Background(), "CONFIG", "SET", "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrong := writeFile(t, dir, "wrong", []byte("not-the-password\n"))
	right := writeFile(t, dir, "right", []byte(password+"\n"))
	empty := writeFile(t, dir, "empty", []byte("\n"))
	url := "redis://" + r.Addr()
	for _, tc := range []struct {
		name string
		args []string
		want []string
		code int // 1: Redis refused the credentials (run time); 2: a bad setting
	}{
		{"no password", []string{"--redis-url", url}, []string{"NOAUTH", "needs a password", "--redis-password-file"}, 1},
		{"wrong password in the file", []string{"--redis-url", url, "--redis-password-file", wrong}, []string{"WRONGPASS", "--redis-password-file"}, 1},
		{"wrong password in the URL", []string{"--redis-url", "redis://:nope@" + r.Addr()}, []string{"WRONGPASS"}, 1},
		{"an empty file", []string{"--redis-url", url, "--redis-password-file", empty}, []string{"--redis-password-file", "empty"}, 2},
		{"a file without Redis", []string{"--redis-password-file", right}, []string{"--redis-password-file needs --redis-url"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0"}, tc.args...)
			_, stderr, code := runCLI(t, args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\n%s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stderr, password) {
				t.Errorf("stderr shows the password:\n%s", stderr)
			}
		})
	}

	p := startServe(t, "--config", writeRules(t, failureRules), "--redis-url", url, "--redis-password-file", right, "--pprof")
	firstHealthy(t, p.Client(t), "closed_p", time.Now(), 10*time.Second)
	if code, body := httpGet(t, p, "/debug/pprof/cmdline"); code != http.StatusOK || strings.Contains(body, password) || !strings.Contains(body, "--redis-password-file") {
		t.Errorf("/debug/pprof/cmdline: %d %q; want 200, the flag, not the password", code, body)
	}
}

// TestRedisCredentialsAtRunTime: Redis' password changes under a running
// server (and its connections are dropped): decisions answer by failure
// mode, the store health and /readyz fail naming the cause, and the log
// says so in one ERROR line; the old password back, it is ready and
// decides again.
func TestRedisCredentialsAtRunTime(t *testing.T) {
	r := redistest.StartServer(t)
	ctx := context.Background()
	const password, changed = "first-pw-8d2K", "second-pw-1mZ0"
	if err := r.Client().Do(ctx, "CONFIG", "SET", "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	admin := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: password})
	defer admin.Close()
	p := startServe(t, "--config", writeRules(t, failureRules), "--redis-url", "redis://"+r.Addr(),
		"--redis-password-file", writeFile(t, t.TempDir(), "pw", []byte(password)), "--redis-timeout", redisTimeout.String())
	c := p.Client(t)
	firstHealthy(t, c, "closed_p", time.Now(), 10*time.Second)

	if err := admin.Do(ctx, "CONFIG", "SET", "requirepass", changed).Err(); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes").Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "/readyz 503", func() bool { code, _ := httpGet(t, p, "/readyz"); return code == http.StatusServiceUnavailable })
	for i := range 200 {
		resp, err := c.Check(ctx, policyCheck("closed_p", "k"))
		if err != nil {
			t.Fatal(err)
		}
		if !resp.Degraded || resp.Allowed {
			t.Fatalf("decision %d with a refused password: %v, want degraded and denied (failure_mode closed)", i, resp)
		}
	}
	code, body := httpGet(t, p, "/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "WRONGPASS") || !strings.Contains(body, "--redis-password-file") {
		t.Errorf("/readyz: %d %q, want 503 naming WRONGPASS and the fix", code, body)
	}
	if n := logLines(p, "store misconfigured", `"level":"ERROR"`); n != 1 {
		t.Errorf("%d \"store misconfigured\" ERROR lines, want 1\n%s", n, p.logs)
	}
	if strings.Contains(p.logs.String(), password) {
		t.Error("the log shows the password")
	}

	if err := redis.NewClient(&redis.Options{Addr: r.Addr(), Password: changed}).Do(ctx, "CONFIG", "SET", "requirepass", password).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "/readyz 200", func() bool { code, _ := httpGet(t, p, "/readyz"); return code == http.StatusOK })
	firstHealthy(t, c, "closed_p", time.Now(), 5*time.Second)
}
