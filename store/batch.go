package store

import "github.com/floodgate/floodgate/algorithms"

// Batch is some of a call's requests, bound for one Decide call: each
// request with its index in the call, and their decisions once decided.
// Out[k] answers Reqs[k], which is the call's Idx[k]-th request. A store
// that routes a call's requests to several stores, or a caller that
// decides a call in several steps, keeps one Batch per store call.
//
// The zero Batch is empty and ready to use.
type Batch struct {
	Idx  []int
	Reqs []Request
	Out  []algorithms.Decision
}

// Add puts r, the call's i-th request, into b.
func (b *Batch) Add(i int, r Request) {
	b.Idx = append(b.Idx, i)
	b.Reqs = append(b.Reqs, r)
}

// Reset empties b of its requests, keeping its memory.
func (b *Batch) Reset() {
	b.Idx, b.Reqs = b.Idx[:0], b.Reqs[:0]
}

// Sized returns b.Out sized to b's requests, reusing its memory when it
// is large enough, and keeps it as b.Out.
func (b *Batch) Sized() []algorithms.Decision {
	if cap(b.Out) < len(b.Reqs) {
		b.Out = make([]algorithms.Decision, len(b.Reqs))
	}
	b.Out = b.Out[:len(b.Reqs)]
	return b.Out
}

// Scatter copies b's decisions to their places in the call's out.
func (b *Batch) Scatter(out []algorithms.Decision) {
	for k, i := range b.Idx {
		out[i] = b.Out[k]
	}
}
