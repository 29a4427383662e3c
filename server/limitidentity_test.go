package server_test

import (
	"context"
	"testing"
	"time"

	floodgatev1 "github.com/floodgate/floodgate/gen/floodgate/v1"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/internal/rules"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/server"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/redisstore"
)

// identityStores are the stores the limit-identity tests run on: the
// embedded store (nil: start's default) and Redis deciding at the test's
// clock.
func identityStores(t *testing.T) map[string]func(t *testing.T) store.Store {
	return map[string]func(t *testing.T) store.Store{
		"memory": func(*testing.T) store.Store { return nil },
		"redis": func(t *testing.T) store.Store {
			srv := redistest.StartServer(t)
			st, err := redisstore.New(srv.Client(), redisstore.Config{ClientTime: true, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
}

const identityPolicies = `policies:
  login: {algorithm: sliding_window, requests: 5, period: 15m}
  otp:   {algorithm: sliding_window, requests: 3, period: 1h}
`

// TestLimitsOnOneKeyNeverShareACount: two limits
// checked on one key must not overwrite each other's state, or alternating
// them admits far more than either allows. Every interleaving below
// must admit exactly what each limit allows on its own, on both stores,
// through Check and CheckBatch, for inline limits and for policies.
func TestLimitsOnOneKeyNeverShareACount(t *testing.T) {
	cfg, err := rules.Parse("policies.yaml", []byte(identityPolicies))
	if err != nil {
		t.Fatal(err)
	}
	fw := floodgatev1.Algorithm_ALGORITHM_FIXED_WINDOW
	sw := floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW
	for name, newStore := range identityStores(t) {
		t.Run(name, func(t *testing.T) {
			h := start(t, newStore(t), server.Settings{Rules: testkit.StaticRules(cfg)})
			ctx := context.Background()
			check := func(req *floodgatev1.CheckRequest) bool {
				t.Helper()
				r, err := h.client.Check(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				return r.Allowed
			}
			count := func(n int, req *floodgatev1.CheckRequest, between ...*floodgatev1.CheckRequest) int {
				t.Helper()
				admitted := 0
				for range n {
					if check(req) {
						admitted++
					}
					for _, b := range between {
						check(b)
					}
				}
				return admitted
			}

			// The first case: FIXED_WINDOW 3/60s alternated with
			// FIXED_WINDOW 1000/7s admitted 10 of 10.
			small := &floodgatev1.CheckRequest{Key: "a", Algorithm: fw, Source: testkit.Inline(3, time.Minute, 0)}
			big := &floodgatev1.CheckRequest{Key: "a", Algorithm: fw, Source: testkit.Inline(1000, 7*time.Second, 0)}
			if got := count(10, small, big); got != 3 {
				t.Errorf("fixed 3/60s alternated with 1000/7s: %d of 10 admitted, want 3", got)
			}
			if got := count(5, big); got != 5 {
				t.Errorf("fixed 1000/7s after the alternation: %d of 5 admitted, want 5", got)
			}

			// The second: SLIDING_WINDOW 5/900s, one 3/3600s check, then
			// more 5/900s checks admitted 4 more (9 in one window).
			five := &floodgatev1.CheckRequest{Key: "b", Algorithm: sw, Source: testkit.Inline(5, 900*time.Second, 0)}
			three := &floodgatev1.CheckRequest{Key: "b", Algorithm: sw, Source: testkit.Inline(3, time.Hour, 0)}
			first := count(5, five)
			check(three)
			if more := count(5, five); first != 5 || more != 0 {
				t.Errorf("sliding 5/900s around one 3/3600s check: %d then %d admitted, want 5 then 0", first, more)
			}
			// Burst is part of an inline limit's identity.
			tb := floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET
			b2 := &floodgatev1.CheckRequest{Key: "c", Algorithm: tb, Source: testkit.Inline(1, time.Hour, 2)}
			b5 := &floodgatev1.CheckRequest{Key: "c", Algorithm: tb, Source: testkit.Inline(1, time.Hour, 5)}
			if got := count(4, b2, b5); got != 2 {
				t.Errorf("token bucket burst 2 alternated with burst 5: %d of 4 admitted, want 2", got)
			}

			// Two policies of one algorithm on one user key.
			login := &floodgatev1.CheckRequest{Key: "alice", Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}}
			otp := &floodgatev1.CheckRequest{Key: "alice", Source: &floodgatev1.CheckRequest_Policy{Policy: "otp"}}
			if got := count(8, login, otp); got != 5 {
				t.Errorf("login alternated with otp: %d of 8 login checks admitted, want 5", got)
			}
			if got := count(2, otp); got != 0 {
				t.Errorf("otp after 8 interleaved checks: %d more admitted, want 0 (3 of 3 spent)", got)
			}

			// CheckBatch: both limits of one key in one batch, repeatedly.
			admittedBatches := 0
			for range 6 {
				r, err := h.client.CheckBatch(ctx, &floodgatev1.CheckBatchRequest{Checks: []*floodgatev1.CheckRequest{
					{Key: "d", Algorithm: fw, Source: testkit.Inline(2, time.Minute, 0)},
					{Key: "d", Algorithm: fw, Source: testkit.Inline(100, time.Second, 0)},
				}})
				if err != nil {
					t.Fatal(err)
				}
				if r.Allowed {
					admittedBatches++
				}
			}
			if admittedBatches != 2 {
				t.Errorf("batches of 2/min and 100/s on one key: %d of 6 admitted, want 2", admittedBatches)
			}
		})
	}
}

// TestResetByLimit: Reset with a limit or a policy forgets that count
// only; Reset with neither forgets every count of the key.
func TestResetByLimit(t *testing.T) {
	cfg, err := rules.Parse("policies.yaml", []byte(identityPolicies))
	if err != nil {
		t.Fatal(err)
	}
	sw := floodgatev1.Algorithm_ALGORITHM_SLIDING_WINDOW
	for name, newStore := range identityStores(t) {
		t.Run(name, func(t *testing.T) {
			h := start(t, newStore(t), server.Settings{Rules: testkit.StaticRules(cfg)})
			ctx := context.Background()
			login := &floodgatev1.CheckRequest{Key: "bob", Source: &floodgatev1.CheckRequest_Policy{Policy: "login"}}
			otp := &floodgatev1.CheckRequest{Key: "bob", Source: &floodgatev1.CheckRequest_Policy{Policy: "otp"}}
			in := &floodgatev1.CheckRequest{Key: "bob", Algorithm: sw, Source: testkit.Inline(2, time.Hour, 0)}
			remaining := func(req *floodgatev1.CheckRequest) int64 {
				t.Helper()
				p := &floodgatev1.PeekRequest{Key: req.Key, Algorithm: req.Algorithm}
				switch s := req.Source.(type) {
				case *floodgatev1.CheckRequest_Policy:
					p.Source = &floodgatev1.PeekRequest_Policy{Policy: s.Policy}
				case *floodgatev1.CheckRequest_Limit:
					p.Source = &floodgatev1.PeekRequest_Limit{Limit: s.Limit}
				}
				r, err := h.client.Peek(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				return r.Remaining
			}
			for _, r := range []*floodgatev1.CheckRequest{login, otp, in} {
				if _, err := h.client.Check(ctx, r); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := h.client.Reset(ctx, &floodgatev1.ResetRequest{Key: "bob", Source: &floodgatev1.ResetRequest_Policy{Policy: "otp"}}); err != nil {
				t.Fatal(err)
			}
			if a, b, c := remaining(login), remaining(otp), remaining(in); a != 4 || b != 3 || c != 1 {
				t.Fatalf("after Reset(policy otp): login %d otp %d inline %d remaining, want 4 3 1", a, b, c)
			}
			if _, err := h.client.Reset(ctx, &floodgatev1.ResetRequest{Key: "bob", Algorithm: sw, Source: &floodgatev1.ResetRequest_Limit{Limit: in.GetLimit()}}); err != nil {
				t.Fatal(err)
			}
			if a, c := remaining(login), remaining(in); a != 4 || c != 2 {
				t.Fatalf("after Reset(inline limit): login %d inline %d remaining, want 4 2", a, c)
			}
			if _, err := h.client.Check(ctx, in); err != nil {
				t.Fatal(err)
			}
			if _, err := h.client.Reset(ctx, &floodgatev1.ResetRequest{Key: "bob"}); err != nil {
				t.Fatal(err)
			}
			if a, c := remaining(login), remaining(in); a != 5 || c != 2 {
				t.Fatalf("after Reset(key): login %d inline %d remaining, want 5 2", a, c)
			}
			for _, bad := range []*floodgatev1.ResetRequest{
				{Key: "bob", Source: &floodgatev1.ResetRequest_Limit{Limit: in.GetLimit()}},
				{Key: "bob", Algorithm: floodgatev1.Algorithm_ALGORITHM_TOKEN_BUCKET, Source: &floodgatev1.ResetRequest_Policy{Policy: "login"}},
			} {
				if _, err := h.client.Reset(ctx, bad); err == nil {
					t.Errorf("Reset(%v): no error", bad)
				}
			}
			if _, err := h.client.Reset(ctx, &floodgatev1.ResetRequest{Key: "bob", Source: &floodgatev1.ResetRequest_Policy{Policy: "nope"}}); err == nil {
				t.Error("Reset of an unknown policy: no error")
			}
		})
	}
}
