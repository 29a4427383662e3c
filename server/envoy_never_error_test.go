package server_test

import (
	"context"
	"math"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store/redisstore"
)

// TestEnvoyNeverAnswersAnError: a default Envoy lets a request through on
// an error answer, so on a real Redis no descriptor answers one: every
// algorithm (calendar periods, charge: after, quota and shadow mode
// included) with hits_addend from 0 to 2^64-1, negative hits, limit
// overrides of 1 and 2^32-1 a unit, with the server's count-denied-hits,
// shared overrides and quota mode; then with every key overwritten by
// bytes that are no state, or by a hash. (Redis killed: e2e's
// TestFailureRedisKilledMidLoad.)
func TestEnvoyNeverAnswersAnError(t *testing.T) {
	const yaml = `domain: x
descriptors:
  - key: tb
    rate_limit: {unit: second, requests_per_unit: 10, algorithm: token_bucket, burst: 20}
  - key: sw
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window}
  - key: swl
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding_window_log}
  - key: fw
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: fixed_window}
  - key: lb
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: leaky_bucket}
  - key: ref
    rate_limit: {unit: day, requests_per_unit: 4294967295}
  - key: cal
    rate_limit: {requests_per_unit: 10000, period: calendar_month, time_zone: Asia/Jakarta}
  - key: calsw
    rate_limit: {requests_per_unit: 10000, algorithm: sliding_window, period: calendar_day, time_zone: Asia/Jakarta}
  - key: quota
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 3, algorithm: sliding_window}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 3, algorithm: leaky_bucket}
  - key: tenant
    rate_limits:
      - {name: a, algorithm: token_bucket, unit: minute, requests_per_unit: 100000}
      - {name: b, algorithm: sliding_window, unit: day, requests_per_unit: 2000000}
      - {name: c, algorithm: leaky_bucket, unit: day, requests_per_unit: 2000000}
      - {name: d, algorithm: fixed_window, unit: day, requests_per_unit: 2000000}
      - {name: e, algorithm: sliding_window_log, unit: second, requests_per_unit: 20}
    descriptors:
      - key: usage
        charge: after
`
	srv := redistest.StartServer(t)
	st, err := redisstore.New(srv.Client(), redisstore.Config{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var harnesses []*envoyHarness
	for _, s := range []server.EnvoySettings{{}, {CountDeniedHits: true, ShareOverrideCounters: true}, {QuotaMode: true}} {
		harnesses = append(harnesses, startEnvoy(t, yaml, st, s))
	}
	var reqs []*rlsv3.RateLimitRequest
	for _, key := range []string{"tb", "sw", "swl", "fw", "lb", "ref", "cal", "calsw", "quota", "shadow", "tenant"} {
		for _, hits := range []uint64{0, 1, 2, 1 << 31, 1 << 32, 1 << 52, 1<<53 + 1, math.MaxInt64, math.MaxUint64} {
			for _, negative := range []bool{false, true} {
				for _, o := range []*ratelimitv3.RateLimitDescriptor_RateLimitOverride{nil,
					{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_SECOND},
					{RequestsPerUnit: math.MaxUint32, Unit: typev3.RateLimitUnit_HOUR},
					{RequestsPerUnit: math.MaxUint32, Unit: typev3.RateLimitUnit_YEAR}} {
					d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: key, Value: "v"}}, IsNegativeHits: negative, HitsAddend: wrapperspb.UInt64(hits), Limit: o}
					if key == "tenant" {
						d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: "usage", Value: "u"})
					}
					other := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "tb", Value: "w"}}}
					reqs = append(reqs,
						&rlsv3.RateLimitRequest{Domain: "x", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}},
						&rlsv3.RateLimitRequest{Domain: "x", Descriptors: []*ratelimitv3.RateLimitDescriptor{other, d}},
						&rlsv3.RateLimitRequest{Domain: "x", Descriptors: []*ratelimitv3.RateLimitDescriptor{d}, HitsAddend: math.MaxUint32})
				}
			}
		}
	}
	run := func(stage string) {
		t.Helper()
		for _, h := range harnesses {
			for _, req := range reqs {
				if _, err := h.client.ShouldRateLimit(context.Background(), req); err != nil {
					t.Fatalf("%s: %v answers %v", stage, req, err)
				}
			}
		}
	}
	run("on Redis")
	ctx := context.Background()
	c := srv.Client()
	keys, err := c.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	for i, k := range keys {
		c.Del(ctx, k)
		if i%2 == 0 {
			err = c.Set(ctx, k, "\xff not a state of any algorithm \xff", 0).Err()
		} else {
			err = c.HSet(ctx, k, "f", "v").Err()
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	run("keys overwritten")
}
