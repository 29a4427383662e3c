package algorithms

// Mode changes how one request is decided; the zero Mode is the plain
// decision. Modes are bits, so they combine.
type Mode uint8

// Debt charges the whole of a positive cost even when it does not fit:
// usage that already happened (an LLM call's tokens, known when it ends)
// is recorded, never refused. The key goes into debt: a bucket's tokens
// go below zero, a window's count past Requests, a queue past its size,
// and later checks are denied until the debt is repaid at the limit's
// rate (the bucket refills, a window whose requests weigh on the next
// carries its count above Requests into it, the queue drains),
// RetryAfter saying exactly when. A window that starts afresh
// (Facts.Afresh) and a calendar period do not carry a debt past their
// end.
//
// The debt is bounded by the capacity: a key owes at most
// [Limit.Capacity] units beyond an empty limit, so every integer stays
// below [MaxScaled]·3 and every wait below 3 × the longest wait. The part of a cost
// beyond that bound is not recorded and is reported in
// [Decision.Unrecorded]. A log (Facts.Log) keeps one slot per unit and
// never more than Requests: it records what fits in its free slots,
// reports the rest as Unrecorded, and never owes (its Debt is always 0).
//
// A cost above the capacity is charged too (bounded as above), where a
// plain check denies it with RetryAfter == Never. A debt decision is
// always allowed; its RetryAfter is 0 and Debt tells what the key owes
// after it. A cost of 0 or below is decided as a plain check, with Debt
// filled in.
const Debt Mode = 2

// NoWait admits a request of an algorithm that waits (Facts.Waits) only
// if it may start now (its Wait would be 0); a request that would have to queue is denied, with
// RetryAfter until the queue is empty. For a caller that cannot hold a
// request, such as Envoy's ShouldRateLimit. Every other algorithm ignores
// it (they never wait).
const NoWait Mode = 1 << 2

// decideMode decides a.cost at a.now in mode a.mode (see Mode).
func decideMode(l Limit, s State, a ask) (State, Decision) {
	if !a.debt() {
		return decide(l, s, a)
	}
	r := rowOf(l.Algorithm)
	if r == nil {
		return s, Decision{Limit: l.Capacity(), RetryAfter: Never}
	}
	var next State
	var d Decision
	switch {
	case a.cost <= 0:
		a.mode &^= Debt
		next, d = decide(l, s, a)
	case l.Calendar != NoCalendar:
		next, d = decideCalendar(l, s, l.Calendar.Bounds(l.Location, a.now), a)
	default:
		next, d = r.decide(l, s, a)
	}
	d.Debt = debtOf(l, next, a.now)
	return next, d
}

// decide is decideMode without Debt: a.mode holds no Debt.
func decide(l Limit, s State, a ask) (State, Decision) {
	if c := l.Capacity(); a.cost > c {
		_, d := decide(l, s, ask{now: a.now, mode: a.mode})
		d.Allowed, d.RetryAfter, d.Wait = false, Never, 0
		return s, d
	} else if a.cost < -c {
		a.cost = -c
	}
	if l.Calendar != NoCalendar { // only the windows, which never wait
		return decideCalendar(l, s, l.Calendar.Bounds(l.Location, a.now), a)
	}
	if r := rowOf(l.Algorithm); r != nil {
		return r.decide(l, s, a)
	}
	return s, Decision{Limit: l.Capacity(), RetryAfter: Never}
}

// debtOf is how many units a key in state s owes at nowMs: how far its
// count stands above the limit (0 when it does not), as a look in Debt
// mode reports it.
func debtOf(l Limit, s State, nowMs int64) int64 {
	a := ask{now: nowMs, mode: Debt}
	if l.Calendar != NoCalendar {
		_, d := decideCalendar(l, s, l.Calendar.Bounds(l.Location, nowMs), a)
		return d.Debt
	}
	if r := rowOf(l.Algorithm); r != nil {
		_, d := r.decide(l, s, a)
		return d.Debt
	}
	return 0
}

// Settle charges the difference between the actual usage and what was
// reserved for it earlier: delta = actual − reserved. A positive delta is
// charged as debt (Debt mode), a negative one refunded (never
// above the capacity), 0 charges nothing. The decision is always allowed;
// its Debt is what the key owes after it, and its RetryAfter is the wait
// until a check of cost 1 would pass (0 if one passes now), so a caller
// knows when the key is usable again.
func Settle(l Limit, s State, nowMs, delta int64) (State, Decision) {
	next, d := decideMode(l, s, ask{now: nowMs, cost: delta, mode: Debt})
	d.Allowed = true
	d.RetryAfter = peekPlain(l, next, nowMs, 1).RetryAfter
	return next, d
}
