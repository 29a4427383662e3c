package algorithms

// tokenScale reduces the rate requests/periodMs to lowest terms: a token
// bucket gains perMs scaled units each millisecond, and one token is scale
// units. Counting in scaled units keeps refills exact integers.
func tokenScale(requests, periodMs int64) (perMs, scale int64) {
	g := gcd(requests, periodMs)
	return requests / g, periodMs / g
}

// Scale is a bucket's rate in lowest terms: perMs
// scaled units a millisecond, scale units a token (or a queue slot). A
// store that decides elsewhere (redisstore's Lua) takes them from here.
func (l Limit) Scale() (perMs, scale int64) {
	return tokenScale(l.Requests, l.periodMs())
}

// tokenLead is how far the theoretical arrival time of state s (the
// moment the bucket is full again: A whole Unix ms and B ticks of 1/perMs
// ms) stands ahead of now: d whole ms and the ticks of s, lead ticks in
// all (the scaled tokens the bucket lacks), and the state it stands at.
// Ticks of a ms or more (written under another limit's rate) round the
// time up to the next whole ms. A time behind now (or the zero State, a key never seen) is a full
// bucket at now. A lead beyond 2 × full (deeper than a debt goes: the
// clock went back, or the limit changed) is reported as 2 × full + 1,
// which decides alike (nothing fits, nothing remains) while the waits,
// taken from d, stay exact and every product below 2^53.
func tokenLead(s State, now, perMs, full int64) (at State, d, lead int64) {
	if s.B >= perMs {
		s = State{A: s.A + 1}
	}
	d = s.A - now
	if d < 0 {
		return State{A: now}, 0, 0
	}
	if d > 2*full/perMs {
		return s, d, 2*full + 1
	}
	return s, d, d*perMs + s.B
}

// tokenBucket is the token bucket: a capacity of Burst tokens refilled
// at Requests per Period, kept as the generic cell rate algorithm keeps
// it: one theoretical arrival time, the moment the bucket is full again,
// in whole ms (State.A) and ticks of 1/perMs ms (State.B), where a token
// is scale ticks (tokenScale), so refills never round. A charge moves it
// later by the cost's ticks, a refund earlier (never before now); time
// refills by passing. A limit change keeps the time until the bucket is
// full (to the ms). A clock that went back leaves the bucket as far from
// full as its arrival time stands ahead of the caller's now: emptier, so
// it refills no sooner than it would have, and every wait is exact from
// that now.
//
// Mirrored by store/redisstore/lua/token_bucket.lua.
//
// tokenBucket decides a.cost at a.now; in Debt mode, a positive cost is
// charged even when it does not fit, down to -capacity tokens (Debt).
func tokenBucket(l Limit, s State, a ask) (State, Decision) {
	now, cost, debt := a.now, a.cost, a.debt()
	perMs, scale := tokenScale(l.Requests, l.periodMs())
	capacity := l.Capacity()
	full := capacity * scale
	at, d, lead := tokenLead(s, now, perMs, full)

	dec := Decision{Allowed: true, Limit: capacity}
	var move int64 // ticks the arrival time moves
	switch {
	case debt && cost > 0:
		k := max(0, min(cost, (2*full-lead)/scale))
		move = k * scale
		dec.Unrecorded = cost - k
	case cost > 0 && lead+cost*scale > full:
		dec.Allowed = false
		dec.RetryAfter = ms(d + floorDiv(at.B+cost*scale-full+perMs-1, perMs))
	case cost > 0:
		move = cost * scale
	case cost < 0:
		move = max(-lead, cost*scale)
	}
	next := at
	if x := at.B + move; move != 0 {
		next = State{A: at.A + floorDiv(x, perMs), B: x - floorDiv(x, perMs)*perMs}
	}
	_, _, lead = tokenLead(next, now, perMs, full)
	dec.Remaining = max(0, (full-lead)/scale) // 0 while in debt
	if debt && lead > full {
		dec.Debt = min(capacity, ceilDiv(lead-full, scale))
	}
	dec.TTL = ms(next.A - now + ceilDiv(next.B, perMs))
	dec.ResetAfter = dec.TTL
	if !dec.Allowed || cost == 0 {
		return s, dec
	}
	return next, dec
}
