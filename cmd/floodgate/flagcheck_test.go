package main

import (
	"testing"
)

// TestServeRangeChecks: serve's check refuses every numeric flag out of
// range before anything starts, naming the flag and the value, and takes
// the defaults and each flag's least value.
func TestServeRangeChecks(t *testing.T) {
	def := serveFlagsFor(t)
	if _, err := def.check(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string // "" when accepted
	}{
		{[]string{"--max-key-bytes", "0"}, "--max-key-bytes must be positive, got 0"},
		{[]string{"--max-streams", "0"}, "--max-streams must be positive, got 0"},
		{[]string{"--max-connections-per-client", "-1"}, "--max-connections-per-client must be positive, got -1"},
		{[]string{"--max-header-list-bytes", "0"}, "--max-header-list-bytes must be positive, got 0"},
		{[]string{"--unary-timeout", "0s"}, "--unary-timeout must be positive, got 0s"},
		{[]string{"--quota-max-buckets-per-stream", "0"}, "--quota-max-buckets-per-stream must be positive, got 0"},
		{[]string{"--quota-assignment-ttl", "-1s"}, "--quota-assignment-ttl must be positive, got -1s"},
		{[]string{"--settle-window", "999us"}, "--settle-window must be at least 1ms, got 999µs"},
		{[]string{"--settle-window", "1ms"}, ""},
		{[]string{"--redis-batch-max-wait", "-1ms"}, "--redis-batch-max-wait must not be negative, got -1ms"},
		{[]string{"--redis-batch-max-wait", "0s"}, ""},
		{[]string{"--deny-cache-size", "-1"}, "--deny-cache-size must not be negative, got -1"},
		{[]string{"--deny-cache-size", "0"}, ""},
		{[]string{"--replicas", "-1"}, "--replicas must not be negative, got -1"},
		{[]string{"--limited-rules", "0"}, "--limited-rules must be positive, got 0"},
		{[]string{"--replicas-heartbeat", "0s"}, "--replicas-heartbeat must be positive, got 0s"},
	} {
		f := serveFlagsFor(t, tc.args...)
		_, err := f.check()
		switch {
		case err == nil && tc.want != "":
			t.Errorf("%v: accepted, want %q", tc.args, tc.want)
		case err != nil && err.Error() != tc.want:
			t.Errorf("%v: err %q, want %q", tc.args, err, tc.want)
		}
	}
}
