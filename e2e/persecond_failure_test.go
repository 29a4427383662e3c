package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/floodgate/floodgate/internal/redistest"
)

// perStoreRules: a closed per-second limit (on the per-second Redis) and
// a closed 5-an-hour one (on the main Redis).
const perStoreRules = `domain: ps
descriptors:
  - key: sec
    rate_limit: {unit: second, requests_per_unit: 100, failure_mode: closed}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 5, failure_mode: closed}
`

// TestPerSecondRedisPaused: two Redis, the per-second one stopped
// (SIGSTOP). Limits on the healthy main Redis are still decided there
// (5 of 7 admitted, none degraded); a request with a per-second limit
// too takes that limit's failure mode alone (closed: denied, and nothing
// charged on the main Redis). The same in the drop-in mode
// (REDIS_PERSECOND=true).
func TestPerSecondRedisPaused(t *testing.T) {
	for _, mode := range []string{"flags", "drop-in"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			main, sec := redistest.StartServer(t), redistest.StartServer(t)
			var p *proc
			if mode == "flags" {
				p = startServe(t, "--config", writeRules(t, perStoreRules), "--redis-url", "redis://"+main.Addr(),
					"--redis-persecond-url", "redis://"+sec.Addr(), "--redis-timeout", "300ms")
			} else {
				p = startAsReference(t, referenceEnv(t, map[string]string{"ps.yaml": perStoreRules}, map[string]string{
					"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": main.Addr(),
					"REDIS_PERSECOND": "true", "REDIS_PERSECOND_SOCKET_TYPE": "tcp", "REDIS_PERSECOND_URL": sec.Addr(),
					"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "true",
				}))
			}
			rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
			h := healthpb.NewHealthClient(p.Conn(t))
			if err := syscall.Kill(sec.PID(), syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = syscall.Kill(sec.PID(), syscall.SIGCONT) })
			waitStoreStatus(t, h, healthpb.HealthCheckResponse_NOT_SERVING, 10*time.Second)

			ask := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				resp, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "ps", Descriptors: descs})
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			// decided says whether each status was decided by a store
			// (a failure-mode answer carries no current limit).
			decided := func(r *rlsv3.RateLimitResponse) string {
				s := ""
				for _, st := range r.Statuses {
					s += fmt.Sprintf("%v/%v ", st.Code, st.CurrentLimit != nil)
				}
				return s
			}
			waitOutHourEdge()
			// A request with the per-second limit: closed, denied;
			// the main Redis charged nothing.
			for range 3 {
				r := ask(rlsDesc("sec", "a"), rlsDesc("hour", "a"))
				if got := decided(r); r.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || got != "OVER_LIMIT/false OK/true " {
					t.Fatalf("per-second and main limits, per-second Redis stopped: %v %s", r.OverallCode, got)
				}
			}
			// The main limit alone: decided on the main Redis, 5 of 7.
			for i := range 7 {
				r := ask(rlsDesc("hour", "a"))
				want := "OK/true "
				if i >= 5 {
					want = "OVER_LIMIT/true "
				}
				if got := decided(r); got != want {
					t.Fatalf("call %d on the main limit with the per-second Redis stopped: %s, want %s", i+1, got, want)
				}
			}
		})
	}
}
