package splitstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/redistest"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/redisstore"
	"github.com/floodgate/floodgate/store/splitstore"
)

// TestGiveBackDebtUnrecorded: a per-second charge in debt (charge: after)
// records only what fits within the debt's depth and reports the rest
// unrecorded; when the main store then denies (a race), the give-back
// refunds what was recorded, never the unrecorded part too, which would
// wipe the debt the key owed before the call. On the memory store and on
// Redis.
func TestGiveBackDebtUnrecorded(t *testing.T) {
	srv := redistest.StartServer(t)
	stores := map[string]func() store.Store{
		"memory": func() store.Store { return memstore.New(memstore.Config{}) },
		"redis": func() store.Store {
			s, err := redisstore.New(srv.Client(), redisstore.Config{ClientTime: true, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	now := time.Now().Truncate(time.Second)
	l := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			sec := newStore()
			main := &racer{Store: memstore.New(memstore.Config{}), take: store.Request{Key: "k", Scope: "1m0s", Limit: perMin, Cost: 2}}
			s := splitstore.New(main, sec)
			defer s.Close()
			look := func() algorithms.Decision {
				t.Helper()
				out := make([]algorithms.Decision, 1)
				if err := sec.Decide(ctx, now, []store.Request{{Key: "k", Scope: "1s", Limit: l}}, out); err != nil {
					t.Fatal(err)
				}
				return out[0]
			}
			// 15 of a capacity of 10: 5 owed, 5 more fit in the debt's depth.
			if err := sec.Decide(ctx, now, []store.Request{{Key: "k", Scope: "1s", Limit: l, Cost: 15, Mode: algorithms.Debt}}, make([]algorithms.Decision, 1)); err != nil {
				t.Fatal(err)
			}
			before := look()
			out := make([]algorithms.Decision, 2)
			reqs := []store.Request{{Key: "k", Scope: "1s", Limit: l, Cost: 10, Mode: algorithms.Debt}, {Key: "k", Scope: "1m0s", Limit: perMin, Cost: 1}}
			if err := s.Decide(ctx, now, reqs, out); err != nil {
				t.Fatal(err)
			}
			if out[1].Allowed {
				t.Fatalf("the raced main store allowed: %+v", out)
			}
			if after := look(); after != before {
				t.Errorf("after the give-back the per-second key decides %+v, before the call %+v", after, before)
			}
		})
	}
}
