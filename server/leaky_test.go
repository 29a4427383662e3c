package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
)

const leakyAlg = floodgatev1.Algorithm_ALGORITHM_LEAKY_BUCKET

// TestCheckLeakyWait: a leaky bucket answers with a wait instead of a
// deny, denies only when its queue is full, frees nothing for a negative
// cost (a give-back), and Peek reports the wait a Check would get.
func TestCheckLeakyWait(t *testing.T) {
	h := start(t, nil, server.Settings{})
	ctx := context.Background()
	check := func(cost int64) *floodgatev1.CheckResponse {
		t.Helper()
		resp, err := h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "partner", Algorithm: leakyAlg, Cost: cost, Source: testkit.Inline(20, time.Second, 4)})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ms := time.Millisecond
	for i, want := range []time.Duration{0, 50 * ms, 100 * ms, 150 * ms} {
		if r := check(1); !r.Allowed || r.Wait.AsDuration() != want || r.RetryAfter.AsDuration() != 0 {
			t.Fatalf("check %d: allowed %v wait %v retry %v, want allowed, wait %v", i, r.Allowed, r.Wait.AsDuration(), r.RetryAfter.AsDuration(), want)
		}
	}
	if r := check(1); r.Allowed || r.Wait.AsDuration() != 0 || r.RetryAfter.AsDuration() != 50*ms {
		t.Fatalf("full queue: allowed %v wait %v retry %v, want denied, retry 50ms", r.Allowed, r.Wait.AsDuration(), r.RetryAfter.AsDuration())
	}
	// A give-back of two slots frees none (they may be a middle caller's):
	// the queue is still full, so no later start comes beside another.
	if r := check(-2); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("give-back: %v, want allowed with nothing freed", r)
	}
	p, err := h.client.Peek(ctx, &floodgatev1.PeekRequest{Key: "partner", Algorithm: leakyAlg, Source: &floodgatev1.PeekRequest_Limit{Limit: testkit.Inline(20, time.Second, 4).Limit}})
	if err != nil || p.Allowed || p.RetryAfter.AsDuration() != 50*ms {
		t.Fatalf("peek: %v %v, want the queue still full (retry after 50ms)", p, err)
	}
	// The other algorithms never wait.
	r, err := h.client.Check(ctx, &floodgatev1.CheckRequest{Key: "partner", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: testkit.Inline(20, time.Second, 0)})
	if err != nil || r.Wait.AsDuration() != 0 {
		t.Fatalf("token bucket: %v %v, want wait 0", r, err)
	}
}

// TestCheckLeakyInvalid: a hostile or careless caller gets
// InvalidArgument naming the field.
func TestCheckLeakyInvalid(t *testing.T) {
	h := start(t, nil, server.Settings{})
	for _, tc := range []struct {
		name string
		req  *floodgatev1.CheckRequest
		want string
	}{
		{"negative cost, token bucket", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Cost: -1, Source: testkit.Inline(5, time.Second, 0)}, "cost: must not be negative"},
		{"cost above the queue", &floodgatev1.CheckRequest{Key: "k", Algorithm: leakyAlg, Cost: 5, Source: testkit.Inline(20, time.Second, 4)}, "cost: 5 exceeds the limit's capacity of 4 (burst, the queue's size)"},
		{"queue waits too long", &floodgatev1.CheckRequest{Key: "k", Algorithm: leakyAlg, Source: testkit.Inline(1, 1<<41*time.Millisecond, 3)}, "limit: burst (queue size) 3"},
		{"burst on a window", &floodgatev1.CheckRequest{Key: "k", Algorithm: floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW, Source: testkit.Inline(5, time.Second, 3)}, "limit.burst: applies only to ALGORITHM_TOKEN_BUCKET and ALGORITHM_LEAKY_BUCKET"},
	} {
		_, err := h.client.Check(context.Background(), tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument containing %q", tc.name, err, tc.want)
		}
	}
}

// TestEnvoyLeakyNoWait: Envoy cannot hold a request, so a leaky bucket
// admits through ShouldRateLimit only what may start now: one request
// per slot, the rest OVER_LIMIT until the queue is empty.
func TestEnvoyLeakyNoWait(t *testing.T) {
	yaml := "domain: edge\ndescriptors:\n  - key: partner\n    rate_limit: {unit: second, requests_per_unit: 20, algorithm: leaky_bucket}\n"
	h := startEnvoy(t, yaml, nil, server.EnvoySettings{})
	d := testkit.Descriptor("partner", "p")
	if got := codesOf(h.call(t, d)); got != "OK:OK" {
		t.Fatalf("first: %s", got)
	}
	r := h.call(t, d)
	if got := codesOf(r); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("second at the same instant: %s, want OVER_LIMIT (no queueing for Envoy)", got)
	}
	if got := r.Statuses[0].DurationUntilReset.AsDuration(); got != 50*time.Millisecond {
		t.Errorf("second: duration_until_reset %v, want 50ms", got)
	}
	h.clock.Advance(49 * time.Millisecond)
	if got := codesOf(h.call(t, d)); got != "OVER_LIMIT:OVER_LIMIT" {
		t.Fatalf("after 49ms: %s", got)
	}
	h.clock.Advance(time.Millisecond)
	if got := codesOf(h.call(t, d)); got != "OK:OK" {
		t.Fatalf("after 50ms: %s", got)
	}
}
