package e2e

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
)

// attackAlgorithms are the algorithms the attack runs on, each with its own
// Envoy descriptor key and policy (named after the algorithm).
var attackAlgorithms = []string{"token_bucket", "sliding_window", "sliding_window_log", "fixed_window", "leaky_bucket"}

// attackRules: 10 requests a key on every algorithm, on both APIs. The
// period is an hour so that nothing refills while the test runs: the
// counts below are then counts, not rates.
func attackRules() string {
	var b strings.Builder
	b.WriteString("domain: attack\ndescriptors:\n")
	for _, a := range attackAlgorithms {
		fmt.Fprintf(&b, "  - key: small_key_%s\n    rate_limit: {unit: hour, requests_per_unit: 10, algorithm: %s}\n", a, a)
	}
	b.WriteString("policies:\n")
	for _, a := range attackAlgorithms {
		fmt.Fprintf(&b, "  small_%s: {requests: 10, period: 1h, algorithm: %s}\n", a, a)
	}
	return b.String()
}

// scriptCalls is how many scripts Redis has run to completion (EVAL,
// EVALSHA, FCALL and their read-only forms), from INFO commandstats:
// calls less failed_calls. The store's health checks add none once the
// first has passed (Ping runs its scripting probe only then).
func scriptCalls(t *testing.T, r *redistest.Server) int64 {
	t.Helper()
	info, err := r.Client().Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		name, stats, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch name {
		case "cmdstat_eval", "cmdstat_evalsha", "cmdstat_eval_ro", "cmdstat_evalsha_ro", "cmdstat_fcall", "cmdstat_fcall_ro":
		default:
			continue
		}
		for _, f := range strings.Split(stats, ",") {
			k, v, found := strings.Cut(f, "=")
			if !ok || !found || (k != "calls" && k != "failed_calls") {
				continue
			}
			c, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("commandstats %q: %v", line, err)
			}
			if k == "failed_calls" {
				c = -c
			}
			n += c
		}
	}
	return n
}

// TestDenyAttackOnRedis: 10 keys at 10 an hour per algorithm, attacked
// through each API by 20 callers at once. Spending the keys costs Redis
// about one script call per allowed request and one deny a key; then
// the attack's 400 requests per API and algorithm cost Redis at most
// 0.01 script calls a decision (none at all: every key's deny is cached),
// and the deny cache's hits metric counts every one, so that a single
// request the cache does not answer fails the test.
func TestDenyAttackOnRedis(t *testing.T) {
	r := redistest.StartServer(t)
	p := startServe(t, "--config", writeRules(t, attackRules()), "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s")
	conn := p.Conn(t)
	c := floodgatev1.NewRateLimiterClient(conn)
	rls := rlsv3.NewRateLimitServiceClient(conn)
	const keys, callers, each = 10, 20, 20
	apis := []struct {
		name  string
		check func(alg string, key int) (bool, error)
	}{
		{"check", func(alg string, key int) (bool, error) {
			resp, err := c.Check(context.Background(), policyCheck("small_"+alg, fmt.Sprint(key)))
			return resp.GetAllowed(), err
		}},
		{"envoy", func(alg string, key int) (bool, error) {
			resp, err := rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
				Domain: "attack", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("small_key_"+alg, fmt.Sprint(key))}})
			return resp.GetOverallCode() == rlsv3.RateLimitResponse_OK, err
		}},
	}
	for _, api := range apis {
		for _, alg := range attackAlgorithms {
			t.Run(api.name+"/"+alg, func(t *testing.T) {
				before := scriptCalls(t, r)
				allowed := 0
				for k := range keys {
					for {
						ok, err := api.check(alg, k)
						if err != nil {
							t.Fatal(err)
						}
						if !ok {
							break
						}
						if allowed++; allowed > keys*10 {
							t.Fatalf("more than %d allowed", keys*10)
						}
					}
				}
				spent := scriptCalls(t, r) - before
				// A call per allowed request and a deny a key, plus room for
				// the first call's script loading (a NOSCRIPT retry).
				if spent > int64(allowed+2*keys) {
					t.Fatalf("spending %d keys (%d allowed): %d script calls, want at most %d", keys, allowed, spent, allowed+2*keys)
				}
				hitsBefore, _ := metricValue(scrape(t, p), "floodgate_deny_cache_hits_total")
				before = scriptCalls(t, r)
				var admitted atomic.Int64
				var wg sync.WaitGroup
				for g := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for i := range each {
							ok, err := api.check(alg, (g+i)%keys)
							if err != nil {
								t.Error(err)
								return
							}
							if ok {
								admitted.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				decisions := int64(callers * each)
				calls := scriptCalls(t, r) - before
				hitsAfter, _ := metricValue(scrape(t, p), "floodgate_deny_cache_hits_total")
				if admitted.Load() != 0 {
					t.Fatalf("%d of the attack's requests allowed, want 0", admitted.Load())
				}
				if calls*100 > decisions {
					t.Fatalf("the attack's %d decisions cost Redis %d script calls (%.4f a decision), want at most 0.01", decisions, calls, float64(calls)/float64(decisions))
				}
				if hits := int64(hitsAfter - hitsBefore); hits != decisions {
					t.Fatalf("floodgate_deny_cache_hits_total moved by %d over the attack's %d decisions, want all of them (every key's deny was cached while spending it)", hits, decisions)
				}
				t.Logf("%d decisions: %d script calls, %d cache hits", decisions, calls, int64(hitsAfter-hitsBefore))
			})
		}
	}
}
