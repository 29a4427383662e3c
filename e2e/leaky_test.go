package e2e

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestLeakyBucketThreeReplicas: three floodgate binaries on one
// Redis, 50 concurrent callers on one key of a leaky bucket at 20/s
// (caller i asks replica i mod 3): every caller is admitted with a wait,
// and the starts (the decision's time, on Redis' clock, plus the wait) are
// 50 ms apart: each start is known to within its call's duration (the
// jitter), and sorted, every gap's possible range holds 50 ms, so no two
// starts are closer than 50 ms minus their two calls' durations.
func TestLeakyBucketThreeReplicas(t *testing.T) {
	r := redistest.StartServer(t)
	var clients []floodgatev1.RateLimiterClient
	for range 3 {
		// A generous --redis-timeout: 50 callers at once on a loaded
		// machine can keep a call past the default, and its failure mode
		// would answer it (degraded) instead of the bucket.
		p := startServe(t, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s")
		clients = append(clients, floodgatev1.NewRateLimiterClient(p.Conn(t)))
	}
	req := &floodgatev1.CheckRequest{
		Key:       "partner:acme",
		Algorithm: floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET,
		Source:    &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 20, Period: durationpb.New(time.Second), Burst: 100}},
	}
	// Warm every replica's connection and script first, on another key,
	// so that the timed calls are short.
	for _, c := range clients {
		warm := &floodgatev1.CheckRequest{Key: "warm", Algorithm: req.Algorithm, Source: req.Source}
		if _, err := c.Check(context.Background(), warm); err != nil {
			t.Fatal(err)
		}
	}
	const callers = 50
	type start struct{ lo, hi time.Time }
	var (
		mu     sync.Mutex
		starts []start
		wg     sync.WaitGroup
	)
	gate := make(chan struct{})
	for i := range callers {
		wg.Go(func() {
			<-gate
			before := time.Now()
			resp, err := clients[i%len(clients)].Check(context.Background(), req)
			after := time.Now()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("caller %d: %v", i, err)
			case !resp.Allowed || resp.Degraded:
				t.Errorf("caller %d: %v, want admitted with a wait", i, resp)
			default:
				w := resp.GetWait().AsDuration()
				// Redis' TIME is read in whole ms, between the call's ends.
				starts = append(starts, start{before.Truncate(time.Millisecond).Add(w), after.Add(w)})
			}
		})
	}
	close(gate)
	wg.Wait()
	if len(starts) != callers {
		t.Fatalf("%d of %d callers admitted", len(starts), callers)
	}
	slices.SortFunc(starts, func(a, b start) int { return a.lo.Compare(b.lo) })
	var jitter time.Duration
	for _, s := range starts {
		jitter = max(jitter, s.hi.Sub(s.lo))
	}
	const slot = 50 * time.Millisecond
	for i := 1; i < len(starts); i++ {
		shortest, longest := starts[i].lo.Sub(starts[i-1].hi), starts[i].hi.Sub(starts[i-1].lo)
		if shortest > slot || longest < slot {
			t.Errorf("starts %d and %d: %v to %v apart, want 50ms (jitter %v)", i-1, i, shortest, longest, jitter)
		}
	}
	t.Logf("50 starts over %v; the longest call took %v", starts[len(starts)-1].hi.Sub(starts[0].lo), jitter)
}
