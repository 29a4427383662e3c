package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/floodgate/floodgate/internal/heartbeat"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store/redisstore"
)

// These tests act as Envoy's rate-limit filter does: go-control-plane's
// envoy.service.ratelimit.v3 client calling ShouldRateLimit on the built
// binary, once on the embedded store and once on a real redis-server.
//
// The limits are per hour in token buckets unless a test is about another
// algorithm, so that the real clock never refills a whole request during a
// test: every count below is exact.

// envoyRules is the config most tests serve (domain "e2e").
const envoyRules = `domain: e2e
default_algorithm: token_bucket
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: remote_address
    value: 10.0.0.1
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: remote_address
    value: 10.9.9.9
    rate_limit: {unit: hour, requests_per_unit: 4}
  - key: remote_address
    value: 10.9.*
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: remote_address
    value: 10.8.*
    share_threshold: true
    rate_limit: {unit: hour, requests_per_unit: 2}
  - key: remote_address
    value: 10.6.6.6
    rate_limit: {unit: hour, requests_per_unit: 0}
  - key: internal
    rate_limit: {unlimited: true}
  - key: shadowed
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: plan
    value: free
    descriptors:
      - key: api_key
        rate_limit: {unit: hour, requests_per_unit: 2}
  - key: plan
    descriptors:
      - key: api_key
        rate_limit: {unit: hour, requests_per_unit: 5}
  - key: tier
    value: free
    descriptors:
      - key: api_key
        rate_limits:
          - {unit: day, requests_per_unit: 5}
          - {unit: hour, requests_per_unit: 2}
`

// envoyBackend is a store `floodgate serve` decides with.
type envoyBackend struct {
	name string
	// serve starts floodgate on this backend (a fresh one: a new
	// redis-server for Redis) with args added.
	serve func(t *testing.T, args ...string) *envoyProc
}

// envoyProc is a running floodgate and, on Redis, its redis-server.
type envoyProc struct {
	*proc
	redis *redistest.Server // nil on the embedded store
	rls   rlsv3.RateLimitServiceClient
}

// envoyBackends are the stores every Envoy test runs on.
var envoyBackends = []envoyBackend{
	{"embedded", func(t *testing.T, args ...string) *envoyProc {
		p := startServe(t, args...)
		return &envoyProc{proc: p, rls: rlsv3.NewRateLimitServiceClient(p.Conn(t))}
	}},
	{"redis", func(t *testing.T, args ...string) *envoyProc {
		r := redistest.StartServer(t)
		// A generous --redis-timeout: these tests pin decisions, and a
		// slow moment of a -race binary must not turn into a degraded
		// (failure-mode) answer.
		p := startServe(t, append(args, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "2s")...)
		return &envoyProc{proc: p, redis: r, rls: rlsv3.NewRateLimitServiceClient(p.Conn(t))}
	}},
}

// forEachBackend runs test once per backend, as parallel subtests named
// after the backends (each has its own floodgate and redis-server).
func forEachBackend(t *testing.T, test func(t *testing.T, b envoyBackend)) {
	for _, b := range envoyBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			test(t, b)
		})
	}
}

// writeRules writes yaml to a new file in a temporary folder and returns
// its path.
func writeRules(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ratelimit.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rlsDesc builds a descriptor from key, value pairs.
func rlsDesc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

// send calls ShouldRateLimit in domain "e2e" with hits_addend hits.
func (p *envoyProc) send(t *testing.T, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := p.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: descs, HitsAddend: hits})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// call is send with Envoy's default hits_addend (unset, i.e. 1).
func (p *envoyProc) call(t *testing.T, descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	return p.send(t, 0, descs...)
}

// rlsCodes is a response's codes: overall, then per descriptor, e.g.
// "OVER_LIMIT:OK,OVER_LIMIT".
func rlsCodes(r *rlsv3.RateLimitResponse) string {
	parts := make([]string, len(r.Statuses))
	for i, s := range r.Statuses {
		parts[i] = s.Code.String()
	}
	return r.OverallCode.String() + ":" + strings.Join(parts, ",")
}

// rlsHeaders is a response's response_headers_to_add as a map.
func rlsHeaders(r *rlsv3.RateLimitResponse) map[string]string {
	m := map[string]string{}
	for _, h := range r.ResponseHeadersToAdd {
		m[h.Key] = h.Value
	}
	return m
}

// TestEnvoyMatching: the reference server's matching rules: an exact value
// beats a prefix wildcard, which beats the key-only rule; each value counts
// on its own unless share_threshold; a limit applies at its depth only.
func TestEnvoyMatching(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, envoyRules))
		tests := []struct {
			name  string
			descs []*ratelimitv3.RateLimitDescriptor // sent one after another, one call each
			want  string                             // the code of the last call
			limit uint32                             // its current_limit; 0: none
		}{
			{"key-only rule", repeat(4, rlsDesc("remote_address", "192.0.2.1")), "OVER_LIMIT:OVER_LIMIT", 3},
			{"each value its own counter", []*ratelimitv3.RateLimitDescriptor{
				rlsDesc("remote_address", "192.0.2.2"), rlsDesc("remote_address", "192.0.2.2"), rlsDesc("remote_address", "192.0.2.2"),
				rlsDesc("remote_address", "192.0.2.3"),
			}, "OK:OK", 3},
			{"exact value beats key-only", repeat(2, rlsDesc("remote_address", "10.0.0.1")), "OVER_LIMIT:OVER_LIMIT", 1},
			{"exact value beats wildcard", repeat(4, rlsDesc("remote_address", "10.9.9.9")), "OK:OK", 4},
			{"wildcard beats key-only", repeat(3, rlsDesc("remote_address", "10.9.1.1")), "OVER_LIMIT:OVER_LIMIT", 2},
			{"wildcard values count apart", []*ratelimitv3.RateLimitDescriptor{
				rlsDesc("remote_address", "10.9.2.1"), rlsDesc("remote_address", "10.9.2.1"), rlsDesc("remote_address", "10.9.2.2"),
			}, "OK:OK", 2},
			{"share_threshold: one counter", []*ratelimitv3.RateLimitDescriptor{
				rlsDesc("remote_address", "10.8.0.1"), rlsDesc("remote_address", "10.8.0.2"), rlsDesc("remote_address", "10.8.0.3"),
			}, "OVER_LIMIT:OVER_LIMIT", 2},
			{"requests_per_unit 0 bans", repeat(1, rlsDesc("remote_address", "10.6.6.6")), "OVER_LIMIT:OVER_LIMIT", 0},
			{"nested exact", repeat(3, rlsDesc("plan", "free", "api_key", "k1")), "OVER_LIMIT:OVER_LIMIT", 2},
			{"nested key-only", repeat(5, rlsDesc("plan", "pro", "api_key", "k1")), "OK:OK", 5},
			{"nested key-only, 6th", repeat(6, rlsDesc("plan", "pro", "api_key", "k2")), "OVER_LIMIT:OVER_LIMIT", 5},
			{"two limits: the tighter answers", repeat(3, rlsDesc("tier", "free", "api_key", "k1")), "OVER_LIMIT:OVER_LIMIT", 2},
			{"no limit above its depth", repeat(10, rlsDesc("plan", "free")), "OK:OK", 0},
			{"no limit below its depth", repeat(10, rlsDesc("remote_address", "192.0.2.4", "path", "/")), "OK:OK", 0},
			{"no rule", repeat(10, rlsDesc("nothing", "here")), "OK:OK", 0},
		}
		for _, tt := range tests {
			var r *rlsv3.RateLimitResponse
			for _, d := range tt.descs {
				r = p.call(t, d)
			}
			if got := rlsCodes(r); got != tt.want {
				t.Errorf("%s: after %d calls got %s, want %s", tt.name, len(tt.descs), got, tt.want)
			}
			if got := r.Statuses[0].GetCurrentLimit().GetRequestsPerUnit(); got != tt.limit {
				t.Errorf("%s: current_limit got %d, want %d", tt.name, got, tt.limit)
			}
		}
		// An unknown domain has no limits, as in the reference server.
		r, err := p.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "elsewhere", Descriptors: repeat(1, rlsDesc("remote_address", "10.6.6.6"))})
		if err != nil || rlsCodes(r) != "OK:OK" {
			t.Errorf("unknown domain: got %v %v, want OK:OK", r, err)
		}
	})
}

// repeat is n copies of d.
func repeat(n int, d *ratelimitv3.RateLimitDescriptor) []*ratelimitv3.RateLimitDescriptor {
	out := make([]*ratelimitv3.RateLimitDescriptor, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestEnvoyHitsAddend: request-level hits_addend (0 means 1, as proto3
// cannot tell it from unset), per-descriptor hits_addend (which wins; 0
// peeks) and is_negative_hits refunds.
func TestEnvoyHitsAddend(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, envoyRules))
		check := func(step string, r *rlsv3.RateLimitResponse, code string, remaining uint32) {
			t.Helper()
			if rlsCodes(r) != code || r.Statuses[0].LimitRemaining != remaining {
				t.Fatalf("%s: got %s remaining %d, want %s remaining %d", step, rlsCodes(r), r.Statuses[0].LimitRemaining, code, remaining)
			}
		}
		ip := rlsDesc("remote_address", "192.0.2.10") // 3 per hour
		check("request hits_addend 0 counts 1", p.send(t, 0, ip), "OK:OK", 2)
		check("request hits_addend 2", p.send(t, 2, ip), "OK:OK", 0)

		peek := rlsDesc("remote_address", "192.0.2.10")
		peek.HitsAddend = wrapperspb.UInt64(0)
		// A 0-hit check answers as a 1-hit check would, charging nothing:
		// the next unit does not fit.
		check("descriptor hits_addend 0 peeks, even with request hits 3", p.send(t, 3, peek), "OVER_LIMIT:OVER_LIMIT", 0)
		check("over", p.call(t, ip), "OVER_LIMIT:OVER_LIMIT", 0)

		refund := rlsDesc("remote_address", "192.0.2.10")
		refund.HitsAddend = wrapperspb.UInt64(2)
		refund.IsNegativeHits = true
		check("refund 2", p.call(t, refund), "OK:OK", 2)
		check("after the refund, 1", p.call(t, ip), "OK:OK", 1)
		check("after the refund, 2", p.call(t, ip), "OK:OK", 0)
		check("after the refund, 3", p.call(t, ip), "OVER_LIMIT:OVER_LIMIT", 0)

		// A descriptor's hits_addend beats the request's; a cost beyond
		// the limit is denied and charges nothing.
		other := rlsDesc("remote_address", "192.0.2.11")
		other.HitsAddend = wrapperspb.UInt64(1)
		check("descriptor hits 1 with request hits 3", p.send(t, 3, other), "OK:OK", 2)
		r := p.send(t, 4, rlsDesc("remote_address", "192.0.2.12"))
		check("request hits 4 > limit 3", r, "OVER_LIMIT:OVER_LIMIT", 0) // an OVER_LIMIT status reports 0 left, as the reference does
		// Never: not a retry soon (which would loop the client), but a
		// day, as for a deny-all rule.
		if ra := rlsHeaders(r)["retry-after"]; ra != "86400" {
			t.Fatalf("a cost that can never pass has Retry-After %q, want 86400", ra)
		}
		check("after the denied 4", p.send(t, 3, rlsDesc("remote_address", "192.0.2.12")), "OK:OK", 0)
	})
}

// TestEnvoyAllOrNothing: a request denied by one descriptor charges none of
// the others (envoyproxy/ratelimit charges them all).
func TestEnvoyAllOrNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, envoyRules))
		ip := rlsDesc("remote_address", "192.0.2.20") // 3 per hour
		key := rlsDesc("plan", "free", "api_key", "k20")
		strict := rlsDesc("remote_address", "10.0.0.1") // 1 per hour
		if got := rlsCodes(p.call(t, strict)); got != "OK:OK" {
			t.Fatalf("spending the strict limit: got %s", got)
		}
		for i := range 5 {
			if got := rlsCodes(p.call(t, ip, key, strict)); got != "OVER_LIMIT:OK,OK,OVER_LIMIT" {
				t.Fatalf("call %d: got %s, want OVER_LIMIT:OK,OK,OVER_LIMIT", i, got)
			}
		}
		// Neither the 3 per hour nor the 2 per hour was charged.
		for i := range 3 {
			if got := rlsCodes(p.call(t, ip)); got != "OK:OK" {
				t.Fatalf("address, call %d after the denied requests: got %s, want OK", i, got)
			}
		}
		for i := range 2 {
			if got := rlsCodes(p.call(t, key)); got != "OK:OK" {
				t.Fatalf("api key, call %d after the denied requests: got %s, want OK", i, got)
			}
		}
		if got := rlsCodes(p.call(t, key)); got != "OVER_LIMIT:OVER_LIMIT" {
			t.Fatalf("api key, 3rd call: got %s, want OVER_LIMIT", got)
		}
	})
}

// TestEnvoyShadowMode: a shadow rule decides and counts but answers OK,
// and its numbers stay out of the status (limit_remaining is 0 because it
// is not set; the count shows in the metrics, see TestEnvoyHeadersShadow);
// --shadow-mode does that for every rule.
func TestEnvoyShadowMode(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		rules := writeRules(t, envoyRules)
		p := b.serve(t, "--config", rules)
		for i, want := range []uint32{0, 0, 0} {
			r := p.call(t, rlsDesc("shadowed", "x"))
			if rlsCodes(r) != "OK:OK" || r.Statuses[0].LimitRemaining != want {
				t.Fatalf("shadow rule, call %d: got %s remaining %d, want OK remaining %d", i, rlsCodes(r), r.Statuses[0].LimitRemaining, want)
			}
			if _, ok := rlsHeaders(r)["retry-after"]; ok {
				t.Fatalf("shadow rule, call %d: Retry-After on an OK answer: %v", i, rlsHeaders(r))
			}
		}
		// A shadow deny does not cancel the enforced descriptors of the
		// request: the 1 per hour is charged.
		if got := rlsCodes(p.call(t, rlsDesc("shadowed", "x"), rlsDesc("remote_address", "10.0.0.1"))); got != "OK:OK,OK" {
			t.Fatalf("shadow deny with an enforced rule: got %s, want OK:OK,OK", got)
		}
		if got := rlsCodes(p.call(t, rlsDesc("remote_address", "10.0.0.1"))); got != "OVER_LIMIT:OVER_LIMIT" {
			t.Fatalf("the enforced rule after it: got %s, want OVER_LIMIT", got)
		}

		// --shadow-mode: every rule, and per-request overrides too.
		g := b.serve(t, "--config", rules, "--shadow-mode")
		override := rlsDesc("remote_address", "192.0.2.19")
		override.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_HOUR}
		for i := range 3 {
			r := g.call(t, rlsDesc("remote_address", "10.0.0.1"), rlsDesc("remote_address", "10.6.6.6"), override)
			if rlsCodes(r) != "OK:OK,OK,OK" || r.Statuses[0].LimitRemaining != 0 || r.Statuses[2].LimitRemaining != 0 {
				t.Fatalf("--shadow-mode, call %d: got %s, remaining %d and %d; want OK:OK,OK,OK, remaining 0 and 0", i, rlsCodes(r), r.Statuses[0].LimitRemaining, r.Statuses[2].LimitRemaining)
			}
		}
	})
}

// TestEnvoyUnlimited: an unlimited rule answers OK without a limit and,
// on Redis, without writing a key.
func TestEnvoyUnlimited(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, envoyRules))
		for i := range 50 {
			r := p.call(t, rlsDesc("internal", "batch-job"))
			if rlsCodes(r) != "OK:OK" || r.Statuses[0].CurrentLimit != nil || len(r.ResponseHeadersToAdd) != 0 {
				t.Fatalf("call %d: got %v, want OK with no limit and no headers", i, r)
			}
		}
		if p.redis != nil {
			n, err := stateKeys(p.redis.Client())
			if err != nil || n != 0 {
				t.Fatalf("redis holds %d keys (%v) after unlimited calls, want 0", n, err)
			}
			p.call(t, rlsDesc("remote_address", "192.0.2.30"))
			if n, err := stateKeys(p.redis.Client()); err != nil || n != 1 {
				t.Fatalf("redis holds %d keys (%v) after one limited call, want 1 (the check above must be able to fail)", n, err)
			}
		}
	})
}

// TestEnvoyResponseHeaders: the draft-03 X-RateLimit-* headers Envoy
// writes, the IETF RateLimit-Policy and RateLimit fields, Retry-After on
// OVER_LIMIT; with several descriptors they describe the most restrictive
// one; --response-headers=false turns them off.
func TestEnvoyResponseHeaders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		rules := writeRules(t, envoyRules)
		p := b.serve(t, "--config", rules)
		ip := rlsDesc("remote_address", "192.0.2.40") // token bucket, 3 per hour: a request back every 1200s
		wantHeaders(t, "first call", p.call(t, ip), map[string]string{
			"x-ratelimit-limit":     "3, 3;w=3600",
			"x-ratelimit-remaining": "2",
			"x-ratelimit-reset":     "1200",
			"ratelimit-policy":      `"e2e.remote_address";q=3;w=3600`,
			"ratelimit":             `"e2e.remote_address";r=2;t=1200`,
			"retry-after":           "",
		})
		p.call(t, ip)
		p.call(t, ip)
		r := p.call(t, ip)
		hs := rlsHeaders(r)
		if rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT" || hs["x-ratelimit-remaining"] != "0" {
			t.Fatalf("4th call: got %s %v, want OVER_LIMIT with remaining 0", rlsCodes(r), hs)
		}
		// The next request is back 1200s after the first; a little of that
		// has passed. Seconds are rounded up, so never early.
		if ra, err := strconv.Atoi(hs["retry-after"]); err != nil || ra < 1190 || ra > 1200 {
			t.Fatalf("4th call: retry-after %q, want about 1200", hs["retry-after"])
		}

		// Several descriptors: an allowed request describes the limit with
		// the fewest remaining (the api key's 2 per hour, 1 left)...
		wantHeaders(t, "fewest remaining", p.call(t, rlsDesc("remote_address", "192.0.2.41"), rlsDesc("plan", "free", "api_key", "k40")), map[string]string{
			"x-ratelimit-limit": "2, 2;w=3600",
			"ratelimit":         `"e2e.plan_free.api_key";r=1;t=1800`,
		})
		// ...a denied one the enforced deny with the longest wait: the ban
		// (which never lifts: come back in a day) over the spent 3 per hour.
		wantHeaders(t, "longest wait", p.call(t, ip, rlsDesc("remote_address", "10.6.6.6")), map[string]string{
			"x-ratelimit-limit": "0, 0;w=3600",
			"ratelimit-policy":  `"e2e.remote_address_10.6.6.6";q=0;w=3600`,
			"retry-after":       "86400",
		})
		r = p.call(t, ip, rlsDesc("remote_address", "10.0.0.1"))
		if hs := rlsHeaders(r); rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT,OK" || hs["x-ratelimit-limit"] != "3, 3;w=3600" || hs["retry-after"] == "" {
			t.Fatalf("the deny beats an allow with fewer remaining: got %s %v", rlsCodes(r), hs)
		}

		off := b.serve(t, "--config", rules, "--response-headers=false")
		for range 4 {
			r = off.call(t, ip)
		}
		if rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT" || len(r.ResponseHeadersToAdd) != 0 {
			t.Fatalf("--response-headers=false: got %s %v, want OVER_LIMIT and no headers", rlsCodes(r), r.ResponseHeadersToAdd)
		}
	})
}

// wantHeaders checks the headers named in want; "" means absent.
func wantHeaders(t *testing.T, step string, r *rlsv3.RateLimitResponse, want map[string]string) {
	t.Helper()
	hs := rlsHeaders(r)
	for k, v := range want {
		got, ok := hs[k]
		if v == "" && ok {
			t.Errorf("%s: %s is %q, want it absent", step, k, got)
		} else if v != "" && got != v {
			t.Errorf("%s: %s is %q, want %q (all: %v)", step, k, got, v, hs)
		}
	}
}

// TestEnvoyLimitOverride: a descriptor's own limit (from Envoy's route
// config) counts in a fixed window under a key of its own, as the
// reference server counts it.
func TestEnvoyLimitOverride(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		p := b.serve(t, "--config", writeRules(t, envoyRules))
		d := rlsDesc("remote_address", "192.0.2.50")
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_HOUR}
		for i, want := range []string{"OK:OK", "OK:OK", "OVER_LIMIT:OVER_LIMIT"} {
			r := p.call(t, d)
			if rlsCodes(r) != want || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 2 || r.Statuses[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
				t.Fatalf("override 2 per hour, call %d: got %v, want %s", i, r, want)
			}
		}
		// Another rate in the override is a counter of its own.
		d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_HOUR}
		if r := p.call(t, d); rlsCodes(r) != "OK:OK" || r.Statuses[0].LimitRemaining != 2 {
			t.Fatalf("override 3 per hour after the 2 per hour ran out: got %s remaining %d, want OK remaining 2", rlsCodes(r), r.Statuses[0].LimitRemaining)
		}
		// The configured 3 per hour for the address is a separate counter.
		if got := rlsCodes(p.call(t, rlsDesc("remote_address", "192.0.2.50"))); got != "OK:OK" {
			t.Fatalf("the configured rule after the override: got %s, want OK", got)
		}
	})
}

// currentLimitOf polls is the requests_per_unit the server answers for
// descriptor value v of remote_address, peeking (hits_addend 0).
func (p *envoyProc) currentLimitOf(t *testing.T, v string) uint32 {
	t.Helper()
	d := rlsDesc("remote_address", v)
	d.HitsAddend = wrapperspb.UInt64(0)
	return p.call(t, d).Statuses[0].GetCurrentLimit().GetRequestsPerUnit()
}

// waitForLimit polls until the server answers limit for remote_address v,
// for at most 5s, and returns how long that took.
func (p *envoyProc) waitForLimit(t *testing.T, v string, limit uint32) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got := p.currentLimitOf(t, v)
		if got == limit {
			return time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("after 5s the limit is still %d, want %d\n%s", got, limit, p.logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rulesWithLimit is a config of one rule: remote_address, n per hour.
func rulesWithLimit(n int) string {
	return fmt.Sprintf("domain: e2e\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: hour, requests_per_unit: %d}\n", n)
}

// TestEnvoyReload: an edited file applies within about a second; a bad
// edit is rejected with file:line:column in the log and the old config
// keeps serving; a fixed file applies again.
func TestEnvoyReload(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		path := writeRules(t, rulesWithLimit(3))
		p := b.serve(t, "--config", path)
		if got := p.currentLimitOf(t, "192.0.2.60"); got != 3 {
			t.Fatalf("initial limit: got %d, want 3", got)
		}
		if err := os.WriteFile(path, []byte(rulesWithLimit(7)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("edit applied after %v", p.waitForLimit(t, "192.0.2.60", 7))

		bad := strings.Replace(rulesWithLimit(9), "unit: hour", "unit: fortnight", 1)
		if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		// "ratelimit.yaml:4:24: invalid rate limit unit", column of "fortnight".
		want := "ratelimit.yaml:4:24: invalid rate limit unit"
		deadline := time.Now().Add(5 * time.Second)
		for !p.logs.Contains(want) {
			if time.Now().After(deadline) {
				t.Fatalf("no log line with %q after 5s:\n%s", want, p.logs)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if !p.logs.Contains("config rejected; the previous config keeps serving") {
			t.Fatalf("the rejection is not logged as such:\n%s", p.logs)
		}
		if got := p.currentLimitOf(t, "192.0.2.60"); got != 7 {
			t.Fatalf("after the bad edit: limit %d, want the previous 7", got)
		}
		if err := os.WriteFile(path, []byte(rulesWithLimit(9)), 0o644); err != nil {
			t.Fatal(err)
		}
		p.waitForLimit(t, "192.0.2.60", 9)
	})
}

// TestEnvoyReloadConfigMap: a Kubernetes ConfigMap mount, whose files are
// symlinks through "..data" into a timestamped folder, updated by
// atomically swapping "..data" to a new folder.
func TestEnvoyReloadConfigMap(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		dir := t.TempDir()
		version := func(name string, n int) {
			t.Helper()
			if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name, "ratelimit.yaml"), []byte(rulesWithLimit(n)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		version("..2026_01_01_00_00_00.1", 3)
		must(t, os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(dir, "..data")))
		must(t, os.Symlink(filepath.Join("..data", "ratelimit.yaml"), filepath.Join(dir, "ratelimit.yaml")))

		p := b.serve(t, "--config", dir)
		if got := p.currentLimitOf(t, "192.0.2.70"); got != 3 {
			t.Fatalf("initial limit: got %d, want 3", got)
		}
		// What the kubelet does: write the new folder, point "..data_tmp"
		// at it, rename it over "..data", remove the old folder.
		version("..2026_01_01_00_01_00.2", 6)
		must(t, os.Symlink("..2026_01_01_00_01_00.2", filepath.Join(dir, "..data_tmp")))
		must(t, os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
		must(t, os.RemoveAll(filepath.Join(dir, "..2026_01_01_00_00_00.1")))
		t.Logf("swap applied after %v", p.waitForLimit(t, "192.0.2.70", 6))
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// edgeRules: a login limit, 10 per 2s, in a sliding window and in
// the reference's fixed window.
const edgeRules = `domain: e2e
descriptors:
  - key: login
    value: sliding
    descriptors:
      - key: user
        rate_limit: {algorithm: sliding_window, period: 2s, requests_per_unit: 10}
  - key: login
    value: fixed
    descriptors:
      - key: user
        rate_limit: {algorithm: fixed_window, period: 2s, requests_per_unit: 10}
`

// TestEnvoyWindowEdge is the real-clock smoke test of the
// window-edge attack through the binary: ten requests before a 2s window
// edge of the wall clock (the binary's windows are aligned to Unix time)
// and ten after. The fixed window (the reference server's only algorithm)
// admits all twenty, twice its limit; the sliding window denies what it
// decides within 200ms of the edge, where its estimate still counts the
// first ten above 9. The exact attack, ten and ten at set moments, runs on
// a simulated clock in the store conformance suite (storetest's
// WindowEdge, on the embedded store and on Redis); this test only needs
// the first ten within a second before the edge and one call within
// 190ms after it, so a loaded machine does not fail it.
func TestEnvoyWindowEdge(t *testing.T) {
	forEachBackend(t, windowEdge)
}

// windowEdge is TestEnvoyWindowEdge on one backend.
func windowEdge(t *testing.T, b envoyBackend) {
	p := b.serve(t, "--config", writeRules(t, edgeRules))
	// The sliding window's estimate after the edge is 10 × (1 - e/2s)
	// for e into the new window: a call decided before e = 200ms is
	// denied, a later one may pass. So a call answered less than judged
	// after the edge must be denied; later ones are not judged.
	const judged = 190 * time.Millisecond
	// A run counts only if its timing held: the first ten before the
	// edge, the first call after it answered within judged, the fixed
	// window's ten before the next edge. A run that missed retries with
	// new users; the decisions are never judged on a broken run.
	for attempt := range 3 {
		user := fmt.Sprintf("mallory-%d", attempt)
		sliding, fixed := rlsDesc("login", "sliding", "user", user), rlsDesc("login", "fixed", "user", user)
		edge := nextEdge(time.Now(), 2*time.Second, 1200*time.Millisecond)
		time.Sleep(time.Until(edge.Add(-time.Second)))
		var before []string
		for range 10 {
			before = append(before, rlsCodes(p.call(t, sliding)), rlsCodes(p.call(t, fixed)))
		}
		if time.Now().After(edge.Add(-20 * time.Millisecond)) {
			t.Logf("attempt %d: the first ten ended too close to the edge; retrying", attempt)
			continue
		}
		time.Sleep(time.Until(edge.Add(10 * time.Millisecond)))
		start := time.Now()
		var afterSliding, afterFixed []string
		var answered []time.Duration // each sliding call's answer, after the edge
		for range 10 {
			afterSliding = append(afterSliding, rlsCodes(p.call(t, sliding)))
			answered = append(answered, time.Since(edge))
		}
		for range 10 {
			afterFixed = append(afterFixed, rlsCodes(p.call(t, fixed)))
		}
		if start.Before(edge) || answered[0] >= judged || time.Since(edge) > 2*time.Second-50*time.Millisecond {
			t.Logf("attempt %d: the first call after the edge answered %v after it, the last %v; retrying", attempt, answered[0], time.Since(edge))
			continue
		}
		for i, c := range before {
			if c != "OK:OK" {
				t.Fatalf("before the edge, call %d: got %s, want OK", i, c)
			}
		}
		for i := range 10 {
			if answered[i] < judged && afterSliding[i] != "OVER_LIMIT:OVER_LIMIT" {
				t.Errorf("sliding_window, call %d answered %v after the edge: got %s, want OVER_LIMIT", i, answered[i], afterSliding[i])
			}
			if afterFixed[i] != "OK:OK" {
				t.Errorf("fixed_window, call %d after the edge: got %s, want OK (the reference's double burst)", i, afterFixed[i])
			}
		}
		return
	}
	t.Fatal("three attempts missed the timing; the machine is too slow for this test")
}

// nextEdge is the first multiple of period (in Unix time) at least margin
// after now.
func nextEdge(now time.Time, period, margin time.Duration) time.Time {
	p := period.Milliseconds()
	ms := now.UnixMilli() + margin.Milliseconds()
	return time.UnixMilli((ms/p + 1) * p)
}

// TestEnvoyRedisReplicasShareLimit: three floodgate processes on one Redis
// receive 300 concurrent calls for one descriptor limited to 100: exactly
// 100 are admitted.
func TestEnvoyRedisReplicasShareLimit(t *testing.T) {
	r := redistest.StartServer(t)
	rules := writeRules(t, "domain: e2e\ndescriptors:\n  - key: tenant\n    rate_limit: {algorithm: token_bucket, unit: hour, requests_per_unit: 100}\n")
	var clients []rlsv3.RateLimitServiceClient
	for range 3 {
		p := startServe(t, "--config", rules, "--redis-url", "redis://"+r.Addr(), "--redis-timeout", "5s")
		clients = append(clients, rlsv3.NewRateLimitServiceClient(p.Conn(t)))
	}
	var ok, over, degraded atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 300)
	start := make(chan struct{})
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := clients[i%3].ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{
				Domain: "e2e", Descriptors: repeat(1, rlsDesc("tenant", "acme")),
			})
			switch {
			case err != nil:
				errs <- err
			case rlsHeaders(resp)["x-ratelimit-degraded"] != "":
				degraded.Add(1)
			case resp.OverallCode == rlsv3.RateLimitResponse_OK:
				ok.Add(1)
			default:
				over.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	if ok.Load() != 100 || over.Load() != 200 || degraded.Load() != 0 {
		t.Fatalf("admitted %d, denied %d, degraded (store not deciding) %d; want exactly 100, 200 and 0", ok.Load(), over.Load(), degraded.Load())
	}
}

// TestEnvoyDeployExample runs the commands docs/envoy.md shows (its
// "floodgate ..." lines) on deploy/envoy/ratelimit.yaml and sends the
// descriptors deploy/envoy/envoy.yaml's actions build for a login and for
// API calls. The guide's addresses are replaced by the test's: a free port
// for --grpc-addr, the test's redis-server for --redis-url.
func TestEnvoyDeployExample(t *testing.T) {
	validate, serves := guideCommands(t)
	if out, stderr, code := runCLI(t, validate...); code != 0 || !strings.HasPrefix(out, "ok: 1 file(s), 1 domain(s)") {
		t.Fatalf("floodgate %v: exit %d, %q %q", validate, code, out, stderr)
	}
	forEachBackend(t, func(t *testing.T, b envoyBackend) {
		args, ok := serves[b.name]
		if !ok {
			t.Fatalf("docs/envoy.md shows no serve command for the %s store", b.name)
		}
		var redisAddr string
		if b.name == "redis" {
			redisAddr = "redis://" + redistest.StartServer(t).Addr()
		}
		var local []string               // startServe adds "serve"
		for i := 1; i < len(args); i++ { // args[0] is "serve"
			switch args[i] {
			case "--grpc-addr": // startServe picks a free port
				i++
			case "--redis-url":
				i++
				local = append(local, "--redis-url", redisAddr)
			default:
				local = append(local, args[i])
			}
		}
		if b.name == "redis" {
			// As for every Redis backend of these tests: a slow moment
			// of a -race binary on a loaded machine must not turn into
			// the login rule's failure mode (closed: a deny).
			local = append(local, "--redis-timeout", "2s")
		}
		pp := startServe(t, local...)
		p := &envoyProc{proc: pp, rls: rlsv3.NewRateLimitServiceClient(pp.Conn(t))}
		edge := func(descs ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
			t.Helper()
			r, err := p.rls.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: descs})
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		// POST /login from 192.0.2.7: [remote_address], [path=/login,
		// remote_address]. Five attempts per 15 minutes.
		login := []*ratelimitv3.RateLimitDescriptor{rlsDesc("remote_address", "192.0.2.7"), rlsDesc("path", "/login", "remote_address", "192.0.2.7")}
		for i := range 5 {
			if got := rlsCodes(edge(login...)); got != "OK:OK,OK" {
				t.Fatalf("login %d: got %s, want OK", i, got)
			}
		}
		r := edge(login...)
		wantHeaders(t, "6th login", r, map[string]string{"ratelimit-policy": `"login";q=5;w=900`})
		if rlsCodes(r) != "OVER_LIMIT:OK,OVER_LIMIT" || rlsHeaders(r)["retry-after"] == "" {
			t.Fatalf("6th login: got %s %v, want OVER_LIMIT:OK,OVER_LIMIT with Retry-After", rlsCodes(r), rlsHeaders(r))
		}
		// The health-check agent on 127.0.0.1 is never limited.
		for i := range 100 {
			if got := rlsCodes(edge(rlsDesc("remote_address", "127.0.0.1"))); got != "OK:OK" {
				t.Fatalf("127.0.0.1, call %d: got %s", i, got)
			}
		}
		// GET / with x-api-key k1 and x-plan free: [remote_address],
		// [api_key], [plan, api_key]. The free tier's burst of 30 runs out
		// first; its headers describe it.
		api := []*ratelimitv3.RateLimitDescriptor{rlsDesc("remote_address", "192.0.2.8"), rlsDesc("api_key", "k1"), rlsDesc("plan", "free", "api_key", "k1")}
		for i := range 30 {
			if got := rlsCodes(edge(api...)); got != "OK:OK,OK,OK" {
				t.Fatalf("free tier, call %d: got %s, want OK", i, got)
			}
		}
		r = edge(api...)
		// 15/min burst 30: the burst of 30 refills in 120s.
		wantHeaders(t, "31st free call", r, map[string]string{"ratelimit-policy": `"plan_free";q=30;w=120`})
		if rlsCodes(r) != "OVER_LIMIT:OK,OK,OVER_LIMIT" {
			t.Fatalf("31st free call: got %s, want OVER_LIMIT:OK,OK,OVER_LIMIT", rlsCodes(r))
		}
		// The same key on the pro plan has a tier of its own.
		if got := rlsCodes(edge(rlsDesc("remote_address", "192.0.2.9"), rlsDesc("api_key", "k1"), rlsDesc("plan", "pro", "api_key", "k1"))); got != "OK:OK,OK,OK" {
			t.Fatalf("pro tier: got %s, want OK", got)
		}
	})
}

// guideCommands reads the "floodgate ..." lines of docs/envoy.md's sh
// blocks: the one `config validate` and the `serve` commands, keyed by
// store ("redis" when it has --redis-url, else "embedded"), each without
// "floodgate" and with paths made relative to this folder.
func guideCommands(t *testing.T) (validate []string, serves map[string][]string) {
	t.Helper()
	data, err := os.ReadFile("../docs/envoy.md")
	if err != nil {
		t.Fatal(err)
	}
	serves = map[string][]string{}
	inSh := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			inSh = line == "```sh"
			continue
		case !inSh || !strings.HasPrefix(line, "floodgate "):
			continue
		}
		args := strings.Fields(line)[1:]
		for i, a := range args {
			if strings.HasPrefix(a, "deploy/") {
				args[i] = "../" + a
			}
		}
		switch {
		case len(args) > 2 && args[0] == "config" && args[1] == "validate":
			validate = args
		case args[0] == "serve" && strings.Contains(line, "--redis-url"):
			serves["redis"] = args
		case args[0] == "serve":
			serves["embedded"] = args
		default:
			t.Fatalf("docs/envoy.md shows %q, which no test runs", line)
		}
	}
	if validate == nil {
		t.Fatal("docs/envoy.md shows no floodgate config validate")
	}
	return validate, serves
}

// TestEnvoyBearerToken: with --auth-token-file, ShouldRateLimit needs the
// token as Envoy sends it from grpc_service.initial_metadata
// ("authorization: Bearer TOKEN"), as docs/envoy.md says.
func TestEnvoyBearerToken(t *testing.T) {
	tokens := filepath.Join(t.TempDir(), "tokens")
	must(t, os.WriteFile(tokens, []byte("envoy-token-0123456789\n"), 0o600))
	p := startServe(t, "--config", writeRules(t, envoyRules), "--auth-token-file", tokens)
	rls := rlsv3.NewRateLimitServiceClient(p.Conn(t))
	req := &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: repeat(1, rlsDesc("remote_address", "10.6.6.6"))}
	if _, err := rls.ShouldRateLimit(context.Background(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("without a token: got %v, want Unauthenticated", err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer envoy-token-0123456789")
	r, err := rls.ShouldRateLimit(ctx, req)
	if err != nil || rlsCodes(r) != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("with the token: got %v %v, want OVER_LIMIT (the ban)", r, err)
	}
}

// stateKeys counts the keys in c but the replicas' heartbeat key
// (failure_mode local's replica count), which every replica on Redis
// writes whatever it decides.
func stateKeys(c *redis.Client) (int, error) {
	names, err := c.Keys(context.Background(), "*").Result()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range names {
		if k != redisstore.DefaultPrefix+heartbeat.KeySuffix {
			n++
		}
	}
	return n, nil
}
