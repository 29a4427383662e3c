package algorithms

// slidingCounts is the counts of the window now falls in and of the one
// before, and the window's start. A count above Requests (a debt) is
// carried into the windows after it, Requests repaid a window: the
// window j windows after the stored one counts curr − j·Requests, and
// the window before it keeps at most Requests. A count is at most
// 2 × Requests (a debt of one capacity), also when the limit was lowered.
func slidingCounts(l Limit, s State, now int64) (curr, prev, start int64) {
	w, r := l.periodMs(), l.Requests
	start = now - now%w
	switch {
	case s.A%w != 0: // a window of another period: the limit changed
	case s.A == start:
		curr, prev = s.B, s.C
	case s.A > start: // the clock went back: stay at the stored window's start
		start, curr, prev = s.A, s.B, s.C
	default:
		j, n := (start-s.A)/w, ceilDiv(s.B, r) // n: windows the count lasts
		if j < n {
			curr = max(0, s.B-j*r)
		}
		if j-1 < n {
			prev = min(r, s.B-(j-1)*r)
		}
	}
	return min(curr, 2*r), min(prev, 2*r), start
}

// slidingWindow is the sliding-window counter. Windows are aligned to
// ⌊now / W⌋; the estimate is curr + prev × (W − now mod W) / W, and a cost
// is admitted iff estimate + cost <= Requests. All sums are kept multiplied
// by W so they stay integers.
//
// RetryAfter is the smallest wait after which the same cost fits: first
// while the previous window decays inside the current one, else after the
// roll into the next window, where curr becomes prev and starts decaying.
//
// The state holds the current window's start in Unix ms, not its index: a
// start that is not a multiple of the period comes from another period
// (the limit was reconfigured) and counts as empty, where an index from
// another period would read as a window far in the future.
//
// Mirrored by store/redisstore/lua/sliding_window.lua.
//
// slidingWindow decides a.cost at a.now; in Debt mode, a positive cost is
// charged even when it does not fit, up to an estimate of 2 × Requests
// (Debt).
func slidingWindow(l Limit, s State, a ask) (State, Decision) {
	w := l.periodMs()
	curr, prev, start := slidingCounts(l, s, a.now)
	return slidingDecide(s, slidingSpan{start: start, w: w, w2: w, carry: true}, slidingTally{requests: l.Requests, curr: curr, prev: prev}, a)
}

// slidingCalendar is the sliding window's decision in a calendar period
// (decideCalendar), the previous period weighing on it. The state counts
// when it starts the period decided, the previous one (its count is the
// previous count, at most Requests: a debt does not roll over), or the
// next one when deciding [b[1], b[2]) (the clock went back across the
// boundary: stay in that window); a state starting at b[3] while
// deciding [b[2], b[3]) is out of range (calendarSkew).
func slidingCalendar(l Limit, s State, b Bounds, a ask) (State, Decision) {
	i := b.period(a.now)
	if i == 2 && s.A == b[3] {
		return s, calendarSkew(l, b, a)
	}
	prev, start, end, next := b[i-1], b[i], b[i+1], b[i+2]
	var curr, last int64
	switch s.A {
	case start:
		curr, last = s.B, s.C
	case prev:
		last = min(s.B, l.Requests)
	case end: // i == 1 only, above
		start, end, next = end, next, b[4]
		curr, last = s.B, s.C
	}
	return slidingDecide(s, slidingSpan{start: start, w: end - start, w2: next - end}, slidingTally{requests: l.Requests, curr: curr, prev: last}, a)
}

// slidingSpan is the window a sliding-window decision is made in: it
// starts at start, is w ms long and is followed by one of w2 ms. carry is
// described at slidingDecide.
type slidingSpan struct {
	start, w, w2 int64
	carry        bool
}

// slidingTally is what a sliding-window decision counts: the counts curr
// (this window) and prev (the one before), against the limit's Requests.
type slidingTally struct {
	requests, curr, prev int64
}

// slidingDecide decides a.cost at a.now in the window p with the counts
// c: the part a fixed period (p.w == p.w2) and a calendar period
// (calendar periods: a month of 31 days may follow one of 28) share. s is
// the state as stored, returned unchanged by a deny or a peek.
//
// With e ms of the window elapsed, the estimate is curr + prev × (w − e)/w:
// the previous window weighs by the fraction of the current one still to
// come, whatever the previous window's own length. Sums are kept
// multiplied by the current window's length w, so they stay integers:
// weighted = curr·w + prev·(w − e), allowed iff weighted + cost·w <=
// Requests·w. After the roll into the next window, curr becomes prev and
// sums are multiplied by w2 instead (slidingWait). Validate keeps
// Requests × the longest window below MaxScaled.
//
// carry says whether a count above Requests (a debt) is carried into the
// windows after (slidingCounts: a fixed period's), or only weighs on the
// next window as its previous one (a calendar period: a quota's period
// does not roll over, the sliding estimate lets the debt decay through the
// next period).
func slidingDecide(s State, p slidingSpan, c slidingTally, a ask) (State, Decision) {
	start, w, w2, carry := p.start, p.w, p.w2, p.carry
	requests, curr, prev := c.requests, c.curr, c.prev
	now, cost, debt := a.now, a.cost, a.debt()
	at := max(now, start) // the moment decided, >= now
	e := at - start       // elapsed in the current window
	limit := requests * w
	weighted := curr*w + prev*(w-e)

	d := Decision{Allowed: true, Limit: requests}
	switch {
	case debt && cost > 0:
		k := max(0, min(cost, (2*limit-weighted)/w))
		curr += k
		weighted += k * w
		d.Unrecorded = cost - k
	case cost > 0 && weighted+cost*w > limit:
		d.Allowed = false
		// The smallest wait after which cost fits: within this window,
		// weighted − prev·wait + cost·w <= limit, else after the roll.
		wait := int64(-1)
		if prev > 0 {
			if x := ceilDiv(weighted+cost*w-limit, prev); e+x < w {
				wait = x
			}
		}
		switch {
		case wait >= 0:
		case carry:
			wait = slidingCarryWait(curr, w, e, cost, requests)
		default:
			wait = slidingWait(curr, w, e, w2, cost, requests)
		}
		d.RetryAfter = ms(at - now + wait)
	case cost > 0:
		curr += cost
		weighted += cost * w
	case cost < 0:
		refund := -cost
		take := min(curr, refund)
		curr -= take
		prev = max(0, prev-(refund-take))
		weighted = curr*w + prev*(w-e)
	}
	d.Remaining = max(0, (limit-weighted)/w)
	switch {
	case curr > 0 && carry:
		// Empty once the count's last carried window has decayed.
		d.ResetAfter = ms(at - now + (ceilDiv(curr, requests)+1)*w - e)
	case curr > 0:
		d.ResetAfter = ms(at - now + w - e + w2)
	case prev > 0:
		d.ResetAfter = ms(at - now + w - e)
	}
	d.TTL = d.ResetAfter
	if d.TTL == 0 && at > now {
		// The clock went back: an empty window ahead of now still decides
		// differently from no state until the clock reaches it.
		d.TTL = ms(at - now)
	}
	if over := weighted - limit; debt && over > 0 {
		// At most one capacity, also when the clock went back within
		// the window (the previous window weighs more then).
		d.Debt = min(ceilDiv(over, w), requests)
	}
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{A: start, B: curr, C: prev}, d
}

// slidingWait is the wait in ms after the roll out of a window of w ms,
// e ms into it, holding curr, into one of w2 ms, when a debt is not
// carried (a calendar period): the next window weighs curr, at most
// requests, as its previous count; e2 ms into it, c·(w2−e2) + cost·w2
// <= requests·w2.
func slidingWait(curr, w, e, w2, cost, requests int64) int64 {
	c := min(curr, requests)
	e2 := int64(0)
	if over := c*w2 + cost*w2 - requests*w2; over > 0 {
		e2 = ceilDiv(over, c)
	}
	return w - e + e2
}

// slidingCarryWait is the wait in ms after the roll out of a window of a
// fixed period (w ms, e ms into it, holding curr), r = Requests, a debt
// carried as slidingCounts does: in the i-th window after this one (i >=
// 1), whose own count is the carried c_i = max(0, curr − i·r) and whose
// previous window keeps p_i = min(r, curr − (i−1)·r), the first i where
// c_i + cost <= r, then e2 ms into it: c_i·w + p_i·(w−e2) + cost·w <= r·w.
func slidingCarryWait(curr, w, e, cost, r int64) int64 {
	i := max(1, ceilDiv(curr+cost-r, r))
	ci := max(0, curr-i*r)
	pi := max(0, min(r, curr-(i-1)*r))
	e2 := int64(0)
	if over := ci*w + pi*w + cost*w - r*w; over > 0 {
		e2 = ceilDiv(over, pi)
	}
	return w - e + (i-1)*w + e2
}

// validateSlidingWindow is Validate's check of a sliding window's
// numbers: it keeps its sums multiplied by the window's length, and its
// requests weigh on the next window, so a wait can be two periods.
func validateSlidingWindow(l Limit) error {
	if l.Calendar != NoCalendar {
		if p := l.Calendar.maxLength().Milliseconds(); l.Requests > MaxScaled/p {
			return invalid(l, "requests %d per calendar %s exceeds %d for %v (requests × the longest %s in ms must be at most 2^50; use %s)", l.Requests, l.Calendar, MaxScaled/p, l.Algorithm, l.Calendar, Names(Which(func(f Facts) bool { return f.Afresh }), "or", Algorithm.String))
		}
		return nil
	}
	p := l.periodMs()
	if p > maxWait.Milliseconds()/2 {
		return invalid(l, "period %v exceeds %v, half the longest wait (a sliding window's requests weigh on the next window)", l.Period, maxWait/2)
	}
	if l.Requests > MaxScaled/p {
		return invalid(l, "requests × period_ms = %d × %d exceeds 2^50", l.Requests, p)
	}
	return nil
}
