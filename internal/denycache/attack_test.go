package denycache_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/internal/denycache"
	"github.com/floodgate/floodgate/internal/testkit"
	"github.com/floodgate/floodgate/store"
	"github.com/floodgate/floodgate/store/memstore"
)

// ledger is a store wrapper that counts the calls reaching the store and
// remembers, per key, until when the store's last deny holds (the moment
// a cached deny of it expires).
type ledger struct {
	store.Store
	calls, denies atomic.Int64

	mu      sync.Mutex
	until   map[string]int64 // key → Unix ms its last store deny holds until
	covered []string         // store denies a cached deny should have answered
}

func newLedger() *ledger {
	return &ledger{Store: memstore.New(memstore.Config{}), until: map[string]int64{}}
}

func (l *ledger) Decide(ctx context.Context, now time.Time, reqs []store.Request, out []algorithms.Decision) error {
	l.calls.Add(1)
	if err := l.Store.Decide(ctx, now, reqs, out); err != nil {
		return err
	}
	nowMs := now.UnixMilli()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, r := range reqs {
		if out[i].Allowed || r.Cost != 1 {
			continue
		}
		l.denies.Add(1)
		if u, ok := l.until[r.Key]; ok && nowMs < u {
			l.covered = append(l.covered, fmt.Sprintf("%s at +%dms (an earlier deny holds until +%dms)", r.Key, nowMs-testkit.T0.UnixMilli(), u-testkit.T0.UnixMilli()))
		}
		l.until[r.Key] = nowMs + out[i].RetryAfter.Milliseconds()
	}
	return nil
}

// attackModes are the modes a check arrives in: plain (the Check API) and
// NoWait (every ShouldRateLimit request).
var attackModes = []algorithms.Mode{0, algorithms.NoWait}

func modeName(m algorithms.Mode) string {
	if m == algorithms.NoWait {
		return "nowait"
	}
	return "plain"
}

// TestAttackCostsTheStoreAlmostNothing: the rule 10/second on 10 keys,
// 10 callers at once, 20,000 checks within one moment: beyond the 100
// that fit, the store sees at most one deny per key and caller (the
// callers that raced the first deny), so at most 0.01 store calls per
// decision, in both the Check API's mode and the Envoy API's.
func TestAttackCostsTheStoreAlmostNothing(t *testing.T) {
	const keys, callers, each = 10, 10, 2000
	for _, alg := range algorithms.All() {
		for _, m := range attackModes {
			t.Run(alg.String()+"/"+modeName(m), func(t *testing.T) {
				inner := newLedger()
				var hits atomic.Int64
				c := denycache.New(inner, denycache.Config{OnHit: func(n int) { hits.Add(int64(n)) }})
				defer c.Close()
				lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Second}
				var allowed atomic.Int64
				var wg sync.WaitGroup
				for g := range callers {
					wg.Add(1)
					go func() {
						defer wg.Done()
						out := make([]algorithms.Decision, 1)
						for i := range each {
							req := []store.Request{{Key: fmt.Sprintf("small_key_%d", (g+i)%keys), Limit: lim, Cost: 1, Mode: m}}
							if err := c.Decide(context.Background(), testkit.T0, req, out); err != nil {
								t.Error(err)
								return
							}
							if out[0].Allowed {
								allowed.Add(1)
							}
						}
					}()
				}
				wg.Wait()
				decisions := int64(callers * each)
				calls := inner.calls.Load()
				if calls+hits.Load() != decisions {
					t.Fatalf("store calls %d + cache hits %d != %d decisions", calls, hits.Load(), decisions)
				}
				if a := allowed.Load(); a > keys*10 {
					t.Fatalf("%d allowed, want at most %d", a, keys*10)
				}
				if d := inner.denies.Load(); d > keys*callers {
					t.Fatalf("the store decided %d denies, want at most %d (one per key and caller)", d, keys*callers)
				}
				if per := float64(calls) / float64(decisions); per > 0.01 {
					t.Fatalf("%d store calls for %d decisions (%.4f a decision), want at most 0.01", calls, decisions, per)
				}
			})
		}
	}
}

// TestEveryCoveredDenyAnswered: an attack over 2.5 seconds of a moving
// clock, 10 keys at 10/second, 3 checks a key every millisecond: no deny
// reaches the store while an earlier deny of the same key still holds,
// and every answer equals a cacheless store's.
func TestEveryCoveredDenyAnswered(t *testing.T) {
	const keys, perMs, ms = 10, 3, 2500
	for _, alg := range algorithms.All() {
		for _, m := range attackModes {
			t.Run(alg.String()+"/"+modeName(m), func(t *testing.T) {
				ctx := context.Background()
				inner := newLedger()
				var hits atomic.Int64
				c := denycache.New(inner, denycache.Config{OnHit: func(n int) { hits.Add(int64(n)) }})
				defer c.Close()
				ref := memstore.New(memstore.Config{})
				defer ref.Close()
				lim := algorithms.Limit{Algorithm: alg, Requests: 10, Period: time.Second}
				got, want := make([]algorithms.Decision, 1), make([]algorithms.Decision, 1)
				for step := range ms {
					now := testkit.T0.Add(time.Duration(step) * time.Millisecond)
					for k := range keys {
						req := []store.Request{{Key: fmt.Sprintf("small_key_%d", k), Limit: lim, Cost: 1, Mode: m}}
						for range perMs {
							if err := c.Decide(ctx, now, req, got); err != nil {
								t.Fatal(err)
							}
							if err := ref.Decide(ctx, now, req, want); err != nil {
								t.Fatal(err)
							}
							if got[0] != want[0] {
								t.Fatalf("%s at +%dms: got %+v, want %+v", req[0].Key, step, got[0], want[0])
							}
						}
					}
				}
				if len(inner.covered) > 0 {
					t.Fatalf("%d denies reached the store while a cached deny held, first: %s", len(inner.covered), inner.covered[0])
				}
				decisions := int64(keys * perMs * ms)
				if hits.Load()+inner.calls.Load() != decisions || hits.Load() < decisions*9/10 {
					t.Fatalf("store calls %d, cache hits %d of %d decisions: want at least 90%% from the cache", inner.calls.Load(), hits.Load(), decisions)
				}
			})
		}
	}
}

// TestWhichModesACachedDenyAnswers: only the leaky bucket decides NoWait
// differently, so for every other algorithm a deny learned in either mode
// answers both; a leaky bucket's plain deny (no place in the queue) does
// not answer a NoWait check, whose wait runs until the queue is empty;
// and a debt charge is never answered from the cache.
func TestWhichModesACachedDenyAnswers(t *testing.T) {
	for _, alg := range algorithms.All() {
		for _, learn := range attackModes {
			for _, ask := range []algorithms.Mode{0, algorithms.NoWait, algorithms.Debt, algorithms.Debt | algorithms.NoWait} {
				t.Run(fmt.Sprintf("%v/%s/%d", alg, modeName(learn), ask), func(t *testing.T) {
					ctx := context.Background()
					inner := newLedger()
					c := denycache.New(inner, denycache.Config{})
					defer c.Close()
					ref := memstore.New(memstore.Config{})
					defer ref.Close()
					lim := algorithms.Limit{Algorithm: alg, Requests: 2, Period: time.Second}
					got, want := make([]algorithms.Decision, 1), make([]algorithms.Decision, 1)
					run := func(m algorithms.Mode) {
						t.Helper()
						req := []store.Request{{Key: "k", Limit: lim, Cost: 1, Mode: m}}
						if err := c.Decide(ctx, testkit.T0, req, got); err != nil {
							t.Fatal(err)
						}
						if err := ref.Decide(ctx, testkit.T0, req, want); err != nil {
							t.Fatal(err)
						}
						if got[0] != want[0] {
							t.Fatalf("mode %d: got %+v, want %+v", m, got[0], want[0])
						}
					}
					// Fill the key in the learning mode until denied.
					for range 8 {
						run(learn)
					}
					if got[0].Allowed || c.Len() != 1 {
						t.Fatalf("after 8 checks: %+v, %d cached, want a cached deny", got[0], c.Len())
					}
					before := inner.calls.Load()
					run(ask)
					fromCache := inner.calls.Load() == before
					wantCache := ask&algorithms.Debt == 0 && (alg != algorithms.LeakyBucket || ask == learn)
					if fromCache != wantCache {
						t.Fatalf("learned in %s, asked in mode %d: answered from the cache %v, want %v", modeName(learn), ask, fromCache, wantCache)
					}
				})
			}
		}
	}
}
