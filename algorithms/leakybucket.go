package algorithms

// decideLeakyBucket is the leaky bucket as a queue: requests leave it
// (start) at Requests per Period, one slot of period/requests each, and it
// holds at most Burst slots (Limit.Capacity), the one starting now
// included. An admitted cost c takes the next c slots; its Wait is the
// time until the first of them. A request is denied only when its slots
// do not fit in the queue, with RetryAfter until they do; in NoWait mode
// also when it would have to wait.
//
// The state is the queue's end, its "theoretical arrival time" (GCRA's
// TAT: when the queue is empty again), kept exactly: B whole ms and A
// units of 1/perMs ms, with perMs/scale = Requests/Period reduced to
// lowest terms (tokenScale): a slot is exactly scale units, so the starts
// never drift, whatever the rate (3/s is a slot of 1000/3 ms). C is perMs,
// the unit of A. A start that is not a whole ms is rounded up to the next
// one, so no start is ever earlier than its exact slot: consecutive
// starts are ⌊period/requests⌋ or ⌈period/requests⌉ ms apart and exact on
// average (3/s: 334, 333, 333 ms), never closer than ⌊period/requests⌋.
//
// In Debt mode (usage that happened) a positive cost takes its slots even
// past the queue's size, up to twice it; the part beyond is Unrecorded,
// and later requests are denied until the queue is back within its size.
//
// A give-back (cost < 0, a caller that will not use its slots) frees
// nothing and changes nothing: it cannot say which slots are its own, and
// the queue's end is the only state. Moving the end back would free the
// queue's last slots, which may belong to a later caller, while the
// giver's are often in the middle: the next caller would then start
// together with the last holder. Keeping the end, every start stays a
// slot apart whatever the give-backs; the giver's slot passes unused. A
// peek (cost 0) reports the Wait a request would get. When the clock goes back, the queue's end stays where it was: it is
// further ahead of now, so waits are longer, never shorter, and starts keep
// their spacing.
//
// Mirrored by store/redisstore/lua/leaky_bucket.lua.
func decideLeakyBucket(l Limit, s State, a ask) (State, Decision) {
	now, cost, m := a.now, a.cost, a.mode
	perMs, scale := tokenScale(l.Requests, l.periodMs())
	capacity := l.Capacity()
	full := capacity * scale // the queue's length in units

	endMs, endU := s.B, s.A
	if s.C != 0 && s.C != perMs && endU > 0 {
		// The rate changed: A counts in another unit; round the end up
		// to a whole ms, so no start comes earlier than promised.
		endMs, endU = endMs+1, 0
	}
	if s.C == 0 || endMs < now || (endMs == now && endU == 0) {
		endMs, endU = now, 0 // an empty queue
	}
	lead := endMs - now // >= 0
	wait := lead        // until the first free slot, rounded up to a ms
	if endU > 0 {
		wait++
	}
	// The queue holds lead*perMs + endU units, up to twice its length in
	// debt. When lead alone passes that (the clock went back), it is
	// full; the product is computed only below that bound, where it is
	// exact in a double.
	over := lead > 2*full/perMs
	var queued int64
	if !over {
		queued = lead*perMs + endU
	}

	d := Decision{Allowed: true, Limit: capacity}
	switch {
	case cost > 0 && m&Debt != 0:
		// Usage that happened: take the slots even past the queue's
		// size, up to twice it (a debt of one capacity), the rest
		// unrecorded.
		k := int64(0)
		if !over {
			k = max(0, min(cost, (2*full-queued)/scale))
		}
		d.Wait = ms(wait)
		d.Unrecorded = cost - k
		endU += k * scale
		endMs, endU = endMs+endU/perMs, endU%perMs
	case cost > 0 && m&NoWait != 0 && wait > 0:
		d.Allowed = false
		d.RetryAfter = ms(wait)
	case cost > 0 && (over || queued+cost*scale > full):
		d.Allowed = false
		// The smallest r with (lead - r)*perMs + endU + cost*scale <= full.
		d.RetryAfter = ms(lead - floorDiv(full-endU-cost*scale, perMs))
	case cost > 0:
		d.Wait = ms(wait)
		endU += cost * scale
		endMs, endU = endMs+endU/perMs, endU%perMs
	case cost < 0:
		// A give-back frees nothing: see the doc comment.
	default:
		d.Wait = ms(wait)
	}

	lead = endMs - now
	empty := lead == 0 && endU == 0
	switch {
	case empty:
		d.Remaining = capacity
	case m&NoWait != 0 || lead > full/perMs:
		d.Remaining = 0
	default:
		d.Remaining = max(0, (full-lead*perMs-endU)/scale)
	}
	if m&Debt != 0 && lead > 0 && lead <= 2*full/perMs+1 {
		// Slots taken past the queue's size.
		if q := lead*perMs + endU; q > full {
			d.Debt = ceilDiv(q-full, scale)
		}
	}
	if endU > 0 {
		lead++
	}
	d.ResetAfter, d.TTL = ms(lead), ms(lead)
	if !d.Allowed || cost <= 0 {
		return s, d
	}
	if empty {
		return State{}, d
	}
	return State{A: endU, B: endMs, C: perMs}, d
}
