// Package storetest is the conformance suite every store.Store passes.
//
// A store's own tests call Run with a constructor:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store {
//			return memstore.New(memstore.Config{})
//		})
//	}
//
// Run calls newStore once per subtest and closes the store it returned when
// the subtest ends, so newStore must hand out a store the suite may close
// (for Redis: a new client on a shared server is fine). The suite never
// assumes an empty store: every subtest works on keys that start with the
// test's name and a random suffix, so it can run against a Redis (or a Redis
// Cluster) that other tests use at the same time.
//
// The store under test must honour the now passed to Decide: the suite
// drives time from a fixed epoch (2000-01-01 UTC) and checks every decision
// against algorithms.Decide run on the same sequence (a reference model in
// this package), field by field, with no tolerance.
//
// What the suite pins beyond the store.Store doc comments:
//   - a cancelled context makes Decide return an error that wraps the
//     context's error; a mismatched out slice an error wrapping
//     store.ErrInvalid;
//   - state whose TTL has passed behaves as absent;
//   - a cost above the capacity is denied with RetryAfter algorithms.Never
//     and charges nothing;
//   - concurrent single requests on one key admit exactly the limit;
//     concurrent two-key batches leave both keys charged by exactly the
//     admitted batches (a store that charges per slot and refunds on deny
//     may deny a few batches spuriously, so their count is only bounded).
//
// It does not pin how DryRun requests mixed with charging requests in one
// call interact; it uses DryRun only on single-request calls.
package storetest

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/floodgate/floodgate/internal/algorithms"
	"github.com/floodgate/floodgate/internal/store"
)

// epoch is the time the suite's clocks start from.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Run runs the conformance suite against stores made by newStore, one store
// per subtest, each closed when its subtest ends.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(h *harness)
	}{
		{"Sequence", testSequence},
		{"RandomTrace", testRandomTrace},
		{"Contention", testContention},
		{"BatchContention", testBatchContention},
		{"AllOrNothing", testAllOrNothing},
		{"RepeatedKeyInBatch", testRepeatedKey},
		{"DryRun", testDryRun},
		{"PeekAndRefund", testPeekAndRefund},
		{"Reset", testReset},
		{"Scopes", testScopes},
		{"KeyIsolation", testKeyIsolation},
		{"Expiry", testExpiry},
		{"WindowEdge", testWindowEdge},
		{"CostAboveCapacity", testCostAboveCapacity},
		{"Errors", testErrors},
		{"Ping", testPing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(&harness{t: t, s: s, prefix: uniquePrefix(t)})
		})
	}
}

// uniquePrefix is the test's name plus a random suffix, so runs against a
// shared Redis never meet each other's keys.
func uniquePrefix(t *testing.T) string {
	var b [8]byte
	if _, err := cryptorand.Read(b[:]); err != nil {
		t.Fatalf("random prefix: %v", err)
	}
	return t.Name() + "/" + hex.EncodeToString(b[:]) + "/"
}

// limitFor is the small limit the suite uses for alg: 5 per second for the
// windows; 4 per second with a burst of 6 for the token bucket, so Burst
// and Requests differ.
func limitFor(alg algorithms.Algorithm) algorithms.Limit {
	if alg == algorithms.TokenBucket {
		return algorithms.Limit{Algorithm: alg, Requests: 4, Period: time.Second, Burst: 6}
	}
	return algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Second}
}

// harness is one subtest's store, keys and helpers.
type harness struct {
	t      *testing.T
	s      store.Store
	prefix string
}

// key is name under this subtest's unique prefix.
func (h *harness) key(name string) string { return h.prefix + name }

// decide runs one Decide call and fails the test on an error.
func (h *harness) decide(now time.Time, reqs ...store.Request) []algorithms.Decision {
	h.t.Helper()
	out := make([]algorithms.Decision, len(reqs))
	if err := h.s.Decide(context.Background(), now, reqs, out); err != nil {
		h.t.Fatalf("Decide(%v, %d requests): %v", now.Sub(epoch), len(reqs), err)
	}
	return out
}

// peek returns the decision of a cost-0 look at key.
func (h *harness) peek(now time.Time, l algorithms.Limit, key string) algorithms.Decision {
	h.t.Helper()
	return h.decide(now, store.Request{Key: key, Limit: l})[0]
}

// expectFull fails unless key is at its full capacity.
func (h *harness) expectFull(now time.Time, l algorithms.Limit, key, what string) {
	h.t.Helper()
	h.expectRemaining(now, l, key, l.Capacity(), what)
}

// expectRemaining fails unless a peek at key reports want remaining.
func (h *harness) expectRemaining(now time.Time, l algorithms.Limit, key string, want int64, what string) {
	h.t.Helper()
	if d := h.peek(now, l, key); d.Remaining != want || !d.Allowed {
		h.t.Errorf("%s: %v peek %q: Remaining %d (allowed %v), want %d", what, l.Algorithm, key, d.Remaining, d.Allowed, want)
	}
}

// checkAgainst compares a store's decisions with the model's, on the fields
// a caller sees (TTL is the store's business).
func (h *harness) checkAgainst(what string, got, want []algorithms.Decision) {
	h.t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if g.Allowed != w.Allowed || g.Limit != w.Limit || g.Remaining != w.Remaining ||
			g.RetryAfter != w.RetryAfter || g.ResetAfter != w.ResetAfter {
			h.t.Errorf("%s: decision %d:\n got  %s\n want %s", what, i, fmtDecision(g), fmtDecision(w))
		}
	}
}

func fmtDecision(d algorithms.Decision) string {
	return fmt.Sprintf("{Allowed:%v Limit:%d Remaining:%d RetryAfter:%v ResetAfter:%v}",
		d.Allowed, d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter)
}

// model is the reference: algorithms.Decide over states kept in a map, with
// the all-or-nothing rule of store.Store.Decide. DryRun requests are decided
// against the state so far and never change it.
type model struct {
	states map[modelKey]algorithms.State
}

type modelKey struct {
	alg algorithms.Algorithm
	key string
}

func newModel() *model { return &model{states: map[modelKey]algorithms.State{}} }

func (m *model) decide(now time.Time, reqs ...store.Request) []algorithms.Decision {
	out := make([]algorithms.Decision, len(reqs))
	tentative := map[modelKey]algorithms.State{}
	denied := false
	for i, r := range reqs {
		k := modelKey{r.Limit.Algorithm, r.Key}
		st, ok := tentative[k]
		if !ok {
			st = m.states[k]
		}
		next, d := algorithms.Decide(r.Limit, st, now, r.Cost)
		out[i] = d
		if r.Cost > 0 && !d.Allowed {
			denied = true
		}
		if d.Allowed && r.Cost != 0 && !r.DryRun {
			tentative[k] = next
		}
	}
	if !denied {
		for k, st := range tentative {
			m.states[k] = st
		}
	}
	return out
}

// testSequence spends a fresh key down to zero, checks the deny's exact
// RetryAfter, waits it out and passes again, for every algorithm.
func testSequence(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		key := h.key("seq-" + alg.String())
		m := newModel()
		now := epoch.Add(137 * time.Millisecond)
		step := func(what string, cost int64) algorithms.Decision {
			h.t.Helper()
			req := store.Request{Key: key, Limit: l, Cost: cost}
			got := h.decide(now, req)
			h.checkAgainst(fmt.Sprintf("%v %s", alg, what), got, m.decide(now, req))
			return got[0]
		}

		if d := step("fresh peek", 0); !d.Allowed || d.Remaining != l.Capacity() || d.ResetAfter != 0 {
			h.t.Errorf("%v fresh key: %s, want full (Remaining %d, ResetAfter 0)", alg, fmtDecision(d), l.Capacity())
		}
		for i := int64(1); i <= l.Capacity(); i++ {
			d := step(fmt.Sprintf("spend %d", i), 1)
			if !d.Allowed || d.Remaining != l.Capacity()-i {
				h.t.Errorf("%v spend %d: %s, want allowed with Remaining %d", alg, i, fmtDecision(d), l.Capacity()-i)
			}
			now = now.Add(3 * time.Millisecond)
		}
		d := step("deny", 1)
		if d.Allowed || d.RetryAfter <= 0 {
			h.t.Fatalf("%v after spending everything: %s, want a deny with a positive RetryAfter", alg, fmtDecision(d))
		}
		now = now.Add(d.RetryAfter - time.Millisecond)
		if d := step("1ms before RetryAfter", 1); d.Allowed {
			h.t.Errorf("%v 1ms before RetryAfter: allowed, want denied", alg)
		}
		now = now.Add(time.Millisecond)
		if d := step("at RetryAfter", 1); !d.Allowed {
			h.t.Errorf("%v after waiting RetryAfter: %s, want allowed", alg, fmtDecision(d))
		}
	}
}

// testRandomTrace runs seeded random (Δt, cost, batch) sequences through the
// store and the model and demands identical decisions.
func testRandomTrace(h *harness) {
	seed := time.Now().UnixNano()
	h.t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		keys := []string{h.key("trace-a-" + alg.String()), h.key("trace-b-" + alg.String()), h.key("trace-c-" + alg.String())}
		m := newModel()
		now := epoch.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		for step := range 400 {
			switch p := rng.IntN(10); {
			case p < 5:
				now = now.Add(time.Duration(rng.IntN(120)) * time.Millisecond)
			case p < 8:
				now = now.Add(time.Duration(rng.IntN(int(l.Period.Milliseconds())*2)) * time.Millisecond)
			}
			n := 1 + rng.IntN(3)
			reqs := make([]store.Request, n)
			for i := range reqs {
				reqs[i] = store.Request{
					Key:   keys[rng.IntN(len(keys))],
					Limit: l,
					Cost:  rng.Int64N(l.Capacity()+4) - 2, // -2 … capacity+1
				}
			}
			if n == 1 && rng.IntN(5) == 0 {
				reqs[0].DryRun = true
			}
			want := m.decide(now, reqs...)
			got := h.decide(now, reqs...)
			h.checkAgainst(fmt.Sprintf("%v step %d at +%v %+v", alg, step, now.Sub(epoch), reqs), got, want)
			if h.t.Failed() {
				return
			}
		}
	}
}

// testContention sends 300 concurrent single requests from 64 goroutines at
// one key with a limit of 100: exactly 100 are admitted.
func testContention(h *harness) {
	const (
		limit      = 100
		calls      = 300
		goroutines = 64
	)
	for _, alg := range algorithms.Algorithms {
		l := algorithms.Limit{Algorithm: alg, Requests: limit, Period: time.Hour}
		key := h.key("contention-" + alg.String())
		now := epoch.Add(42 * time.Millisecond)
		var admitted, next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for range goroutines {
			wg.Go(func() {
				out := make([]algorithms.Decision, 1)
				reqs := []store.Request{{Key: key, Limit: l, Cost: 1}}
				for next.Add(1) <= calls {
					if err := h.s.Decide(context.Background(), now, reqs, out); err != nil {
						errs <- err
						return
					}
					if out[0].Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			h.t.Fatalf("%v: Decide: %v", alg, err)
		}
		if got := admitted.Load(); got != limit {
			h.t.Errorf("%v: %d concurrent calls with a limit of %d admitted %d, want exactly %d", alg, calls, limit, got, limit)
		}
		h.expectRemaining(now, l, key, 0, "after contention")
	}
}

// testBatchContention sends two-key batches in both key orders from many
// goroutines. Stores must neither deadlock nor leak partial charges: both
// keys end charged exactly by the admitted batches.
func testBatchContention(h *harness) {
	const (
		limit      = 100
		calls      = 300
		goroutines = 32
	)
	l := algorithms.Limit{Algorithm: algorithms.FixedWindow, Requests: limit, Period: time.Hour}
	k1, k2 := h.key("batch-1"), h.key("batch-2")
	now := epoch
	var admitted, next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			reqs := []store.Request{{Key: k1, Limit: l, Cost: 1}, {Key: k2, Limit: l, Cost: 1}}
			if g%2 == 1 {
				reqs[0], reqs[1] = reqs[1], reqs[0]
			}
			out := make([]algorithms.Decision, 2)
			for next.Add(1) <= calls {
				if err := h.s.Decide(context.Background(), now, reqs, out); err != nil {
					errs <- err
					return
				}
				if out[0].Allowed && out[1].Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatalf("Decide: %v", err)
	}
	got := admitted.Load()
	if got > limit || got == 0 {
		h.t.Fatalf("admitted %d batches, want between 1 and %d", got, limit)
	}
	h.expectRemaining(now, l, k1, limit-got, "first key after batches")
	h.expectRemaining(now, l, k2, limit-got, "second key after batches")
}

// testAllOrNothing: a batch whose last request is denied charges none of
// the others, and each decision still reports its own request's outcome.
func testAllOrNothing(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		a, b, c := h.key("aon-a-"+alg.String()), h.key("aon-b-"+alg.String()), h.key("aon-c-"+alg.String())
		m := newModel()
		now := epoch.Add(10 * time.Millisecond)
		spend := store.Request{Key: c, Limit: l, Cost: l.Capacity()}
		h.checkAgainst("exhaust c", h.decide(now, spend), m.decide(now, spend))

		batch := []store.Request{
			{Key: a, Limit: l, Cost: 1},
			{Key: b, Limit: l, Cost: 2},
			{Key: c, Limit: l, Cost: 1},
		}
		got := h.decide(now, batch...)
		h.checkAgainst(fmt.Sprintf("%v denied batch", alg), got, m.decide(now, batch...))
		if !got[0].Allowed || !got[1].Allowed || got[2].Allowed {
			h.t.Errorf("%v batch outcomes %v %v %v, want true true false", alg, got[0].Allowed, got[1].Allowed, got[2].Allowed)
		}
		if got[0].Remaining != l.Capacity()-1 || got[1].Remaining != l.Capacity()-2 {
			h.t.Errorf("%v batch Remaining %d %d, want %d %d (each request's own outcome)",
				alg, got[0].Remaining, got[1].Remaining, l.Capacity()-1, l.Capacity()-2)
		}
		h.expectFull(now, l, a, "first request of a denied batch")
		h.expectFull(now, l, b, "second request of a denied batch")
		h.expectRemaining(now, l, c, 0, "denied request of a denied batch")

		// The same batch without the exhausted key is charged in full.
		ok := h.decide(now, batch[:2]...)
		h.checkAgainst(fmt.Sprintf("%v admitted batch", alg), ok, m.decide(now, batch[:2]...))
		h.expectRemaining(now, l, a, l.Capacity()-1, "admitted batch")
		h.expectRemaining(now, l, b, l.Capacity()-2, "admitted batch")
	}
}

// testRepeatedKey: a key repeated in one batch is charged twice, and
// all or nothing holds for the repeats too.
func testRepeatedKey(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		key := h.key("repeat-" + alg.String())
		m := newModel()
		now := epoch.Add(500 * time.Millisecond)
		c := l.Capacity()

		over := []store.Request{{Key: key, Limit: l, Cost: c/2 + 1}, {Key: key, Limit: l, Cost: c/2 + 1}}
		got := h.decide(now, over...)
		h.checkAgainst(fmt.Sprintf("%v over-capacity repeat", alg), got, m.decide(now, over...))
		if !got[0].Allowed || got[1].Allowed {
			h.t.Errorf("%v repeat of %d+%d with capacity %d: allowed %v %v, want true false", alg, c/2+1, c/2+1, c, got[0].Allowed, got[1].Allowed)
		}
		h.expectFull(now, l, key, "after a denied repeat")

		fit := []store.Request{{Key: key, Limit: l, Cost: 2}, {Key: key, Limit: l, Cost: 2}}
		got = h.decide(now, fit...)
		h.checkAgainst(fmt.Sprintf("%v fitting repeat", alg), got, m.decide(now, fit...))
		if got[1].Remaining != c-4 {
			h.t.Errorf("%v second of a repeated pair: Remaining %d, want %d", alg, got[1].Remaining, c-4)
		}
		h.expectRemaining(now, l, key, c-4, "after an admitted repeat")
	}
}

// testDryRun: a DryRun decides like a charge but writes nothing.
func testDryRun(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		key := h.key("dry-" + alg.String())
		now := epoch.Add(250 * time.Millisecond)
		c := l.Capacity()

		d := h.decide(now, store.Request{Key: key, Limit: l, Cost: 2, DryRun: true})[0]
		if !d.Allowed || d.Remaining != c-2 {
			h.t.Errorf("%v dry run of 2 on a fresh key: %s, want allowed with Remaining %d", alg, fmtDecision(d), c-2)
		}
		h.expectFull(now, l, key, "after a dry run")

		h.decide(now, store.Request{Key: key, Limit: l, Cost: c - 1})
		d = h.decide(now, store.Request{Key: key, Limit: l, Cost: 2, DryRun: true})[0]
		if d.Allowed || d.RetryAfter <= 0 {
			h.t.Errorf("%v dry run of 2 with 1 left: %s, want a deny with a positive RetryAfter", alg, fmtDecision(d))
		}
		d = h.decide(now, store.Request{Key: key, Limit: l, Cost: -1, DryRun: true})[0]
		if !d.Allowed || d.Remaining != 2 {
			h.t.Errorf("%v dry refund of 1 with 1 left: %s, want allowed with Remaining 2", alg, fmtDecision(d))
		}
		h.expectRemaining(now, l, key, 1, "after dry runs on a spent key")
	}
}

// testPeekAndRefund: cost 0 never changes anything; a negative cost gives
// units back, never above the capacity.
func testPeekAndRefund(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		key := h.key("refund-" + alg.String())
		m := newModel()
		now := epoch.Add(700 * time.Millisecond)
		c := l.Capacity()
		run := func(what string, cost int64) algorithms.Decision {
			h.t.Helper()
			req := store.Request{Key: key, Limit: l, Cost: cost}
			got := h.decide(now, req)
			h.checkAgainst(fmt.Sprintf("%v %s", alg, what), got, m.decide(now, req))
			return got[0]
		}
		run("spend 3", 3)
		for i := range 5 {
			if d := run(fmt.Sprintf("peek %d", i), 0); d.Remaining != c-3 {
				h.t.Errorf("%v peek %d: Remaining %d, want %d", alg, i, d.Remaining, c-3)
			}
		}
		if d := run("refund 2", -2); !d.Allowed || d.Remaining != c-1 {
			h.t.Errorf("%v refund 2 after spending 3: %s, want allowed with Remaining %d", alg, fmtDecision(d), c-1)
		}
		if d := run("refund 100", -100); !d.Allowed || d.Remaining != c {
			h.t.Errorf("%v refund far above capacity: %s, want Remaining %d (the capacity)", alg, fmtDecision(d), c)
		}
		if d := run("spend all", c); !d.Allowed || d.Remaining != 0 {
			h.t.Errorf("%v spend the capacity after a large refund: %s, want allowed with Remaining 0", alg, fmtDecision(d))
		}
		if d := run("one more", 1); d.Allowed {
			h.t.Errorf("%v a refund above capacity was kept: one more unit was admitted", alg)
		}
	}
}

// testReset forgets one algorithm's state, or every algorithm's.
func testReset(h *harness) {
	ctx := context.Background()
	now := epoch.Add(time.Second)
	key := h.key("reset")
	for _, alg := range algorithms.Algorithms {
		h.decide(now, store.Request{Key: key, Limit: limitFor(alg), Cost: 2})
	}
	if err := h.s.Reset(ctx, algorithms.TokenBucket, key); err != nil {
		h.t.Fatalf("Reset(token_bucket): %v", err)
	}
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		if alg == algorithms.TokenBucket {
			h.expectFull(now, l, key, "reset algorithm")
		} else {
			h.expectRemaining(now, l, key, l.Capacity()-2, "algorithm not reset")
		}
	}
	if err := h.s.Reset(ctx, algorithms.Unspecified, key); err != nil {
		h.t.Fatalf("Reset(unspecified): %v", err)
	}
	for _, alg := range algorithms.Algorithms {
		h.expectFull(now, limitFor(alg), key, "after resetting every algorithm")
	}
	if err := h.s.Reset(ctx, algorithms.SlidingWindow, h.key("never-seen")); err != nil {
		h.t.Errorf("Reset of a key never seen: %v, want nil", err)
	}
}

// testScopes: one key in several scopes holds a count per scope, whatever
// bytes the key and scopes hold, and in one batch too; Reset with scopes
// forgets only those, Reset without forgets every scope of the key (and
// only of that key).
func testScopes(h *harness) {
	ctx := context.Background()
	now := epoch.Add(5 * time.Second)
	key := h.key("scopes\x00p{x}*?")
	other := key + "x"
	scopes := []string{"", "pa", "pb", "i5/1000/0", "\x00\x01weird{}*?[", strings.Repeat("s", 300)}
	remaining := func(alg algorithms.Algorithm, k, sc string) int64 {
		h.t.Helper()
		d := h.decide(now, store.Request{Key: k, Scope: sc, Limit: limitFor(alg), Cost: 0})
		return d[0].Remaining
	}
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		for i, sc := range scopes {
			// Scope i spends i+1 units in a batch with the next scope's peek.
			next := scopes[(i+1)%len(scopes)]
			h.decide(now, store.Request{Key: key, Scope: sc, Limit: l, Cost: int64(i%3 + 1)},
				store.Request{Key: key, Scope: next, Limit: l, Cost: 0})
		}
		h.decide(now, store.Request{Key: other, Scope: "pa", Limit: l, Cost: 1})
		for i, sc := range scopes {
			if got, want := remaining(alg, key, sc), l.Capacity()-int64(i%3+1); got != want {
				h.t.Errorf("%v scope %q: remaining %d, want %d (scopes share a count)", alg, sc, got, want)
			}
		}
	}
	if err := h.s.Reset(ctx, algorithms.Unspecified, key, "pa"); err != nil {
		h.t.Fatalf("Reset(scope pa): %v", err)
	}
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		if got := remaining(alg, key, "pa"); got != l.Capacity() {
			h.t.Errorf("%v after Reset(pa): remaining %d, want full %d", alg, got, l.Capacity())
		}
		if got := remaining(alg, key, "pb"); got != l.Capacity()-3 {
			h.t.Errorf("%v scope pb after Reset(pa): remaining %d, want %d", alg, got, l.Capacity()-3)
		}
	}
	if err := h.s.Reset(ctx, algorithms.FixedWindow, key); err != nil {
		h.t.Fatalf("Reset(fixed_window, every scope): %v", err)
	}
	for _, sc := range scopes {
		fw, sw := limitFor(algorithms.FixedWindow), limitFor(algorithms.SlidingWindow)
		if got := remaining(algorithms.FixedWindow, key, sc); got != fw.Capacity() {
			h.t.Errorf("fixed_window scope %q after Reset of every scope: remaining %d, want full", sc, got)
		}
		if sc != "pa" && remaining(algorithms.SlidingWindow, key, sc) == sw.Capacity() {
			h.t.Errorf("sliding_window scope %q was reset by a fixed_window Reset", sc)
		}
	}
	if err := h.s.Reset(ctx, algorithms.Unspecified, key); err != nil {
		h.t.Fatalf("Reset(every algorithm, every scope): %v", err)
	}
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		for _, sc := range scopes {
			if got := remaining(alg, key, sc); got != l.Capacity() {
				h.t.Errorf("%v scope %q after Reset of everything: remaining %d, want full", alg, sc, got)
			}
		}
		if got := remaining(alg, other, "pa"); got != l.Capacity()-1 {
			h.t.Errorf("%v: Reset of %q reset the longer key %q too (remaining %d)", alg, key, other, got)
		}
	}
}

// testKeyIsolation: keys that differ only in awkward bytes, long keys, and
// one key under several algorithms never share state.
func testKeyIsolation(h *harness) {
	now := epoch.Add(3 * time.Second)
	base := h.key("iso")
	long := strings.Repeat("k", 4096)
	keys := []string{
		base, base + "{", base + "}", "{" + base + "}", base + "{}", base + "{x}", "{x}" + base,
		base + "\x00", base + "\x00\x00", base + "_", base + ":", base + "\xff", base + " ",
		h.prefix + long, h.prefix + long[:4095] + "j", h.prefix + long + "\x00",
	}
	if len(keys) > 20 {
		h.t.Fatalf("too many keys for a limit of 20")
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			h.t.Fatalf("key %q listed twice", k)
		}
		seen[k] = true
	}
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindow} {
		l := algorithms.Limit{Algorithm: alg, Requests: 20, Period: time.Minute}
		offset := int64(0)
		if alg == algorithms.SlidingWindow {
			offset = 1 // the same keys under a second algorithm get different charges
		}
		for i, k := range keys {
			h.decide(now, store.Request{Key: k, Limit: l, Cost: int64(i) + 1 + offset})
		}
	}
	for _, alg := range []algorithms.Algorithm{algorithms.TokenBucket, algorithms.SlidingWindow} {
		l := algorithms.Limit{Algorithm: alg, Requests: 20, Period: time.Minute}
		offset := int64(0)
		if alg == algorithms.SlidingWindow {
			offset = 1
		}
		for i, k := range keys {
			want := 20 - int64(i) - 1 - offset
			if d := h.peek(now, l, k); d.Remaining != want {
				h.t.Errorf("%v key #%d (%q…, %d bytes): Remaining %d, want %d", alg, i, trunc(k), len(k), d.Remaining, want)
			}
		}
	}
	// A fixed window key never charged stays full, though its name is shared.
	h.expectFull(now, limitFor(algorithms.FixedWindow), base, "same key, algorithm never used")
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}

// testExpiry: once now passes a state's ResetAfter, the key behaves as
// absent.
func testExpiry(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		key := h.key("expiry-" + alg.String())
		now := epoch.Add(5*time.Second + 333*time.Millisecond)
		d := h.decide(now, store.Request{Key: key, Limit: l, Cost: l.Capacity()})[0]
		if !d.Allowed || d.ResetAfter <= 0 {
			h.t.Fatalf("%v spend the capacity: %s, want allowed with a positive ResetAfter", alg, fmtDecision(d))
		}
		later := now.Add(d.ResetAfter)
		got := h.peek(later, l, key)
		fresh := h.peek(later, l, h.key("expiry-fresh-"+alg.String()))
		h.checkAgainst(fmt.Sprintf("%v after ResetAfter", alg), []algorithms.Decision{got}, []algorithms.Decision{fresh})
		if got.Remaining != l.Capacity() || got.ResetAfter != 0 {
			h.t.Errorf("%v after ResetAfter: %s, want a full key", alg, fmtDecision(got))
		}
		d = h.decide(later.Add(time.Hour), store.Request{Key: key, Limit: l, Cost: 1})[0]
		if !d.Allowed || d.Remaining != l.Capacity()-1 {
			h.t.Errorf("%v an hour later: %s, want allowed with Remaining %d", alg, fmtDecision(d), l.Capacity()-1)
		}
	}
}

// testCostAboveCapacity: a cost that can never fit is denied with
// RetryAfter Never and charges nothing, alone or in a batch.
func testCostAboveCapacity(h *harness) {
	for _, alg := range algorithms.Algorithms {
		l := limitFor(alg)
		key, other := h.key("huge-"+alg.String()), h.key("huge-other-"+alg.String())
		now := epoch.Add(9 * time.Second)
		d := h.decide(now, store.Request{Key: key, Limit: l, Cost: l.Capacity() + 1})[0]
		if d.Allowed || d.RetryAfter != algorithms.Never || d.Remaining != l.Capacity() {
			h.t.Errorf("%v cost capacity+1: %s, want denied, RetryAfter Never, Remaining %d", alg, fmtDecision(d), l.Capacity())
		}
		h.decide(now, store.Request{Key: key, Limit: l, Cost: 1})
		out := h.decide(now,
			store.Request{Key: other, Limit: l, Cost: 1},
			store.Request{Key: key, Limit: l, Cost: 1 << 40})
		if !out[0].Allowed || out[1].Allowed || out[1].RetryAfter != algorithms.Never {
			h.t.Errorf("%v batch with a huge cost: %s %s, want allowed then denied with RetryAfter Never", alg, fmtDecision(out[0]), fmtDecision(out[1]))
		}
		h.expectRemaining(now, l, key, l.Capacity()-1, "key asked for more than its capacity")
		h.expectFull(now, l, other, "other request of a batch with a huge cost")
	}
}

// testErrors: a done context and a mismatched out slice are errors, not
// panics, and decide nothing.
func testErrors(h *harness) {
	l := limitFor(algorithms.TokenBucket)
	key := h.key("errors")
	now := epoch
	reqs := []store.Request{{Key: key, Limit: l, Cost: 1}}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := h.s.Decide(ctx, now, reqs, make([]algorithms.Decision, 1))
	if err == nil || !errors.Is(err, context.Canceled) {
		h.t.Errorf("Decide with a cancelled context: %v, want an error wrapping context.Canceled", err)
	}
	for _, n := range []int{0, 2} {
		err := h.s.Decide(context.Background(), now, reqs, make([]algorithms.Decision, n))
		if !errors.Is(err, store.ErrInvalid) {
			h.t.Errorf("Decide with 1 request and %d decisions: %v, want an error wrapping store.ErrInvalid", n, err)
		}
	}
	err = h.s.Decide(context.Background(), now, nil, nil)
	if err != nil {
		h.t.Errorf("Decide with no requests: %v, want nil", err)
	}
	h.expectFull(now, l, key, "after failed calls")
}

// testPing: a working store pings.
func testPing(h *harness) {
	if err := h.s.Ping(context.Background()); err != nil {
		h.t.Errorf("Ping: %v", err)
	}
}
