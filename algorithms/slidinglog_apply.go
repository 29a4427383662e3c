package algorithms

// applyPlain is Apply of a plain Request (Request.plain). A log's ring is written
// in place, O(cost) slots after an O(log Requests) search, so *s must not
// share its Log with a State anyone else still reads; a ring that must
// grow, or may shrink, is rebuilt into a new slice (amortised O(1) a
// unit), the old one left untouched.
func applyPlain(l Limit, s *State, a ask, u *Undo) Decision {
	if r := rowOf(l.Algorithm); r == nil || !r.Log || a.cost > l.Capacity() {
		next, d := decide(l, *s, ask{now: a.now, cost: a.cost})
		*s = next
		return d
	}
	cost := max(a.cost, -l.Capacity())
	p := planSlidingLog(l, *s, a.now, cost)
	if p.writes {
		p.apply(l, s, cost, u)
	}
	return p.d
}

// peekPlain is the plain decision of cost against l for state s at nowMs,
// with nothing written or copied.
func peekPlain(l Limit, s State, nowMs, cost int64) Decision {
	if r := rowOf(l.Algorithm); r == nil || !r.Log || cost > l.Capacity() {
		_, d := decide(l, s, ask{now: nowMs, cost: cost})
		return d
	}
	return planSlidingLog(l, s, nowMs, max(cost, -l.Capacity())).d
}

// Undo records the slots of log rings (Facts.Log) that Apply
// overwrote in place, so that a caller deciding several requests all or
// nothing can take an admitted charge back. The zero value is ready; an
// Undo may be reused after Revert.
type Undo struct {
	marks []undoMark
	old   []int64
}

// undoMark is one run of overwritten slots: k slots of ring from index
// from on (wrapping), their old values at old[off:off+k].
type undoMark struct {
	ring    []int64
	from, k int64
	off     int
}

// save records the k slots of ring from index from on, before they are
// overwritten. A nil u records nothing.
func (u *Undo) save(ring []int64, from, k int64) {
	if u == nil || k == 0 {
		return
	}
	off := len(u.old)
	for i := range k {
		u.old = append(u.old, logSlot(ring, from, i))
	}
	u.marks = append(u.marks, undoMark{ring: ring, from: from, k: k, off: off})
}

// Revert writes back every slot recorded since the last Revert or Reset,
// newest change first, then forgets them.
func (u *Undo) Revert() {
	for i := len(u.marks) - 1; i >= 0; i-- {
		m := u.marks[i]
		for j := range m.k {
			m.ring[ringIndex(int64(len(m.ring)), m.from, j)] = u.old[m.off+int(j)]
		}
	}
	u.reset()
}

// reset forgets the recorded slots: the changes are kept.
func (u *Undo) reset() {
	clear(u.marks) // drop the references to the rings
	u.marks, u.old = u.marks[:0], u.old[:0]
}
