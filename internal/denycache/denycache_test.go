package denycache_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/denycache"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
	"github.com/floodgate/floodgate/store/storetest"
)

// TestConformance: with the cache in front, the memory store still passes
// the whole conformance suite (every decision exact).
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
	})
}

// counting counts the calls that reach the store.
type counting struct {
	store.Store
	calls atomic.Int64
}

func (c *counting) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	c.calls.Add(1)
	return c.Store.Decide(ctx, now, reqs, out)
}

func TestDeniesAnsweredFromMemory(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			inner := &counting{Store: memstore.New(memstore.Config{})}
			var hits atomic.Int64
			c := denycache.New(inner, denycache.Config{OnHit: func(n int) { hits.Add(int64(n)) }})
			defer c.Close()
			// The reference: the same requests on a store without a cache.
			ref := memstore.New(memstore.Config{})
			defer ref.Close()
			lim := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Minute}
			reqs := []store.Request{{Key: "attacked", Limit: lim, Cost: 1}}
			got, want := make([]algorithms.Decision, 1), make([]algorithms.Decision, 1)
			now := testkit.T0
			for i := range 200 {
				if err := c.Decide(ctx, now, reqs, got); err != nil {
					t.Fatal(err)
				}
				if err := ref.Decide(ctx, now, reqs, want); err != nil {
					t.Fatal(err)
				}
				if got[0].Allowed != want[0].Allowed || got[0].RetryAfter != want[0].RetryAfter || got[0].Limit != want[0].Limit ||
					got[0].Remaining != want[0].Remaining || got[0].ResetAfter != want[0].ResetAfter {
					t.Fatalf("step %d at %v: got %+v, want %+v", i, now.Sub(testkit.T0), got[0], want[0])
				}
				now = now.Add(time.Second)
			}
			if hits.Load() == 0 || inner.calls.Load()+hits.Load() != 200 {
				t.Fatalf("store calls %d, cache hits %d: want most denies from the cache and 200 in all", inner.calls.Load(), hits.Load())
			}
			t.Logf("%v: %d of 200 answered from memory", alg, hits.Load())
		})
	}
}

func TestRefundAndResetInvalidate(t *testing.T) {
	ctx := context.Background()
	c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
	defer c.Close()
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Hour}
	out := make([]algorithms.Decision, 1)
	spend := []store.Request{{Key: "k", Limit: lim, Cost: 1}}
	for range 2 {
		if err := c.Decide(ctx, testkit.T0, spend, out); err != nil {
			t.Fatal(err)
		}
	}
	if out[0].Allowed || c.Len() != 1 {
		t.Fatalf("second spend: allowed=%v cached=%d, want a cached deny", out[0].Allowed, c.Len())
	}
	if err := c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: -1}}, out); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(ctx, testkit.T0, spend, out); err != nil || !out[0].Allowed {
		t.Fatalf("after a refund: got %+v %v, want allowed", out[0], err)
	}
	_ = c.Decide(ctx, testkit.T0, spend, out) // denied and cached again
	if err := c.Reset(ctx, algorithms.Unspecified, "k"); err != nil {
		t.Fatal(err)
	}
	if err := c.Decide(ctx, testkit.T0, spend, out); err != nil || !out[0].Allowed {
		t.Fatalf("after a reset: got %+v %v, want allowed", out[0], err)
	}
}

// TestOnlySingleUnitsCached: a larger cost is decided by the store, so
// its Remaining stays exact.
func TestOnlySingleUnitsCached(t *testing.T) {
	ctx := context.Background()
	c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
	defer c.Close()
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	out := make([]algorithms.Decision, 1)
	_ = c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 8}}, out)
	_ = c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 8}}, out) // denied: 2 left
	if out[0].Allowed {
		t.Fatal("second cost 8 allowed")
	}
	if c.Len() != 0 {
		t.Fatalf("a cost-8 deny was cached")
	}
	if err := c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 2}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("cost 2 after a cost-8 deny: got %+v %v, want allowed", out[0], err)
	}
}

func TestBounded(t *testing.T) {
	ctx := context.Background()
	c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{MaxEntries: 128})
	defer c.Close()
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Hour}
	out := make([]algorithms.Decision, 1)
	for i := range 5000 {
		key := string(rune('a'+i%26)) + string(rune(i))
		for range 2 {
			_ = c.Decide(ctx, testkit.T0, []store.Request{{Key: key, Limit: lim, Cost: 1}}, out)
		}
	}
	if n := c.Len(); n > 128 {
		t.Fatalf("%d cached keys, want at most 128", n)
	}
}

// TestAnswersInWholeMilliseconds: between whole milliseconds a cached deny
// says what the store says at that moment (both read now in whole ms), so
// its retry_after is a whole number of milliseconds; it was once until-now
// to the nanosecond.
func TestAnswersInWholeMilliseconds(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			var hits atomic.Int64
			c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{OnHit: func(n int) { hits.Add(int64(n)) }})
			defer c.Close()
			ref := memstore.New(memstore.Config{})
			defer ref.Close()
			lim := algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Second}
			reqs := []store.Request{{Key: "attacked", Limit: lim, Cost: 1}}
			got, want := make([]algorithms.Decision, 1), make([]algorithms.Decision, 1)
			now := testkit.T0.Add(123456 * time.Nanosecond)
			for i := range 3000 {
				if err := c.Decide(ctx, now, reqs, got); err != nil {
					t.Fatal(err)
				}
				if err := ref.Decide(ctx, now, reqs, want); err != nil {
					t.Fatal(err)
				}
				if got[0] != want[0] {
					t.Fatalf("step %d at %v: got %+v, want %+v", i, now.Sub(testkit.T0), got[0], want[0])
				}
				now = now.Add(1234567 * time.Nanosecond) // 1.23ms: never on a millisecond
			}
			if hits.Load() == 0 {
				t.Fatal("no answer came from the cache")
			}
		})
	}
}

// TestLeakyModesApart: a leaky bucket denies a NoWait request until its
// queue is empty, a plain one only until a place frees; a cached deny of
// one mode never answers the other. A plain request that queues behind a
// cached NoWait deny makes the queue longer, so that deny goes: the next
// NoWait request gets the store's longer wait.
func TestLeakyModesApart(t *testing.T) {
	ctx := context.Background()
	c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
	defer c.Close()
	lim := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 20, Period: time.Second, Burst: 10}
	now := testkit.T0
	out := make([]algorithms.Decision, 1)
	decide := func(m algorithms.Mode) algorithms.Decision {
		t.Helper()
		if err := c.Decide(ctx, now, []store.Request{{Key: "partner", Limit: lim, Cost: 1, Mode: m}}, out); err != nil {
			t.Fatal(err)
		}
		return out[0]
	}
	if d := decide(0); !d.Allowed {
		t.Fatalf("first: %+v", d)
	}
	// NoWait: denied until the queue is empty, 50ms; cached.
	for range 2 {
		if d := decide(algorithms.NoWait); d.Allowed || d.RetryAfter != 50*time.Millisecond {
			t.Fatalf("NoWait: %+v, want denied for 50ms", d)
		}
	}
	// A plain request still queues.
	if d := decide(0); !d.Allowed || d.Wait != 50*time.Millisecond {
		t.Fatalf("plain after a cached NoWait deny: %+v, want admitted with a 50ms wait", d)
	}
	if d := decide(algorithms.NoWait); d.Allowed || d.RetryAfter != 100*time.Millisecond {
		t.Fatalf("NoWait after a plain request queued: %+v, want denied for 100ms (two in the queue)", d)
	}
}

// TestDebtChargeInvalidates: a debt charge passes a key whose deny is
// cached and deepens its debt; the next check is answered by the store,
// with the longer wait, not by the cached deny's shorter one.
func TestDebtChargeInvalidates(t *testing.T) {
	ctx := context.Background()
	c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
	defer c.Close()
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	out := make([]algorithms.Decision, 1)
	check := []store.Request{{Key: "k", Limit: lim, Cost: 1}}
	if err := c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 10}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("spend the bucket: %+v %v", out[0], err)
	}
	if err := c.Decide(ctx, testkit.T0, check, out); err != nil || out[0].Allowed || c.Len() != 1 {
		t.Fatalf("check: %+v %v, cached %d; want a cached deny", out[0], err, c.Len())
	}
	if err := c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 5, Mode: algorithms.Debt}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("debt charge: %+v %v, want allowed", out[0], err)
	}
	if err := c.Decide(ctx, testkit.T0, check, out); err != nil || out[0].Allowed || out[0].RetryAfter != 600*time.Millisecond {
		t.Fatalf("check after the debt: %+v %v, want denied with 600ms to wait (5 owed + 1)", out[0], err)
	}
}

// TestDenyOfARolledBackCallNotCached: a call that charges one key twice
// with a single unit left is denied on its second request only because of
// its own first one, and rolled back whole: the key still has its unit, so
// a single check after it must reach the store and be allowed.
func TestDenyOfARolledBackCallNotCached(t *testing.T) {
	ctx := context.Background()
	for _, alg := range algorithms.All() {
		t.Run(alg.String(), func(t *testing.T) {
			c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
			defer c.Close()
			lim := algorithms.Limit{Algorithm: alg, Requests: 2, Period: time.Hour}
			one := []store.Request{{Key: "k", Limit: lim, Cost: 1}}
			out := make([]algorithms.Decision, 2)
			if err := c.Decide(ctx, testkit.T0, one, out[:1]); err != nil || !out[0].Allowed {
				t.Fatalf("first unit: %+v %v", out[0], err)
			}
			twice := []store.Request{one[0], one[0]}
			if err := c.Decide(ctx, testkit.T0, twice, out); err != nil {
				t.Fatal(err)
			}
			if out[1].Allowed {
				t.Fatalf("the call's second unit allowed with one left: %+v", out)
			}
			if err := c.Decide(ctx, testkit.T0, one, out[:1]); err != nil || !out[0].Allowed {
				t.Fatalf("a single unit after the rolled-back call: %+v %v, want allowed (one unit is left)", out[0], err)
			}
		})
	}
}

// TestUnitDebtChargeInvalidates is TestDebtChargeInvalidates with a debt
// charge of one unit: it too passes the denied key and makes its wait
// longer, so the cached deny must go.
func TestUnitDebtChargeInvalidates(t *testing.T) {
	ctx := context.Background()
	c := denycache.New(memstore.New(memstore.Config{}), denycache.Config{})
	defer c.Close()
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 10, Period: time.Second}
	out := make([]algorithms.Decision, 1)
	check := []store.Request{{Key: "k", Limit: lim, Cost: 1}}
	if err := c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 10}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("spend the bucket: %+v %v", out[0], err)
	}
	if err := c.Decide(ctx, testkit.T0, check, out); err != nil || out[0].Allowed || out[0].RetryAfter != 100*time.Millisecond || c.Len() != 1 {
		t.Fatalf("check: %+v %v, cached %d; want a cached deny for 100ms", out[0], err, c.Len())
	}
	if err := c.Decide(ctx, testkit.T0, []store.Request{{Key: "k", Limit: lim, Cost: 1, Mode: algorithms.Debt}}, out); err != nil || !out[0].Allowed {
		t.Fatalf("debt charge of 1: %+v %v, want allowed", out[0], err)
	}
	if err := c.Decide(ctx, testkit.T0, check, out); err != nil || out[0].Allowed || out[0].RetryAfter != 200*time.Millisecond {
		t.Fatalf("check after the debt: %+v %v, want denied with 200ms to wait (1 owed + 1)", out[0], err)
	}
}
