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
)

// spent returns a cache over a ledger with key "k" of limit lim denied
// (and cached) in mode m, and a function that decides reqs and reports
// whether they were answered from the cache.
func spent(t *testing.T, lim algorithms.Limit, m algorithms.Mode, hits *atomic.Int64) (*denycache.Cache, func(reqs ...store.Request) (bool, []algorithms.Decision)) {
	t.Helper()
	inner := newLedger()
	c := denycache.New(inner, denycache.Config{OnHit: func(n int) {
		if hits != nil {
			hits.Add(int64(n))
		}
	}})
	t.Cleanup(func() { c.Close() })
	decide := func(reqs ...store.Request) (bool, []algorithms.Decision) {
		t.Helper()
		before := inner.calls.Load()
		out := make([]algorithms.Decision, len(reqs))
		if err := c.Decide(context.Background(), testkit.T0, reqs, out); err != nil {
			t.Fatal(err)
		}
		return inner.calls.Load() == before, out
	}
	for range lim.Capacity() + 1 {
		decide(store.Request{Key: "k", Limit: lim, Cost: 1, Mode: m})
	}
	if c.Len() != 1 {
		t.Fatalf("%d keys cached after spending k, want 1", c.Len())
	}
	return c, decide
}

// TestUnknownModeNeverCached: a mode bit this cache does not know may
// change the decision in ways it cannot tell, so such a request is
// neither answered from a cached deny nor cached when denied.
func TestUnknownModeNeverCached(t *testing.T) {
	const unknown algorithms.Mode = 1 << 6
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 2, Period: time.Hour}
	c, decide := spent(t, lim, 0, nil)
	if cached, out := decide(store.Request{Key: "k", Limit: lim, Cost: 1, Mode: unknown}); cached || out[0].Allowed {
		t.Fatalf("unknown mode at a cached deny: from the cache %v, %+v; want the store's deny", cached, out[0])
	}
	c.Reset(context.Background(), algorithms.Unspecified, "k")
	for range 3 {
		decide(store.Request{Key: "k", Limit: lim, Cost: 1, Mode: unknown})
	}
	if c.Len() != 0 {
		t.Fatalf("a deny in an unknown mode was cached")
	}
}

// TestDryRunsKeepCachedDenies: a dry-run refund or debt charge changes
// nothing in the store, so the key's cached deny stays and answers.
func TestDryRunsKeepCachedDenies(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.TokenBucket, Requests: 2, Period: time.Hour}
	for _, dry := range []store.Request{
		{Key: "k", Limit: lim, Cost: -1, DryRun: true},
		{Key: "k", Limit: lim, Cost: 3, Mode: algorithms.Debt, DryRun: true},
	} {
		c, decide := spent(t, lim, 0, nil)
		decide(dry)
		if cached, out := decide(store.Request{Key: "k", Limit: lim, Cost: 1}); !cached || out[0].Allowed || c.Len() != 1 {
			t.Fatalf("after a dry run %+v: from the cache %v, %+v; want the cached deny", dry, cached, out[0])
		}
	}
}

// TestHitsCountEveryRequest: OnHit counts requests, not calls: a call of
// two cached denies is two hits.
func TestHitsCountEveryRequest(t *testing.T) {
	var hits atomic.Int64
	lim := algorithms.Limit{Algorithm: algorithms.SlidingWindow, Requests: 2, Period: time.Hour}
	other := lim
	other.Requests = 1
	_, decide := spent(t, lim, 0, &hits)
	decide(store.Request{Key: "k2", Limit: other, Cost: 1})
	decide(store.Request{Key: "k2", Limit: other, Cost: 1}) // denied: cached
	hits.Store(0)
	if cached, _ := decide(store.Request{Key: "k", Limit: lim, Cost: 1}, store.Request{Key: "k2", Limit: other, Cost: 1}); !cached || hits.Load() != 2 {
		t.Fatalf("a call of two cached denies: from the cache %v, %d hits; want 2", cached, hits.Load())
	}
}

// TestLeakyBothModesCached: a leaky bucket's plain and NoWait denies are
// kept side by side, each answering its own mode.
func TestLeakyBothModesCached(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.LeakyBucket, Requests: 2, Period: time.Hour}
	_, decide := spent(t, lim, 0, nil)
	decide(store.Request{Key: "k", Limit: lim, Cost: 1, Mode: algorithms.NoWait}) // the store denies; cached beside the plain deny
	for _, m := range []algorithms.Mode{0, algorithms.NoWait, 0} {
		if cached, out := decide(store.Request{Key: "k", Limit: lim, Cost: 1, Mode: m}); !cached || out[0].Allowed {
			t.Fatalf("mode %d: from the cache %v, %+v; want the cached deny of its mode", m, cached, out[0])
		}
	}
}

// TestSameKeyOtherScopesCached: one call denying a key in two scopes
// (two states) denies each on its own merits: both are cached.
func TestSameKeyOtherScopesCached(t *testing.T) {
	lim := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: 1, Period: time.Hour}
	_, decide := spent(t, lim, 0, nil)
	a := store.Request{Key: "j", Scope: "a", Limit: lim, Cost: 1}
	b := a
	b.Scope = "b"
	decide(a)
	decide(b)
	decide(a, b) // both denied, each by its own state
	for _, r := range []store.Request{a, b} {
		if cached, out := decide(r); !cached || out[0].Allowed {
			t.Fatalf("scope %s: from the cache %v, %+v; want its cached deny", r.Scope, cached, out[0])
		}
	}
}
