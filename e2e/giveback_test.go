package e2e

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestLeakyGiveBackKeepsSpacing: on the binary, embedded and on Redis, a
// leaky bucket of 10 per 100 s queues three callers at 0, 10 and 20 s; a
// give-back (a check of cost -1, as a caller in the middle of the queue
// sends when it stops waiting) frees no slot, so the next caller starts
// a slot after the last one (30 s), never at the same time as it (the
// give-back used to free the queue's last slot: 20 s, two starts at once).
func TestLeakyGiveBackKeepsSpacing(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"embedded", func(*testing.T) []string { return nil }},
		{"redis", func(t *testing.T) []string {
			// A generous --redis-timeout, so that a loaded machine's slow
			// call is not answered by the failure mode instead.
			return []string{"--redis-url", "redis://" + redistest.StartServer(t).Addr(), "--redis-timeout", "2s"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := startServe(t, tc.args(t)...).Client(t)
			check := func(cost int64) *floodgatev1.CheckResponse {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r, err := c.Check(ctx, &floodgatev1.CheckRequest{Key: "queue", Algorithm: floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET, Cost: cost,
					Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 10, Period: durationpb.New(100 * time.Second)}}})
				if err != nil || !r.Allowed || r.Degraded {
					t.Fatalf("check of cost %d: %v, %v; want allowed", cost, r, err)
				}
				return r
			}
			// startAt is when a caller admitted by a check of cost 1 starts:
			// the check's time plus its wait (to within the call's duration).
			startAt := func() time.Time {
				t.Helper()
				at := time.Now()
				return at.Add(check(1).Wait.AsDuration())
			}
			first := startAt()
			var last time.Time
			for i, want := range []time.Duration{10 * time.Second, 20 * time.Second} {
				last = startAt()
				if d := last.Sub(first); d < want-time.Second || d > want+time.Second {
					t.Fatalf("caller %d starts %v after the first, want %v", i+2, d, want)
				}
			}
			check(-1)
			if d := startAt().Sub(last); d < 9*time.Second {
				t.Errorf("after a give-back the next caller starts %v after the last one, want a slot (10 s)", d)
			}
		})
	}
}
