package server_test

import (
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/memstore"
)

// TestEnvoyCountDeniedHitsNoLockout: with CountDeniedHits, a client that
// sends 6 requests every second, one each 1/6 s, against a 2/second rule
// is admitted again in each later second, whatever the algorithm: denied
// hits are counted only where a window starts afresh (the fixed window),
// never carried into another window as a debt that its retries renew.
func TestEnvoyCountDeniedHitsNoLockout(t *testing.T) {
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			yaml := "domain: edge\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2, algorithm: " + alg.String() + "}\n"
			cfg, err := rules.Parse("edge.yaml", []byte(yaml))
			if err != nil {
				t.Fatal(err)
			}
			st := memstore.New(memstore.Config{})
			t.Cleanup(func() { st.Close() })
			clock := testkit.NewClock(testkit.T0.Truncate(time.Second))
			e := server.NewEnvoy(st, server.EnvoySettings{Settings: server.Settings{Rules: testkit.StaticRules(cfg), Clock: clock.Now}, CountDeniedHits: true})
			for second := range 4 {
				admitted := 0
				for range 6 {
					clock.Advance(time.Second / 6)
					resp, err := e.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: dl{d("k", "client", -1)}})
					if err != nil {
						t.Fatal(err)
					}
					if resp.OverallCode == rlsv3.RateLimitResponse_OK {
						admitted++
					}
				}
				if admitted == 0 {
					t.Fatalf("second %d: 0 of 6 admitted: the denied hits of earlier seconds lock the client out", second)
				}
				if admitted > 4 { // a full bucket and a second's refill
					t.Fatalf("second %d: %d of 6 admitted, want at most 4", second, admitted)
				}
			}
		})
	}
}
