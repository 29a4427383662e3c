package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
)

// TestCredentialsRefused: a Redis that refuses floodgate's credentials
// (no password, a wrong one) or its ACL user's rights (no scripts) can
// never decide: CheckServer, Ping and Decide fail with
// store.ErrMisconfigured (still store.ErrUnavailable, so the failure
// modes answer) and a message naming the fix. They used to fail as plain
// errors: not an outage, so the breaker stayed closed, the store health
// SERVING and /readyz ready while every decision was degraded.
func TestCredentialsRefused(t *testing.T) {
	r := redistest.StartServer(t)
	ctx := context.Background()
	admin := r.Client()
	for _, cmd := range [][]any{
		{"ACL", "SETUSER", "pingonly", "on", ">pingpw", "~*", "+ping", "+info"},
		{"ACL", "SETUSER", "bare", "on", ">barepw", "~*", "+ping"},
		{"ACL", "SETUSER", "noinfo", "on", ">noinfopw", "~*", "+ping", "+@scripting"},
		{"ACL", "SETUSER", "fcallonly", "on", ">fcallpw", "~*", "+ping", "+info", "+fcall"},
		{"CONFIG", "SET", "requirepass", "right-password"},
	} {
		if err := admin.Do(ctx, cmd...).Err(); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
	}
	reqs := []store.Request{{Key: "a", Limit: limit(algorithms.TokenBucket, 5), Cost: 1}}
	opts := func(user, pw string) *redis.Options {
		return &redis.Options{Addr: r.Addr(), Username: user, Password: pw, MaxRetries: -1}
	}
	for _, tc := range []struct {
		name string
		opt  *redis.Options
		want []string // in every error
	}{
		{"no password", opts("", ""), []string{"NOAUTH", "needs a password", "--redis-password-file"}},
		{"wrong password", opts("", "wrong-password"), []string{"WRONGPASS", "--redis-password-file"}},
		{"unknown user", opts("nobody", "right-password"), []string{"WRONGPASS", "user name or password"}},
		{"a user without scripts", opts("pingonly", "pingpw"), []string{"NOPERM", "+@scripting"}},
		{"a user without INFO or scripts", opts("bare", "barepw"), []string{"NOPERM", "+@scripting"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := redis.NewClient(tc.opt)
			defer c.Close()
			s := newStore(t, c, testConfig())
			defer s.Close()
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, store.ErrMisconfigured) || !errors.Is(err, store.ErrUnavailable) {
					t.Fatalf("%s: %v, want ErrMisconfigured (and ErrUnavailable)", op, err)
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: %q does not name %q", op, err, w)
					}
				}
				if strings.Contains(err.Error(), "right-password") || strings.Contains(err.Error(), "pingpw") || strings.Contains(err.Error(), "barepw") {
					t.Errorf("%s: %q shows a password", op, err)
				}
			}
			check("CheckServer", s.CheckServer(ctx))
			check("Ping", s.Ping(ctx))
			check("Decide", s.Decide(ctx, t0, reqs, make([]algorithms.Decision, len(reqs))))
		})
	}
	// Allowed: the right password; a user refused INFO but allowed
	// scripts; a user allowed FCALL only (the store uses functions).
	for _, opt := range []*redis.Options{opts("", "right-password"), opts("noinfo", "noinfopw"), opts("fcallonly", "fcallpw")} {
		c := redis.NewClient(opt)
		s := newStore(t, c, testConfig())
		if err := s.CheckServer(ctx); err != nil {
			t.Errorf("CheckServer as %q: %v", opt.Username, err)
		}
		if err := s.Ping(ctx); err != nil {
			t.Errorf("Ping as %q: %v", opt.Username, err)
		}
		s.Close()
		c.Close()
	}
}
