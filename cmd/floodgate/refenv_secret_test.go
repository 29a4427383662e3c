package main

import (
	"slices"
	"strings"
	"testing"
)

// TestReferenceRedisURLRefusedHidesPassword: a $REDIS_URL that is not
// the reference's host:port (say, a password in it the reference's
// client never read) is refused with an error that names the variable
// and shows its value without the password.
func TestReferenceRedisURLRefusedHidesPassword(t *testing.T) {
	const secret = "s3cr3tpa55"
	for _, env := range []map[string]string{
		{"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "u:" + secret + "@h:6379"},
		{"REDIS_TYPE": "cluster", "REDIS_URL": "h:1,u:" + secret + "@h:2"},
		{"REDIS_TYPE": "sentinel", "REDIS_URL": "m,u:" + secret + "@h:26379"},
		{"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": "u:" + secret + "@h:6379"},
	} {
		_, err := translateReference(mapEnv(env))
		if err == nil {
			t.Errorf("%v: accepted", env)
			continue
		}
		if !strings.Contains(err.Error(), "REDIS_") || strings.Contains(err.Error(), secret) {
			t.Errorf("%v: %q, want an error naming the variable, without the password", env, err)
		}
	}
}

// TestReferenceRedisURLTakesAuthAndTLS: a $REDIS_URL given as a redis://
// URL still takes $REDIS_AUTH and $REDIS_TLS, as the reference's client
// does whatever the address: a migrated deployment never reaches its
// Redis without the password or TLS it set (which would answer every
// limit by its failure mode). A password in the URL itself stays.
func TestReferenceRedisURLTakesAuthAndTLS(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"REDIS_URL": "redis://r:1/2", "REDIS_AUTH": "p@ss", "REDIS_TLS": "true"}, "rediss://:p%40ss@r:1/2"},
		{map[string]string{"REDIS_URL": "redis://r:1", "REDIS_AUTH": "u:pw"}, "redis://u:pw@r:1"},
		{map[string]string{"REDIS_URL": "rediss://r:1", "REDIS_TLS": "true"}, "rediss://r:1"},
		{map[string]string{"REDIS_URL": "redis://:own@r:1", "REDIS_AUTH": "other"}, "redis://:own@r:1"},
		{map[string]string{"REDIS_URL": "redis://r:1"}, "redis://r:1"},
	} {
		c, err := translateReference(mapEnv(tc.env))
		if err != nil {
			t.Errorf("%v: %v", tc.env, err)
			continue
		}
		if !slices.Contains(c.args, "--redis-url="+tc.want) {
			t.Errorf("%v: args %q, want --redis-url=%s", tc.env, c.args, tc.want)
		}
	}
}
