package server_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/floodgate/floodgate/algorithms"
	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/breaker"
	"github.com/floodgate/floodgate/internal/localshare"
	"github.com/floodgate/floodgate/internal/observability"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// localRules has a local rule and policy of 30 a minute, and a closed
// policy, for failure_mode: local.
const localRules = `domain: edge
descriptors:
  - key: local
    rate_limit: {algorithm: fixed_window, unit: minute, requests_per_unit: 30, failure_mode: local}
  - key: bucket
    rate_limit: {algorithm: token_bucket, unit: minute, requests_per_unit: 30, failure_mode: local}
policies:
  local: {algorithm: sliding_window, requests: 30, period: 1m, failure_mode: local}
  closed: {requests: 30, period: 1m, failure_mode: closed}
`

// threeReplicas is a local share with a replica count of 3.
func threeReplicas() *localshare.Share {
	return localshare.New(func() int { return 3 }, memstore.Config{})
}

// checkLocal sends n Checks of policy on key and returns how many were
// allowed; every answer must be degraded.
func checkLocal(t *testing.T, c floodgatev1.RateLimiterClient, policy, key string, n int) int {
	t.Helper()
	allowed := 0
	for range n {
		r, err := c.Check(context.Background(), &floodgatev1.CheckRequest{Key: key, Source: &floodgatev1.CheckRequest_Policy{Policy: policy}})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Degraded {
			t.Fatalf("answer not degraded with the store down: %v", r)
		}
		if r.Allowed {
			allowed++
		}
	}
	return allowed
}

// TestLocalFailureModeAdmitsAShare: with the store down, a limit of 30 a
// minute whose failure mode is local admits exactly 10 on a replica that
// knows of 3, on both APIs, for the rule, the policy, and for inline
// limits under the server's --failure-mode local; the decisions count as
// result "local".
func TestLocalFailureModeAdmitsAShare(t *testing.T) {
	cfg := testkit.ParseRules(t, localRules)
	reg := prometheus.NewRegistry()
	metrics := observability.NewMetrics(reg)
	share := threeReplicas()
	t.Cleanup(share.Discard)
	mem := memstore.New(memstore.Config{})
	h := start(t, failingStore{mem}, server.Settings{Rules: testkit.StaticRules(cfg), Local: share, Metrics: metrics})
	if got := checkLocal(t, h.client, "local", "k", 30); got != 10 {
		t.Errorf("policy: %d of 30 allowed, want 10", got)
	}
	if got := checkLocal(t, h.client, "local", "other", 30); got != 10 {
		t.Errorf("policy, another key: %d of 30 allowed, want 10", got)
	}
	r, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "third", Source: &floodgatev1.CheckRequest_Policy{Policy: "local"}})
	if err != nil || !r.Allowed || r.Limit != 10 || r.Remaining != 9 {
		t.Errorf("first local answer %v, %v; want allowed, limit 10 (the share), remaining 9", r, err)
	}

	inline := start(t, failingStore{mem}, server.Settings{FailureMode: rules.FailureLocal, Local: share})
	allowed := 0
	for range 30 {
		r, err := inline.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Source: testkit.Inline(30, time.Minute, 0)})
		if err != nil || !r.Degraded {
			t.Fatalf("inline: %v, %v", r, err)
		}
		if r.Allowed {
			allowed++
		}
	}
	if allowed != 10 {
		t.Errorf("inline limit under --failure-mode local: %d of 30 allowed, want 10", allowed)
	}

	e := startEnvoy(t, localRules, failingStore{mem}, server.EnvoySettings{Settings: server.Settings{Local: share, Metrics: metrics}})
	for _, key := range []string{"local", "bucket"} {
		ok := 0
		for range 30 {
			if codesOf(e.call(t, testkit.Descriptor(key, "1"))) == "OK:OK" {
				ok++
			}
		}
		if ok != 10 {
			t.Errorf("envoy rule %s: %d of 30 OK, want 10", key, ok)
		}
	}

	results := map[string]float64{}
	for _, s := range decisionSamples(t, reg) {
		results[s.labels["result"]] += s.n
	}
	if results[observability.ResultLocal] != 60+1+60 || len(results) != 1 {
		t.Errorf("decisions by result %v, want only %q: 121", results, observability.ResultLocal)
	}
}

// TestLocalAllOrNothing: in a batch, a closed limit's deny keeps the local
// ones from being charged, as a store's deny would.
func TestLocalAllOrNothing(t *testing.T) {
	cfg := testkit.ParseRules(t, localRules+"  open: {requests: 30, period: 1m, failure_mode: open}\n")
	for _, tc := range []struct {
		name     string
		policies []string // the batch's, on one key; "local" first
		allowed  []bool   // each result's
	}{
		{"closed denies", []string{"local", "closed"}, []bool{true, false}},
		// One closed deny anywhere in the batch keeps the local limits
		// from being charged, even when an open limit after it allows.
		{"open after the deny", []string{"local", "closed", "open"}, []bool{true, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			share := threeReplicas()
			t.Cleanup(share.Discard)
			h := start(t, failingStore{memstore.New(memstore.Config{})}, server.Settings{Rules: testkit.StaticRules(cfg), Local: share})
			batch := &floodgatev1.CheckBatchRequest{}
			for _, p := range tc.policies {
				batch.Checks = append(batch.Checks, &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: p}})
			}
			for range 5 {
				r, err := h.client.CheckBatch(context.Background(), batch)
				if err != nil || r.Allowed {
					t.Fatalf("batch %v, %v; want denied by closed", r, err)
				}
				for i, want := range tc.allowed {
					if r.Results[i].Allowed != want {
						t.Fatalf("batch %v: result %d (%s) allowed %v, want %v (local would fit)", r, i, tc.policies[i], r.Results[i].Allowed, want)
					}
				}
			}
			if got := checkLocal(t, h.client, "local", "k", 30); got != 10 {
				t.Errorf("%d of 30 allowed after 5 denied batches, want 10 (nothing charged)", got)
			}
		})
	}
}

// TestLocalFullAnswersClosed: when the replica's own memory cannot take
// another key either, a local limit answers as a closed one: denied.
func TestLocalFullAnswersClosed(t *testing.T) {
	cfg := testkit.ParseRules(t, localRules)
	share := localshare.New(nil, memstore.Config{Shards: 1, MaxKeys: 1})
	t.Cleanup(share.Discard)
	h := start(t, failingStore{memstore.New(memstore.Config{})}, server.Settings{Rules: testkit.StaticRules(cfg), Local: share})
	if got := checkLocal(t, h.client, "local", "first", 1); got != 1 {
		t.Fatalf("the first key: %d of 1 allowed, want 1 (the local share decides)", got)
	}
	if got := checkLocal(t, h.client, "local", "second", 3); got != 0 {
		t.Errorf("a key the full local memory cannot take: %d of 3 allowed, want 0 (closed)", got)
	}
}

// TestLocalPeekChargesNothing: with the store down, a Peek of a local
// limit looks at the replica's share without spending it, even when it
// would fit (the share is then still whole for Checks).
func TestLocalPeekChargesNothing(t *testing.T) {
	cfg := testkit.ParseRules(t, localRules)
	share := threeReplicas()
	t.Cleanup(share.Discard)
	h := start(t, failingStore{memstore.New(memstore.Config{})}, server.Settings{Rules: testkit.StaticRules(cfg), Local: share})
	for i := range 5 {
		r, err := h.client.Peek(context.Background(), &floodgatev1.PeekRequest{Key: "k", Cost: 3, Source: &floodgatev1.PeekRequest_Policy{Policy: "local"}})
		if err != nil || !r.Allowed || !r.Degraded || r.Remaining != 10 {
			t.Fatalf("peek %d of 3: %v, %v; want allowed and degraded with the share of 10 remaining", i, r, err)
		}
	}
	if got := checkLocal(t, h.client, "local", "k", 30); got != 10 {
		t.Errorf("%d of 30 allowed after 5 peeks, want 10 (nothing charged)", got)
	}
}

// switchStore is a memory store that fails, Ping included, while down.
type switchStore struct {
	store.Store
	down *atomic.Bool
}

func (s switchStore) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	if s.down.Load() {
		return fmt.Errorf("redis: %w", store.ErrUnavailable)
	}
	return s.Store.Decide(ctx, now, reqs, out)
}

func (s switchStore) Ping(ctx context.Context) error {
	if s.down.Load() {
		return fmt.Errorf("redis: %w", store.ErrUnavailable)
	}
	return s.Store.Ping(ctx)
}

// TestLocalKeptWhenStoreReturns: while the store is up, decisions are
// the store's; the local counts outlive the breaker's closing, so a
// second outage in the same period admits nothing more on the key (a
// flapping store grants one share per period, not one per outage).
func TestLocalKeptWhenStoreReturns(t *testing.T) {
	cfg := testkit.ParseRules(t, localRules)
	share := threeReplicas()
	t.Cleanup(share.Discard)
	var down atomic.Bool
	down.Store(true)
	closed := make(chan struct{}, 1)
	br := breaker.New(switchStore{memstore.New(memstore.Config{}), &down}, breaker.Config{
		ProbeInterval: 5 * time.Millisecond, CheckInterval: 5 * time.Millisecond,
		OnChange: func(open bool, cause error) {
			share.StoreChanged(open, cause)
			if !open {
				select {
				case closed <- struct{}{}:
				default:
				}
			}
		},
	})
	h := start(t, br, server.Settings{Rules: testkit.StaticRules(cfg), Local: share})
	if got := checkLocal(t, h.client, "local", "k", 30); got != 10 {
		t.Fatalf("first outage: %d of 30 allowed, want 10", got)
	}

	down.Store(false)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("10s after the store returned: breaker still open")
	}
	r, err := h.client.Check(context.Background(), &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "local"}})
	if err != nil || r.Degraded || !r.Allowed || r.Limit != 30 {
		t.Fatalf("store back: %v, %v; want the store's answer (limit 30)", r, err)
	}

	down.Store(true)
	if got := checkLocal(t, h.client, "local", "k", 30); got != 0 {
		t.Errorf("second outage in the same minute: %d of 30 allowed, want 0 (the first outage's share is spent: its local counts are kept when the store returns)", got)
	}
}

// TestLocalShareNeverFitsSaysPeriodEnd: with the store down and two
// replicas, a token bucket of 10 a minute has a local share of 5; a cost
// of 6 fits the limit but never the share. The answer is a degraded deny
// whose retry_after is the time left in the minute, in whole seconds
// (never negative, which a client sleeping retry_after would spin on, nor
// 0, an immediate retry); Peek says the same. A cost of 5 is admitted.
func TestLocalShareNeverFitsSaysPeriodEnd(t *testing.T) {
	share := localshare.New(func() int { return 2 }, memstore.Config{})
	t.Cleanup(share.Discard)
	h := start(t, failingStore{memstore.New(memstore.Config{})}, server.Settings{Local: share, FailureMode: rules.FailureLocal})
	src := testkit.Inline(10, time.Minute, 0)
	ctx := context.Background()
	r, err := h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: 6, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	inMinute := func(d time.Duration) bool { return d >= time.Second && d <= time.Minute && d%time.Second == 0 }
	if r.Allowed || !r.Degraded || !inMinute(r.RetryAfter.AsDuration()) || r.Limit != 5 {
		t.Errorf("cost 6 of a share of 5: %v, want a degraded deny with a retry_after of whole seconds within the minute, limit 5", r)
	}
	p, err := h.client.Peek(ctx, &floodgatev1.PeekRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: 6, Source: &floodgatev1.PeekRequest_Limit{Limit: src.Limit}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Allowed || !inMinute(p.RetryAfter.AsDuration()) {
		t.Errorf("peek of cost 6: %v, want a retry_after within the minute", p)
	}
	r, err = h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: 5, Source: src})
	if err != nil || !r.Allowed || r.RetryAfter.AsDuration() != 0 {
		t.Errorf("cost 5 of a share of 5: %v %v, want allowed, retry_after 0", r, err)
	}
	r, err = h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: 1, Source: src})
	if err != nil || r.Allowed || r.RetryAfter.AsDuration() <= 0 {
		t.Errorf("cost 1 of a spent share: %v %v, want denied with a positive retry_after", r, err)
	}
}

// TestFailureLogNamesAPI: the warning that the store could not decide
// names the front door that asked: check (or the API set in Settings,
// http for the HTTP/JSON API) and envoy.
func TestFailureLogNamesAPI(t *testing.T) {
	cfg := testkit.ParseRules(t, localRules)
	check := &floodgatev1.CheckRequest{Key: "k", Source: &floodgatev1.CheckRequest_Policy{Policy: "closed"}}
	envoy := &rlsv3.RateLimitRequest{Domain: "edge", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "local", Value: "v"}}},
	}}
	for _, tc := range []struct {
		api  string // CheckSettings.API
		want string
		call func(server.CheckSettings) error
	}{
		{"", observability.APICheck, func(s server.CheckSettings) error {
			_, err := server.NewRateLimiter(failingStore{}, s).Check(context.Background(), check)
			return err
		}},
		{observability.APIHTTP, observability.APIHTTP, func(s server.CheckSettings) error {
			_, err := server.NewRateLimiter(failingStore{}, s).Check(context.Background(), check)
			return err
		}},
		{"", observability.APIEnvoy, func(s server.CheckSettings) error {
			_, err := server.NewEnvoy(failingStore{}, server.EnvoySettings{Settings: s.Settings}).ShouldRateLimit(context.Background(), envoy)
			return err
		}},
	} {
		var buf bytes.Buffer
		s := server.CheckSettings{API: tc.api, Settings: server.Settings{Rules: testkit.StaticRules(cfg), Clock: testkit.NewClock(testkit.T0).Now,
			Logger: slog.New(slog.NewJSONHandler(&buf, nil))}}
		if err := tc.call(s); err != nil {
			t.Fatalf("%s: %v", tc.want, err)
		}
		if want := `"api":"` + tc.want + `"`; !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %s", buf.String(), want)
		}
	}
}
