package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// TestReplicasShareLimits: three `floodgate serve` processes share one
// Redis (and, in the second case, a 3-master cluster); 300 concurrent
// Checks on one key with a limit of 100, from 64 workers spread over the
// three replicas, admit exactly 100, for every algorithm. A generous
// --redis-timeout and --failure-mode closed mean a slow call cannot slip
// through as a degraded allow; none may be degraded.
func TestReplicasShareLimits(t *testing.T) {
	backends := []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"standalone", func(t *testing.T) []string {
			return []string{"--redis-url", "redis://" + redistest.StartServer(t).Addr()}
		}},
		{"cluster", func(t *testing.T) []string {
			return []string{"--redis-mode", "cluster", "--redis-url", clusterURL(redistest.StartCluster(t, 3, 0))}
		}},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			args := append(b.args(t), "--failure-mode", "closed", "--redis-timeout", "5s")
			var clients []floodgatev1.RateLimiterClient
			for range 3 {
				clients = append(clients, startServe(t, args...).Client(t))
			}
			for _, alg := range clusterAlgorithms {
				t.Run(alg.String(), func(t *testing.T) {
					req := &floodgatev1.CheckRequest{
						Key: "shared:" + b.name + ":" + alg.String(), Algorithm: alg,
						Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 100, Period: durationpb.New(24 * time.Hour)}},
					}
					work := make(chan int, 300)
					for i := range 300 {
						work <- i
					}
					close(work)
					var mu sync.Mutex
					allowed, degraded := 0, 0
					var wg sync.WaitGroup
					for w := range 64 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							c := clients[w%len(clients)]
							for range work {
								ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
								resp, err := c.Check(ctx, req)
								cancel()
								if err != nil {
									t.Error(err)
									return
								}
								mu.Lock()
								if resp.Degraded {
									degraded++
								} else if resp.Allowed {
									allowed++
								}
								mu.Unlock()
							}
						}()
					}
					wg.Wait()
					if allowed != 100 || degraded != 0 {
						t.Fatalf("%d allowed and %d degraded of 300 across three replicas, want exactly 100 allowed and none degraded", allowed, degraded)
					}
				})
			}
		})
	}
}

// TestServeThroughSentinel: `floodgate serve --redis-mode sentinel` finds
// the master through Redis Sentinel and decides there: one of two checks
// of a 1-per-day limit passes, neither is degraded, and the state is in the
// master.
func TestServeThroughSentinel(t *testing.T) {
	master := redistest.StartServer(t)
	sentinel := redistest.StartSentinel(t, master, "mymaster")
	p := startServe(t, "--redis-mode", "sentinel", "--redis-sentinel-master", "mymaster",
		"--redis-url", "redis://"+sentinel.Addr(), "--failure-mode", "closed", "--redis-timeout", "5s")
	c := p.Client(t)
	req := &floodgatev1.CheckRequest{
		Key: "via-sentinel", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		Source: &floodgatev1.CheckRequest_Limit{Limit: &floodgatev1.Limit{Requests: 1, Period: durationpb.New(24 * time.Hour)}},
	}
	var got []bool
	for range 2 {
		resp, err := c.Check(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.Degraded {
			t.Fatalf("degraded answer through sentinel: %v", resp)
		}
		got = append(got, resp.Allowed)
	}
	if !got[0] || got[1] {
		t.Fatalf("got allowed %v, want [true false]", got)
	}
	if n, err := master.Client().Exists(context.Background(), "fg:tat:{kvia-sentinel}:i1/24h").Result(); err != nil || n != 1 {
		t.Fatalf("the master holds %d keys for the check (%v), want 1", n, err)
	}
}
