package store_test

import (
	"slices"
	"testing"

	"github.com/floodgate/floodgate/algorithms"
	"github.com/floodgate/floodgate/store"
)

// TestBatch: a Batch keeps each request with its index in the call, sizes
// its decisions to its requests reusing their memory, and puts each
// decision back at its request's place in the call.
func TestBatch(t *testing.T) {
	var b store.Batch
	if got := b.Sized(); len(got) != 0 {
		t.Fatalf("zero Batch: Sized has %d decisions, want 0", len(got))
	}
	b.Add(2, store.Request{Key: "c"})
	b.Add(0, store.Request{Key: "a"})
	if !slices.Equal(b.Idx, []int{2, 0}) || len(b.Reqs) != 2 || b.Reqs[0].Key != "c" || b.Reqs[1].Key != "a" {
		t.Fatalf("after two Adds: Idx %v, Reqs %+v", b.Idx, b.Reqs)
	}
	out := b.Sized()
	if len(out) != 2 || len(b.Out) != 2 || &out[0] != &b.Out[0] {
		t.Fatalf("Sized: %d decisions (b.Out %d), want 2, the same memory", len(out), len(b.Out))
	}
	out[0] = algorithms.Decision{Remaining: 7}
	out[1] = algorithms.Decision{Remaining: 9, Allowed: true}

	call := make([]algorithms.Decision, 3)
	call[1] = algorithms.Decision{Remaining: 5}
	b.Scatter(call)
	want := []algorithms.Decision{{Remaining: 9, Allowed: true}, {Remaining: 5}, {Remaining: 7}}
	if !slices.Equal(call, want) {
		t.Fatalf("Scatter: %+v, want %+v", call, want)
	}

	first := &b.Out[0]
	b.Reset()
	if len(b.Idx) != 0 || len(b.Reqs) != 0 || cap(b.Idx) < 2 || cap(b.Reqs) < 2 {
		t.Fatalf("Reset: Idx %v (cap %d), Reqs %d (cap %d), want empty with their memory", b.Idx, cap(b.Idx), len(b.Reqs), cap(b.Reqs))
	}
	b.Add(1, store.Request{Key: "b"})
	if out := b.Sized(); len(out) != 1 || &out[0] != first {
		t.Fatalf("Sized after Reset and one Add: %d decisions, want 1 in the same memory", len(out))
	}
	b.Add(0, store.Request{Key: "a"})
	b.Add(2, store.Request{Key: "c"})
	if out := b.Sized(); len(out) != 3 || len(b.Out) != 3 {
		t.Fatalf("Sized past its memory: %d decisions (b.Out %d), want 3", len(out), len(b.Out))
	}
	if n := testing.AllocsPerRun(100, func() {
		b.Reset()
		b.Add(0, store.Request{})
		b.Add(1, store.Request{})
		b.Add(2, store.Request{})
		b.Sized() // exactly its memory

		b.Scatter(call)
	}); n != 0 {
		t.Errorf("Reset, Add, Sized and Scatter within its memory (the batch's size): %v allocations, want 0", n)
	}
}
