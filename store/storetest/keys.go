package storetest

import (
	"context"
	"strings"
	"time"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// Cases on keys: Reset, scopes and isolation between keys.

// testReset forgets one algorithm's state, or every algorithm's.
func testReset(h *harness) {
	ctx := context.Background()
	now := epoch.Add(time.Second)
	key := h.key("reset")
	for _, alg := range algorithms.All() {
		h.decide(now, store.Request{Key: key, Limit: limitFor(alg), Cost: 2})
	}
	one := algorithms.All()[0]
	if err := h.s.Reset(ctx, one, key); err != nil {
		h.t.Fatalf("Reset(%v): %v", one, err)
	}
	for alg, l := range limits() {
		if alg == one {
			h.expectFull(now, l, key, "reset algorithm")
		} else {
			h.expectRemaining(now, l, key, l.Capacity()-2, "algorithm not reset")
		}
	}
	if err := h.s.Reset(ctx, algorithms.Unspecified, key); err != nil {
		h.t.Fatalf("Reset(unspecified): %v", err)
	}
	for _, alg := range algorithms.All() {
		h.expectFull(now, limitFor(alg), key, "after resetting every algorithm")
	}
	if err := h.s.Reset(ctx, one, h.key("never-seen")); err != nil {
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
	for alg, l := range limits() {
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
	for alg, l := range limits() {
		if got := remaining(alg, key, "pa"); got != l.Capacity() {
			h.t.Errorf("%v after Reset(pa): remaining %d, want full %d", alg, got, l.Capacity())
		}
		if got := remaining(alg, key, "pb"); got != l.Capacity()-3 {
			h.t.Errorf("%v scope pb after Reset(pa): remaining %d, want %d", alg, got, l.Capacity()-3)
		}
	}
	// One algorithm reset in every scope, another left as it was.
	reset, kept := algorithms.All()[0], algorithms.All()[1]
	if err := h.s.Reset(ctx, reset, key); err != nil {
		h.t.Fatalf("Reset(%v, every scope): %v", reset, err)
	}
	for _, sc := range scopes {
		if got := remaining(reset, key, sc); got != limitFor(reset).Capacity() {
			h.t.Errorf("%v scope %q after Reset of every scope: remaining %d, want full", reset, sc, got)
		}
		if sc != "pa" && remaining(kept, key, sc) == limitFor(kept).Capacity() {
			h.t.Errorf("%v scope %q was reset by a %v Reset", kept, sc, reset)
		}
	}
	if err := h.s.Reset(ctx, algorithms.Unspecified, key); err != nil {
		h.t.Fatalf("Reset(every algorithm, every scope): %v", err)
	}
	for alg, l := range limits() {
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
	// Two algorithms on the same keys.
	two := algorithms.All()[:2]
	for _, alg := range two {
		l := algorithms.Limit{Algorithm: alg, Requests: 20, Period: time.Minute}
		offset := int64(0)
		if alg == two[1] {
			offset = 1 // the same keys under a second algorithm get different charges
		}
		for i, k := range keys {
			h.decide(now, store.Request{Key: k, Limit: l, Cost: int64(i) + 1 + offset})
		}
	}
	for _, alg := range two {
		l := algorithms.Limit{Algorithm: alg, Requests: 20, Period: time.Minute}
		offset := int64(0)
		if alg == two[1] {
			offset = 1
		}
		for i, k := range keys {
			want := 20 - int64(i) - 1 - offset
			if d := h.peek(now, l, k); d.Remaining != want {
				h.t.Errorf("%v key #%d (%q…, %d bytes): Remaining %d, want %d", alg, i, trunc(k), len(k), d.Remaining, want)
			}
		}
	}
	// A third algorithm's key never charged stays full, though its name is shared.
	h.expectFull(now, limitFor(algorithms.All()[2]), base, "same key, algorithm never used")
}

func trunc(s string) string {
	if len(s) > 60 {
		return s[:60]
	}
	return s
}
