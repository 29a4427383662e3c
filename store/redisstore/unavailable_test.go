package redisstore

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestUnavailableClassifies pins which errors mean Redis is unavailable.
// The pool's timeout is recognised by identity (errors.Is), not by its
// text: an unrelated error that merely quotes the words is not an outage.
func TestUnavailableClassifies(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"pool timeout", redis.ErrPoolTimeout, true},
		{"pool timeout, wrapped", fmt.Errorf("evalsha: %w", redis.ErrPoolTimeout), true},
		{"pool timeout, joined", errors.Join(errors.New("pipeline"), redis.ErrPoolTimeout), true},
		{"deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), true},
		{"client closed", redis.ErrClosed, true},
		{"the words without the error", errors.New(`ERR user script: "connection pool timeout"`), false},
		{"an unrelated error", errors.New("ERR unknown command"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unavailable(tc.err); got != tc.want {
				t.Errorf("unavailable(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
