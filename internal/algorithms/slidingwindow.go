package algorithms

// decideSlidingWindow is the sliding-window counter. Windows are aligned to
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
func decideSlidingWindow(l Limit, s State, now, cost int64) (State, Decision) {
	w := l.PeriodMs()
	start := now - now%w
	var curr, prev int64
	switch {
	case s.A%w != 0: // a window of another period: the limit changed
	case s.A == start:
		curr, prev = s.B, s.C
	case s.A == start-w:
		prev = s.B
	case s.A > start: // the clock went back: stay at the stored window's start
		start, curr, prev = s.A, s.B, s.C
	}
	return slidingDecide(l, s, start, w, w, curr, prev, now, cost)
}

// slidingDecide decides cost in the window starting at start, w ms long,
// whose next window is w2 ms long, with counts curr (this window) and prev
// (the one before): the part a fixed period (w == w2) and a calendar
// period (DecideCalendar: a month of 31 days may follow one of 28) share.
// s is the state as stored, returned unchanged by a deny or a peek.
//
// With e ms of the window elapsed, the estimate is curr + prev × (w − e)/w:
// the previous window weighs by the fraction of the current one still to
// come, whatever the previous window's own length. Sums are kept
// multiplied by the current window's length w, so they stay integers:
// weighted = curr·w + prev·(w − e), allowed iff weighted + cost·w <=
// Requests·w. After the roll into the next window, curr becomes prev and
// sums are multiplied by w2 instead (slidingWait). Validate keeps
// Requests × the longest window below MaxScaled.
func slidingDecide(l Limit, s State, start, w, w2, curr, prev, now, cost int64) (State, Decision) {
	at := max(now, start) // the moment decided, >= now
	e := at - start       // elapsed in the current window
	limit := l.Requests * w
	weighted := curr*w + prev*(w-e)

	d := Decision{Allowed: true, Limit: l.Requests}
	switch {
	case cost > 0 && weighted+cost*w > limit:
		d.Allowed = false
		d.RetryAfter = ms(at - now + slidingWait(curr, prev, cost, w, w2, e, l.Requests))
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
	if !d.Allowed || cost == 0 {
		return s, d
	}
	return State{A: start, B: curr, C: prev}, d
}

// slidingWait is the smallest wait in ms after which cost fits, for counts
// curr and prev at e ms into a window of w ms followed by one of w2 ms.
func slidingWait(curr, prev, cost, w, w2, e, requests int64) int64 {
	if prev > 0 {
		// Within this window: curr·w + prev·(w−e−d) + cost·w <= requests·w.
		over := curr*w + prev*(w-e) + cost*w - requests*w
		if d := ceilDiv(over, prev); e+d < w {
			return d
		}
	}
	// After the roll, e2 ms into the next window (curr is its prev):
	// curr·(w2−e2) + cost·w2 <= requests·w2.
	e2 := int64(0)
	if over := curr*w2 + cost*w2 - requests*w2; over > 0 {
		e2 = ceilDiv(over, curr)
	}
	return w - e + e2
}
