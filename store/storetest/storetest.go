// Package storetest is the conformance suite every store.Store passes: test
// support for store implementations, which only their tests import.
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
//
// The API follows floodgate's releases: v0, no compatibility promise yet.
package storetest

import (
	cryptorand "crypto/rand"
	"encoding/hex"
	"iter"
	"testing"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
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
		{"LeakyQueue", testLeakyQueue},
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
		{"Calendar", testCalendar},
		{"CostAboveCapacity", testCostAboveCapacity},
		{"Settle", testSettle},
		{"SettleConcurrentRetries", testSettleConcurrentRetries},
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

// limitFor is the small limit the suite uses for alg: 5 per second for
// an algorithm without a burst; 4 per second with a burst of 6 for one
// with, so Burst and Requests differ; 3 per second with a burst of 4 for
// one that waits (a slot of 333.33 ms, so starts are rounded).
func limitFor(alg algorithms.Algorithm) algorithms.Limit {
	switch f := alg.Facts(); {
	case f.Waits:
		return algorithms.Limit{Algorithm: alg, Requests: 3, Period: time.Second, Burst: 4}
	case f.Burst != "":
		return algorithms.Limit{Algorithm: alg, Requests: 4, Period: time.Second, Burst: 6}
	}
	return algorithms.Limit{Algorithm: alg, Requests: 5, Period: time.Second}
}

// windowed lists the algorithms that count in windows, which take a
// calendar period (algorithms.Facts.Window).
func windowed() []algorithms.Algorithm {
	return algorithms.Which(func(f algorithms.Facts) bool { return f.Window })
}

// limits yields every algorithm with the suite's limit for it (limitFor).
func limits() iter.Seq2[algorithms.Algorithm, algorithms.Limit] {
	return func(yield func(algorithms.Algorithm, algorithms.Limit) bool) {
		for _, alg := range algorithms.All() {
			if !yield(alg, limitFor(alg)) {
				return
			}
		}
	}
}
