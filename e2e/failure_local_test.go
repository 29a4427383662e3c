package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// localRules are two limits of 30 an hour whose failure mode is local:
// with three replicas, 10 each while Redis is down. An hour, so that no
// refill or window boundary adds to the count while the test runs.
const localRules = `domain: local
policies:
  sw: {algorithm: sliding_window, requests: 30, period: 1h, failure_mode: local}
  tb: {algorithm: token_bucket, requests: 30, period: 1h, failure_mode: local}
`

// localShareLog is the message a replica logs when its breaker opens,
// with the replica count of the shares.
const localShareLog = "limits with failure_mode local enforce their share in memory"

// TestFailureLocalThreeReplicas: three replicas on one Redis count each
// other by their heartbeats; Redis is killed; each replica then admits
// exactly its third of each limit (10 of 30), degraded, so that together
// they admit the limit, and counts them as result "local". When Redis is
// back, the store decides again, and the local counts are kept until
// their period ends: killed again within the hour, no replica admits
// anything more on the same key, so the outages together admit the
// limit, not a third per replica per outage.
func TestFailureLocalThreeReplicas(t *testing.T) {
	r := redistest.StartServer(t)
	rules := writeRules(t, localRules)
	var procs []*proc
	var clients []floodgatev1.RateLimiterClient
	var health []healthpb.HealthClient
	for range 3 {
		p := startServe(t, "--config", rules, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "200ms", "--replicas-heartbeat", "100ms")
		procs = append(procs, p)
		conn := p.Conn(t)
		clients = append(clients, floodgatev1.NewRateLimiterClient(conn))
		health = append(health, healthpb.NewHealthClient(conn))
	}

	rc := r.Client()
	t.Cleanup(func() { rc.Close() })
	// The same key in both rounds: the second outage admits nothing,
	// since the first one's local counts are still in their hour.
	const key = "k"
	for round := 1; round <= 2; round++ {
		// Every replica announced itself; after that, each reads the count
		// of 3 at its next beats (20 intervals of 100ms, for a loaded
		// machine; the count each used is checked in its log below).
		waitFor(t, 30*time.Second, "three replicas in fg:replicas", func() bool {
			n, err := rc.ZCard(context.Background(), "fg:replicas").Result()
			return err == nil && n == 3
		})
		time.Sleep(2 * time.Second)
		// Healthy: the store decides, across replicas.
		for i, c := range clients {
			resp, err := c.Check(context.Background(), policyCheck("sw", fmt.Sprintf("healthy:%d", round)))
			if err != nil || resp.Degraded || !resp.Allowed || resp.Limit != 30 {
				t.Fatalf("round %d, replica %d before the outage: %v, %v; want the store's answer (limit 30)", round, i, resp, err)
			}
		}

		r.Kill()
		for i, p := range procs {
			waitStoreStatus(t, health[i], healthpb.HealthCheckResponse_NOT_SERVING, 30*time.Second)
			waitFor(t, 10*time.Second, "the local share logged", func() bool { return countLog(p, localShareLog) >= round })
			if n := shareReplicas(t, p, round); n != 3 {
				t.Fatalf("round %d, replica %d: shares of %d replicas, want 3\n%s", round, i, n, p.logs)
			}
		}
		for _, policy := range []string{"sw", "tb"} {
			total := 0
			for i, c := range clients {
				allowed := 0
				for range 30 {
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := c.Check(ctx, policyCheck(policy, key))
					cancel()
					if err != nil {
						t.Fatalf("round %d, %s on replica %d: %v", round, policy, i, err)
					}
					if !resp.Degraded {
						t.Fatalf("round %d, %s on replica %d: not degraded with Redis killed: %v", round, policy, i, resp)
					}
					if resp.Allowed {
						allowed++
					}
				}
				want := 10 // its third, in the first outage; nothing more in the second
				if round == 2 {
					want = 0
				}
				if allowed != want {
					t.Errorf("round %d, %s: replica %d admitted %d of 30, want %d", round, policy, i, allowed, want)
				}
				total += allowed
			}
			if want := 30 * (2 - round); total != want {
				t.Errorf("round %d, %s: the replicas admitted %d together, want %d (the limit over both outages)", round, policy, total, want)
			}
		}

		for i, p := range procs {
			local, _ := metricValue(scrape(t, p), "floodgate_decisions_total", "result", "local")
			if want := float64(60 * round); local != want {
				t.Errorf("round %d, replica %d: %v decisions with result local, want %v", round, i, local, want)
			}
		}

		r.Restart()
		for i := range procs {
			waitStoreStatus(t, health[i], healthpb.HealthCheckResponse_SERVING, 30*time.Second)
		}
	}
}

// countLog is how many of p's log lines hold msg.
func countLog(p *proc, msg string) int {
	return strings.Count(p.logs.String(), msg)
}

// shareReplicas is the replica count of p's nth local share log line.
func shareReplicas(t *testing.T, p *proc, nth int) int {
	t.Helper()
	seen := 0
	for _, line := range strings.Split(p.logs.String(), "\n") {
		if !strings.Contains(line, localShareLog) {
			continue
		}
		if seen++; seen < nth {
			continue
		}
		var rec struct{ Replicas int }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		return rec.Replicas
	}
	t.Fatalf("no %dth %q line", nth, localShareLog)
	return 0
}
