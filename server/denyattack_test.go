package server_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/denycache"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// callCounter counts the Decide calls that reach the store behind the
// deny cache.
type callCounter struct {
	store.Store
	calls atomic.Int64
}

func (c *callCounter) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	c.calls.Add(1)
	return c.Store.Decide(ctx, now, reqs, out)
}

// The attack phase: attackCallers callers at once, attackEach checks
// each, spread over attackKeys attacked keys.
const attackCallers, attackEach, attackKeys = 20, 50, 10

// attack runs fn from attackCallers goroutines, attackEach times each,
// with the key index to hit.
func attack(t *testing.T, fn func(key int) bool) (allowed int64) {
	t.Helper()
	var n atomic.Int64
	var wg sync.WaitGroup
	for g := range attackCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range attackEach {
				if fn((g + i) % attackKeys) {
					n.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return n.Load()
}

// TestDenyAttackCheckAPI: the rule 10/second on 10 keys through the Check
// API. Once each key is spent (10 allowed and a deny each, the only calls
// the store must see), 20 callers sending 1,000 checks at the same moment
// cost the store nothing: every deny comes from the cache.
func TestDenyAttackCheckAPI(t *testing.T) {
	for _, alg := range []floodgatev1.Algorithm{
		floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET,
		floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW,
		floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW_LOG,
		floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW,
		floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET,
	} {
		t.Run(alg.String(), func(t *testing.T) {
			inner := &callCounter{Store: memstore.New(memstore.Config{})}
			var hits atomic.Int64
			h := start(t, denycache.New(inner, denycache.Config{OnHit: func(n int) { hits.Add(int64(n)) }}), server.Settings{})
			check := func(key int) bool {
				resp, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{
					Key: fmt.Sprintf("small_key_%d", key), Algorithm: alg, Source: testkit.Inline(10, time.Second, 0)})
				if err != nil {
					t.Error(err)
					return false
				}
				return resp.Allowed
			}
			spend(t, check, inner)
			before := inner.calls.Load()
			if n := attack(t, check); n != 0 {
				t.Fatalf("%d of the attack's checks allowed at the same moment, want 0", n)
			}
			if calls := inner.calls.Load() - before; calls != 0 || hits.Load() < attackCallers*attackEach {
				t.Fatalf("the attack's %d checks: %d store calls, %d cache hits in all; want 0 store calls, every deny from the cache",
					attackCallers*attackEach, calls, hits.Load())
			}
		})
	}
}

// TestDenyAttackShouldRateLimit is TestDenyAttackCheckAPI on the Envoy
// API, whose requests are all NoWait: the rule small_key 10/second, 10
// values attacked by 20 callers.
func TestDenyAttackShouldRateLimit(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			inner := &callCounter{Store: memstore.New(memstore.Config{})}
			var hits atomic.Int64
			yaml := "domain: edge\ndescriptors:\n  - key: small_key\n    rate_limit: {unit: second, requests_per_unit: 10, algorithm: " + alg.String() + "}\n"
			h := startEnvoy(t, yaml, denycache.New(inner, denycache.Config{OnHit: func(n int) { hits.Add(int64(n)) }}), server.EnvoySettings{})
			check := func(key int) bool {
				resp, err := h.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
					Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{testkit.Descriptor("small_key", fmt.Sprint(key))}})
				if err != nil {
					t.Error(err)
					return false
				}
				return resp.OverallCode == rlsv3.RateLimitResponse_OK
			}
			spend(t, check, inner)
			before := inner.calls.Load()
			if n := attack(t, check); n != 0 {
				t.Fatalf("%d of the attack's requests allowed at the same moment, want 0", n)
			}
			if calls := inner.calls.Load() - before; calls != 0 || hits.Load() < attackCallers*attackEach {
				t.Fatalf("the attack's %d requests: %d store calls, %d cache hits in all; want 0 store calls, every deny from the cache",
					attackCallers*attackEach, calls, hits.Load())
			}
		})
	}
}

// spend checks every attacked key until it is denied, one caller at a
// time: at most 10 allowed and one deny a key reach the store.
func spend(t *testing.T, check func(key int) bool, inner *callCounter) {
	t.Helper()
	for k := range attackKeys {
		n := 0
		for check(k) {
			if n++; n > 10 {
				t.Fatalf("key %d: more than 10 allowed at one moment", k)
			}
		}
	}
	if calls := inner.calls.Load(); calls > attackKeys*11 {
		t.Fatalf("spending %d keys took %d store calls, want at most %d", attackKeys, calls, attackKeys*11)
	}
}
