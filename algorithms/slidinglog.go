package algorithms

import "math"

// The sliding window log keeps the times of the last admitted units in a
// ring: State.Log holds one slot per unit, State.A the index of the oldest
// slot (the head), State.B the floor and State.C the low mark: the number
// of slots, from the head, at or below the floor (all of them gone), where
// a search for the live units starts. Read from the head, the slots are
// sorted oldest to newest; empty slots (emptySlot) come first. A slot at or
// below the floor counts as gone: every write raises the floor to
// now − W, which drops the units that have left the window without
// touching their slots. A unit is live iff its slot is above max(floor,
// at − W).
//
// Because the slots are sorted, every question is a search or a single
// read: the live units are a suffix, found by an exponential search from
// the low mark (O(log n), and O(1) for a key in steady use, whose oldest
// live unit moves little between decisions); RetryAfter is the time of
// one slot; an admit of cost c overwrites the c oldest slots, which are
// gone. A ring holds at most Requests slots (Requests ≤ MaxLogRequests);
// it starts small and is rebuilt, keeping only its live units, when it is
// too small for an admit or four times larger than it needs (logPlan.resize).

// emptySlot marks a slot of a sliding window log's ring that holds no
// unit: below every time.
const emptySlot int64 = math.MinInt64

// logMinSlots is the smallest ring a log is given.
const logMinSlots = 8

// ringIndex is the index of the i-th slot from index from in a ring of n
// slots (from, i < n).
func ringIndex(n, from, i int64) int64 {
	if j := from + i; j < n {
		return j
	}
	return from + i - n
}

// logSlot is the i-th oldest slot of a ring whose oldest slot is at head.
func logSlot(ring []int64, head, i int64) int64 {
	return ring[ringIndex(int64(len(ring)), head, i)]
}

// logPlan is what a decision on a sliding window log found, before
// anything is written.
type logPlan struct {
	d      Decision
	at     int64 // the time decided at: now, or the newest unit if later
	cut    int64 // units at or below cut are gone
	live   int64 // live units before the decision
	writes bool  // the decision changes the state
}

// planSlidingLog decides cost against the log in s without changing it.
// Allowed iff the units live in (at − W, at] plus cost fit in Requests;
// RetryAfter is the wait until enough of the oldest live units leave.
//
// Mirrored by store/redisstore/lua/sliding_window_log.lua.
func planSlidingLog(l Limit, s State, now, cost int64) logPlan {
	w := l.periodMs()
	n := int64(len(s.Log))
	at, cut, top := now, emptySlot, emptySlot
	if n > 0 {
		cut, top = s.B, logSlot(s.Log, s.A, n-1)
		if top > cut {
			at = max(at, top) // the clock went back: decide at the newest unit
		}
	}
	cut = max(cut, at-w)
	// The first live slot: slots ascend from the head, and the first
	// s.C are at or below the floor. Gallop from there, then bisect.
	lo, hi, step := max(0, min(s.C, n)), n, int64(1)
	for lo < n {
		probe := min(lo+step-1, n-1)
		if logSlot(s.Log, s.A, probe) > cut {
			hi = probe
			break
		}
		lo, step = probe+1, step*2
	}
	for lo < hi {
		mid := int64(uint64(lo+hi) >> 1)
		if logSlot(s.Log, s.A, mid) > cut {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	p := logPlan{d: Decision{Allowed: true, Limit: l.Requests}, at: at, cut: cut, live: n - lo}
	live := p.live
	newest := top // the newest live unit after the decision, if live > 0
	switch {
	case cost > 0 && live+cost > l.Requests:
		p.d.Allowed = false
		// The need-th oldest live unit must leave.
		need := live + cost - l.Requests
		p.d.RetryAfter = ms(logSlot(s.Log, s.A, n-live+need-1) + w - now)
	case cost > 0:
		live += cost
		newest = at
		p.writes = true
	case cost < 0:
		k := min(-cost, live) // refunds give back the newest live units
		live -= k
		if live > 0 {
			newest = logSlot(s.Log, s.A, n-1-k)
		}
		p.writes = true
	}
	p.d.Remaining = max(0, l.Requests-live)
	if live > 0 {
		p.d.ResetAfter = ms(newest + w - now)
	}
	p.d.TTL = p.d.ResetAfter
	return p
}

// slidingLog is the sliding window log's decision of a.cost at a.now. It
// never changes s: a write goes to a copy of the ring (O(Requests));
// Apply writes in place instead. In Debt mode it records what its free
// slots hold (slidingLogDebt).
func slidingLog(l Limit, s State, a ask) (State, Decision) {
	if a.debt() && a.cost > 0 {
		return slidingLogDebt(l, s, a)
	}
	p := planSlidingLog(l, s, a.now, a.cost)
	if !p.writes {
		return s, p.d
	}
	next := s
	next.Log = append([]int64(nil), s.Log...)
	p.apply(l, &next, a.cost, nil)
	return next, p.d
}

// apply writes the decision p (made by planSlidingLog for cost) into
// *s: O(cost) slots, or a rebuilt ring of O(live units) slots when
// the ring must grow or may shrink. It records the slots it overwrites in
// u, if not nil.
func (p logPlan) apply(l Limit, s *State, cost int64, u *Undo) {
	n := int64(len(s.Log))
	switch {
	case cost > 0:
		after := p.live + cost
		target := min(l.Requests, max(logMinSlots, 2*after))
		// In place only when some unit is live: then at is at or after
		// the newest slot and above the floor, so the ring stays sorted.
		if p.live == 0 || n-p.live < cost || n > 2*target {
			*s = p.resize(*s, target, cost, l.periodMs())
			return
		}
		u.save(s.Log, s.A, cost)
		fillSlots(s.Log, s.A, cost, p.at)
		s.A, s.B, s.C = (s.A+cost)%n, p.cut, n-after
	case cost < 0:
		k := min(-cost, p.live)
		if p.live-k == 0 {
			// Nothing left: the state is no state (its TTL is 0).
			*s = State{}
			return
		}
		head := (s.A - k + n) % n
		u.save(s.Log, head, k)
		fillSlots(s.Log, head, k, emptySlot)
		s.A, s.B, s.C = head, p.cut, n-(p.live-k)
	}
}

// resize returns a new ring of size slots holding the live units of s
// (as p found them) followed by cost units at p.at, empty slots first.
// Its floor is at − W (w = W): every slot it keeps is above it.
func (p logPlan) resize(s State, size, cost, w int64) State {
	ring := make([]int64, size)
	empty := size - p.live - cost
	for i := range empty {
		ring[i] = emptySlot
	}
	n := int64(len(s.Log))
	for i := range p.live {
		ring[empty+i] = logSlot(s.Log, s.A, n-p.live+i)
	}
	for i := size - cost; i < size; i++ {
		ring[i] = p.at
	}
	return State{Log: ring, B: p.at - w, C: empty}
}

// fillSlots sets the k slots of ring from index from on (wrapping) to v.
func fillSlots(ring []int64, from, k, v int64) {
	for i := range k {
		ring[ringIndex(int64(len(ring)), from, i)] = v
	}
}

// slidingLogDebt is slidingLog of a positive cost in Debt mode: it
// records what the free slots hold and reports the rest as unrecorded; a
// log never owes (a lowered limit may leave more live units than
// Requests).
func slidingLogDebt(l Limit, s State, a ask) (State, Decision) {
	p := planSlidingLog(l, s, a.now, 0)
	k := max(0, min(a.cost, l.Requests-p.live))
	next, d := s, p.d
	if k > 0 {
		next, d = slidingLog(l, s, ask{now: a.now, cost: k})
	}
	d.Unrecorded = a.cost - k
	return next, d
}

// validateSlidingLog is Validate's check of a sliding window log's
// numbers: its memory grows with Requests.
func validateSlidingLog(l Limit) error {
	if l.Requests > MaxLogRequests {
		return invalid(l, "requests %d exceeds the %v cap of %d (its memory grows with requests; use %s)", l.Requests, l.Algorithm, MaxLogRequests, Names(Which(func(f Facts) bool { return f.Window && !f.Afresh }), "or", Algorithm.String))
	}
	return nil
}
